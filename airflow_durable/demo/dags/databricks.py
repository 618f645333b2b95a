"""The demo's Databricks DAG pair: the provider's operator and its durable drop-in, same arguments.

``airflow-durable demo`` copies this file into the temporary deployment's DAG folder. Each task's
Databricks ``run_name`` is its dag_id, so the emulator can tell the two DAGs' runs apart.
"""

from __future__ import annotations

from datetime import datetime, timedelta

from airflow.providers.databricks.operators.databricks import DatabricksSubmitRunOperator
from airflow.sdk import DAG

from airflow_durable.demo.systems import get
from airflow_durable.operators.databricks import DurableDatabricksSubmitRunOperator

SYSTEM = get("databricks")

for side, operator in (
    (SYSTEM.upstream, DatabricksSubmitRunOperator),
    (SYSTEM.durable, DurableDatabricksSubmitRunOperator),
):
    with DAG(
        dag_id=side.dag_id,
        schedule=None,
        start_date=datetime(2026, 1, 1),
        catchup=False,
        tags=["airflow-durable", "demo"],
    ) as dag:
        operator(
            task_id=SYSTEM.task_id,
            json={
                "run_name": side.dag_id,
                "new_cluster": {"spark_version": "15.4.x-scala2.12", "num_workers": 8},
                "notebook_task": {"notebook_path": "/Shared/nightly_etl"},
            },
            deferrable=True,
            retries=2,
            retry_delay=timedelta(seconds=2),
            polling_period_seconds=1,
            databricks_retry_limit=2,
            databricks_retry_delay=0.2,
        )
    globals()[side.dag_id] = dag
