# Licensed under the Apache License, Version 2.0 (http://www.apache.org/licenses/LICENSE-2.0).
# Reduced from apache/airflow providers/databricks/tests/system/databricks/example_databricks_workflow.py.
from __future__ import annotations

from datetime import timedelta

from airflow.models.dag import DAG
from airflow.providers.databricks.operators.databricks import DatabricksNotebookOperator
from airflow.providers.databricks.operators.databricks_workflow import DatabricksWorkflowTaskGroup
from airflow.utils.timezone import datetime

job_cluster_spec = [{"job_cluster_key": "Shared_job_cluster", "new_cluster": {"num_workers": 1}}]

dag = DAG(dag_id="example_databricks_workflow", start_date=datetime(2022, 1, 1), schedule=None)
with dag:
    task_group = DatabricksWorkflowTaskGroup(
        group_id="test_workflow_x",
        databricks_conn_id="databricks_default",
        job_clusters=job_cluster_spec,
        notebook_params={"ts": "{{ ts }}"},
        extra_job_params={"email_notifications": {"on_start": ["user@example.com"]}},
    )
    with task_group:
        notebook_1 = DatabricksNotebookOperator(
            task_id="workflow_notebook_1",
            databricks_conn_id="databricks_default",
            notebook_path="/Shared/Notebook_1",
            source="WORKSPACE",
            job_cluster_key="Shared_job_cluster",
            execution_timeout=timedelta(seconds=600),
        )
        notebook_2 = DatabricksNotebookOperator(
            task_id="workflow_notebook_2",
            databricks_conn_id="databricks_default",
            notebook_path="/Shared/Notebook_2",
            source="WORKSPACE",
            job_cluster_key="Shared_job_cluster",
        )
        notebook_1 >> notebook_2
