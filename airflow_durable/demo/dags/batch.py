"""The demo's AWS Batch DAG pair: the provider's operator and its durable drop-in, same arguments.

``airflow-durable demo --system batch`` copies this file into the temporary deployment's DAG
folder. Each task's Batch job is named after its dag_id, so the emulator can tell the two DAGs' jobs
apart. The queue and job definition are the ones the emulator creates at start.
"""

from __future__ import annotations

from datetime import datetime, timedelta

from airflow.providers.amazon.aws.operators.batch import BatchOperator
from airflow.sdk import DAG

from airflow_durable.demo.systems import get
from airflow_durable.operators.batch import DurableBatchOperator

SYSTEM = get("batch")

for side, operator in (
    (SYSTEM.upstream, BatchOperator),
    (SYSTEM.durable, DurableBatchOperator),
):
    with DAG(
        dag_id=side.dag_id,
        schedule=None,
        start_date=datetime(2026, 1, 1),
        catchup=False,
        tags=["airflow-durable", "demo"],
    ) as dag:
        operator(
            task_id=SYSTEM.task_id,
            aws_conn_id="aws_default",
            job_name=side.dag_id,
            job_queue="emulator-queue",
            job_definition="emulator-job-def",
            container_overrides={"command": ["python", "etl.py"]},
            deferrable=True,
            poll_interval=1,
            retries=2,
            retry_delay=timedelta(seconds=2),
        )
    globals()[side.dag_id] = dag
