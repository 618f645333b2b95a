# Licensed under the Apache License, Version 2.0 (http://www.apache.org/licenses/LICENSE-2.0).
# Reduced from apache/airflow providers/amazon/tests/system/amazon/aws/example_emr_eks.py.
from __future__ import annotations

from datetime import datetime

import boto3

from airflow.providers.amazon.aws.operators.emr import EmrContainerOperator, EmrEksCreateClusterOperator
from airflow.providers.amazon.aws.sensors.emr import EmrContainerSensor
from airflow.sdk import DAG, chain, task
from airflow.utils.trigger_rule import TriggerRule

JOB_DRIVER_ARG = {"sparkSubmitJobDriver": {"entryPoint": "s3://bucket/pi.py"}}


@task(trigger_rule=TriggerRule.ALL_DONE)
def delete_virtual_cluster(virtual_cluster_id):
    boto3.client("emr-containers").delete_virtual_cluster(id=virtual_cluster_id)


with DAG(dag_id="example_emr_eks", schedule="@once", start_date=datetime(2021, 1, 1)) as dag:
    create_emr_eks_cluster = EmrEksCreateClusterOperator(
        task_id="create_emr_eks_cluster",
        virtual_cluster_name="virtual",
        eks_cluster_name="eks",
        eks_namespace="default",
    )

    job_starter = EmrContainerOperator(  # expect: ADR005
        task_id="start_job",
        virtual_cluster_id=str(create_emr_eks_cluster.output),
        execution_role_arn="arn:aws:iam::123456789012:role/job",
        release_label="emr-7.0.0-latest",
        job_driver=JOB_DRIVER_ARG,
        name="pi.py",
    )
    job_starter.wait_for_completion = False
    job_starter.job_retry_max_attempts = 5

    job_waiter = EmrContainerSensor(
        task_id="job_waiter",
        virtual_cluster_id=str(create_emr_eks_cluster.output),
        job_id=str(job_starter.output),
    )

    chain(
        create_emr_eks_cluster,
        job_starter,
        job_waiter,
        delete_virtual_cluster(str(create_emr_eks_cluster.output)),
    )
