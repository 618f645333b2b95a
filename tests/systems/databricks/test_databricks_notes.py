"""The Databricks-specific statements on docs/systems/databricks.md, each pinned by a test.

The failure model itself is in tests/conformance (both Databricks operators are registered there);
these are the notes only Databricks has: a user's own idempotency token, and ``cancel_previous_runs``.
"""

from __future__ import annotations

import pytest

import tests.conformance.systems  # noqa: F401  (import the registry first: its cases import it back)
from tests.conformance.cases.databricks import (
    _databricks_run_now,
    _databricks_submit,
    upstream_run_now_broken,
)
from tests.harness import DURABLE, TaskRunner, record_state

pytestmark = pytest.mark.skipif(
    not DURABLE, reason="Airflow < 3.3: no task_state_store, nothing durable to note"
)


def test_our_token_is_sent_as_the_databricks_idempotency_token(databricks_emulator, durable_ledger):
    databricks_emulator.lifecycle = ["PENDING", "RUNNING", "TERMINATED:SUCCESS"]
    runner = TaskRunner(lambda: _databricks_submit(databricks_emulator, False))
    assert runner.run().state == "success"
    (submission,) = durable_ledger.submissions("databricks")
    record = runner.store.data["airflow_durable.databricks_submit_run"]
    assert submission.token == record["token"] and submission.token.startswith("afd-")


def test_a_token_you_set_wins_and_a_failed_run_then_comes_back_on_every_retry(
    databricks_emulator, durable_ledger
):
    databricks_emulator.lifecycle = ["PENDING", "RUNNING", "TERMINATED:FAILED"]
    make = lambda: _databricks_submit(  # noqa: E731
        databricks_emulator,
        False,
        json={
            "new_cluster": {"spark_version": "15.4.x-scala2.12", "num_workers": 1},
            "notebook_task": {"notebook_path": "/Shared/etl"},
            "idempotency_token": "my-own-token",
        },
    )
    runner = TaskRunner(make, retries=2)
    outcome = runner.run()
    assert [o.state for o in runner.outcomes] == ["failed", "failed", "failed"]
    assert outcome.state == "failed"
    # Databricks returned the same (failed) run to every resubmission carrying the user's token.
    calls = durable_ledger.select("databricks", "runs/submit")
    assert {call.token for call in calls} == {"my-own-token"}
    assert [call.created for call in calls] == [True, False, False]


@pytest.mark.skipif(upstream_run_now_broken() is not None, reason=upstream_run_now_broken() or "")
def test_cancel_previous_runs_never_cancels_the_run_a_retry_reconnects_to(
    databricks_emulator, durable_ledger
):
    databricks_emulator.lifecycle = ["PENDING"] + ["RUNNING"] * 4 + ["TERMINATED:SUCCESS"]
    runner = TaskRunner(lambda: _databricks_run_now(databricks_emulator, False, cancel_previous_runs=True))
    runner.store.crash_when(record_state("submitted"), before=False)
    outcome = runner.run()
    assert [o.state for o in runner.outcomes] == ["crashed", "success"]
    (run,) = durable_ledger.submissions("databricks")
    assert databricks_emulator.run(run.external_id).state == "TERMINATED:SUCCESS"
    # One cancel-all, before the run was started; the reconnecting retry cancelled nothing.
    operations = [entry.operation for entry in durable_ledger.entries]
    assert operations.count("runs/cancel-all") == 1
    assert operations.index("runs/cancel-all") < operations.index("run-now")
    assert outcome.xcoms["run_id"] == run.external_id


@pytest.mark.parametrize("deferrable", [False, True], ids=["sync", "deferrable"])
def test_wait_for_termination_false_succeeds_on_submit_and_retires_the_record(
    databricks_emulator, durable_ledger, deferrable
):
    databricks_emulator.lifecycle = ["RUNNING"]
    runner = TaskRunner(
        lambda: _databricks_submit(databricks_emulator, deferrable, wait_for_termination=False)
    )
    outcome = runner.run()
    assert outcome.state == "success" and outcome.try_number == 1 and outcome.deferrals == 0
    (run,) = durable_ledger.submissions("databricks")
    assert databricks_emulator.run(run.external_id).state == "RUNNING"  # nobody waits for it
    assert runner.store.data["airflow_durable.databricks_submit_run"]["state"] == "done"


def test_in_a_split_the_durable_submit_still_closes_the_window(databricks_emulator, durable_ledger):
    """Submit half of a kept split (wait_for_termination=False): a crash before the id is stored does
    not start a second run."""
    databricks_emulator.lifecycle = ["RUNNING"]
    runner = TaskRunner(lambda: _databricks_submit(databricks_emulator, False, wait_for_termination=False))
    runner.store.crash_when(record_state("submitted"), before=True)
    outcome = runner.run()
    assert [o.state for o in runner.outcomes] == ["crashed", "success"]
    (run,) = durable_ledger.submissions("databricks")
    assert outcome.xcoms["run_id"] == run.external_id  # what the sensor downstream reads


def test_the_reconnect_line_names_the_runs_life_cycle_state(databricks_emulator, caplog, capsys):
    """The README's example line: a run with no result yet is ``RUNNING``, not the composite ``RUNNING:``
    the engine compares."""
    databricks_emulator.lifecycle = ["RUNNING"] * 6 + ["TERMINATED:SUCCESS"]
    runner = TaskRunner(lambda: _databricks_submit(databricks_emulator, False))
    runner.store.crash_when(record_state("submitted"), before=False)
    capsys.readouterr()
    outcome = runner.run()
    assert [o.state for o in runner.outcomes] == ["crashed", "success"], outcome.error
    logs = "\n".join([caplog.text, *capsys.readouterr()])  # Airflow 3: structlog on stdout
    run_id = outcome.xcoms["run_id"]
    decisions = [line for line in logs.splitlines() if "task job [" in line]
    expected = f"[reconnect]: job {run_id} is still RUNNING; reconnecting without submitting"
    assert any(expected in line for line in decisions), decisions
