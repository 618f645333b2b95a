"""The Databricks emulator driven by the real, unmodified ``DatabricksHook`` (sync path, ``requests``)."""

from __future__ import annotations

import json
import os

import pytest

from airflow_durable.testing import DatabricksEmulator

pytest.importorskip("airflow.providers.databricks")

from airflow.exceptions import AirflowException  # noqa: E402
from airflow.providers.databricks.hooks.databricks import DatabricksHook, RunState  # noqa: E402
from airflow.providers.databricks.utils.databricks import extract_failed_task_errors  # noqa: E402

from tests.testing.helpers import api_status  # noqa: E402

SUBMIT = {
    "run_name": "etl",
    "tasks": [
        {"task_key": "extract", "notebook_task": {"notebook_path": "/x"}},
        {"task_key": "load", "notebook_task": {"notebook_path": "/y"}},
    ],
}


def test_connection_is_installed_as_databricks_default(databricks_emulator):
    conn = json.loads(os.environ["AIRFLOW_CONN_DATABRICKS_DEFAULT"])
    assert conn == {
        "conn_type": "databricks",
        "host": "127.0.0.1",
        "port": databricks_emulator.port,
        "schema": "http",
        "password": databricks_emulator.token,
    }


def test_install_connection_into_a_mapping_and_a_callable():
    with DatabricksEmulator() as dbx:
        env: dict[str, str] = {}
        assert dbx.install_connection(env, conn_id="my_dbx") == "AIRFLOW_CONN_MY_DBX"
        assert json.loads(env["AIRFLOW_CONN_MY_DBX"])["port"] == dbx.port
        calls: list[tuple[str, str]] = []
        dbx.install_connection(lambda k, v: calls.append((k, v)))
        assert calls == [("AIRFLOW_CONN_DATABRICKS_DEFAULT", dbx.connection_uri())]


def test_submit_run_then_lifecycle_through_get_run(databricks_emulator, hook):
    run_id = hook.submit_run(SUBMIT)
    states = [RunState(**hook.get_run(run_id)["state"]) for _ in range(4)]
    assert [s.life_cycle_state for s in states] == ["PENDING", "RUNNING", "TERMINATED", "TERMINATED"]
    assert states[-1].is_successful
    run = databricks_emulator.run(run_id)
    assert run.reads == 4 and run.operation == "runs/submit" and run.payload == SUBMIT

    (entry,) = databricks_emulator.ledger.submissions()
    assert (entry.system, entry.operation, entry.external_id, entry.created) == (
        "databricks",
        "runs/submit",
        run_id,
        True,
    )


def test_get_run_fields_the_provider_reads(databricks_emulator, hook):
    run_id = hook.submit_run(SUBMIT)
    info = hook.get_run(run_id)
    assert info["run_id"] == run_id
    assert info["job_id"] == hook.get_job_id(run_id) == databricks_emulator.run(run_id).job_id
    assert hook.get_run_page_url(run_id).startswith(databricks_emulator.url)
    assert info["number_in_job"] == 1
    assert set(info["state"]) >= {"life_cycle_state", "state_message"}
    assert [t["task_key"] for t in info["tasks"]] == ["extract", "load"]
    assert all({"run_id", "state", "start_time"} <= set(t) for t in info["tasks"])
    assert "next_page_token" not in info


def test_idempotency_token_returns_the_existing_run(databricks_emulator, hook):
    first = hook.submit_run({**SUBMIT, "idempotency_token": "tok-1"})
    again = hook.submit_run({**SUBMIT, "idempotency_token": "tok-1"})
    other = hook.submit_run({**SUBMIT, "idempotency_token": "tok-2"})
    assert again == first and other != first
    assert len(databricks_emulator.jobs) == 2
    ledger = databricks_emulator.ledger
    assert [(e.external_id, e.token, e.created) for e in ledger.entries] == [
        (first, "tok-1", True),
        (first, "tok-1", False),
        (other, "tok-2", True),
    ]
    assert [e.external_id for e in ledger.submissions()] == [first, other]


def test_idempotency_token_longer_than_64_chars_is_refused(databricks_emulator, hook):

    assert hook.submit_run({**SUBMIT, "idempotency_token": "x" * 64})
    with pytest.raises(AirflowException) as err:
        hook.submit_run({**SUBMIT, "idempotency_token": "x" * 65})
    assert api_status(err.value) == 400 and "INVALID_PARAMETER_VALUE" in str(err.value)
    assert len(databricks_emulator.ledger.submissions()) == 1


def test_run_now_needs_a_known_job(databricks_emulator, hook):

    databricks_emulator.add_job(job_id=42, name="nightly", tasks=["a", "b"])
    run_id = hook.run_now({"job_id": 42, "notebook_params": {"d": "1"}, "idempotency_token": "rn"})
    assert hook.run_now({"job_id": 42, "idempotency_token": "rn"}) == run_id
    second = hook.run_now({"job_id": 42})
    info = hook.get_run(second)
    assert info["job_id"] == 42 and info["number_in_job"] == 2
    assert [t["task_key"] for t in info["tasks"]] == ["a", "b"]
    assert [e.operation for e in databricks_emulator.ledger.submissions()] == ["run-now", "run-now"]

    with pytest.raises(AirflowException) as err:
        hook.run_now({"job_id": 7})
    assert api_status(err.value) == 400 and "Job 7 does not exist" in str(err.value)
    with pytest.raises(AirflowException):
        hook.run_now({"notebook_params": {}})  # no job_id


def test_find_job_id_by_name_and_pagination(databricks_emulator, hook):
    for i in range(30):  # more than the hook's page size of 25
        databricks_emulator.add_job(job_id=100 + i, name=f"job-{i}")
    databricks_emulator.add_job(job_id=500, name="dup")
    databricks_emulator.add_job(job_id=501, name="dup")
    assert hook.find_job_id_by_name("job-29") == 129
    assert hook.find_job_id_by_name("missing") is None
    assert len(hook.list_jobs()) == 32
    from airflow.providers.common.compat.sdk import AirflowException

    with pytest.raises(AirflowException, match="more than one job"):
        hook.find_job_id_by_name("dup")


def test_set_state_is_sticky_and_script_replaces_the_rest(databricks_emulator, hook):
    databricks_emulator.lifecycle = ["RUNNING"]
    run_id = hook.submit_run(SUBMIT)
    assert {hook.get_run_state(run_id).life_cycle_state for _ in range(5)} == {"RUNNING"}  # held
    databricks_emulator.set_state(run_id, "TERMINATED:FAILED", message="boom")
    state = hook.get_run_state(run_id)
    assert (state.life_cycle_state, state.result_state) == ("TERMINATED", "FAILED")
    assert state.state_message == "boom"
    assert hook.get_run_state(run_id).result_state == "FAILED"
    databricks_emulator.script(run_id, ["QUEUED", "INTERNAL_ERROR:FAILED"])
    assert [hook.get_run_state(run_id).life_cycle_state for _ in range(3)] == [
        "QUEUED",
        "INTERNAL_ERROR",
        "INTERNAL_ERROR",
    ]


def test_lifecycle_default_applies_to_new_runs_only(databricks_emulator, hook):
    old = hook.submit_run(SUBMIT)
    databricks_emulator.lifecycle = ["SKIPPED"]
    new = hook.submit_run(SUBMIT)
    assert hook.get_run_state(old).life_cycle_state == "PENDING"
    assert hook.get_run_state(new).life_cycle_state == "SKIPPED"


def test_constructor_lifecycle_and_ledger():
    from airflow_durable.testing import Ledger

    ledger = Ledger()
    with DatabricksEmulator(ledger=ledger, lifecycle=["TERMINATED:SUCCESS"]) as dbx:
        env: dict[str, str] = {}
        dbx.install_connection(env, conn_id="mine")
        os.environ.update(env)
        try:
            hook = DatabricksHook("mine", retry_limit=1)
            run_id = hook.submit_run(SUBMIT)
            assert hook.get_run_state(run_id).is_successful
        finally:
            os.environ.pop("AIRFLOW_CONN_MINE")
    assert dbx.ledger is ledger and ledger.count() == 1


def test_unknown_life_cycle_state_is_served_as_is(databricks_emulator, hook):
    from airflow.providers.common.compat.sdk import AirflowException

    run_id = hook.submit_run(SUBMIT)
    databricks_emulator.set_state(run_id, "HIBERNATING")
    assert hook.get_run(run_id)["state"]["life_cycle_state"] == "HIBERNATING"
    with pytest.raises(AirflowException, match="Unexpected life cycle state"):
        hook.get_run_state(run_id)


def test_cancel_run_moves_an_active_run_to_canceled(databricks_emulator, hook):
    databricks_emulator.lifecycle = ["RUNNING"]
    run_id = hook.submit_run(SUBMIT)
    hook.cancel_run(run_id)
    run = databricks_emulator.run(run_id)
    assert run.cancelled and run.state == "TERMINATED:CANCELED"
    state = hook.get_run_state(run_id)
    assert state.is_terminal and not state.is_successful and state.result_state == "CANCELED"
    assert databricks_emulator.ledger.entries[-1].operation == "runs/cancel"


def test_cancel_of_a_finished_run_changes_nothing(databricks_emulator, hook):
    databricks_emulator.lifecycle = ["TERMINATED:SUCCESS"]
    run_id = hook.submit_run(SUBMIT)
    hook.cancel_run(run_id)
    assert databricks_emulator.run(run_id).state == "TERMINATED:SUCCESS"
    assert databricks_emulator.run(run_id).cancelled  # the request is still on record


def test_cancel_all_runs_of_a_job(databricks_emulator, hook):
    databricks_emulator.add_job(job_id=42, name="nightly")
    databricks_emulator.add_job(job_id=43, name="other")
    databricks_emulator.lifecycle = ["RUNNING"]
    a, b = hook.run_now({"job_id": 42}), hook.run_now({"job_id": 42})
    c = hook.run_now({"job_id": 43})
    hook.cancel_all_runs(42)
    assert [databricks_emulator.run(r).state for r in (a, b, c)] == [
        "TERMINATED:CANCELED",
        "TERMINATED:CANCELED",
        "RUNNING",
    ]
    entry = databricks_emulator.ledger.entries[-1]
    assert entry.operation == "runs/cancel-all" and entry.payload["cancelled_run_ids"] == [a, b]


def test_get_run_output_and_failed_task_errors(databricks_emulator, hook):
    databricks_emulator.lifecycle = ["TERMINATED:SUCCESS"]
    ok = hook.submit_run(SUBMIT)
    assert "notebook_output" in hook.get_run_output(ok)

    databricks_emulator.lifecycle = ["TERMINATED:FAILED"]
    bad = hook.submit_run(SUBMIT)
    info = hook.get_run(bad)
    errors = extract_failed_task_errors(hook, info, RunState(**info["state"]))
    assert [e["task_key"] for e in errors] == ["extract", "load"]
    assert all(e["run_id"] != bad and e["error"] for e in errors)  # asked per task run

    databricks_emulator.run(bad).output = {"error": "custom"}
    assert hook.get_run_output(bad) == {"error": "custom"}


def test_repair_run_and_latest_repair_id(databricks_emulator, hook):

    databricks_emulator.add_job(job_id=42, name="nightly")
    databricks_emulator.lifecycle = ["TERMINATED:FAILED"]
    run_id = hook.run_now({"job_id": 42})
    assert hook.get_latest_repair_id(run_id) is None

    databricks_emulator.lifecycle = ["RUNNING", "TERMINATED:SUCCESS"]
    repair_id = hook.repair_run({"run_id": run_id, "rerun_all_failed_tasks": True})
    # The repair restarts the run on the current default script (every runs/get is one step).
    assert [hook.get_run_state(run_id).life_cycle_state for _ in range(2)] == ["RUNNING", "TERMINATED"]
    assert hook.get_latest_repair_id(run_id) == repair_id

    with pytest.raises(AirflowException, match="latest_repair_id"):
        hook.repair_run({"run_id": run_id, "rerun_all_failed_tasks": True})  # must name the latest
    second = hook.repair_run({"run_id": run_id, "latest_repair_id": repair_id})
    assert second != repair_id
    assert [e.operation for e in databricks_emulator.ledger.entries[-2:]] == ["runs/repair", "runs/repair"]
    assert databricks_emulator.ledger.count(operation="runs/repair", created=True) == 0


def test_repair_of_an_active_run_is_refused(databricks_emulator, hook):

    databricks_emulator.lifecycle = ["RUNNING"]
    run_id = hook.submit_run(SUBMIT)
    with pytest.raises(AirflowException) as err:
        hook.repair_run({"run_id": run_id, "rerun_all_failed_tasks": True})
    assert api_status(err.value) == 400


def test_update_job_merges_settings(databricks_emulator, hook):
    databricks_emulator.add_job(job_id=42, name="nightly")
    hook.update_job("42", {"max_concurrent_runs": 3})
    assert databricks_emulator.job_definitions[42].settings["max_concurrent_runs"] == 3
    assert databricks_emulator.ledger.entries[-1].operation == "jobs/update"


def test_expired_run_answers_404_everywhere(databricks_emulator, hook):

    run_id = hook.submit_run({**SUBMIT, "idempotency_token": "tok"})
    databricks_emulator.expire(run_id)
    for call in (hook.get_run, hook.get_run_page_url, hook.get_run_output, hook.cancel_run):
        with pytest.raises(AirflowException) as err:
            call(run_id)
        assert api_status(err.value) == 404, call
        assert "RESOURCE_DOES_NOT_EXIST" in str(err.value)
    # The history is gone, the token with it: the same token now makes a new run.
    assert hook.submit_run({**SUBMIT, "idempotency_token": "tok"}) != run_id


def test_unknown_run_is_404(hook):

    with pytest.raises(AirflowException) as err:
        hook.get_run(123)
    assert api_status(err.value) == 404


def test_wrong_token_is_refused(databricks_emulator, monkeypatch):

    conn = json.loads(databricks_emulator.connection_uri())
    monkeypatch.setenv("AIRFLOW_CONN_BAD", json.dumps({**conn, "password": "wrong"}))
    with pytest.raises(AirflowException) as err:
        DatabricksHook("bad", retry_limit=1).submit_run(SUBMIT)
    assert api_status(err.value) == 401
    assert databricks_emulator.ledger.entries == []


def test_run_lookup_errors_name_the_run(databricks_emulator):
    with pytest.raises(KeyError, match="no run 77"):
        databricks_emulator.run(77)
