"""AFTER: the fix for ``before_submit_and_sensor.py``: one durable task submits and waits.

With a Triggerer, ``deferrable=True`` frees the worker while the run executes (the provider's own
``DatabricksExecutionTrigger`` waits). A retry reconnects to the run the task already started; a
retry after the run succeeded returns without submitting. ``publish`` depends on the task whose
success means the job succeeded. ``airflow-durable check`` finds nothing here.

No Triggerer? Use ``deferrable=False`` (the worker polls). A long job and scarce worker slots? Keep
the split, with the sensor in ``mode="reschedule"`` and everything downstream of the sensor — see
the docs page "One task or two".
"""

from __future__ import annotations

from datetime import datetime

try:
    from airflow.sdk import DAG, task
except ImportError:  # Airflow 2.x
    from airflow import DAG
    from airflow.decorators import task

from airflow_durable.operators.databricks import DurableDatabricksSubmitRunOperator

SPEC = {
    "run_name": "nightly-etl",
    "tasks": [{"task_key": "etl", "notebook_task": {"notebook_path": "/Shared/etl/nightly"}}],
}

with DAG(
    dag_id="after_one_durable_task",
    schedule=None,
    start_date=datetime(2026, 1, 1),
    catchup=False,
    tags=["airflow-durable", "example", "after"],
) as dag:
    run = DurableDatabricksSubmitRunOperator(task_id="run", json=SPEC, deferrable=True, retries=3)

    @task
    def publish():
        print("nightly tables are ready")

    run >> publish()
