# Pattern from user DAGs (see MANIFEST.json): state of one run kept under a run-scoped Variable key.
from __future__ import annotations

from datetime import datetime

from airflow import DAG
from airflow.models import Variable
from airflow.operators.python import PythonOperator


def list_files(**context):
    run_id = context["dag_run"].run_id
    files = ["a.csv", "b.csv"]
    Variable.set(f"{run_id}_pending_files", ",".join(files))  # expect: ADR001


def load_files(**context):
    run_id = context["dag_run"].run_id
    pending = Variable.get(f"{run_id}_pending_files").split(",")  # expect: ADR001
    for name in pending:
        print("loading", name)


with DAG("files_per_run", start_date=datetime(2023, 1, 1), schedule_interval="@daily", catchup=False):
    PythonOperator(task_id="list_files", python_callable=list_files) >> PythonOperator(
        task_id="load_files", python_callable=load_files
    )
