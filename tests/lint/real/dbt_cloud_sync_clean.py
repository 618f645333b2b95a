# Licensed under the Apache License, Version 2.0 (http://www.apache.org/licenses/LICENSE-2.0).
# Reduced from apache/airflow providers/dbt/cloud/tests/system/dbt/cloud/example_dbt_cloud.py: a run that
# waits, then an artifact read from its run id. No finding.
from __future__ import annotations

from datetime import datetime

from airflow.models import DAG
from airflow.providers.dbt.cloud.operators.dbt import (
    DbtCloudGetJobRunArtifactOperator,
    DbtCloudRunJobOperator,
)

with DAG(
    dag_id="example_dbt_cloud_sync",
    default_args={"dbt_cloud_conn_id": "dbt", "account_id": 39151},
    start_date=datetime(2021, 1, 1),
    schedule=None,
    catchup=False,
) as dag:
    trigger_job_run1 = DbtCloudRunJobOperator(
        task_id="trigger_job_run1",
        job_id=48617,
        check_interval=10,
        timeout=300,
    )
    get_run_results_artifact = DbtCloudGetJobRunArtifactOperator(
        task_id="get_run_results_artifact", run_id=trigger_job_run1.output, path="run_results.json"
    )
    trigger_job_run3 = DbtCloudRunJobOperator(
        task_id="trigger_job_run3",
        project_name="my_dbt_project",
        environment_name="prod",
        job_name="my_dbt_job",
        deferrable=True,
    )
