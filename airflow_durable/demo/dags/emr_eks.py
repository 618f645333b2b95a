"""The demo's EMR on EKS DAG pair: the provider's operator and its durable drop-in, same arguments.

``airflow-durable demo --system emr-eks`` copies this file into the temporary deployment's DAG
folder. Each task's job run is named after its dag_id, so the emulator can tell the two DAGs' runs
apart; the virtual cluster id (created by the emulator at start) arrives as an Airflow Variable.
"""

from __future__ import annotations

from datetime import datetime, timedelta

from airflow.providers.amazon.aws.operators.emr import EmrContainerOperator
from airflow.sdk import DAG

from airflow_durable.demo.systems import get
from airflow_durable.operators.emr import DurableEmrContainerOperator

SYSTEM = get("emr-eks")

for side, operator in (
    (SYSTEM.upstream, EmrContainerOperator),
    (SYSTEM.durable, DurableEmrContainerOperator),
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
            name=side.dag_id,
            virtual_cluster_id="{{ var.value." + SYSTEM.cluster_variable + " }}",
            execution_role_arn="arn:aws:iam::123456789012:role/emr-on-eks-job",
            release_label="emr-7.1.0-latest",
            job_driver={"sparkSubmitJobDriver": {"entryPoint": "s3://my-bucket/jobs/etl.py"}},
            deferrable=True,
            poll_interval=1,
            retries=2,
            retry_delay=timedelta(seconds=2),
        )
    globals()[side.dag_id] = dag
