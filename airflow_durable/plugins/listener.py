"""The listener that tells a clear of a running task whose worker is gone from a plain retry.

Airflow 3.3 gives a try no trace of that clear: the task goes ``restarting`` with ``max_tries`` untouched,
the scheduler fails it for its missing heartbeat and retries it, and the next try sees what any retry
sees (the run's ``clear_number`` also changes when another task is cleared). Only Airflow's own failure
handling, in the scheduler, still knows: there this listener marks the task instance's records
(`airflow_durable.shims.mark_cleared_while_running`), so that the next try starts a new logical job and
ends the old one (`airflow_durable.engine.identity.same_epoch`).
"""

from __future__ import annotations

import logging
from typing import Any

from airflow.listeners import hookimpl

from airflow_durable import catalogue, shims
from airflow_durable.engine.record import CLEARED_FIELD

log = logging.getLogger(__name__)

#: Every durable operator's task-state-store key.
KEYS = tuple(row.key for row in catalogue.OPERATORS)


@hookimpl
def on_task_instance_failed(previous_state: Any, task_instance: Any, error: Any) -> None:
    try:
        marked = shims.mark_cleared_while_running(task_instance, KEYS, CLEARED_FIELD)
    except Exception:  # a listener must never break Airflow's failure handling
        log.exception("airflow-durable: could not mark the records of %s", task_instance)
        return
    if marked:
        log.info(
            "airflow-durable: %s was cleared while it ran and is failed for its missing heartbeat: its next "
            "try starts a new logical job (marked %s)",
            task_instance,
            ", ".join(marked),
        )
