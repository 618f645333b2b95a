# Pattern from user DAGs (see MANIFEST.json): run an existing job without waiting and poll it with a
# @task.sensor that receives the run id.
from __future__ import annotations

import pendulum

from airflow.providers.databricks.hooks.databricks import DatabricksHook
from airflow.providers.databricks.operators.databricks import DatabricksRunNowOperator
from airflow.sdk import PokeReturnValue, dag, task


@dag(schedule="0 3 * * *", start_date=pendulum.datetime(2024, 1, 1, tz="UTC"), catchup=False)
def nightly_job():
    run = DatabricksRunNowOperator(  # expect: ADR005
        task_id="run_job",
        job_id=1234,
        wait_for_termination=False,
    )

    @task.sensor(poke_interval=60, timeout=6 * 3600, mode="reschedule")
    def wait_for_run(run_id: int) -> PokeReturnValue:
        state = DatabricksHook().get_run_state(run_id)
        return PokeReturnValue(is_done=state.is_terminal, xcom_value=state.result_state)

    @task
    def publish(result_state: str):
        print(result_state)

    publish(wait_for_run(run.output))


nightly_job()
