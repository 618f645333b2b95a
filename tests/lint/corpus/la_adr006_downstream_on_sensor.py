"""A split done right for a deployment without a Triggerer and with scarce slots: reschedule-mode
sensor, and everything downstream depends on the sensor. ADR005 still explains the decision; ADR006
must stay silent."""

from airflow.providers.databricks.operators.databricks import DatabricksRunNowOperator
from airflow.providers.databricks.sensors.databricks import DatabricksSQLStatementsSensor
from airflow.providers.standard.operators.empty import EmptyOperator
from airflow.sdk import DAG

with DAG("downstream_on_sensor", schedule=None):
    run = DatabricksRunNowOperator(task_id="run_job", job_id=7, wait_for_termination=False)  # expect: ADR005 ADR007
    wait = DatabricksSQLStatementsSensor(task_id="wait_job", statement_id=run.output, mode="reschedule")
    publish = EmptyOperator(task_id="publish")
    notify = EmptyOperator(task_id="notify")
    run >> wait >> [publish, notify]
    publish >> notify
