"""Databricks submit that does not wait, a hand-written sensor on its run id, and a report that
hangs off the submit instead of the sensor."""

from airflow.providers.databricks.hooks.databricks import DatabricksHook
from airflow.providers.databricks.operators.databricks import DatabricksSubmitRunOperator
from airflow.sdk import PokeReturnValue, dag, task


def alert_success(context):
    print("nightly job succeeded")


@dag(schedule="@daily")
def split_databricks():
    submit = DatabricksSubmitRunOperator(  # expect: ADR005 ADR007
        task_id="submit_nightly",
        json={"run_name": "nightly", "tasks": []},
        wait_for_termination=False,
        on_success_callback=alert_success,  # expect: ADR006
    )

    @task.sensor(poke_interval=60, timeout=6 * 3600, mode="reschedule")
    def wait_for_run(run_id: str) -> PokeReturnValue:
        state = DatabricksHook().get_run_state(run_id)
        return PokeReturnValue(is_done=state.is_terminal, xcom_value=state.result_state)

    @task
    def publish_report():
        print("report")

    waited = wait_for_run(submit.output)
    report = publish_report()
    submit >> report  # expect: ADR006


split_databricks()
