# Pattern from user DAGs (see MANIFEST.json): the statement id is pulled from XCom inside a PythonSensor
# callable that takes the task instance.
from __future__ import annotations

from datetime import datetime

from airflow import DAG
from airflow.providers.amazon.aws.hooks.redshift_data import RedshiftDataHook
from airflow.providers.amazon.aws.operators.redshift_data import RedshiftDataOperator
from airflow.sensors.python import PythonSensor

CLUSTER = "warehouse"


def check_statement(ti):
    statement_id = ti.xcom_pull(task_ids="refresh_materialized_views")[0]
    desc = RedshiftDataHook(aws_conn_id="aws_default").conn.describe_statement(Id=statement_id)
    return desc["Status"] == "FINISHED"


with DAG("refresh_mvs", start_date=datetime(2023, 1, 1), schedule="30 2 * * *", catchup=False) as dag:
    refresh = RedshiftDataOperator(  # expect: ADR005
        task_id="refresh_materialized_views",
        cluster_identifier=CLUSTER,
        database="analytics",
        sql=["REFRESH MATERIALIZED VIEW mv_sales;", "REFRESH MATERIALIZED VIEW mv_stock;"],
        wait_for_completion=False,
    )
    wait_refresh = PythonSensor(task_id="wait_refresh", python_callable=check_statement, poke_interval=20)
    refresh >> wait_refresh
