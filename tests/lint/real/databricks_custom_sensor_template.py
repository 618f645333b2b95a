# Pattern from user DAGs (see MANIFEST.json): a custom BaseSensorOperator polls DatabricksHook, its run id
# is a template that pulls the submit task's XCom.
from __future__ import annotations

from datetime import datetime

from airflow import DAG
from airflow.providers.databricks.hooks.databricks import DatabricksHook
from airflow.providers.databricks.operators.databricks import DatabricksSubmitRunOperator
from airflow.sensors.base import BaseSensorOperator


class DatabricksJobSensor(BaseSensorOperator):
    template_fields = ("run_id",)

    def __init__(self, databricks_conn_id, run_id, **kwargs):
        super().__init__(**kwargs)
        self.databricks_conn_id = databricks_conn_id
        self.run_id = run_id

    def poke(self, context):
        hook = DatabricksHook(self.databricks_conn_id)
        run_state = hook.get_run_state(self.run_id)
        return run_state.is_terminal and run_state.is_successful


dag = DAG("claims_processing", start_date=datetime(2024, 1, 1), schedule="@daily", catchup=False)

submit_spark_job = DatabricksSubmitRunOperator(  # expect: ADR005
    task_id="submit_spark_job",
    json={"run_name": "claims", "spark_python_task": {"python_file": "dbfs:/jobs/claims.py"}},
    wait_for_termination=False,
    dag=dag,
)

wait_for_databricks = DatabricksJobSensor(
    task_id="wait_for_spark_job",
    databricks_conn_id="databricks_default",
    run_id='{{ task_instance.xcom_pull(task_ids="submit_spark_job", key="run_id") }}',
    poke_interval=120,
    timeout=14400,
    dag=dag,
)

submit_spark_job >> wait_for_databricks
