"""Names that look like catalogue operators but are not: no drop-in to suggest."""

from airflow.providers.databricks.operators.databricks_sql import DatabricksSqlOperator
from airflow.sdk import DAG

from airflow_durable.operators.databricks import DurableDatabricksSubmitRunOperator


class DatabricksSubmitRunOperator:  # our own class with the same name as the provider's
    def __init__(self, **kwargs):
        self.kwargs = kwargs


with DAG("dropin_lookalikes", schedule=None):
    DatabricksSqlOperator(task_id="sql", sql="select 1")
    DurableDatabricksSubmitRunOperator(task_id="already_durable", json={}, deferrable=True)
    DatabricksSubmitRunOperator(task_id="local")
