"""The engine at the edges of each system's documented idempotency (`airflow_durable.catalogue.IDEMPOTENCY`).

Every cell starts the same way: the worker dies after submitting and before the job's id is stored (the
submit→persist window), so the retry resubmits with the same token. Then the earlier job's fate or the
token's differs: its deduplication window passed, the job ended (succeeded, failed, cancelled), it was
deleted, or it expired from the system's history. The emulators answer as the catalogue says the services
do. Expected everywhere: the task succeeds with exactly one live job per generation, never a blind second
job while the first may still run.

Where a system cannot meet a cell, the cell is marked ``xfail(strict=True)`` with the documented limit
(the system's docs page states it too).
"""

from __future__ import annotations

from typing import Any

import pytest

from airflow_durable.catalogue import IDEMPOTENCY, LOOKUPS
from tests.conformance.systems import SYSTEMS, SystemCase
from tests.harness import DURABLE, TaskRunner, record_state

pytestmark = pytest.mark.skipif(
    not DURABLE, reason="Airflow < 3.3: no task_state_store, every try submits fresh (test_degraded.py)"
)

PATHS = [pytest.param(False, id="sync"), pytest.param(True, id="deferrable")]

#: Databricks run-now: a native key and no lookup (run-now carries nothing that names the task instance).
RUN_NOW_PAST_WINDOW = (
    "documented limit: Databricks deduplicates an idempotency_token as long as a run with it exists, so it "
    "does not lapse while the run runs; should it (the emulator forgets it here), a resubmission starts a "
    "second run: run-now takes no run name or tags, so there is no lookup to find the first "
    "(airflow_durable.catalogue.LOOKUPS)"
)


def _crashed_in_the_window(case: SystemCase, emulator: Any, deferrable: bool) -> tuple[TaskRunner, Any]:
    """A first try that submitted and died before storing the id; returns the runner and that submission."""
    runner = TaskRunner(lambda: case.make(emulator, deferrable))
    runner.store.crash_when(record_state("submitted"), before=True)
    assert runner.run_try().state == "crashed"
    [first] = case.submissions(emulator)
    return runner, first


def _no_lookup(case: SystemCase) -> bool:
    """A native key alone closes the window: no lookup by identity or token to find a job past it."""
    key = f"airflow_durable.{case.id}"
    return IDEMPOTENCY[key].native and case.window_closed_by != "lookup" and not LOOKUPS[key].implemented


@pytest.mark.parametrize("deferrable", PATHS)
def test_a_resubmission_past_the_token_window_starts_no_second_job(case, emulator, deferrable, request):
    # BigQuery is not looked up and still passes: its token is the job id, taken while the job
    # exists. Redshift Data and EMR Serverless pass by the lookup before the resend (`Idempotency.lapses`).
    if _no_lookup(case):
        request.applymarker(pytest.mark.xfail(strict=True, reason=RUN_NOW_PAST_WINDOW))
    runner, first = _crashed_in_the_window(case, emulator, deferrable)
    emulator.forget_token(first.token)  # the deduplication window passed while the job still runs
    outcome = runner.run()
    assert outcome.state == "success", outcome.error
    created = case.submissions(emulator)
    assert [e.external_id for e in created] == [first.external_id]


@pytest.mark.parametrize("deferrable", PATHS)
@pytest.mark.parametrize("ending", ["succeeded", "failed", "cancelled"])
def test_a_resubmission_after_the_job_ended(case, emulator, deferrable, ending):
    runner, first = _crashed_in_the_window(case, emulator, deferrable)
    emulator.set_state(first.external_id, getattr(case, ending))
    outcome = runner.run()
    assert outcome.state == "success", outcome.error
    created = case.submissions(emulator)
    if ending == "succeeded":
        # The token hands back the job that already succeeded (or the lookup finds it): nothing new.
        assert [e.external_id for e in created] == [first.external_id]
    else:
        # The ended job is not the logical job's result: one more job, under the next generation's token.
        assert len(created) == 2 and created[0].external_id == first.external_id
        assert created[1].token != first.token


@pytest.mark.parametrize("deferrable", PATHS)
def test_a_resubmission_after_the_job_expired(case, emulator, deferrable):
    runner, first = _crashed_in_the_window(case, emulator, deferrable)
    emulator.expire(first.external_id)  # gone from the system's history, its token with it
    outcome = runner.run()
    assert outcome.state == "success", outcome.error
    created = case.submissions(emulator)
    # A job the system no longer knows cannot be reached again: one new job, and it is the tracked one.
    assert len(created) == 2, [e.external_id for e in created]


DATABRICKS = [c for c in SYSTEMS if c.emulator_fixture == "databricks_emulator"]


@pytest.mark.parametrize("deferrable", PATHS)
@pytest.mark.parametrize("case", [pytest.param(c, id=c.id) for c in DATABRICKS])
def test_a_resubmission_after_the_run_was_deleted(case, deferrable, request):
    emulator = request.getfixturevalue(case.emulator_fixture)
    emulator.lifecycle = case.lifecycle()
    runner, first = _crashed_in_the_window(case, emulator, deferrable)
    emulator.delete(first.external_id)
    outcome = runner.run()
    assert outcome.state == "success", outcome.error
    # The deleted run's token is refused for good: one new run under the next generation's token, tracked.
    created = case.submissions(emulator)
    assert len(created) == 2 and created[0].external_id == first.external_id
    assert created[1].token != first.token
    assert case.reported(outcome) == created[1].external_id
