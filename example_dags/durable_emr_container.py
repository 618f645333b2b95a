"""Run a Spark job on EMR on EKS and wait for it in one durable task.

``DurableEmrContainerOperator`` takes the same arguments as the provider's ``EmrContainerOperator``.
``StartJobRun`` receives a ``clientToken`` derived from the task instance; a retry reconnects to the
job run by id, and after a crash inside the submit call looks it up by name and token first. With
``deferrable=True`` it waits in the provider's ``EmrContainerTrigger``; a retry after the job run
succeeded returns its id without submitting.

Connection: ``aws_default``. The virtual cluster id comes from the Airflow Variable
``emr_virtual_cluster_id``. Runs offline against ``airflow_durable.testing.emr.EmrContainersEmulator``
(see ``tests/examples``). On Airflow < 3.3 it still works as one task; each try then starts a fresh run.
"""

from __future__ import annotations

from datetime import datetime, timedelta

try:
    from airflow.sdk import DAG
except ImportError:  # Airflow 2.x
    from airflow import DAG

from airflow_durable.operators.emr import DurableEmrContainerOperator

with DAG(
    dag_id="durable_emr_container",
    schedule=None,
    start_date=datetime(2026, 1, 1),
    catchup=False,
    tags=["airflow-durable", "example", "emr"],
) as dag:
    DurableEmrContainerOperator(
        task_id="nightly_etl",
        aws_conn_id="aws_default",
        name="nightly-etl",
        virtual_cluster_id="{{ var.value.emr_virtual_cluster_id }}",
        execution_role_arn="arn:aws:iam::123456789012:role/emr-on-eks-job",
        release_label="emr-7.1.0-latest",
        job_driver={
            "sparkSubmitJobDriver": {
                "entryPoint": "s3://my-bucket/jobs/etl.py",
                "entryPointArguments": ["--date", "{{ ds }}"],
            }
        },
        deferrable=True,
        retries=3,
        retry_delay=timedelta(minutes=2),
    )
