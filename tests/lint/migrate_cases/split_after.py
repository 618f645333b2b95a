"""A submit+sensor split: migrate swaps the operator, reports the split, and does not restructure it."""

import pendulum
from airflow.providers.databricks.hooks.databricks import DatabricksHook
from airflow_durable.operators.databricks import DurableDatabricksSubmitRunOperator
from airflow.sdk import DAG, PokeReturnValue, task

with DAG("migrate_split", schedule=None, start_date=pendulum.datetime(2025, 1, 1, tz="UTC")):
    submit = DurableDatabricksSubmitRunOperator(
        task_id="submit", json={"run_name": "nightly", "tasks": []}, wait_for_termination=False
    )

    @task.sensor(poke_interval=60, mode="reschedule")
    def wait_for_run(run_id: str) -> PokeReturnValue:
        state = DatabricksHook().get_run_state(run_id)
        return PokeReturnValue(is_done=state.is_terminal)

    wait_for_run(submit.output)
