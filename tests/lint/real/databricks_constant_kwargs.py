# Pattern from user DAGs (see MANIFEST.json): arguments held in module constants and default_args-like
# dicts; the no-wait flag is a constant, the sensor gets the run id through a template.
from __future__ import annotations

from datetime import datetime

from airflow import DAG
from airflow.providers.databricks.operators.databricks import DatabricksRunNowOperator
from airflow.providers.standard.sensors.python import PythonSensor

DATABRICKS_CONN = "databricks_default"
WAIT_FOR_TERMINATION = False
JOB_ID = 4411
RUN_TASK = "run_export"


def export_done(run_id: str) -> bool:
    from airflow.providers.databricks.hooks.databricks import DatabricksHook

    return DatabricksHook(DATABRICKS_CONN).get_run_state(int(run_id)).is_terminal


with DAG("export_dag", start_date=datetime(2024, 2, 1), schedule="@daily", catchup=False) as dag:
    run_export = DatabricksRunNowOperator(  # expect: ADR005
        task_id=RUN_TASK,
        databricks_conn_id=DATABRICKS_CONN,
        job_id=JOB_ID,
        wait_for_termination=WAIT_FOR_TERMINATION,
    )
    export_finished = PythonSensor(
        task_id="export_finished",
        python_callable=export_done,
        op_kwargs={"run_id": "{{ ti.xcom_pull(task_ids='" + RUN_TASK + "', key='run_id') }}"},
    )
    run_export >> export_finished
