"""The reaper's rules and plumbing without a deployment (its real-deployment run: ``test_reaper_runtime.py``).

`decide` is the whole safety rule: it is asked about every state Airflow has for a task instance. The
connection handling uses Airflow's own connection lookup (``AIRFLOW_CONN_*``); an unreachable API is a
real refused TCP connection.
"""

from __future__ import annotations

import socket
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest

from airflow_durable.jobs.api import AirflowApi
from airflow_durable.jobs.collect import ENDED_STATES, _row, candidates, orphan_reason
from airflow_durable.jobs.systems import LiveStatus
from airflow_durable.reaper import (
    ReaperError,
    _connection,
    _connection_url,
    api_from_connection,
    decide,
    durable_reaper_dag,
    reap,
)

TI = {"dag_id": "d", "dag_run_id": "r", "task_id": "t", "map_index": -1, "try_number": 1, "max_tries": 0}
KEY = "airflow_durable.databricks_submit_run"
RECORD = {
    "schema": "airflow-durable/2",
    "generation": 1,
    "token": "afd-" + "1" * 40 + "-g1",
    "state": "submitted",
    "external_id": 1001,
    "max_tries": 0,
    "locator": {"databricks_conn_id": "databricks_default"},
}
EXAMPLE = Path(__file__).resolve().parents[2] / "example_dags" / "maintenance_reaper.py"


def _task_instance_states() -> list[str | None]:
    try:
        from airflow.sdk import TaskInstanceState
    except ImportError:  # Airflow 2
        from airflow.utils.state import TaskInstanceState  # type: ignore[no-redef]
    return [None, *(s.value for s in TaskInstanceState)]


def orphan(ti_state: str = "failed", **ti: Any) -> Any:
    """A job the record tracks, of a task instance in ``ti_state``, that its system says runs."""
    (row,) = candidates([_row({**TI, **ti, "state": ti_state}, KEY, RECORD, "http://airflow")])
    row.live = LiveStatus("active", "RUNNING")
    row.orphan = orphan_reason(row)
    assert row.orphan == f"task instance {ti_state}"
    return row


@pytest.mark.parametrize("state", _task_instance_states())
def test_a_job_is_cancelled_only_if_its_task_instance_has_ended(state):
    """The task instance as re-read just before the cancel decides: only an ended one lets the job go.
    Running, deferred, queued, scheduled, up_for_retry, up_for_reschedule, restarting: a try waits on the
    job or is about to; none (cleared): the next try ends an older epoch's job itself."""
    cancel, reason = decide(orphan(), {**TI, "state": state})
    assert cancel is (state in ENDED_STATES), (state, reason)
    if cancel:
        assert reason == f"task instance failed; its task instance is {state}"
    elif state is None:
        assert "cleared and no try runs yet" in reason
    else:
        assert reason.startswith(f"its task instance is {state}: a try waits on this job")


def test_the_states_the_reaper_must_never_touch_are_airflow_states():
    """The brief's list, by name, so a rename in Airflow cannot silently widen what is cancelled."""
    states = set(_task_instance_states())
    for state in ("running", "deferred", "queued", "up_for_retry", "restarting", "scheduled"):
        assert state in states and state not in ENDED_STATES
        assert decide(orphan(), {**TI, "state": state})[0] is False


def test_a_gone_task_instance_lets_the_job_go():
    cancel, reason = decide(orphan(), None)
    assert cancel and reason == "task instance failed; its task instance is gone"


@pytest.mark.parametrize(
    ("now", "changed"),
    [({"try_number": 2}, "try_number 1 -> 2"), ({"max_tries": 1}, "max_tries 0 -> 1")],
)
def test_a_task_instance_retried_or_cleared_since_the_look_is_left_to_the_next_run(now, changed):
    """Failed when listed, failed again when re-read, but another try ran in between (a clear, then a
    failure): the look is stale, so nothing is cancelled on it."""
    cancel, reason = decide(orphan(), {**TI, **now, "state": "failed"})
    assert not cancel and changed in reason and "left to the next run" in reason


def test_a_job_only_the_cache_knows_is_judged_by_the_state_alone():
    row = orphan()
    row.source, row.note, row.orphan = "cache", "record deleted", "record deleted"
    cancel, reason = decide(row, {**TI, "try_number": 5, "state": "success"})
    assert cancel and reason == "record deleted; its task instance is success"


def _closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def test_an_unreachable_api_cancels_nothing_and_says_so():
    with AirflowApi(f"http://127.0.0.1:{_closed_port()}", timeout=5) as api:
        with pytest.raises(
            ReaperError, match="could not read the deployment's durable jobs; nothing cancelled"
        ):
            reap(api)


@pytest.mark.parametrize(
    ("uri", "url"),
    [
        ("http://reaper:secret@api.internal:8080", "http://api.internal:8080"),
        ("https://reaper:secret@airflow.example.com", "https://airflow.example.com"),
        ("http://reaper:secret@airflow.example.com:8443/https", "https://airflow.example.com:8443"),
        ("http://reaper:secret@airflow.example.com/tenant-a", "http://airflow.example.com/tenant-a"),
        (
            '{"conn_type": "http", "host": "https://airflow.example.com/tenant-a/", "port": 8443}',
            "https://airflow.example.com:8443/tenant-a",
        ),
    ],
)
def test_the_api_url_comes_from_the_connection(monkeypatch, uri, url):
    monkeypatch.setenv("AIRFLOW_CONN_AFD_REAPER_TEST", uri)
    assert _connection_url(_connection("afd_reaper_test")) == url


def test_a_token_in_the_connection_is_used_as_is(monkeypatch):
    port = _closed_port()  # nothing is called: a given token needs no login
    monkeypatch.setenv(
        "AIRFLOW_CONN_AFD_REAPER_TEST",
        f'{{"conn_type": "http", "host": "http://127.0.0.1:{port}", "extra": {{"token": "jwt-abc"}}}}',
    )
    with api_from_connection("afd_reaper_test") as api:
        assert (api.url, api.token) == (f"http://127.0.0.1:{port}", "jwt-abc")


def test_a_login_that_cannot_reach_the_api_fails_clearly(monkeypatch):
    monkeypatch.setenv("AIRFLOW_CONN_AFD_REAPER_TEST", f"http://reaper:secret@127.0.0.1:{_closed_port()}")
    with pytest.raises(Exception, match="/auth/token"):
        api_from_connection("afd_reaper_test")


def test_without_a_connection_the_worker_s_api_server_is_used(monkeypatch):
    monkeypatch.delenv("AIRFLOW_DURABLE_API_URL", raising=False)
    monkeypatch.setenv("AIRFLOW__CORE__EXECUTION_API_SERVER_URL", "http://api.internal:8080/execution/")
    with api_from_connection("afd_reaper_no_such_connection") as api:
        assert api.url == "http://api.internal:8080" and api.token is None
    monkeypatch.setenv("AIRFLOW_DURABLE_API_URL", "http://elsewhere:8080")
    with api_from_connection("afd_reaper_no_such_connection") as api:
        assert api.url == "http://elsewhere:8080"


def test_the_dag_runs_one_at_a_time_without_catchup_or_retries():
    dag = durable_reaper_dag("afd_reaper_test", dry_run=True, dag_ids=["a"])
    (task,) = dag.tasks
    assert (dag.max_active_runs, dag.catchup, task.task_id, task.retries) == (1, False, "reap", 0)
    assert task.execution_timeout == timedelta(minutes=10)
    assert task.multiple_outputs is False  # the report is one XCom, not one per key
    assert dag.params["dry_run"] is True
    assert "airflow-durable" in dag.tags


def test_the_example_dag_is_the_reaper():
    namespace: dict[str, Any] = {"__name__": "maintenance_reaper"}
    exec(compile(EXAMPLE.read_text(), str(EXAMPLE), "exec"), namespace)
    dag = namespace["dag"]
    assert dag.dag_id == "maintenance_reaper" and dag.max_active_runs == 1
    assert dag.params["dry_run"] is False and [t.task_id for t in dag.tasks] == ["reap"]


@pytest.mark.parametrize("now", [None, {**TI, "state": "success"}, {**TI, "state": "failed"}])
def test_a_submit_only_tasks_job_is_never_cancelled(now):
    """Its system listed it with the mark of a task that only submits: someone else waits on it."""
    row = orphan()
    row.submit_only = True
    cancel, reason = decide(row, now)
    assert not cancel and "only submits" in reason
