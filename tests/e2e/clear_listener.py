"""Put a task instance through Airflow's own failure handling and print what became of its durable record.

Usage: ``python -m tests.e2e.clear_listener STATE`` (in the end-to-end tests' migrated home): the task
instance of ``assume_cleared_while_running``'s run is set to STATE (``restarting``: the user cleared it
while it ran; ``running``: its worker died), then ``TaskInstance.handle_failure`` runs as the scheduler
runs it when the heartbeat is missed, with the plugins' listeners loaded as in the scheduler.
"""

from __future__ import annotations

import importlib
import json
import sys


def main(state: str) -> None:
    from airflow.models.task_state_store import TaskStateStoreModel
    from airflow.models.taskinstance import TaskInstance
    from airflow.utils.session import create_session
    from sqlalchemy import select

    from tests.e2e import dagrun

    module = importlib.import_module("cleared_while_running")  # the dags folder is on PYTHONPATH
    run, _ = dagrun.run_dag(module.assume_cleared_while_running())
    with create_session() as session:
        ti = session.scalar(select(TaskInstance).where(TaskInstance.run_id == run.run_id))
        ti.state = state
        ti.max_tries = 1
    with create_session() as session:
        ti = session.scalar(select(TaskInstance).where(TaskInstance.run_id == run.run_id))
        ti.handle_failure(error="Task did not emit heartbeat within time limit", session=session)
        final = str(ti.state)
    with create_session() as session:
        row = session.scalar(
            select(TaskStateStoreModel).where(
                TaskStateStoreModel.run_id == run.run_id, TaskStateStoreModel.key == module.KEY
            )
        )
        print("CLEAR " + json.dumps({"state": final, "record": json.loads(row.value)}))


if __name__ == "__main__":
    main(sys.argv[1])
