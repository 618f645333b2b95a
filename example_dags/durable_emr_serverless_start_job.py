"""Run a Spark job on EMR Serverless and wait for it in one durable task.

``DurableEmrServerlessStartJobOperator`` takes the same arguments as the provider's
``EmrServerlessStartJobOperator``. ``StartJobRun`` receives a ``clientToken`` derived from the task
instance, so a retry after a crash (even one inside the submit call) gets the job run it already
started. With ``deferrable=True`` it waits in the provider's ``EmrServerlessStartJobTrigger``; a retry
reconnects to the same job run, and a retry after it succeeded returns its id without submitting.
Unlike upstream, a wait that runs out of ``waiter_max_attempts`` leaves the job running (tracked) for
the retry instead of cancelling it.

Connection: ``aws_default``. The application id comes from the Airflow Variable
``emr_serverless_application_id``. Runs offline against
``airflow_durable.testing.emr.EmrServerlessEmulator`` (see ``tests/examples``). On Airflow < 3.3 it
still works as one task; each try then starts a fresh job run.
"""

from __future__ import annotations

from datetime import datetime, timedelta

try:
    from airflow.sdk import DAG
except ImportError:  # Airflow 2.x
    from airflow import DAG

from airflow_durable.operators.emr import DurableEmrServerlessStartJobOperator

with DAG(
    dag_id="durable_emr_serverless_start_job",
    schedule=None,
    start_date=datetime(2026, 1, 1),
    catchup=False,
    tags=["airflow-durable", "example", "emr"],
) as dag:
    DurableEmrServerlessStartJobOperator(
        task_id="nightly_etl",
        aws_conn_id="aws_default",
        application_id="{{ var.value.emr_serverless_application_id }}",
        execution_role_arn="arn:aws:iam::123456789012:role/emr-serverless-job",
        job_driver={
            "sparkSubmit": {
                "entryPoint": "s3://my-bucket/jobs/etl.py",
                "entryPointArguments": ["--date", "{{ ds }}"],
            }
        },
        name="nightly-etl-{{ ds }}",
        deferrable=True,
        retries=3,
        retry_delay=timedelta(minutes=2),
    )
