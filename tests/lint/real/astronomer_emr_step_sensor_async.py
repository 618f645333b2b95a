# Licensed under the Apache License, Version 2.0 (http://www.apache.org/licenses/LICENSE-2.0).
# Reduced from astronomer/astronomer-providers astronomer/providers/amazon/aws/example_dags/
# example_emr_sensor.py: steps added (EmrAddStepsOperator does not wait by default) and sensed by
# EmrStepSensorAsync through a template on the steps task's XCom; the cluster is sensed too.
from datetime import datetime

from airflow import DAG
from airflow.providers.amazon.aws.operators.emr import (
    EmrAddStepsOperator,
    EmrCreateJobFlowOperator,
    EmrTerminateJobFlowOperator,
)

from astronomer.providers.amazon.aws.sensors.emr import EmrJobFlowSensorAsync, EmrStepSensorAsync

AWS_CONN_ID = "aws_default"
SPARK_STEPS = [{"Name": "calculate_pi", "ActionOnFailure": "CONTINUE", "HadoopJarStep": {"Jar": "x.jar"}}]

with DAG(dag_id="example_emr_sensor", schedule=None, start_date=datetime(2021, 1, 1), catchup=False) as dag:
    create_job_flow = EmrCreateJobFlowOperator(
        task_id="create_job_flow",
        job_flow_overrides={"Name": "pi"},
        aws_conn_id=AWS_CONN_ID,
    )
    add_steps = EmrAddStepsOperator(  # expect: ADR005
        task_id="add_steps",
        job_flow_id=create_job_flow.output,
        aws_conn_id=AWS_CONN_ID,
        steps=SPARK_STEPS,
    )
    watch_step = EmrStepSensorAsync(
        task_id="watch_step",
        job_flow_id=create_job_flow.output,
        step_id="{{ task_instance.xcom_pull(task_ids='add_steps', key='return_value')[0] }}",
        aws_conn_id=AWS_CONN_ID,
    )
    remove_cluster = EmrTerminateJobFlowOperator(
        task_id="remove_cluster",
        job_flow_id=create_job_flow.output,
        aws_conn_id=AWS_CONN_ID,
    )
    job_flow_sensor = EmrJobFlowSensorAsync(
        task_id="job_flow_sensor",
        job_flow_id=create_job_flow.output,
        aws_conn_id=AWS_CONN_ID,
    )
    create_job_flow >> add_steps >> watch_step >> remove_cluster >> job_flow_sensor
