"""Clear one task instance through Airflow's own ``clear_task_instances``; print every carrier involved.

Usage: ``python -m tests.e2e.clear_carrier`` (in the end-to-end tests' migrated home). The run of
``assume_clear_carrier`` runs once with ``dag.test()`` (each task pushes the ``context_carrier`` its try
saw), then ``cleared`` is cleared as the UI's clear does, and both task instances' carriers are read again.
"""

from __future__ import annotations

import importlib
import json


def main() -> None:
    from airflow.models.taskinstance import TaskInstance, clear_task_instances
    from airflow.models.xcom import XComModel
    from airflow.utils.session import create_session
    from sqlalchemy import select

    from tests.e2e import dagrun

    module = importlib.import_module("clear_carrier")  # the dags folder is on PYTHONPATH
    run, _ = dagrun.run_dag(module.assume_clear_carrier())

    def carriers() -> dict[str, dict[str, str] | None]:
        with create_session() as session:
            tis = session.scalars(select(TaskInstance).where(TaskInstance.run_id == run.run_id)).all()
            return {ti.task_id: ti.context_carrier for ti in tis}

    with create_session() as session:
        seen = {
            row.task_id: row.value
            for row in session.scalars(
                select(XComModel).where(XComModel.run_id == run.run_id, XComModel.key == "return_value")
            )
        }
    before = carriers()
    # What a worker's try is handed: the executor's workload is built from the ORM row
    # (ExecuteTask.make: TaskInstanceDTO.model_validate(ti, from_attributes=True)), and the task runner
    # builds its RuntimeTaskInstance from it (task_runner.parse: model_dump(exclude_unset=True)).
    from airflow.executors.workloads.task import TaskInstanceDTO

    with create_session() as session:
        orm = session.scalar(
            select(TaskInstance).where(TaskInstance.run_id == run.run_id, TaskInstance.task_id == "cleared")
        )
        handed = TaskInstanceDTO.model_validate(orm, from_attributes=True).model_dump(exclude_unset=True)
    workload = handed.get("context_carrier")
    with create_session() as session:
        tis = session.scalars(
            select(TaskInstance).where(TaskInstance.run_id == run.run_id, TaskInstance.task_id == "cleared")
        ).all()
        clear_task_instances(tis, session)
    after = carriers()
    print(
        "CARRIER "
        + json.dumps({"seen": seen, "workload": workload, "before": before, "after": after}, default=str)
    )


if __name__ == "__main__":
    main()
