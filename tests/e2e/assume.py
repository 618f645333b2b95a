"""Run one assumption DAG of ``tests/e2e/dags`` with ``dag.test()``; print its XComs as one JSON line.

Usage: ``python -m tests.e2e.assume DAG_ID`` (in the end-to-end tests' migrated home).
"""

from __future__ import annotations

import importlib
import json
import sys

from tests.e2e import dagrun


def main(dag_id: str) -> None:
    module = importlib.import_module(dag_id.removeprefix("assume_"))  # the dags folder is on PYTHONPATH
    dag = getattr(module, dag_id)()
    run, _ = dagrun.run_dag(dag)
    print(
        "ASSUME "
        + json.dumps(
            {
                "state": str(run.state),
                "tries": dagrun.tries(dag_id, run.run_id, "job"),
                "xcoms": dagrun.xcoms(dag_id, run.run_id),
            }
        )
    )


if __name__ == "__main__":
    main(sys.argv[1])
