# Licensed under the Apache License, Version 2.0 (http://www.apache.org/licenses/LICENSE-2.0).
# Reduced from apache/airflow providers/amazon/tests/system/amazon/aws/example_batch.py (see MANIFEST.json).
from __future__ import annotations

from datetime import datetime

import boto3

from airflow.providers.amazon.aws.operators.batch import BatchCreateComputeEnvironmentOperator, BatchOperator
from airflow.providers.amazon.aws.sensors.batch import BatchComputeEnvironmentSensor, BatchSensor
from airflow.sdk import DAG, chain, task
from airflow.utils.trigger_rule import TriggerRule

DAG_ID = "example_batch"
JOB_OVERRIDES: dict = {}


@task(trigger_rule=TriggerRule.ONE_FAILED)
def describe_job(job_id):
    boto3.client("batch").describe_jobs(jobs=[job_id])


with DAG(dag_id=DAG_ID, schedule="@once", start_date=datetime(2021, 1, 1), catchup=False) as dag:
    create_compute_environment = BatchCreateComputeEnvironmentOperator(
        task_id="create_compute_environment",
        compute_environment_name="env",
        environment_type="MANAGED",
        state="ENABLED",
        compute_resources={"type": "FARGATE", "maxvCpus": 10},
    )
    wait_for_compute_environment_valid = BatchComputeEnvironmentSensor(
        task_id="wait_for_compute_environment_valid",
        compute_environment="env",
    )
    wait_for_compute_environment_valid.poke_interval = 1

    submit_batch_job = BatchOperator(  # expect: ADR005
        task_id="submit_batch_job",
        job_name="job",
        job_queue="queue",
        job_definition="definition",
        container_overrides=JOB_OVERRIDES,
    )
    # BatchOperator waits by default, setting as False to test the Sensor below.
    submit_batch_job.wait_for_completion = False

    wait_for_batch_job = BatchSensor(
        task_id="wait_for_batch_job",
        job_id=submit_batch_job.output,
    )
    wait_for_batch_job.poke_interval = 10

    chain(
        create_compute_environment,
        wait_for_compute_environment_valid,
        submit_batch_job,
        wait_for_batch_job,
        describe_job(submit_batch_job.output),
    )
