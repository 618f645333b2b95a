"""The demo's Redshift Data DAG pair: the provider's operator and its durable drop-in, same arguments.

``airflow-durable demo --system redshift`` copies this file into the temporary deployment's DAG
folder. Each task's SQL names its dag_id in a comment, so the emulator can tell the two DAGs'
statements apart.
"""

from __future__ import annotations

from datetime import datetime, timedelta

from airflow.providers.amazon.aws.operators.redshift_data import RedshiftDataOperator
from airflow.sdk import DAG

from airflow_durable.demo.systems import get
from airflow_durable.operators.redshift import DurableRedshiftDataOperator

SYSTEM = get("redshift")

for side, operator in (
    (SYSTEM.upstream, RedshiftDataOperator),
    (SYSTEM.durable, DurableRedshiftDataOperator),
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
            aws_conn_id="aws_default",
            cluster_identifier="analytics",
            database="dev",
            sql=f"insert into sales select * from staging_sales /* {side.dag_id} */",
            deferrable=True,
            poll_interval=1,
            retries=2,
            retry_delay=timedelta(seconds=2),
        )
    globals()[side.dag_id] = dag
