"""Run one example DAG through real Airflow ``dag.test()`` against its emulator; print a JSON summary.

Usage: ``python -m tests.examples.run_example durable_databricks_submit_run.py``

Runs in its own process (the test starts one per DAG) with an AIRFLOW_HOME the caller migrated and
``[core] dags_folder`` = ``example_dags/`` (``dag.test()`` needs the file inside a bundle). The
registry entry (``tests/examples/cases/``) says which emulator to start; the DAG file itself is
imported unchanged, then only the entry's ``task_overrides`` (timing knobs) are applied.
"""

from __future__ import annotations

import importlib
import io
import json
import os
import sys
from contextlib import redirect_stderr, redirect_stdout
from typing import Any

from tests.examples.registry import by_file

DECISIONS = (
    "fresh_submit",
    "resume_submit",
    "reconnect",
    "already_succeeded",
    "terminal_resubmit",
    "not_durable",
)


def main() -> int:
    example = by_file(sys.argv[1])
    handle = example.setup(os.environ)
    try:
        module = importlib.import_module(example.path.stem)  # example_dags/ is on PYTHONPATH
        dag = next(
            value
            for value in vars(module).values()
            if getattr(value, "dag_id", None) == example.dag_id and hasattr(value, "test")
        )
        for task in dag.tasks:
            for name, value in example.task_overrides.items():
                if hasattr(task, name):
                    setattr(task, name, value)
        log = io.StringIO()
        with redirect_stdout(log), redirect_stderr(log):
            dag_run = dag.test()
        output = log.getvalue()
        sys.stderr.write(output[-20000:])
        summary = {
            "file": example.file,
            "dag_run_state": str(getattr(dag_run, "state", None)),
            "submissions": len(handle.ledger.submissions(example.system)),
            "tasks": _task_states(dag.dag_id, dag_run.run_id),
            "xcoms": _xcoms(dag.dag_id, dag_run.run_id),
            # The engine logs each decision once at INFO as "task <id> [<decision>]: ...".
            "decisions": [d for line in output.splitlines() for d in DECISIONS if f"[{d}]" in line],
        }
    finally:
        stop = getattr(handle, "stop", None)
        if stop is not None:
            stop()
    print("EXAMPLE-SUMMARY " + json.dumps(summary, default=str))
    return 0


def _task_states(dag_id: str, run_id: str) -> dict[str, str]:
    from airflow.settings import Session
    from sqlalchemy import text

    with Session() as session:
        rows = session.execute(
            text("SELECT task_id, state FROM task_instance WHERE dag_id=:dag AND run_id=:run"),
            {"dag": dag_id, "run": run_id},
        ).all()
    return {task_id: state for task_id, state in rows}


def _xcoms(dag_id: str, run_id: str) -> dict[str, dict[str, Any]]:
    from airflow.settings import Session
    from sqlalchemy import text

    with Session() as session:
        rows = session.execute(
            text("SELECT task_id, key, value FROM xcom WHERE dag_id=:dag AND run_id=:run"),
            {"dag": dag_id, "run": run_id},
        ).all()
    out: dict[str, dict[str, Any]] = {}
    for task_id, key, value in rows:
        if isinstance(value, bytes):
            value = value.decode(errors="replace")
        try:
            value = json.loads(value)
        except (TypeError, ValueError):
            pass
        out.setdefault(task_id, {})[key] = value
    return out


if __name__ == "__main__":
    sys.exit(main())
