# Licensed under the Apache License, Version 2.0 (http://www.apache.org/licenses/LICENSE-2.0).
# Reduced from astronomer/astronomer-providers astronomer/providers/amazon/aws/example_dags/
# example_emr_eks_containers_job.py: EmrContainerOperatorAsync already waits (deferred), the
# EmrContainerSensorAsync after it only re-checks a finished job. A double wait, not a split.
import os
from datetime import datetime, timedelta

from airflow import DAG
from airflow.operators.bash import BashOperator
from airflow.providers.amazon.aws.operators.emr import EmrEksCreateClusterOperator

from astronomer.providers.amazon.aws.operators.emr import EmrContainerOperatorAsync
from astronomer.providers.amazon.aws.sensors.emr import EmrContainerSensorAsync

AWS_CONN_ID = os.getenv("ASTRO_AWS_CONN_ID", "aws_default")
JOB_ROLE_ARN = "arn:aws:iam::123456789012:role/job"
JOB_DRIVER_ARG = {"sparkSubmitJobDriver": {"entryPoint": "local:///usr/lib/spark/examples/pi.py"}}

default_args = {"execution_timeout": timedelta(hours=6), "retries": 2}

with DAG(
    dag_id="example_emr_eks_pi_job",
    start_date=datetime(2022, 1, 1),
    schedule_interval=None,
    catchup=False,
    default_args=default_args,
) as dag:
    create_emr_virtual_cluster = EmrEksCreateClusterOperator(
        task_id="create_emr_eks_cluster",
        virtual_cluster_name="virtual",
        eks_cluster_name="eks",
        eks_namespace="ns",
    )
    VIRTUAL_CLUSTER_ID = create_emr_virtual_cluster.output

    run_emr_container_job = EmrContainerOperatorAsync(
        task_id="run_emr_container_job",
        virtual_cluster_id=VIRTUAL_CLUSTER_ID,
        execution_role_arn=JOB_ROLE_ARN,
        release_label="emr-6.2.0-latest",
        job_driver=JOB_DRIVER_ARG,
        name="pi.py",
    )
    emr_job_container_sensor = EmrContainerSensorAsync(
        task_id="emr_job_container_sensor",
        job_id=run_emr_container_job.output,
        virtual_cluster_id=VIRTUAL_CLUSTER_ID,
        poll_interval=5,
        aws_conn_id=AWS_CONN_ID,
    )
    remove = BashOperator(task_id="remove", bash_command="echo done", trigger_rule="all_done")
    create_emr_virtual_cluster >> run_emr_container_job >> emr_job_container_sensor >> remove
