# Pattern from user DAGs (see MANIFEST.json): a PythonSensor waits for a file a previous task downloads.
from __future__ import annotations

import os
from datetime import datetime

from airflow import DAG
from airflow.operators.bash import BashOperator
from airflow.sensors.python import PythonSensor

LANDING = "/data/landing/{{ ds }}.csv"


def _file_ready(path: str, **context) -> bool:
    return os.path.exists(path) and os.path.getsize(path) > 0


with DAG("landing_files", start_date=datetime(2023, 1, 1), schedule_interval="@daily", catchup=False) as dag:
    download = BashOperator(task_id="download", bash_command=f"curl -o {LANDING} https://example.com/export")
    wait_file = PythonSensor(
        task_id="wait_file", python_callable=_file_ready, op_kwargs={"path": LANDING}, mode="reschedule"
    )
    download >> wait_file
