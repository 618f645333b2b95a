"""Hand-rolled 'reconnect if we have an id, else submit', three ways."""

from airflow.sdk import Variable, dag, task
from airflow.providers.databricks.hooks.databricks import DatabricksHook


@dag(schedule=None)
def hand_rolled():
    @task(retries=2)
    def with_variable():
        hook = DatabricksHook()
        run_id = Variable.get("nightly_run_id", default=None)  # expect: ADR001
        if run_id:  # expect: ADR004
            hook.get_run_state(run_id)
        else:
            run_id = hook.submit_run({"tasks": []})
            Variable.set("nightly_run_id", run_id)  # expect: ADR001
        return run_id

    @task(retries=2)
    def with_task_state_store(task_state_store):
        hook = DatabricksHook()
        if (run_id := task_state_store.get("databricks_run_id")) is not None:  # expect: ADR004
            return hook.get_run_state(run_id)
        run_id = hook.submit_run({"tasks": []})
        task_state_store.set("databricks_run_id", run_id)
        return run_id

    @task(retries=2)
    def with_xcom(**context):
        ti = context["ti"]
        stored = ti.xcom_pull(task_ids="with_xcom", key="run_id")
        if not stored:  # expect: ADR004
            stored = DatabricksHook().submit_run({"tasks": []})
            ti.xcom_push(key="run_id", value=stored)  # expect: ADR003
        return stored

    with_variable() >> with_task_state_store() >> with_xcom()


hand_rolled()
