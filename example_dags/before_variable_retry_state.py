"""BEFORE: retry state kept in Variables and XCom (what ``airflow-durable check`` reports).

Two tasks that try to survive retries by hand:

* ``load_pages`` keeps its progress in a Variable keyed by the run id (ADR001): global, shared with
  every other DAG, never scoped or expired, one metadata-database round trip per page.
* ``run_nightly`` stores the Databricks run id in a Variable and "reconnects" if one is there
  (ADR001, ADR004): every run of the DAG shares that one id, and a failed run is reconnected to forever.
* ``run_hourly`` pushes the run id to XCom and reads it back on retry (ADR003, ADR004): XCom is cleared
  when a new try starts, so the retry never finds it and submits a second run.

The fixed version is ``after_task_state_store.py``. This file imports cleanly but is an example of
what not to do; it is not meant to be run.
"""

from __future__ import annotations

from datetime import datetime

try:
    from airflow.sdk import DAG, Variable, task
except ImportError:  # Airflow 2.x
    from airflow import DAG
    from airflow.decorators import task
    from airflow.models import Variable

from airflow.providers.databricks.hooks.databricks import DatabricksHook

NIGHTLY = {"run_name": "nightly", "tasks": [{"task_key": "etl", "notebook_task": {"notebook_path": "/etl"}}]}


def fetch(page: int) -> None:
    print(f"fetching page {page}")


with DAG(
    dag_id="before_variable_retry_state",
    schedule=None,
    start_date=datetime(2026, 1, 1),
    catchup=False,
    tags=["airflow-durable", "example", "before"],
) as dag:

    @task(retries=3)
    def load_pages(**context):
        key = f"pages_done_{context['run_id']}"
        done = int(Variable.get(key, default_var=0))
        for page in range(done, 100):
            fetch(page)
            Variable.set(key, page + 1)

    @task(retries=2)
    def run_nightly():
        hook = DatabricksHook()
        run_id = Variable.get("nightly_run_id", default_var=None)
        if run_id:
            hook.get_run_state(run_id)
        else:
            run_id = hook.submit_run(NIGHTLY)
            Variable.set("nightly_run_id", run_id)
        return run_id

    @task(retries=2)
    def run_hourly(**context):
        ti = context["ti"]
        run_id = ti.xcom_pull(task_ids="run_hourly", key="run_id")
        if not run_id:
            run_id = DatabricksHook().submit_run(NIGHTLY)
            ti.xcom_push(key="run_id", value=run_id)
        return run_id

    load_pages() >> run_nightly() >> run_hourly()
