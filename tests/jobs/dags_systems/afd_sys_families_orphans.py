"""DAGs for ``tests/jobs/test_orphans_systems_runtime.py``, every other system family whose jobs can be looked
up (Snowflake, BigQuery, Redshift Data, AWS Batch, EMR steps, EMR Serverless, EMR on EKS): per family, a job
whose DAG run is deleted while the job goes on, and one still waited for.

Each family's emulator runs in its own process (``tests/e2e_runtime/emulator_runner.py``, as the reliability
matrix runs them): its AWS connection is ``aws_<key>`` and its Variables ``afd_rt_*``. The arguments are the
demo's (``airflow_durable/demo/table.py``) with those names. The DAG id is in each job's name, SQL or query,
so the emulator tells the two DAGs' jobs apart.

* ``afd_fam_<key>_deleted``: deferred; then its trigger's next read is refused (403), the trigger fails,
  the task fails (no retries; a failed trigger cancels nothing), the job goes on; then the test deletes the
  DAG run.
* ``afd_fam_<key>_tracked``: deferred and still waited for → never an orphan, never cancelled.
"""

from __future__ import annotations

import importlib
import json
from datetime import datetime, timedelta
from typing import Any

from airflow.sdk import DAG, get_parsing_context

from airflow_durable.demo import systems
from tests.e2e_runtime.matrix import KEYS

TASK_ID = "job"
#: The job kinds (``--system``) of these DAGs: every one with a lookup but Databricks and dbt Cloud (their
#: own DAG files). Databricks run-now has none.
FAMILIES: tuple[str, ...] = (
    "snowflake",
    "bigquery",
    "redshift",
    "batch",
    "emr-steps",
    "emr-serverless",
    "emr-eks",
)


def dag_id_of(kind: str, role: str) -> str:
    """``role`` is ``"deleted"`` or ``"tracked"``."""
    return f"afd_fam_{KEYS[kind]}_{role}"


def _arguments(kind: str, dag_id: str) -> dict[str, Any]:
    """The demo's arguments, under the names the emulator runner gives the connection and Variables."""
    text = json.dumps(systems.get(kind).operator_kwargs(dag_id))
    text = text.replace('"aws_default"', f'"aws_{KEYS[kind]}"').replace(
        "var.value.afd_demo_", "var.value.afd_rt_"
    )
    return dict(json.loads(text))


_LIMITS: dict[str, dict[str, Any]] = {
    "deleted": {"retries": 0},
    # Under load a first try can fail before it submits; a durable retry reconnects.
    "tracked": {"retries": 2, "retry_delay": timedelta(seconds=2)},
}
_own = get_parsing_context().dag_id  # set in a task process: it imports its own provider only
for _kind in FAMILIES:
    for _role, _limits in _LIMITS.items():
        _dag_id = dag_id_of(_kind, _role)
        if _own and _dag_id != _own:
            continue
        _row = systems.get(_kind).operator
        _operator = getattr(importlib.import_module(_row.durable_module), _row.durable_class)
        with DAG(
            dag_id=_dag_id,
            schedule=None,
            start_date=datetime(2026, 1, 1),
            catchup=False,
            tags=["airflow-durable"],
        ) as _dag:
            _operator(task_id=TASK_ID, deferrable=True, **_limits, **_arguments(_kind, _dag_id))
        globals()[_dag_id] = _dag
