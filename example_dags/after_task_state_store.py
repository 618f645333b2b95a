"""AFTER: the fix for ``before_variable_retry_state.py``; ``airflow-durable check`` finds nothing here.

* ``load_pages`` keeps its progress in ``context["task_state_store"]`` (Airflow 3.3+): scoped to this
  DAG run, task and map index, shared by its retries only, and gone with the run.
* ``run_nightly`` and ``run_hourly`` are one durable task each: the operator stores the Databricks run id
  before waiting, and a retry reconnects to that run, returns its result if it already succeeded, or
  submits a new run (new idempotency token) only if it failed. No hand-written resume logic.

On Airflow < 3.3 this file imports and the durable operators still work as one task (each try
submits fresh); ``load_pages`` needs the 3.3 task state store.
"""

from __future__ import annotations

from datetime import datetime

try:
    from airflow.sdk import DAG, task
except ImportError:  # Airflow 2.x
    from airflow import DAG
    from airflow.decorators import task

from airflow_durable.operators.databricks import DurableDatabricksSubmitRunOperator

NIGHTLY = {"run_name": "nightly", "tasks": [{"task_key": "etl", "notebook_task": {"notebook_path": "/etl"}}]}


def fetch(page: int) -> None:
    print(f"fetching page {page}")


with DAG(
    dag_id="after_task_state_store",
    schedule=None,
    start_date=datetime(2026, 1, 1),
    catchup=False,
    tags=["airflow-durable", "example", "after"],
) as dag:

    @task(retries=3)
    def load_pages(**context):
        store = context["task_state_store"]
        for page in range(store.get("pages_done", default=0), 100):
            fetch(page)
            store.set("pages_done", page + 1)

    run_nightly = DurableDatabricksSubmitRunOperator(
        task_id="run_nightly", json=NIGHTLY, deferrable=True, retries=2
    )
    run_hourly = DurableDatabricksSubmitRunOperator(
        task_id="run_hourly", json=NIGHTLY, deferrable=True, retries=2
    )

    load_pages() >> run_nightly >> run_hourly
