# Pattern from Airflow 2.x DAGs (see MANIFEST.json): the per-operator modules that amazon provider 2.x-7.x
# shipped (airflow.providers.amazon.aws.operators.emr_add_steps, sensors.emr_step), removed since.
from datetime import datetime

from airflow import DAG
from airflow.providers.amazon.aws.operators.emr_add_steps import EmrAddStepsOperator
from airflow.providers.amazon.aws.sensors.emr_step import EmrStepSensor

CLUSTER_ID = "j-2AXXXXXXGAPLF"

with DAG("emr_existing_cluster_steps", start_date=datetime(2022, 3, 1), schedule_interval="@daily") as dag:
    add_step = EmrAddStepsOperator(  # expect: ADR005
        task_id="add_step",
        job_flow_id=CLUSTER_ID,
        steps=[{"Name": "etl", "ActionOnFailure": "CONTINUE", "HadoopJarStep": {"Jar": "command-runner.jar"}}],
    )
    wait_step = EmrStepSensor(
        task_id="wait_step",
        job_flow_id=CLUSTER_ID,
        step_id="{{ ti.xcom_pull(task_ids='add_step')[0] }}",
    )
    add_step >> wait_step
