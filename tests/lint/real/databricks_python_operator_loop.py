# Pattern from user DAGs (see MANIFEST.json): a PythonOperator polls in a loop; its callable takes **context
# and pulls the run id that the submit pushed.
from __future__ import annotations

import time
from datetime import datetime

from airflow import DAG
from airflow.operators.python import PythonOperator
from airflow.providers.databricks.hooks.databricks import DatabricksHook
from airflow.providers.databricks.operators.databricks import DatabricksRunNowOperator


def poll_databricks_run(**context):
    run_id = context["ti"].xcom_pull(task_ids="trigger_ingest", key="run_id")
    hook = DatabricksHook(databricks_conn_id="databricks_prod")
    while True:
        state = hook.get_run_state(run_id)
        if state.is_terminal:
            if not state.is_successful:
                raise Exception(f"Databricks run {run_id} failed: {state.state_message}")
            return state.result_state
        time.sleep(30)


with DAG("ingest_pipeline", start_date=datetime(2023, 6, 1), schedule_interval="@hourly", catchup=False):
    trigger_ingest = DatabricksRunNowOperator(  # expect: ADR005
        task_id="trigger_ingest",
        databricks_conn_id="databricks_prod",
        job_id=987,
        wait_for_termination=False,
    )
    poll = PythonOperator(task_id="poll_ingest", python_callable=poll_databricks_run)
    trigger_ingest >> poll
