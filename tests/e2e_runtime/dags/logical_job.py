"""DAGs for ``tests/e2e_runtime/test_logical_job.py``: where a logical job begins and ends (DESIGN §8).

One DAG per scenario and operator, one task ``submit_run`` each; its Databricks ``run_name`` is the
dag_id, so the test finds the runs of its scenario in the emulator. ``*_upstream`` DAGs run the
provider's own ``DatabricksSubmitRunOperator`` in the same deployment, for comparison.

The test copies this file into the deployment's DAG folder and sets ``AFD_LJ_DAGS`` (comma list) to
the DAGs that deployment needs; unset, every DAG is defined. ``build_dag`` is also what the generated
DAG file of the "lower retries" scenario calls, so that the test can rewrite that file.
"""

from __future__ import annotations

import os
from datetime import datetime, timedelta
from typing import Any

from airflow.providers.databricks.operators.databricks import DatabricksSubmitRunOperator
from airflow.sdk import DAG

from airflow_durable.operators.databricks import DurableDatabricksSubmitRunOperator

TASK_ID = "submit_run"

#: dag_id -> operator options. "upstream": the provider's operator instead of the durable one.
SPECS: dict[str, dict[str, Any]] = {
    # 1. a new logical job never receives an older job
    # (one retry each: a try that a loaded deployment fails on its own must reconnect, never resubmit)
    "lj_rerun_deleted": {"retries": 1},
    "lj_retention_clean": {"retries": 1},
    "lj_clear_on_success": {"retries": 1},  # deployment with [state_store] clear_on_success = True
    # 2. a user's clear or mark starts a new logical job
    "lj_clear_deferred": {},
    "lj_clear_deferred_upstream": {"upstream": True},
    "lj_mark_running": {},
    "lj_mark_finished": {},
    # issue 22 (A): clear while deferred on SQLite, where the new trigger can take the old one's id
    **{f"lj_trigger_id_{i}": {} for i in range(4)},
    # issue 22 (C): a mark failed while deferred, timed from the user's request to the job's cancel
    "lj_mark_failed_first": {},
    "lj_mark_failed_later": {},
    # 3. only the owner cancels
    "lj_zombie_sync": {"deferrable": False, "retries": 1},
    "lj_zombie_sync_upstream": {"upstream": True, "deferrable": False, "retries": 1},
    "lj_triggerer_takeover": {},
    "lj_triggerer_takeover_upstream": {"upstream": True},
    # 4. execution_timeout while deferred
    "lj_exec_timeout": {"execution_timeout": 12},
    "lj_exec_timeout_upstream": {"upstream": True, "execution_timeout": 12},
}


def build_dag(
    dag_id: str,
    *,
    upstream: bool = False,
    deferrable: bool = True,
    retries: int = 0,
    execution_timeout: float | None = None,
) -> DAG:
    operator = DatabricksSubmitRunOperator if upstream else DurableDatabricksSubmitRunOperator
    with DAG(
        dag_id=dag_id,
        schedule=None,
        start_date=datetime(2026, 1, 1),
        catchup=False,
        tags=["airflow-durable", "runtime", "logical-job"],
    ) as dag:
        operator(
            task_id=TASK_ID,
            json={
                "run_name": dag_id,
                "new_cluster": {"spark_version": "15.4.x-scala2.12", "num_workers": 1},
                "notebook_task": {"notebook_path": "/Shared/etl"},
            },
            deferrable=deferrable,
            retries=retries,
            retry_delay=timedelta(seconds=2),
            execution_timeout=timedelta(seconds=execution_timeout) if execution_timeout else None,
            polling_period_seconds=1,
            databricks_retry_limit=2,
            databricks_retry_delay=0.2,
        )
    return dag


_wanted = {d for d in os.environ.get("AFD_LJ_DAGS", "").split(",") if d}
# Imported by name (the generated DAG file imports ``build_dag``), define nothing: Airflow registers
# every DAG built in a ``with DAG()`` block with the file being parsed, so these would also be filed
# under the generated file, and the two files would keep re-versioning them.
if __name__ != "logical_job":
    for _dag_id, _spec in SPECS.items():
        if not _wanted or _dag_id in _wanted:
            globals()[_dag_id] = build_dag(_dag_id, **_spec)
