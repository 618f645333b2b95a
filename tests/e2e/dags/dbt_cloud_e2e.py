"""End-to-end DAGs for dbt Cloud: the durable operator and the upstream one, each deferrable and sync.

Kept in the dags folder because ``dag.test()`` needs the file inside a configured bundle.
"""

from __future__ import annotations

from datetime import datetime, timedelta

try:
    from airflow.sdk import DAG
except ImportError:  # Airflow 2.x
    from airflow import DAG

from airflow.providers.dbt.cloud.operators.dbt import DbtCloudRunJobOperator

from airflow_durable.operators.dbt_cloud import DurableDbtCloudRunJobOperator

OPERATORS = {"durable": DurableDbtCloudRunJobOperator, "upstream": DbtCloudRunJobOperator}
dags = {}

for kind, operator in OPERATORS.items():
    for path in ("deferrable", "sync"):
        with DAG(
            dag_id=f"dbt_cloud_e2e_{kind}_{path}",
            schedule=None,
            start_date=datetime(2026, 1, 1),
            catchup=False,
            tags=["airflow-durable", "e2e"],
        ) as dag:
            operator(
                task_id="dbt_job",
                job_id=42,
                deferrable=path == "deferrable",
                check_interval=1,
                timeout=600,
                retries=2,
                retry_delay=timedelta(seconds=1),
            )
        dags[dag.dag_id] = dag
        globals()[dag.dag_id] = dag
