# Licensed under the Apache License, Version 2.0 (http://www.apache.org/licenses/LICENSE-2.0).
# Reduced from astronomer/astronomer-providers astronomer/providers/dbt/cloud/example_dags/
# example_dbt_cloud.py: the run is triggered without waiting and sensed by DbtCloudJobRunSensorAsync.
from datetime import datetime, timedelta

from airflow import DAG
from airflow.operators.empty import EmptyOperator
from airflow.providers.dbt.cloud.operators.dbt import DbtCloudRunJobOperator

from astronomer.providers.dbt.cloud.sensors.dbt import DbtCloudJobRunSensorAsync

DBT_CLOUD_CONN_ID = "dbt"
DBT_CLOUD_ACCOUNT_ID = 12345
DBT_CLOUD_JOB_ID = 67890

default_args = {"execution_timeout": timedelta(hours=6), "retries": 2, "retry_delay": timedelta(seconds=60)}

with DAG(
    dag_id="example_async_dbt_cloud",
    start_date=datetime(2022, 1, 1),
    schedule=None,
    catchup=False,
    default_args=default_args,
) as dag:
    start = EmptyOperator(task_id="start")
    trigger_job_run = DbtCloudRunJobOperator(  # expect: ADR005
        task_id="trigger_job_run",
        dbt_cloud_conn_id=DBT_CLOUD_CONN_ID,
        job_id=DBT_CLOUD_JOB_ID,
        account_id=DBT_CLOUD_ACCOUNT_ID,
        check_interval=10,
        timeout=300,
        wait_for_termination=False,
    )
    job_run_sensor = DbtCloudJobRunSensorAsync(
        task_id="job_run_sensor",
        dbt_cloud_conn_id=DBT_CLOUD_CONN_ID,
        run_id=trigger_job_run.output,
        account_id=DBT_CLOUD_ACCOUNT_ID,
        timeout=20,
    )
    end = EmptyOperator(task_id="end")
    start >> trigger_job_run >> job_run_sensor >> end
