"""BigQuery specifics beyond the shared failure model: job ids, ``force_rerun=False``, ``cancel_on_kill``."""

from __future__ import annotations

from typing import Any

import pytest

from tests.harness import DURABLE, TaskRunner, record_state

pytestmark = pytest.mark.skipif(not DURABLE, reason="durable behaviour needs Airflow >= 3.3")

QUERY = {"query": "SELECT 1 AS x", "useLegacySql": False}


def make(deferrable: bool = True, **overrides: Any) -> Any:
    from airflow_durable.operators.bigquery import DurableBigQueryInsertJobOperator

    kwargs: dict[str, Any] = dict(
        task_id="load.step",  # a task-group style id: "." is not allowed in a job id
        configuration={"query": dict(QUERY)},
        deferrable=deferrable,
        poll_interval=0.01,
    )
    kwargs.update(overrides)
    return DurableBigQueryInsertJobOperator(**kwargs)


def inserts(emulator: Any) -> list[Any]:
    return emulator.ledger.select(operation="jobs.insert")


@pytest.mark.parametrize("deferrable", [False, True], ids=["sync", "deferrable"])
def test_job_id_is_the_task_prefix_plus_the_token_and_is_returned(bigquery_emulator, deferrable):
    runner = TaskRunner(lambda: make(deferrable))
    outcome = runner.run()
    assert outcome.state == "success", outcome.error
    (entry,) = inserts(bigquery_emulator)
    token = runner.store.data["airflow_durable.bigquery_insert_job"]["token"]
    assert entry.external_id == f"airflow_{runner.last_operator.dag_id}_load_step_{token}"
    assert outcome.result == entry.external_id
    # The provider's automatic labels, and the task instance's identity and token (issue 23: jobs.list shows
    # labels, so durable_find finds the job without the record).
    from airflow_durable.identity_tags import task_identity

    ti = runner.ti
    labels = bigquery_emulator.job(entry.external_id).labels
    assert set(labels) == {"airflow-dag", "airflow-task", "airflow-durable-ti", "airflow-durable-token"}
    assert labels["airflow-durable-ti"] == task_identity(ti.dag_id, ti.run_id, ti.task_id, ti.map_index)
    assert labels["airflow-durable-token"] == token


def test_a_configured_job_id_stays_the_prefix(bigquery_emulator):
    runner = TaskRunner(lambda: make(job_id="nightly_rollup"))
    assert runner.run().state == "success"
    token = runner.store.data["airflow_durable.bigquery_insert_job"]["token"]
    assert [e.external_id for e in inserts(bigquery_emulator)] == [f"nightly_rollup_{token}"]


def test_a_409_for_our_id_adopts_the_job_in_any_state(bigquery_emulator):
    """The previous try died inside the window after the job had already finished: adopt, don't rerun."""
    bigquery_emulator.lifecycle = ["DONE"]
    runner = TaskRunner(lambda: make())
    runner.store.crash_when(record_state("submitted"), before=True)
    outcome = runner.run()
    assert [o.state for o in runner.outcomes] == ["crashed", "success"]
    assert [e.created for e in inserts(bigquery_emulator)] == [True, False]
    assert outcome.deferrals == 0  # already DONE: completed inline, as upstream


def upstream_job_id(emulator: Any, prefix: str) -> str:
    """What the provider's generate_job_id gives with force_rerun=False: prefix + md5 of the configuration."""
    import json

    from airflow.utils.hashlib_wrapper import md5

    configuration = inserts(emulator)[0].payload["configuration"]  # as sent, automatic labels included
    return f"{prefix}_{md5(json.dumps(configuration, sort_keys=True).encode()).hexdigest()}"


def test_force_rerun_false_keeps_the_upstream_config_hash_id(bigquery_emulator):
    runner = TaskRunner(lambda: make(job_id="daily", force_rerun=False))
    assert runner.run().state == "success"
    assert [e.external_id for e in inserts(bigquery_emulator)] == [
        upstream_job_id(bigquery_emulator, "daily")
    ]


def test_force_rerun_false_window_closed_by_reattach_states(bigquery_emulator):
    runner = TaskRunner(
        lambda: make(job_id="daily", force_rerun=False, reattach_states={"PENDING", "RUNNING"})
    )
    runner.store.crash_when(record_state("submitted"), before=True)
    outcome = runner.run()
    assert [o.state for o in runner.outcomes] == ["crashed", "success"]
    assert [e.created for e in inserts(bigquery_emulator)] == [True, False]
    assert len(bigquery_emulator.ledger.submissions()) == 1
    assert outcome.result == upstream_job_id(bigquery_emulator, "daily")


def test_force_rerun_false_without_reattach_states_fails_as_upstream_never_duplicates(bigquery_emulator):
    runner = TaskRunner(lambda: make(job_id="daily", force_rerun=False))
    runner.store.crash_when(record_state("submitted"), before=True)
    runner.run_try()
    second = runner.run_try()
    assert second.state == "failed"
    assert "already exists" in str(second.error) and "reattach_states" in str(second.error)
    assert len(bigquery_emulator.ledger.submissions()) == 1


@pytest.mark.parametrize("deferrable", [False, True], ids=["sync", "deferrable"])
def test_cancel_on_kill_false_leaves_the_job_running(bigquery_emulator, deferrable):
    bigquery_emulator.lifecycle = ["RUNNING"]
    runner = TaskRunner(lambda: make(deferrable, cancel_on_kill=False))
    runner.store.crash_when(record_state("submitted"), before=False)
    runner.run_try()
    runner.last_operator.on_kill()
    job_id = inserts(bigquery_emulator)[0].external_id
    assert bigquery_emulator.job(job_id).state == "RUNNING"
    assert bigquery_emulator.ledger.select(operation="jobs.cancel") == []


def test_durable_job_id_helper():
    from airflow_durable.engine import DurableToken
    from airflow_durable.operators.bigquery import durable_job_id

    token = DurableToken.for_task_instance("my.dag", "manual__x", "grp.task", -1, 3)
    job_id = durable_job_id(None, "my.dag", "grp.task", token)
    assert job_id == f"airflow_my_dag_grp_task_{token.text}" and job_id.endswith("-g3")
    assert durable_job_id("mine", "d", "t", token) == f"mine_{token.text}"
