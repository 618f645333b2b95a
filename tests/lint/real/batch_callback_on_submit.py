# Pattern from user DAGs (see MANIFEST.json): the success alert is attached to the submit, which turns green
# as soon as AWS Batch accepts the job.
from __future__ import annotations

from datetime import datetime

from airflow import DAG
from airflow.providers.amazon.aws.operators.batch import BatchOperator
from airflow.providers.amazon.aws.sensors.batch import BatchSensor


def alert_success(context):
    print("batch job done", context["ti"].task_id)


with DAG("batch_reindex", start_date=datetime(2024, 1, 1), schedule="@weekly", catchup=False) as dag:
    submit = BatchOperator(  # expect: ADR005
        task_id="submit_reindex",
        job_name="reindex",
        job_queue="default",
        job_definition="reindex:3",
        wait_for_completion=False,
        on_success_callback=alert_success,  # expect: ADR006
    )
    wait = BatchSensor(task_id="wait_reindex", job_id=submit.output, deferrable=True)
    submit >> wait
