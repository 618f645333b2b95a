"""BEFORE: submit without waiting, then a sensor on the run (what ``airflow-durable check`` reports).

``submit`` returns as soon as Databricks *accepts* the run (ADR005); ``wait_for_run`` polls it. A retry
of either task cannot reconnect to the run the other one knows about, and ``publish`` hangs off the
submit, so it runs while the job is still running or after it failed (ADR006).

The fix is ``after_one_durable_task.py``; which fix fits your deployment is on the docs page "One
task or two". This file imports cleanly but is an example of what not to do.
"""

from __future__ import annotations

from datetime import datetime

try:
    from airflow.sdk import DAG, task
except ImportError:  # Airflow 2.x
    from airflow import DAG
    from airflow.decorators import task

from airflow.providers.databricks.hooks.databricks import DatabricksHook
from airflow.providers.databricks.operators.databricks import DatabricksSubmitRunOperator

SPEC = {
    "run_name": "nightly-etl",
    "tasks": [{"task_key": "etl", "notebook_task": {"notebook_path": "/Shared/etl/nightly"}}],
}

with DAG(
    dag_id="before_submit_and_sensor",
    schedule=None,
    start_date=datetime(2026, 1, 1),
    catchup=False,
    tags=["airflow-durable", "example", "before"],
) as dag:
    submit = DatabricksSubmitRunOperator(task_id="submit", json=SPEC, wait_for_termination=False)

    @task.sensor(poke_interval=60, timeout=6 * 3600)
    def wait_for_run(run_id) -> bool:
        state = DatabricksHook().get_run_state(run_id)
        if state.is_terminal and not state.is_successful:
            raise RuntimeError(f"Databricks run {run_id} ended {state.result_state}")
        return state.is_terminal

    @task
    def publish():
        print("nightly tables are ready")

    waited = wait_for_run(submit.output)
    report = publish()
    submit >> [waited, report]
