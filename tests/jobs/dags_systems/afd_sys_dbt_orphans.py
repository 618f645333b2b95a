"""DAGs for ``tests/jobs/test_orphans_systems_runtime.py``, dbt Cloud: a run whose DAG run is deleted while
the run goes on, and one still waited for.

Each DAG triggers its own dbt Cloud job (`job_id_of`), so the test can scope emulator faults to one DAG. No
retries: a failed try is the task instance's end.

* ``afd_sys_dbt_deleted``: deferred; the trigger's poll gets a 400, the trigger reports an error, the task
  fails (a failed trigger cancels nothing), the run goes on; then the test deletes the DAG run.
* ``afd_sys_dbt_tracked``: deferred and still waited for → never an orphan, never cancelled.
"""

from __future__ import annotations

import hashlib
from datetime import datetime, timedelta

from airflow.sdk import DAG

from airflow_durable.operators.dbt_cloud import DurableDbtCloudRunJobOperator

TASK_ID = "run_job"
_KWARGS = {
    "afd_sys_dbt_deleted": {},
    # Under load a first try can fail before it submits; a durable retry reconnects.
    "afd_sys_dbt_tracked": {"retries": 2, "retry_delay": timedelta(seconds=2)},
}
DAG_IDS = tuple(_KWARGS)


def job_id_of(dag_id: str) -> int:
    """The dbt Cloud job a DAG triggers (the test defines it on the emulator)."""
    return 10_000 + int(hashlib.sha256(dag_id.encode()).hexdigest()[:6], 16) % 890_000


for _dag_id, _kwargs in _KWARGS.items():
    with DAG(
        dag_id=_dag_id,
        schedule=None,
        start_date=datetime(2026, 1, 1),
        catchup=False,
        tags=["airflow-durable"],
    ) as _dag:
        DurableDbtCloudRunJobOperator(
            task_id=TASK_ID,
            job_id=job_id_of(_dag_id),
            deferrable=True,
            check_interval=1,
            timeout=600,
            **{"retries": 0, **_kwargs},
        )
    globals()[_dag_id] = _dag
