"""Nightly Databricks DAG: the shape most users arrive with."""

from __future__ import annotations

import pendulum

# Both run operators come from the provider.
from airflow.providers.databricks.operators.databricks import (  # provider operators
    DatabricksRunNowOperator,
    DatabricksSubmitRunOperator as SubmitRun,  # keep the alias
)
from airflow.providers.databricks.operators import databricks as dbx
from airflow.providers.databricks.operators.databricks import DatabricksCreateJobsOperator, DatabricksSubmitRunOperator
from airflow.sdk import DAG

with DAG(
    dag_id="migrate_databricks",
    schedule=None,
    start_date=pendulum.datetime(2025, 1, 1, tz="UTC"),
    catchup=False,
):
    submit = SubmitRun(
        task_id="submit",
        databricks_conn_id="databricks_default",
        json={"run_name": "nightly", "tasks": []},  # arguments are never touched
        deferrable=True,
    )
    run_now = DatabricksRunNowOperator(task_id="run_now", job_id=42, retries=3)
    again = dbx.DatabricksRunNowOperator(task_id="again", job_id=43)
    create = DatabricksCreateJobsOperator(task_id="create", json={"name": "nightly"})
    plain = DatabricksSubmitRunOperator(task_id="plain", json={"tasks": []})
    create >> submit >> run_now >> again >> plain


def is_provider_run(op) -> bool:
    # isinstance checks keep working: the durable classes subclass the provider ones.
    return isinstance(op, DatabricksRunNowOperator)
