"""DAGs for ``tests/jobs/test_orphans_systems_runtime.py``: a Databricks run whose DAG run is deleted while
the run goes on, and one still waited for.

Each task's ``run_name`` is its dag_id (the marker ``[afd-ti-… afd-…]`` follows it), so the test can scope
emulator faults to one DAG. No retries: a failed try is the task instance's end.

* ``afd_sys_deleted``: deferred; the trigger's poll gets a 400, the trigger raises, the task fails (a
  failed trigger cancels nothing), the run goes on; then the test deletes the DAG run with its record.
* ``afd_sys_tracked``: deferred and still waited for → never an orphan, never cancelled.
"""

from __future__ import annotations

from datetime import datetime, timedelta

from airflow.sdk import DAG

from airflow_durable.operators.databricks import DurableDatabricksSubmitRunOperator

TASK_ID = "submit_run"
_KWARGS = {
    "afd_sys_deleted": {},
    # Under load a first try was seen failing before it submitted; a durable retry reconnects.
    "afd_sys_tracked": {"retries": 2, "retry_delay": timedelta(seconds=2)},
}
DAG_IDS = tuple(_KWARGS)

for _dag_id, _kwargs in _KWARGS.items():
    with DAG(
        dag_id=_dag_id,
        schedule=None,
        start_date=datetime(2026, 1, 1),
        catchup=False,
        tags=["airflow-durable"],
    ) as _dag:
        DurableDatabricksSubmitRunOperator(
            task_id=TASK_ID,
            json={
                "run_name": _dag_id,
                "new_cluster": {"spark_version": "15.4.x-scala2.12", "num_workers": 1},
                "notebook_task": {"notebook_path": "/Shared/etl"},
            },
            deferrable=True,
            polling_period_seconds=1,
            databricks_retry_limit=2,
            databricks_retry_delay=0.2,
            **{"retries": 0, **_kwargs},
        )
    globals()[_dag_id] = _dag
