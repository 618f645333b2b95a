# Look-alike for ADR005 in loops: a poller whose templated xcom_pull names tasks of another shape
# (f"load_{job}", not the f"start_{job}" submit), and a factory whose poller lives in another function.
import time
from datetime import datetime

import boto3

from airflow import DAG
from airflow.operators.python import PythonOperator


def start_glue(job, **context):
    return boto3.client("glue").start_job_run(JobName=job)["JobRunId"]


def wait_other(job, **context):
    key = context["ti"].xcom_pull(task_ids=f"load_{job}")
    while not boto3.client("s3").list_objects_v2(Bucket="lake", Prefix=key).get("KeyCount"):
        time.sleep(30)


with DAG("glue_loop_lookalike", start_date=datetime(2024, 1, 1), schedule=None):
    for job in ("orders", "customers"):
        start = PythonOperator(task_id=f"start_{job}", python_callable=start_glue, op_args=[job])
        wait = PythonOperator(task_id=f"wait_{job}", python_callable=wait_other, op_args=[job])
        start >> wait
