# Pattern from user DAGs (see MANIFEST.json): a @task.sensor that takes the task instance and pulls the
# dbt Cloud run id from the trigger task's XCom.
from __future__ import annotations

import pendulum

from airflow.providers.dbt.cloud.hooks.dbt import DbtCloudHook, DbtCloudJobRunStatus
from airflow.providers.dbt.cloud.operators.dbt import DbtCloudRunJobOperator
from airflow.sdk import dag, task


@dag(schedule="@daily", start_date=pendulum.datetime(2024, 1, 1, tz="UTC"), catchup=False)
def dbt_marts():
    trigger = DbtCloudRunJobOperator(  # expect: ADR005
        task_id="trigger_dbt",
        dbt_cloud_conn_id="dbt_cloud",
        job_id=9001,
        wait_for_termination=False,
    )

    @task.sensor(poke_interval=45, timeout=3 * 3600)
    def dbt_finished(ti=None) -> bool:
        run_id = ti.xcom_pull(task_ids="trigger_dbt")
        status = DbtCloudHook("dbt_cloud").get_job_run_status(run_id=run_id)
        if status in (DbtCloudJobRunStatus.ERROR.value, DbtCloudJobRunStatus.CANCELLED.value):
            raise RuntimeError(f"dbt run {run_id} ended {status}")
        return status == DbtCloudJobRunStatus.SUCCESS.value

    trigger >> dbt_finished()


dbt_marts()
