"""The engine at the edges of each system's documented idempotency (`airflow_durable.catalogue.IDEMPOTENCY`).

Every cell starts the same way: the worker dies after submitting and before the job's id is stored (the
submit→persist window), so the retry resubmits with the same token. Then the earlier job's fate or the
token's differs: its deduplication window passed, the job ended (succeeded, failed, cancelled), it was
deleted, or it expired from the system's history. The emulators answer as the catalogue says the services
do. Expected everywhere: the task succeeds with exactly one live job per generation, never a blind second
job while the first may still run.

Where the engine does not meet a cell yet, the cell is marked ``xfail(strict=True)`` with the behaviour
the engine needs; the marker goes when the engine does it.
"""

from __future__ import annotations

from typing import Any

import pytest

from airflow_durable.catalogue import IDEMPOTENCY
from tests.conformance.systems import SYSTEMS, SystemCase
from tests.harness import DURABLE, TaskRunner, record_state

pytestmark = pytest.mark.skipif(
    not DURABLE, reason="Airflow < 3.3: no task_state_store, every try submits fresh (test_degraded.py)"
)

PATHS = [pytest.param(False, id="sync"), pytest.param(True, id="deferrable")]

#: Cases whose only protection in the window is the system's own deduplication: once a token no longer
#: deduplicates, a resubmission starts a second job.
PAST_WINDOW_GAP = (
    "engine: a retry inside the submit→persist window resends the stored token blindly; when the "
    "token no longer deduplicates (its window passed: the documented window is unknown for this system, "
    "see airflow_durable.catalogue.IDEMPOTENCY) the system starts a second job. The engine must look the "
    "job up by its identity (name/tag/label carrying the token) before resending, and adopt the job it "
    "finds"
)


def _crashed_in_the_window(case: SystemCase, emulator: Any, deferrable: bool) -> tuple[TaskRunner, Any]:
    """A first try that submitted and died before storing the id; returns the runner and that submission."""
    runner = TaskRunner(lambda: case.make(emulator, deferrable))
    runner.store.crash_when(record_state("submitted"), before=True)
    assert runner.run_try().state == "crashed"
    [first] = case.submissions(emulator)
    return runner, first


def _native_only(case: SystemCase) -> bool:
    return IDEMPOTENCY[f"airflow_durable.{case.id}"].native and case.window_closed_by != "lookup"


@pytest.mark.parametrize("deferrable", PATHS)
def test_a_resubmission_past_the_token_window_starts_no_second_job(case, emulator, deferrable, request):
    if _native_only(case) and case.id != "bigquery_insert_job":
        # BigQuery's token is the job id itself: it stays taken while the job exists, so it cannot lapse.
        request.applymarker(pytest.mark.xfail(strict=True, reason=PAST_WINDOW_GAP))
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


DELETED_GAP = (
    "engine: Databricks answers an error to a resubmission whose idempotency token names a deleted run "
    "(Jobs API: 'If a run with the provided token is deleted, an error is returned'); the retry fails on "
    "it, and so does every later retry. The engine must take that answer as 'the job is gone' and submit "
    "the next generation with a new token"
)
DATABRICKS = [c for c in SYSTEMS if c.emulator_fixture == "databricks_emulator"]


@pytest.mark.xfail(strict=True, reason=DELETED_GAP)
@pytest.mark.parametrize("deferrable", PATHS)
@pytest.mark.parametrize("case", [pytest.param(c, id=c.id) for c in DATABRICKS])
def test_a_resubmission_after_the_run_was_deleted(case, deferrable, request):
    emulator = request.getfixturevalue(case.emulator_fixture)
    emulator.lifecycle = case.lifecycle()
    runner, first = _crashed_in_the_window(case, emulator, deferrable)
    emulator.delete(first.external_id)
    outcome = runner.run()
    assert outcome.state == "success", outcome.error
    assert len(case.submissions(emulator)) == 2
