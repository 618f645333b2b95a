# Licensed under the Apache License, Version 2.0 (http://www.apache.org/licenses/LICENSE-2.0).
# Reduced from apache/airflow providers/databricks/tests/system/databricks/example_databricks.py: every
# Databricks operator waits. No finding.
from __future__ import annotations

import os
from datetime import datetime

from airflow import DAG
from airflow.providers.databricks.operators.databricks import (
    DatabricksCreateJobsOperator,
    DatabricksNotebookOperator,
    DatabricksRunNowOperator,
    DatabricksSubmitRunOperator,
)
from airflow.sdk import Asset

ENV_ID = os.environ.get("SYSTEM_TESTS_ENV_ID")

with DAG(
    dag_id="example_databricks_operator", schedule="@daily", start_date=datetime(2021, 1, 1), catchup=False
) as dag:
    tasks = [{"task_key": "test", "job_cluster_key": "job_cluster", "notebook_task": {"notebook_path": "/t"}}]
    jobs_create_named = DatabricksCreateJobsOperator(task_id="jobs_create_named", tasks=tasks)
    run_now = DatabricksRunNowOperator(
        task_id="run_now",
        job_id=jobs_create_named.output,
        outlets=[Asset("databricks://my-workspace.cloud.databricks.com/main/default/my_airflow_table")],
    )
    jobs_create_named >> run_now

    new_cluster = {"spark_version": "9.1.x-scala2.12", "node_type_id": "r3.xlarge", "num_workers": 8}
    notebook_task_params = {"new_cluster": new_cluster, "notebook_task": {"notebook_path": "/PrepareData"}}
    notebook_task = DatabricksSubmitRunOperator(task_id="notebook_task", json=notebook_task_params)
    spark_jar_task = DatabricksSubmitRunOperator(
        task_id="spark_jar_task",
        new_cluster=new_cluster,
        spark_jar_task={"main_class_name": "com.example.ProcessData"},
        libraries=[{"jar": "dbfs:/lib/etl-0.1.jar"}],
    )
    notebook_task >> spark_jar_task

    notebook_1 = DatabricksNotebookOperator(
        task_id="notebook_1",
        notebook_path="/Shared/Notebook_1",
        source="WORKSPACE",
        new_cluster=new_cluster,
    )
