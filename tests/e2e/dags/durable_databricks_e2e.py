"""The end-to-end DAG: one durable Databricks task, shaped by environment variables set by the runner.

Kept in the dags folder because ``dag.test()`` needs the file inside a configured bundle.
"""

from __future__ import annotations

import os
from datetime import datetime, timedelta

try:
    from airflow.sdk import DAG
except ImportError:  # Airflow 2.x
    from airflow import DAG

from airflow_durable.operators.databricks import (
    DurableDatabricksRunNowOperator,
    DurableDatabricksSubmitRunOperator,
)

OPERATOR = os.environ.get("E2E_OPERATOR", "submit_run")
DEFERRABLE = os.environ.get("E2E_DEFERRABLE", "1") == "1"

common = dict(
    task_id="durable_job",
    deferrable=DEFERRABLE,
    retries=2,
    retry_delay=timedelta(seconds=1),
    polling_period_seconds=1,
    databricks_retry_limit=2,
    databricks_retry_delay=0.1,
)

with DAG(
    dag_id="durable_databricks_e2e",
    schedule=None,
    start_date=datetime(2026, 1, 1),
    catchup=False,
    tags=["airflow-durable", "e2e"],
) as dag:
    if OPERATOR == "run_now":
        DurableDatabricksRunNowOperator(job_id=42, notebook_params={"run": "{{ run_id }}"}, **common)
    else:
        DurableDatabricksSubmitRunOperator(
            json={
                "run_name": "e2e-{{ ds }}",
                "new_cluster": {"spark_version": "15.4.x-scala2.12", "num_workers": 1},
                "notebook_task": {"notebook_path": "/Shared/etl"},
            },
            **common,
        )
