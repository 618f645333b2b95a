"""The demo's Snowflake DAG pair: the provider's operator and its durable drop-in, same arguments.

``airflow-durable demo --system snowflake`` copies this file into the temporary deployment's DAG
folder. Each task's SQL names its dag_id in a comment, so the emulator can tell the two DAGs'
queries apart.
"""

from __future__ import annotations

from datetime import datetime, timedelta

from airflow.providers.snowflake.operators.snowflake import SnowflakeSqlApiOperator
from airflow.sdk import DAG

from airflow_durable.demo.systems import get
from airflow_durable.operators.snowflake import DurableSnowflakeSqlApiOperator

SYSTEM = get("snowflake")

for side, operator in (
    (SYSTEM.upstream, SnowflakeSqlApiOperator),
    (SYSTEM.durable, DurableSnowflakeSqlApiOperator),
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
            snowflake_conn_id="snowflake_default",
            sql=f"insert into analytics.orders_daily select * from raw.orders /* {side.dag_id} */",
            statement_count=1,
            deferrable=True,
            poll_interval=1,
            retries=2,
            retry_delay=timedelta(seconds=2),
        )
    globals()[side.dag_id] = dag
