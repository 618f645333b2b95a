"""Two more splits: dbt Cloud (explicit no-wait) and EMR steps (no wait by default), wired with
templated XCom pulls, chain() and set_downstream()."""

from airflow.providers.amazon.aws.operators.emr import EmrAddStepsOperator
from airflow.providers.amazon.aws.sensors.emr import EmrStepSensor
from airflow.providers.dbt.cloud.operators.dbt import DbtCloudRunJobOperator
from airflow.providers.dbt.cloud.sensors.dbt import DbtCloudJobRunSensor
from airflow.providers.standard.operators.empty import EmptyOperator
from airflow.sdk import DAG, chain

with DAG("split_dbt_emr", schedule=None):
    trigger = DbtCloudRunJobOperator(task_id="trigger_dbt", job_id=42, wait_for_termination=False)  # expect: ADR005 ADR007
    watch = DbtCloudJobRunSensor(task_id="watch_dbt", run_id=trigger.output, deferrable=True)
    done = EmptyOperator(task_id="dbt_done")
    chain(trigger, [watch, done])  # expect: ADR006

    add_steps = EmrAddStepsOperator(task_id="add_steps", job_flow_id="j-1", steps=[])  # expect: ADR005 ADR007
    step_sensor = EmrStepSensor(
        task_id="watch_step",
        job_flow_id="j-1",
        step_id="{{ task_instance.xcom_pull(task_ids='add_steps', key='return_value')[0] }}",
    )
    publish = EmptyOperator(task_id="publish")
    add_steps.set_downstream(step_sensor)
    add_steps.set_downstream(publish)  # expect: ADR006
