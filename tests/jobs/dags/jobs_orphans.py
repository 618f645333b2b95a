"""DAGs for tests/jobs: one per kind of durable job the ``jobs``/``orphans`` commands must tell apart.

Every Databricks run the emulator starts stays RUNNING until the test ends it; each task's ``run_name`` is
its dag_id, so the test can tell the runs apart and scope emulator faults to one DAG. No retries: a failed
try is the task instance's end.

* ``afd_jobs_trigger_fails``: deferred; the trigger's poll gets a 400, the trigger raises, the task fails
  without ``on_kill`` (only a killed trigger cancels), the run goes on → orphan.
* ``afd_jobs_deleted``: the same, then the test deletes the failed DAG run (its record goes with it) → an
  orphan only the cache of an earlier look still knows.
* ``afd_jobs_timeout``: deferred, hits ``execution_timeout`` (the engine bounds the deferral by it and
  cancels the job when it runs out); the cancel gets a 500 from the emulator → the task fails, the run
  goes on → orphan.
* ``afd_jobs_tracked``: deferred and still waited for → never an orphan, never cancelled.
* ``afd_jobs_done``: its run succeeds → record ``done``, not an orphan.
"""

from __future__ import annotations

from datetime import datetime, timedelta

from airflow.sdk import DAG

from airflow_durable.operators.databricks import DurableDatabricksSubmitRunOperator

TASK_ID = "submit_run"

_KWARGS = {
    "afd_jobs_trigger_fails": {"deferrable": True},
    "afd_jobs_deleted": {"deferrable": True},
    "afd_jobs_timeout": {"deferrable": True, "execution_timeout": timedelta(seconds=10)},
    # Retries: under load a first try of these was seen failing before it submitted (cause not found
    # yet); a retry of a durable task reconnects, so it changes nothing else the test looks at.
    "afd_jobs_tracked": {"deferrable": True, "retries": 2, "retry_delay": timedelta(seconds=2)},
    "afd_jobs_done": {"deferrable": True, "retries": 2, "retry_delay": timedelta(seconds=2)},
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
            polling_period_seconds=1,
            databricks_retry_limit=2,
            databricks_retry_delay=0.2,
            **{"retries": 0, **_kwargs},
        )
    globals()[_dag_id] = _dag
