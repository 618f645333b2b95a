# Pattern from user DAGs (see MANIFEST.json): trigger another DAG without waiting and wait for one of its
# tasks with ExternalTaskSensor. An Airflow DAG run, not an external job: out of scope for the split rule.
from __future__ import annotations

import pendulum

from airflow.providers.standard.operators.trigger_dagrun import TriggerDagRunOperator
from airflow.providers.standard.sensors.external_task import ExternalTaskSensor
from airflow.sdk import DAG

with DAG("parent", start_date=pendulum.datetime(2024, 1, 1, tz="UTC"), schedule="@daily", catchup=False):
    trigger = TriggerDagRunOperator(
        task_id="trigger_child",
        trigger_dag_id="child",
        logical_date="{{ logical_date }}",
        wait_for_completion=False,
    )
    wait_child = ExternalTaskSensor(
        task_id="wait_child", external_dag_id="child", external_task_id="publish", mode="reschedule"
    )
    trigger >> wait_child
