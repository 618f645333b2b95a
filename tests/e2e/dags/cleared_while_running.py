"""A record under a durable key and one task instance, for tests.e2e.clear_listener.

The task writes a record under a durable operator's key, as the engine would; the check then puts the
task instance through Airflow's own failure handling, once as a task cleared while it ran (``restarting``)
and once as a plain worker death (``running``).
"""

from __future__ import annotations

from airflow.sdk import dag, get_current_context, task

KEY = "airflow_durable.databricks_submit_run"


@task
def job() -> None:
    get_current_context()["task_state_store"].set(
        KEY,
        {
            "schema": "airflow-durable/2",
            "generation": 1,
            "token": "afd-" + "0" * 40 + "-g1",
            "state": "submitted",
            "external_id": 7,
            "max_tries": 0,
            "owner_try": 1,
        },
    )


@dag(dag_id="assume_cleared_while_running", schedule=None)
def assume_cleared_while_running() -> None:
    job()


assume_cleared_while_running()
