"""Look-alikes for the split rule: a submit that waits, and a sensor that watches something else."""

from airflow.providers.databricks.operators.databricks import DatabricksSubmitRunOperator
from airflow.providers.standard.sensors.filesystem import FileSensor
from airflow.sdk import DAG

with DAG("waiting_submit", schedule=None):
    landed = FileSensor(task_id="wait_for_file", filepath="/data/in/{{ ds }}.csv", mode="reschedule")
    run = DatabricksSubmitRunOperator(task_id="run", json={"tasks": []}, deferrable=True)  # expect: ADR007
    fire_and_forget = DatabricksSubmitRunOperator(  # expect: ADR007
        task_id="warm_cache", json={"tasks": []}, wait_for_termination=False
    )
    landed >> run >> fire_and_forget
