"""Run one example DAG through real Airflow ``dag.test()`` against its emulator; print a JSON summary.

Usage: ``python -m tests.examples.run_example durable_databricks_submit_run.py``

Runs in its own process (the test starts one per DAG) with an AIRFLOW_HOME the caller migrated and
``[core] dags_folder`` = ``example_dags/`` (``dag.test()`` needs the file inside a bundle). The
registry entry (``tests/examples/cases/``) says which emulator to start; the DAG file itself is
imported unchanged, then only the entry's ``task_overrides`` (timing knobs) are applied.
"""

from __future__ import annotations

import importlib
import json
import os
import sys

from tests.e2e import dagrun
from tests.examples.registry import by_file


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
        dag_run, output = dagrun.run_dag(dag, tail=20000)
        summary = {
            "file": example.file,
            "dag_run_state": str(getattr(dag_run, "state", None)),
            "submissions": len(handle.ledger.submissions(example.system)),
            "tasks": dagrun.task_states(dag.dag_id, dag_run.run_id),
            "xcoms": dagrun.xcoms(dag.dag_id, dag_run.run_id),
            "decisions": dagrun.decisions(output),
        }
    finally:
        stop = getattr(handle, "stop", None)
        if stop is not None:
            stop()
    print("EXAMPLE-SUMMARY " + json.dumps(summary, default=str))
    return 0


if __name__ == "__main__":
    sys.exit(main())
