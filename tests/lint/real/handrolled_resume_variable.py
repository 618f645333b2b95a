# Pattern from user DAGs (see MANIFEST.json): "reconnect to the run stored in a Variable, else submit".
from __future__ import annotations

import time
from datetime import datetime

from airflow import DAG
from airflow.models import Variable
from airflow.operators.python import PythonOperator
from airflow.providers.databricks.hooks.databricks import DatabricksHook


def run_training(**context):
    hook = DatabricksHook()
    run_id = Variable.get("training_run_id", default_var=None)  # expect: ADR001
    if not run_id:  # expect: ADR004
        run_id = hook.submit_run({"run_name": "training", "tasks": []})
        Variable.set("training_run_id", run_id)  # expect: ADR001
    while not hook.get_run_state(run_id).is_terminal:
        time.sleep(60)
    Variable.delete("training_run_id")  # expect: ADR001


with DAG("training", start_date=datetime(2024, 1, 1), schedule_interval="@weekly", catchup=False):
    PythonOperator(task_id="run_training", python_callable=run_training, retries=3)
