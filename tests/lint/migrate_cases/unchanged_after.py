"""Nothing to migrate: already durable, and a local class that only shares a provider name."""

from airflow.sdk import DAG

from airflow_durable.operators.databricks import DurableDatabricksSubmitRunOperator


class DatabricksRunNowOperator:
    def __init__(self, **kwargs):
        self.kwargs = kwargs


with DAG("migrate_unchanged", schedule=None):
    DurableDatabricksSubmitRunOperator(task_id="run", json={})
    DatabricksRunNowOperator(task_id="local")
