# Pattern from user DAGs (see MANIFEST.json): task ids in module constants, the submit does not wait and
# a PythonSensor pulls the run id from the submit's XCom and asks Databricks for the run state.
from __future__ import annotations

import pendulum

from airflow.providers.databricks.hooks.databricks import DatabricksHook
from airflow.providers.databricks.operators.databricks import DatabricksSubmitRunOperator
from airflow.providers.standard.sensors.python import PythonSensor
from airflow.sdk import DAG

SUBMIT_TASK_ID = "submit_notebook"
WAIT_TASK_ID = "wait_for_notebook"
NOTEBOOK_RUN = {
    "run_name": "daily_features",
    "tasks": [{"task_key": "features", "notebook_task": {"notebook_path": "/Repos/etl/features"}}],
}


def _run_finished(ti, **_):
    run_id = ti.xcom_pull(task_ids=SUBMIT_TASK_ID, key="run_id")
    state = DatabricksHook(databricks_conn_id="databricks_default").get_run_state(run_id)
    if state.is_terminal and not state.is_successful:
        raise RuntimeError(f"run {run_id} ended {state.result_state}")
    return state.is_terminal


with DAG(
    dag_id="daily_features",
    start_date=pendulum.datetime(2024, 1, 1, tz="UTC"),
    schedule="@daily",
    catchup=False,
) as dag:
    submit = DatabricksSubmitRunOperator(  # expect: ADR005
        task_id=SUBMIT_TASK_ID,
        json=NOTEBOOK_RUN,
        wait_for_termination=False,
    )
    wait = PythonSensor(
        task_id=WAIT_TASK_ID,
        python_callable=_run_finished,
        poke_interval=60,
        mode="reschedule",
    )
    submit >> wait
