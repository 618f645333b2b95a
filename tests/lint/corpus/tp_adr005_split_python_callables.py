# ADR005 where the split is in Python callables: one callable starts a Glue run and returns its id, the next
# task's callable polls it. Built in a loop and in a task factory, with templated task ids; the id reaches the
# poller as the submit's .output (op_kwargs) or through xcom_pull(task_ids=f"start_{job}").
import time
from datetime import datetime

import boto3

from airflow import DAG
from airflow.operators.python import PythonOperator


def start_glue(job, **context):
    return boto3.client("glue").start_job_run(JobName=job)["JobRunId"]


def wait_glue(job, run_id, **context):
    while True:
        state = boto3.client("glue").get_job_run(JobName=job, RunId=run_id)["JobRun"]["JobRunState"]
        if state in ("SUCCEEDED", "FAILED"):
            return state
        time.sleep(30)


def wait_pulled(job, **context):
    run_id = context["ti"].xcom_pull(task_ids=f"start_{job}")
    while boto3.client("glue").get_job_run(JobName=job, RunId=run_id)["JobRun"]["JobRunState"] != "SUCCEEDED":
        time.sleep(30)


def glue_pair(dag, job):
    start = PythonOperator(task_id=f"start_{job}", python_callable=start_glue, op_args=[job], dag=dag)  # expect: ADR005
    wait = PythonOperator(task_id=f"wait_{job}", python_callable=wait_pulled, op_args=[job], dag=dag)
    start >> wait
    return wait


with DAG("glue_loop", start_date=datetime(2024, 1, 1), schedule=None) as dag:
    for job in ("orders", "customers"):
        start = PythonOperator(  # expect: ADR005
            task_id=f"start_{job}", python_callable=start_glue, op_kwargs={"job": job}
        )
        wait = PythonOperator(
            task_id=f"wait_{job}", python_callable=wait_glue, op_kwargs={"job": job, "run_id": start.output}
        )
        start >> wait
    glue_pair(dag, "returns")
