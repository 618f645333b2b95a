# Pattern from user DAGs (see MANIFEST.json): after a dbt Cloud run that does not wait, the notification and
# the downstream export hang off the trigger task instead of the sensor.
from __future__ import annotations

import pendulum

from airflow.providers.dbt.cloud.operators.dbt import DbtCloudRunJobOperator
from airflow.providers.dbt.cloud.sensors.dbt import DbtCloudJobRunSensor
from airflow.providers.standard.operators.python import PythonOperator
from airflow.sdk import DAG


def notify_slack(**context):
    print("dbt models refreshed for", context["ds"])


with DAG(
    "dbt_nightly",
    start_date=pendulum.datetime(2024, 1, 1, tz="UTC"),
    schedule="0 4 * * *",
    catchup=False,
    default_args={"dbt_cloud_conn_id": "dbt_cloud", "account_id": 7},
):
    trigger = DbtCloudRunJobOperator(  # expect: ADR005
        task_id="trigger_dbt_nightly",
        job_id=555,
        wait_for_termination=False,
    )
    wait = DbtCloudJobRunSensor(task_id="wait_dbt_nightly", run_id=trigger.output, deferrable=True)
    notify = PythonOperator(task_id="notify", python_callable=notify_slack)
    export = PythonOperator(task_id="export_marts", python_callable=lambda: None)
    trigger >> wait
    trigger >> [notify, export]  # expect: ADR006
