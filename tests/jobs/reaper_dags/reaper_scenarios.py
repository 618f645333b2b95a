"""DAGs for tests/jobs/test_reaper_runtime.py: jobs that nothing will ever end, and the reapers that end them.

Every Databricks run the emulator starts stays RUNNING until something cancels it or the test ends it;
each task's ``run_name`` is its dag_id, so the test tells the runs apart and scopes emulator faults.

* ``rp_marked_deferred``: deferred while the triggerer is stopped; the user marks it failed before any
  triggerer picked its trigger up: no trigger ever runs, no try is left, the job runs on.
* ``rp_up_for_retry``: its trigger's poll fails once, so the try fails into ``up_for_retry`` (the next
  try is an hour away) with its job running; the user marks it failed: no try will come.
* ``rp_tracked``: deferred and waited for: no reaper may touch its job.
* ``rp_dry``: failed with its job running (like ``rp_up_for_retry`` without retries), outside
  ``rp_reaper``'s scope: the dry-run reaper, the failing reapers and then a real run handle it.
* ``rp_reaper``: the reaper every minute, for the first three DAGs.
* ``rp_reaper_dry``: a dry-run reaper for ``rp_dry`` (triggered by the test; ``{"dry_run": false}`` makes
  a run cancel).
* ``rp_reaper_badauth``: a reaper whose connection's password is wrong: Airflow refuses to be read.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from airflow.sdk import DAG

from airflow_durable.operators.databricks import DurableDatabricksSubmitRunOperator
from airflow_durable.reaper import durable_reaper_dag

TASK_ID = "submit_run"
REAPED = ("rp_marked_deferred", "rp_up_for_retry", "rp_tracked")
_KWARGS = {
    "rp_marked_deferred": {},
    "rp_up_for_retry": {"retries": 1, "retry_delay": timedelta(hours=1)},
    "rp_tracked": {},
    "rp_dry": {},
}

for _dag_id, _kwargs in _KWARGS.items():
    with DAG(
        dag_id=_dag_id, schedule=None, start_date=datetime(2026, 1, 1), catchup=False, tags=["reaper-test"]
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

rp_reaper = durable_reaper_dag(
    "rp_reaper", schedule=timedelta(minutes=1), dag_ids=REAPED, start_date=datetime(2026, 1, 1, tzinfo=UTC)
)
rp_reaper_dry = durable_reaper_dag("rp_reaper_dry", schedule=None, dry_run=True, dag_ids=["rp_dry"])
rp_reaper_badauth = durable_reaper_dag(
    "rp_reaper_badauth", schedule=None, api_conn_id="airflow_durable_api_bad", dag_ids=["rp_dry"]
)
