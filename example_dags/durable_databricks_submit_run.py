"""Submit a one-time Databricks run and wait for it in one durable task.

``DurableDatabricksSubmitRunOperator`` takes the same arguments as the provider's
``DatabricksSubmitRunOperator``. With ``deferrable=True`` it submits, stores the run id in the task
state store, then frees the worker and waits in the provider's ``DatabricksExecutionTrigger``. A retry
(worker crash, trigger error, lost deferral) reconnects to the same run instead of starting another;
a retry after the run already succeeded returns without submitting.

Connection: ``databricks_default``. Runs offline against ``airflow_durable.testing.DatabricksEmulator``
(see ``tests/examples``). On Airflow < 3.3 it still works as one task; each try then submits fresh.
"""

from __future__ import annotations

from datetime import datetime, timedelta

try:
    from airflow.sdk import DAG, task
except ImportError:  # Airflow 2.x
    from airflow import DAG
    from airflow.decorators import task

from airflow_durable.operators.databricks import DurableDatabricksSubmitRunOperator

with DAG(
    dag_id="durable_databricks_submit_run",
    schedule=None,
    start_date=datetime(2026, 1, 1),
    catchup=False,
    tags=["airflow-durable", "example", "databricks"],
) as dag:
    nightly_etl = DurableDatabricksSubmitRunOperator(
        task_id="nightly_etl",
        databricks_conn_id="databricks_default",
        json={
            "run_name": "nightly-etl-{{ ds }}",
            "tasks": [
                {
                    "task_key": "etl",
                    "new_cluster": {
                        "spark_version": "15.4.x-scala2.12",
                        "node_type_id": "i3.xlarge",
                        "num_workers": 2,
                    },
                    "notebook_task": {
                        "notebook_path": "/Shared/etl/nightly",
                        "base_parameters": {"date": "{{ ds }}"},
                    },
                }
            ],
        },
        deferrable=True,
        retries=3,
        retry_delay=timedelta(minutes=2),
    )

    @task
    def publish(**context) -> str:
        # The provider's XComs are pushed on every path: fresh, reconnected, already succeeded.
        ti = context["ti"]
        run_id = ti.xcom_pull(task_ids="nightly_etl", key="run_id")
        run_page_url = ti.xcom_pull(task_ids="nightly_etl", key="run_page_url")
        print(f"Databricks run {run_id} finished: {run_page_url}")
        return run_page_url

    nightly_etl >> publish()
