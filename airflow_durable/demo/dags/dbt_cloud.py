"""The demo's dbt Cloud DAG pair: the provider's operator and its durable drop-in, same arguments.

``airflow-durable demo --system dbt-cloud`` copies this file into the temporary deployment's DAG
folder. Each DAG triggers its own dbt Cloud job (``job_ids`` in the registry), so the emulator can
tell the two DAGs' runs apart.
"""

from __future__ import annotations

from datetime import datetime, timedelta

from airflow.providers.dbt.cloud.operators.dbt import DbtCloudRunJobOperator
from airflow.sdk import DAG

from airflow_durable.demo.systems import get
from airflow_durable.operators.dbt_cloud import DurableDbtCloudRunJobOperator

SYSTEM = get("dbt-cloud")

for side, operator in (
    (SYSTEM.upstream, DbtCloudRunJobOperator),
    (SYSTEM.durable, DurableDbtCloudRunJobOperator),
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
            dbt_cloud_conn_id="dbt_cloud_default",
            job_id=SYSTEM.job_ids[side.dag_id],
            trigger_reason=f"nightly models ({side.dag_id})",
            deferrable=True,
            check_interval=1,
            timeout=600,
            retries=2,
            retry_delay=timedelta(seconds=2),
        )
    globals()[side.dag_id] = dag
