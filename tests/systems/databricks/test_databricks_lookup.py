"""The Databricks submit-run lookup (`DurableDatabricksSubmitRunOperator.durable_find` / `durable_find_all`)
in a busy workspace: ``runs/list`` read back to the logical job's earliest possible start, never a silent
partial answer (issue 30).

The lookup runs through the real provider hook against the emulator's ``runs/list``; the workspace's other
one-time runs are made by the same hook, as another DAG's tasks would.
"""

from __future__ import annotations

import datetime as dt
from typing import Any

import pytest

import tests.conformance.systems  # noqa: F401  (import the registry first: its cases import it back)
from airflow_durable.engine import DurableLookupError
from airflow_durable.identity_tags import marked_jobs, task_identity
from tests.conformance.cases.databricks import _databricks_run_now, _databricks_submit
from tests.harness import DURABLE, TaskRunner, record_state

pytestmark = pytest.mark.skipif(not DURABLE, reason="Airflow < 3.3: no durable submit, no lookup")

RUNNING = ["PENDING"] + ["RUNNING"] * 40 + ["TERMINATED:SUCCESS"]


def _hook() -> Any:
    from airflow.providers.databricks.hooks.databricks import DatabricksHook

    return DatabricksHook(retry_limit=1)


def _other_runs(emulator: Any, count: int, backdate: float = 0.0) -> list[int]:
    """``count`` one-time runs of other DAGs' tasks (no marker of this task instance), submitted through
    the provider's hook; ``backdate``: started that many seconds earlier."""
    hook = _hook()
    runs = [hook.submit_run({"run_name": f"other-dag-task-{i}", "tasks": []}) for i in range(count)]
    for run in runs if backdate else ():
        emulator.backdate(run, backdate)
    return runs


def _runs_of(emulator: Any, runner: TaskRunner) -> list[int]:
    """This task instance's runs (by the marker in their name), oldest first."""
    ti = runner.ti
    identity = task_identity(ti.dag_id, ti.run_id, ti.task_id, ti.map_index)
    return sorted(
        run.run_id
        for run in emulator.jobs.values()
        if any(i == identity for i, _ in marked_jobs(run.run_name))
    )


def _watch_lists(emulator: Any) -> list[Any]:
    """Every ``runs/list`` request from now on (a fault that never matches: it only looks)."""
    seen: list[Any] = []

    def look(request: Any) -> bool:
        if str(request.path).split("?")[0].endswith("jobs/runs/list"):
            seen.append(request)
        return False

    emulator.faults.add(status=None, times=None, predicate=look)
    return seen


def _crash_with_the_run_going(emulator: Any, deferrable: bool = False) -> tuple[TaskRunner, int]:
    """Try 1 submits, records the run and dies; the run goes on."""
    emulator.lifecycle = RUNNING
    runner = TaskRunner(lambda: _databricks_submit(emulator, deferrable))
    runner.store.crash_when(record_state("submitted"), before=False)
    assert runner.run_try().state == "crashed"
    (old,) = _runs_of(emulator, runner)
    return runner, old


@pytest.mark.parametrize("deferrable", [False, True], ids=["sync", "deferrable"])
def test_a_lost_records_run_behind_more_than_500_newer_runs_is_found_and_ended(
    databricks_emulator, deferrable
):
    """The record is lost (Storage tab, retention) while try 1's run goes on; 600 one-time runs of other
    tasks start after it. Try 2 lists back to its DAG run's start, finds the run past the newest 500, and
    ends it before running its own: never two live runs of one task instance."""
    runner, old = _crash_with_the_run_going(databricks_emulator, deferrable)
    _other_runs(databricks_emulator, 600)
    runner.store.data.clear()
    databricks_emulator.lifecycle = ["PENDING", "RUNNING", "TERMINATED:SUCCESS"]
    outcome = runner.run_try()
    assert outcome.state == "success", outcome.error
    assert databricks_emulator.run(old).state == "TERMINATED:CANCELED", "the older run goes on untracked"
    mine = _runs_of(databricks_emulator, runner)
    assert len(mine) == 2 and mine[0] == old
    unended = runner.store.data["airflow_durable.databricks_submit_run"]["unended"]
    assert [entry["external_id"] for entry in unended] == [old]


def test_a_listing_cut_at_its_bound_fails_the_try_and_submits_nothing(databricks_emulator, monkeypatch):
    """More runs started since the DAG run began than the lookup may read: the try fails with
    `DurableLookupError` naming what was cut, and starts no run beside the one it could not rule out."""
    from airflow_durable.operators.databricks import DurableDatabricksSubmitRunOperator

    monkeypatch.setattr(DurableDatabricksSubmitRunOperator, "durable_lookup_runs", 48)
    runner, old = _crash_with_the_run_going(databricks_emulator)
    _other_runs(databricks_emulator, 60)
    runner.store.data.clear()
    outcome = runner.run_try()
    assert outcome.state == "failed"
    assert isinstance(outcome.error, DurableLookupError), repr(outcome.error)
    text = str(outcome.error)
    assert "48" in text and "more remain" in text, text
    assert _runs_of(databricks_emulator, runner) == [old], "a run was started beside the one not ruled out"
    assert not databricks_emulator.run(old).is_terminal, "a run the lookup did not find was ended"


def test_the_lookup_reads_nothing_older_than_the_dag_run(databricks_emulator):
    """Runs that started a day before this DAG run cannot be this task instance's: the listing stops at
    the DAG run's start (``start_time_from``), whatever their number."""
    runner, old = _crash_with_the_run_going(databricks_emulator)
    _other_runs(databricks_emulator, 200, backdate=86_400)
    runner.store.data.clear()
    lists = _watch_lists(databricks_emulator)
    databricks_emulator.lifecycle = ["PENDING", "RUNNING", "TERMINATED:SUCCESS"]
    outcome = runner.run_try()
    assert outcome.state == "success", outcome.error
    assert databricks_emulator.run(old).state == "TERMINATED:CANCELED"
    assert len(lists) == 1, [r.params for r in lists]
    since = int(lists[0].params["start_time_from"])
    started = runner.dag_run.start_date
    assert since <= started.timestamp() * 1000
    assert since > (started - dt.timedelta(hours=1)).timestamp() * 1000


def test_the_bound_is_the_dag_runs_run_after_when_it_is_earlier(databricks_emulator):
    """A clear of a finished DAG run resets its start date (``clear_task_instances``); ``run_after`` never
    changes and no task of the run starts before it: a run older than the new start date is still found."""
    runner, old = _crash_with_the_run_going(databricks_emulator)
    databricks_emulator.backdate(old, 3 * 3600)  # try 1 ran three hours ago
    runner.dag_run.run_after = runner.dag_run.start_date - dt.timedelta(hours=4)
    runner.clear()
    runner.dag_run.start_date = dt.datetime.now(dt.UTC)  # the cleared DAG run started again just now
    runner.store.data.clear()  # Airflow 3.4's clear discards the record
    databricks_emulator.lifecycle = ["PENDING", "RUNNING", "TERMINATED:SUCCESS"]
    outcome = runner.run_try()
    assert outcome.state == "success", outcome.error
    assert databricks_emulator.run(old).state == "TERMINATED:CANCELED", "the pre-clear run goes on"


def test_durable_find_without_a_context_reads_the_retention_window(databricks_emulator):
    """Without a task context (``airflow-durable orphans``, a test), the bound is the runs' retention: 60
    days. A run behind 600 newer ones is found."""
    runner, old = _crash_with_the_run_going(databricks_emulator)
    _other_runs(databricks_emulator, 600)
    ti = runner.ti
    lists = _watch_lists(databricks_emulator)
    found = _databricks_submit(databricks_emulator, False).durable_find(
        task_identity(ti.dag_id, ti.run_id, ti.task_id, ti.map_index)
    )
    assert [job.id for job in found] == [old]
    since = int(lists[0].params["start_time_from"])
    sixty_days = dt.datetime.now(dt.UTC) - dt.timedelta(days=60)
    assert abs(since - sixty_days.timestamp() * 1000) < 3_600_000


def test_a_crash_window_retry_past_the_token_finds_the_run_behind_newer_runs(databricks_emulator):
    """Try 1 dies between the submit and storing the run id; Databricks no longer deduplicates its token
    (the run's token lapsed). The retry looks the token up (`durable_find_all`), past 600 newer runs, and
    reconnects instead of starting a second run."""
    emulator = databricks_emulator
    emulator.lifecycle = RUNNING
    runner = TaskRunner(lambda: _databricks_submit(emulator, False))
    runner.store.crash_when(record_state("submitted"), before=True)
    assert runner.run_try().state == "crashed"
    (first,) = _runs_of(emulator, runner)
    _other_runs(emulator, 600)
    emulator.forget_token(emulator.run(first).token)
    emulator.set_state(first, "RUNNING")
    emulator.lifecycle = ["PENDING", "RUNNING", "TERMINATED:SUCCESS"]
    emulator.script(first, ["RUNNING", "TERMINATED:SUCCESS"])
    outcome = runner.run_try()
    assert outcome.state == "success", outcome.error
    assert _runs_of(emulator, runner) == [first]


def _has_more_without_a_token(emulator: Any) -> None:
    """Every runs/list page says more runs remain and gives no token to read them."""
    emulator.faults.add(
        status=200,
        body={"has_more": True},
        times=None,
        predicate=lambda request: str(request.path).endswith("jobs/runs/list"),
    )


def test_has_more_without_a_next_page_token_fails_the_lookup(databricks_emulator):
    """A page that says more runs remain but gives no way to read them: `DurableLookupError`, not ``[]``."""
    runner, _ = _crash_with_the_run_going(databricks_emulator)
    _has_more_without_a_token(databricks_emulator)
    ti = runner.ti
    with pytest.raises(DurableLookupError, match="has_more without a next_page_token"):
        _databricks_submit(databricks_emulator, False).durable_find(
            task_identity(ti.dag_id, ti.run_id, ti.task_id, ti.map_index)
        )


def test_has_more_without_a_next_page_token_fails_the_orphans_listing(databricks_emulator):
    """The same page in the ``orphans`` listing: a `ScanError`, not an empty, untruncated scan."""
    from airflow_durable.jobs.systems import ScanError, list_marked, parse_scan

    _crash_with_the_run_going(databricks_emulator)
    _has_more_without_a_token(databricks_emulator)
    with pytest.raises(ScanError, match="has_more without a next_page_token"):
        list_marked(parse_scan("databricks:databricks_default"))


def test_only_the_deleted_token_answer_starts_the_next_generation(databricks_emulator):
    """Another refusal of the resent token (a 400 of the same code, about something else) is not 'the run
    is gone': the token is sent once more and reaches the run that still runs; no second run starts."""
    databricks_emulator.lifecycle = RUNNING
    runner = TaskRunner(lambda: _databricks_run_now(databricks_emulator, False))
    runner.store.crash_when(record_state("submitted"), before=True)
    assert runner.run_try().state == "crashed"
    [first] = databricks_emulator.ledger.submissions()
    databricks_emulator.faults.add(
        path_contains="run-now",
        status=400,
        body={"error_code": "INVALID_PARAMETER_VALUE", "message": "Cluster spec is invalid."},
    )
    assert runner.run_try().state == "success"
    assert [e.external_id for e in databricks_emulator.ledger.submissions()] == [first.external_id]
