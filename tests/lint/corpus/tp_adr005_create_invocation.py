# Creating a *run* is submitting a job: an asynchronous Dataform workflow invocation polled by a sensor.
# (Creating a cluster or an application stays a resource: tests/lint/real/emr_serverless_app_sensor_clean.py.)
from airflow import DAG
from airflow.providers.google.cloud.operators.dataform import DataformCreateWorkflowInvocationOperator
from airflow.providers.google.cloud.sensors.dataform import DataformWorkflowInvocationStateSensor

with DAG("dataform_async", schedule=None):
    invoke = DataformCreateWorkflowInvocationOperator(  # expect: ADR005
        task_id="invoke",
        project_id="p",
        region="r",
        repository_id="repo",
        asynchronous=True,
        workflow_invocation={"compilation_result": "c"},
    )
    done = DataformWorkflowInvocationStateSensor(
        task_id="done",
        project_id="p",
        region="r",
        repository_id="repo",
        workflow_invocation_id="{{ task_instance.xcom_pull('invoke')['name'].split('/')[-1] }}",
        expected_statuses={"SUCCEEDED"},
    )
    invoke >> done
