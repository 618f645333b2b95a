# Licensed under the Apache License, Version 2.0 (http://www.apache.org/licenses/LICENSE-2.0).
# Reduced from astronomer/astronomer-providers astronomer/providers/amazon/aws/example_dags/example_batch.py:
# BatchOperatorAsync waits; the sensor reads a job id found by a separate listing task. Not a split.
import os
from datetime import datetime

from airflow import DAG
from airflow.operators.python import PythonOperator

from astronomer.providers.amazon.aws.operators.batch import BatchOperatorAsync
from astronomer.providers.amazon.aws.sensors.batch import BatchSensorAsync

AWS_CONN_ID = os.getenv("ASTRO_AWS_CONN_ID", "aws_default")
JOB_NAME = "test_airflow_job"
JOB_QUEUE = "providers_team_job_queue"


def list_jobs_func() -> str:
    import boto3

    client = boto3.client("batch")
    response = client.list_jobs(jobQueue=JOB_QUEUE, filters=[{"name": "JOB_NAME", "values": [JOB_NAME]}])
    return response["jobSummaryList"][0]["jobId"]


with DAG(dag_id="example_async_batch", schedule_interval=None, start_date=datetime(2021, 1, 1)) as dag:
    submit_batch_job = BatchOperatorAsync(
        task_id="submit_batch_job",
        job_name=JOB_NAME,
        job_queue=JOB_QUEUE,
        job_definition="providers_team_job_defn:1",
        overrides={},
        aws_conn_id=AWS_CONN_ID,
    )
    list_jobs = PythonOperator(task_id="list_jobs", python_callable=list_jobs_func)
    batch_job_sensor = BatchSensorAsync(
        task_id="sense_job",
        job_id="{{ task_instance.xcom_pull(task_ids='list_jobs', dag_id='example_async_batch') }}",
        aws_conn_id=AWS_CONN_ID,
    )
    submit_batch_job >> list_jobs >> batch_job_sensor
