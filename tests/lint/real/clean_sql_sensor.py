# Pattern from user DAGs (see MANIFEST.json): wait until the upstream load marked the partition complete.
from __future__ import annotations

from datetime import datetime

from airflow import DAG
from airflow.providers.common.sql.operators.sql import SQLExecuteQueryOperator
from airflow.providers.common.sql.sensors.sql import SqlSensor

with DAG("mart_build", start_date=datetime(2023, 1, 1), schedule_interval="@daily", catchup=False) as dag:
    wait_partition = SqlSensor(
        task_id="wait_partition",
        conn_id="warehouse",
        sql="SELECT 1 FROM load_log WHERE ds = '{{ ds }}' AND status = 'done'",
        poke_interval=300,
        mode="reschedule",
    )
    build = SQLExecuteQueryOperator(task_id="build_mart", conn_id="warehouse", sql="CALL build_mart('{{ ds }}')")
    wait_partition >> build
