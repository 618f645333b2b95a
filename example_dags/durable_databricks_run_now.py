"""Trigger an existing Databricks job and wait for it in one durable task.

``DurableDatabricksRunNowOperator`` takes the same arguments as the provider's
``DatabricksRunNowOperator``. The run-now call carries an idempotency token derived from the task
instance, so a retry after a crash between "run started" and "run id stored" gets the same run back
from Databricks. ``deferrable=False`` here: the worker polls (the provider's own loop) — use it where
no Triggerer runs; a retry after a worker crash mid-poll reconnects to the run it was polling.

Connection: ``databricks_default``; job 42 must exist (the offline emulator defines it in
``tests/examples``).
"""

from __future__ import annotations

from datetime import datetime, timedelta

try:
    from airflow.sdk import DAG
except ImportError:  # Airflow 2.x
    from airflow import DAG

from airflow_durable.operators.databricks import DurableDatabricksRunNowOperator

with DAG(
    dag_id="durable_databricks_run_now",
    schedule=None,
    start_date=datetime(2026, 1, 1),
    catchup=False,
    tags=["airflow-durable", "example", "databricks"],
) as dag:
    DurableDatabricksRunNowOperator(
        task_id="refresh_marts",
        databricks_conn_id="databricks_default",
        job_id=42,
        job_parameters={"date": "{{ ds }}"},
        deferrable=False,
        retries=2,
        retry_delay=timedelta(minutes=1),
    )
