# Licensed under the Apache License, Version 2.0 (http://www.apache.org/licenses/LICENSE-2.0).
# Reduced from astronomer/astronomer-providers astronomer/providers/amazon/aws/example_dags/
# example_emr_job_flow_manual_steps.py: create a cluster, add steps (EmrAddStepsOperator does not wait by
# default), sense the step by pulling the step ids from XCom in a template.
from __future__ import annotations

from datetime import datetime, timedelta

from airflow import DAG
from airflow.providers.amazon.aws.operators.emr import (
    EmrAddStepsOperator,
    EmrCreateJobFlowOperator,
    EmrTerminateJobFlowOperator,
)
from airflow.providers.amazon.aws.sensors.emr import EmrJobFlowSensor, EmrStepSensor

SPARK_STEPS = [{"Name": "calculate_pi", "ActionOnFailure": "CONTINUE", "HadoopJarStep": {"Jar": "x.jar"}}]
JOB_FLOW_OVERRIDES = {"Name": "PiCalc", "Instances": {"KeepJobFlowAliveWhenNoSteps": True}}

with DAG(
    dag_id="emr_job_flow_manual_steps_dag",
    default_args={"retries": 1, "retry_delay": timedelta(minutes=5)},
    start_date=datetime(2021, 1, 1),
    schedule=None,
) as dag:
    cluster_creator = EmrCreateJobFlowOperator(
        task_id="create_job_flow",
        job_flow_overrides=JOB_FLOW_OVERRIDES,
    )
    cluster_up = EmrJobFlowSensor(
        task_id="cluster_up",
        job_flow_id=cluster_creator.output,
        target_states=["WAITING"],
    )
    step_adder = EmrAddStepsOperator(  # expect: ADR005
        task_id="add_steps",
        job_flow_id="{{ task_instance.xcom_pull(task_ids='create_job_flow', key='return_value') }}",
        aws_conn_id="aws_default",
        steps=SPARK_STEPS,
    )
    step_checker = EmrStepSensor(
        task_id="watch_step",
        job_flow_id="{{ task_instance.xcom_pull('create_job_flow', key='return_value') }}",
        step_id="{{ task_instance.xcom_pull(task_ids='add_steps', key='return_value')[0] }}",
        aws_conn_id="aws_default",
    )
    cluster_remover = EmrTerminateJobFlowOperator(
        task_id="remove_cluster",
        job_flow_id="{{ task_instance.xcom_pull(task_ids='create_job_flow', key='return_value') }}",
        aws_conn_id="aws_default",
    )
    cluster_creator >> cluster_up >> step_adder >> step_checker >> cluster_remover
