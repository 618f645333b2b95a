# Pattern from user DAGs (see MANIFEST.json): a custom sensor pulls the job run id from the start task's
# XCom inside poke(); the start task's id is a module constant.
from __future__ import annotations

from datetime import datetime

from airflow import DAG
from airflow.providers.amazon.aws.hooks.emr import EmrServerlessHook
from airflow.providers.amazon.aws.operators.emr import EmrServerlessStartJobOperator
from airflow.sensors.base import BaseSensorOperator

APP_ID = "00f1abcdxyz"
START_TASK = "start_spark_job"


class SparkJobDoneSensor(BaseSensorOperator):
    def poke(self, context) -> bool:
        job_run_id = context["ti"].xcom_pull(task_ids=START_TASK)
        run = EmrServerlessHook().conn.get_job_run(applicationId=APP_ID, jobRunId=job_run_id)
        state = run["jobRun"]["state"]
        if state in ("FAILED", "CANCELLED"):
            raise RuntimeError(state)
        return state == "SUCCESS"


with DAG("spark_serverless", start_date=datetime(2024, 1, 1), schedule="@daily", catchup=False) as dag:
    start = EmrServerlessStartJobOperator(  # expect: ADR005
        task_id=START_TASK,
        application_id=APP_ID,
        execution_role_arn="arn:aws:iam::123456789012:role/emr",
        job_driver={"sparkSubmit": {"entryPoint": "s3://bucket/job.py"}},
        wait_for_completion=False,
    )
    done = SparkJobDoneSensor(task_id="spark_job_done", poke_interval=60, mode="reschedule")
    start >> done
