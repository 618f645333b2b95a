# Pattern from user DAGs (see MANIFEST.json): an incremental load keyed on the largest id seen; the
# Variable's name says nothing about watermarks, its use does (read, filter on it, write a later value).
from __future__ import annotations

from datetime import datetime

from airflow import DAG
from airflow.models import Variable
from airflow.operators.python import PythonOperator
from airflow.providers.postgres.hooks.postgres import PostgresHook


def sync_orders(**kwargs):
    max_id = int(Variable.get("orders_sync"))
    hook = PostgresHook(postgres_conn_id="shop")
    rows = hook.get_records(f"SELECT id, total FROM orders WHERE id > {max_id} ORDER BY id")
    for row in rows:
        print(row)
    if rows:
        Variable.set("orders_sync", rows[-1][0])  # expect: ADR002


with DAG("orders_incremental", start_date=datetime(2022, 5, 1), schedule_interval="*/15 * * * *") as dag:
    sync = PythonOperator(task_id="sync_orders", python_callable=sync_orders)
