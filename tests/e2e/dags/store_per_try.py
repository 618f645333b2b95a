"""A task whose retry uses its first try's ``task_state_store`` accessor: what Airflow lets an older try do.

The engine relies on it (DESIGN §8): every new try of a task instance (a retry, a clear) gets a new
task-instance id, and the execution API answers an older try's state-store calls as if the task instance
were gone, so a try that outlived its turn cannot overwrite the record a newer try keeps.
"""

from __future__ import annotations

from datetime import timedelta
from typing import Any

from airflow.sdk import dag, get_current_context, task

#: Kept across tries: ``dag.test()`` runs every try in this one process.
FIRST_TRY: dict[str, Any] = {}


@task(retries=1, retry_delay=timedelta(seconds=0))
def job() -> dict[str, Any]:
    context = get_current_context()
    store = context["task_state_store"]
    if not FIRST_TRY:
        store.set("record", "written by try 1")
        FIRST_TRY["store"] = store
        raise RuntimeError("try 1 dies; the retry runs")
    old = FIRST_TRY["store"]
    seen: dict[str, Any] = {"same_accessor": old == store}
    seen["old_get"] = old.get("record", "<default>")
    try:
        old.set("record", "written by try 1 after try 2 began")
        seen["old_set"] = "accepted"
    except Exception as err:
        seen["old_set"] = f"refused: {type(err).__name__}: {err}"
    seen["new_get"] = store.get("record", "<default>")
    return seen


@dag(dag_id="assume_store_per_try", schedule=None)
def assume_store_per_try() -> None:
    job()


assume_store_per_try()
