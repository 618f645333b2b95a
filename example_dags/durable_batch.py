"""Submit an AWS Batch job and wait for it in one durable task.

``DurableBatchOperator`` takes the same arguments as the provider's ``BatchOperator``. Batch's
``SubmitJob`` has no idempotency token, so the job carries the tag ``airflow-durable-token``; a retry
after a crash between submitting and recording the job id finds the job by name and tag instead of
submitting another. With ``deferrable=True`` it stores the job id in the task state store, then waits
in the provider's ``BatchJobTrigger``; a retry reconnects to the same job, and a retry after the job
succeeded returns its id without submitting.

Connection: ``aws_default``. Runs offline against ``airflow_durable.testing.BatchEmulator`` (queue
``emulator-queue``, job definition ``emulator-job-def``). On Airflow < 3.3 it still works as one task;
each try then submits fresh.
"""

from __future__ import annotations

from datetime import datetime, timedelta

try:
    from airflow.sdk import DAG, task
except ImportError:  # Airflow 2.x
    from airflow import DAG
    from airflow.decorators import task

from airflow_durable.operators.batch import DurableBatchOperator

with DAG(
    dag_id="durable_batch",
    schedule=None,
    start_date=datetime(2026, 1, 1),
    catchup=False,
    tags=["airflow-durable", "example", "batch"],
) as dag:
    nightly_etl = DurableBatchOperator(
        task_id="nightly_etl",
        aws_conn_id="aws_default",
        job_name="nightly-etl",
        job_queue="emulator-queue",
        job_definition="emulator-job-def",
        container_overrides={"command": ["python", "etl.py", "--date", "{{ ds }}"]},
        tags={"team": "data"},
        deferrable=True,
        poll_interval=30,
        retries=3,
        retry_delay=timedelta(minutes=2),
    )

    @task
    def publish(job_id: str, **context) -> str:
        # The return value and the job details link XCom are the provider's, on every path.
        details = context["ti"].xcom_pull(task_ids="nightly_etl", key="batch_job_details")
        print(f"AWS Batch job {job_id} succeeded: {details}")
        return job_id

    publish(nightly_etl.output)
