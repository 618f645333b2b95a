"""Two task instances that report the trace carrier their try sees, for tests.e2e.clear_carrier.

The engine tells a clear of this task instance from a retry, a DAG edit or a clear of another task by its
``context_carrier`` (`airflow_durable.engine.identity.clear_mark_of`); the check clears one of the two
through Airflow's own ``clear_task_instances`` and compares.
"""

from __future__ import annotations

from airflow.sdk import dag, get_current_context, task


@task
def seen_carrier() -> dict[str, object]:
    ti = get_current_context()["ti"]
    return {"carrier": getattr(ti, "context_carrier", None), "type": type(ti).__name__}


@dag(dag_id="assume_clear_carrier", schedule=None)
def assume_clear_carrier() -> None:
    seen_carrier.override(task_id="cleared")()
    seen_carrier.override(task_id="other")()


assume_clear_carrier()
