# Licensed under the Apache License, Version 2.0 (http://www.apache.org/licenses/LICENSE-2.0).
# Reduced from apache/airflow providers/amazon/tests/system/amazon/aws/example_emr_serverless.py.
from __future__ import annotations

from datetime import datetime

from airflow.providers.amazon.aws.hooks.emr import EmrServerlessHook
from airflow.providers.amazon.aws.operators.emr import (
    EmrServerlessCreateApplicationOperator,
    EmrServerlessDeleteApplicationOperator,
    EmrServerlessStartJobOperator,
    EmrServerlessStopApplicationOperator,
)
from airflow.providers.amazon.aws.sensors.emr import EmrServerlessApplicationSensor, EmrServerlessJobSensor
from airflow.providers.common.compat.sdk import DAG, chain

SPARK_JOB_DRIVER = {"sparkSubmit": {"entryPoint": "s3://bucket/wordcount.py"}}

with DAG(dag_id="example_emr_serverless", schedule="@once", start_date=datetime(2021, 1, 1)) as dag:
    emr_serverless_app = EmrServerlessCreateApplicationOperator(
        task_id="create_emr_serverless_task",
        release_label="emr-6.6.0",
        job_type="SPARK",
        config={"name": "new_application"},
    )
    # EmrServerlessCreateApplicationOperator waits by default, setting as False to test the Sensor below.
    emr_serverless_app.wait_for_completion = False

    emr_serverless_app_id = emr_serverless_app.output

    wait_for_app_creation = EmrServerlessApplicationSensor(
        task_id="wait_for_app_creation",
        application_id=emr_serverless_app_id,
    )
    wait_for_app_creation.poke_interval = 1

    start_job = EmrServerlessStartJobOperator(  # expect: ADR005
        task_id="start_emr_serverless_job",
        application_id=emr_serverless_app_id,
        execution_role_arn="arn:aws:iam::123456789012:role/emr",
        job_driver=SPARK_JOB_DRIVER,
    )
    start_job.wait_for_completion = False

    wait_for_job = EmrServerlessJobSensor(
        task_id="wait_for_job",
        application_id=emr_serverless_app_id,
        job_run_id=start_job.output,
        target_states={*EmrServerlessHook.JOB_SUCCESS_STATES, "RUNNING"},
    )
    wait_for_job.poke_interval = 10

    stop_app = EmrServerlessStopApplicationOperator(
        task_id="stop_application",
        application_id=emr_serverless_app_id,
        force_stop=True,
    )
    delete_app = EmrServerlessDeleteApplicationOperator(
        task_id="delete_application",
        application_id=emr_serverless_app_id,
    )

    chain(emr_serverless_app, wait_for_app_creation, start_job, wait_for_job, stop_app, delete_app)
