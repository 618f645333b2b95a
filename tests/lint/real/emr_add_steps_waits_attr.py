# Licensed under the Apache License, Version 2.0 (http://www.apache.org/licenses/LICENSE-2.0).
# Reduced from apache/airflow providers/amazon/tests/system/amazon/aws/example_emr.py.
# Look-alike: the steps operator is told to wait after construction, and the cluster is created and
# then sensed; neither is a submit+sensor split.
from __future__ import annotations

from datetime import datetime
from typing import Any

from airflow.decorators import task
from airflow.models.baseoperator import chain
from airflow.models.dag import DAG
from airflow.providers.amazon.aws.operators.emr import (
    EmrAddStepsOperator,
    EmrCreateJobFlowOperator,
    EmrModifyClusterOperator,
    EmrTerminateJobFlowOperator,
)
from airflow.providers.amazon.aws.sensors.emr import EmrJobFlowSensor, EmrStepSensor
from airflow.utils.trigger_rule import TriggerRule

SPARK_STEPS = [
    {
        "Name": "calculate_pi",
        "ActionOnFailure": "CONTINUE",
        "HadoopJarStep": {"Jar": "command-runner.jar", "Args": ["/usr/lib/spark/bin/run-example", "SparkPi"]},
    }
]
JOB_FLOW_OVERRIDES: dict[str, Any] = {"Name": "PiCalc", "ReleaseLabel": "emr-7.1.0", "Steps": SPARK_STEPS}


@task
def get_step_id(step_ids: list):
    return step_ids[0]


with DAG(dag_id="example_emr", start_date=datetime(2021, 1, 1), schedule="@once", catchup=False) as dag:
    create_job_flow = EmrCreateJobFlowOperator(
        task_id="create_job_flow",
        job_flow_overrides=JOB_FLOW_OVERRIDES,
    )
    modify_cluster = EmrModifyClusterOperator(
        task_id="modify_cluster", cluster_id=create_job_flow.output, step_concurrency_level=1
    )
    add_steps = EmrAddStepsOperator(
        task_id="add_steps",
        job_flow_id=create_job_flow.output,
        steps=SPARK_STEPS,
    )
    add_steps.wait_for_completion = True

    wait_for_step = EmrStepSensor(
        task_id="wait_for_step",
        job_flow_id=create_job_flow.output,
        step_id=get_step_id(add_steps.output),
    )
    remove_cluster = EmrTerminateJobFlowOperator(
        task_id="remove_cluster",
        job_flow_id=create_job_flow.output,
    )
    remove_cluster.trigger_rule = TriggerRule.ALL_DONE

    check_job_flow = EmrJobFlowSensor(task_id="check_job_flow", job_flow_id=create_job_flow.output)
    check_job_flow.poke_interval = 10

    chain(create_job_flow, modify_cluster, add_steps, wait_for_step, remove_cluster, check_job_flow)
