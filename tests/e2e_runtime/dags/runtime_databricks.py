"""DAGs for the real-runtime tests: one DAG per scenario, so scenarios sharing a deployment never meet.

Each task's Databricks ``run_name`` is its dag_id: the test scopes its emulator faults to the runs of
its own DAG through it. The durable operator comes from ``airflow_durable.operators.databricks``; the
``rt_upstream_*`` DAG runs the provider's own operator in the same harness, for comparison.
"""

from __future__ import annotations

from datetime import datetime, timedelta

from airflow.providers.databricks.operators.databricks import DatabricksSubmitRunOperator
from airflow.sdk import DAG

from airflow_durable.operators.databricks import DurableDatabricksSubmitRunOperator

TASK_ID = "submit_run"

DURABLE_DAGS = ("rt_durable_trigger_400", "rt_durable_trigger_5xx", "rt_durable_worker_killed")
UPSTREAM_DAGS = ("rt_upstream_trigger_400",)


def _task(operator: type, dag_id: str):
    return operator(
        task_id=TASK_ID,
        json={
            "run_name": dag_id,
            "new_cluster": {"spark_version": "15.4.x-scala2.12", "num_workers": 1},
            "notebook_task": {"notebook_path": "/Shared/etl"},
        },
        deferrable=True,
        retries=2,
        retry_delay=timedelta(seconds=2),
        polling_period_seconds=1,
        databricks_retry_limit=2,
        databricks_retry_delay=0.2,
    )


for _dag_id in DURABLE_DAGS + UPSTREAM_DAGS:
    with DAG(
        dag_id=_dag_id,
        schedule=None,
        start_date=datetime(2026, 1, 1),
        catchup=False,
        tags=["airflow-durable", "runtime"],
    ) as _dag:
        _task(
            DatabricksSubmitRunOperator if _dag_id in UPSTREAM_DAGS else DurableDatabricksSubmitRunOperator,
            _dag_id,
        )
    globals()[_dag_id] = _dag
