# Pattern from Airflow 1.10-era DAGs (see MANIFEST.json): deprecated contrib module paths for the EMR steps
# operator and its sensor.
from datetime import timedelta

from airflow import DAG
from airflow.contrib.operators.emr_add_steps_operator import EmrAddStepsOperator
from airflow.contrib.operators.emr_create_job_flow_operator import EmrCreateJobFlowOperator
from airflow.contrib.sensors.emr_step_sensor import EmrStepSensor
from airflow.utils.dates import days_ago

DEFAULT_ARGS = {"owner": "airflow", "depends_on_past": False, "retries": 1, "retry_delay": timedelta(minutes=5)}
SPARK_TEST_STEPS = [{"Name": "calculate_pi", "ActionOnFailure": "CONTINUE", "HadoopJarStep": {"Jar": "x"}}]

dag = DAG(
    "emr_job_flow_manual_steps_dag",
    default_args=DEFAULT_ARGS,
    dagrun_timeout=timedelta(hours=2),
    start_date=days_ago(2),
    schedule_interval="0 3 * * *",
)

cluster_creator = EmrCreateJobFlowOperator(
    task_id="create_job_flow",
    job_flow_overrides={"Name": "PiCalc"},
    aws_conn_id="aws_default",
    emr_conn_id="emr_default",
    dag=dag,
)

step_adder = EmrAddStepsOperator(  # expect: ADR005
    task_id="add_steps",
    job_flow_id="{{ task_instance.xcom_pull(task_ids='create_job_flow', key='return_value') }}",
    aws_conn_id="aws_default",
    steps=SPARK_TEST_STEPS,
    dag=dag,
)

step_checker = EmrStepSensor(
    task_id="watch_step",
    job_flow_id="{{ task_instance.xcom_pull('create_job_flow', key='return_value') }}",
    step_id="{{ task_instance.xcom_pull(task_ids='add_steps', key='return_value')[0] }}",
    aws_conn_id="aws_default",
    dag=dag,
)

cluster_creator.set_downstream(step_adder)
step_adder.set_downstream(step_checker)
