# Pattern from user DAGs (see MANIFEST.json): a counter of DAG runs kept in a Variable, read then written
# back incremented. It must carry across runs: per-run storage would reset it every run.
from __future__ import annotations

from datetime import datetime

from airflow import DAG
from airflow.models import Variable
from airflow.operators.python import PythonOperator


def bump_run_count():
    count = int(Variable.get("report_run_count", default_var=0))
    print(f"this is run number {count + 1}")
    Variable.set("report_run_count", count + 1)  # expect: ADR002


with DAG("weekly_report", start_date=datetime(2023, 1, 1), schedule_interval="@weekly", catchup=False):
    PythonOperator(task_id="bump_run_count", python_callable=bump_run_count)
