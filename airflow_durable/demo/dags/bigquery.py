"""The demo's BigQuery DAG pair: the provider's operator and its durable drop-in, same arguments.

``airflow-durable demo --system bigquery`` copies this file into the temporary deployment's DAG
folder. Each task's query names its dag_id in a comment, so the emulator can tell the two DAGs'
jobs apart.
"""

from __future__ import annotations

from datetime import datetime, timedelta

from airflow.providers.google.cloud.operators.bigquery import BigQueryInsertJobOperator
from airflow.sdk import DAG

from airflow_durable.demo.systems import get
from airflow_durable.operators.bigquery import DurableBigQueryInsertJobOperator

SYSTEM = get("bigquery")

for side, operator in (
    (SYSTEM.upstream, BigQueryInsertJobOperator),
    (SYSTEM.durable, DurableBigQueryInsertJobOperator),
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
            gcp_conn_id="google_cloud_default",
            configuration={
                "query": {
                    "query": f"SELECT COUNT(*) FROM `shop.orders` -- {side.dag_id}",
                    "useLegacySql": False,
                }
            },
            deferrable=True,
            poll_interval=1.0,
            retries=2,
            retry_delay=timedelta(seconds=2),
        )
    globals()[side.dag_id] = dag
