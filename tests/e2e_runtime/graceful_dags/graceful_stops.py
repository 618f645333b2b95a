"""DAGs for the graceful-stop tests (``tests/e2e_runtime/test_graceful_stops.py``): one DAG per scenario and
operator, synchronous Databricks submit-run, so a stop lands while the task polls on its worker.

Each task's Databricks ``run_name`` is its dag_id: the test finds its DAG's runs in the emulator by it.
"""

from __future__ import annotations

from datetime import datetime, timedelta

from airflow.providers.databricks.operators.databricks import DatabricksSubmitRunOperator
from airflow.sdk import DAG

from airflow_durable.operators.databricks import DurableDatabricksSubmitRunOperator

TASK_ID = "submit_run"
SCENARIOS = ("podstop", "schedreset")


def dag_id_of(scenario: str, operator: str) -> str:
    return f"gs_{operator}_{scenario}"


for _scenario in SCENARIOS:
    for _operator, _class in (
        ("durable", DurableDatabricksSubmitRunOperator),
        ("upstream", DatabricksSubmitRunOperator),
    ):
        _dag_id = dag_id_of(_scenario, _operator)
        with DAG(
            dag_id=_dag_id,
            schedule=None,
            start_date=datetime(2026, 1, 1),
            catchup=False,
            tags=["airflow-durable", "runtime"],
        ) as _dag:
            _class(
                task_id=TASK_ID,
                json={
                    "run_name": _dag_id,
                    "new_cluster": {"spark_version": "15.4.x-scala2.12", "num_workers": 1},
                    "notebook_task": {"notebook_path": "/Shared/etl"},
                },
                deferrable=False,
                retries=2,
                retry_delay=timedelta(seconds=2),
                polling_period_seconds=1,
                databricks_retry_limit=2,
                databricks_retry_delay=0.2,
            )
        globals()[_dag_id] = _dag
