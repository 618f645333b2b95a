"""The one-task DAGs of the ``dag.test()`` section (``bench/dagtest.py``).

``dag.test()`` parses the DAG's bundle and needs the DAG's file inside it, so the DAGs are defined here,
at parse time, from the registry the benchmark fills in the same process (each entry builds its task
against the emulator the benchmark started). Parsed anywhere else, this file defines no DAG.
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime
from typing import Any

try:
    from airflow.sdk import DAG
except ImportError:  # Airflow 2.x
    from airflow import DAG

#: dag_id → ``build(dag)`` adding the DAG's only task; filled by ``bench/dagtest.py``.
REGISTRY: dict[str, Callable[[Any], Any]] = {}


def make_dag(dag_id: str, build_task: Callable[[Any], Any]) -> Any:
    """A DAG ``dag_id`` whose only task is ``build_task(dag)``."""
    dag = DAG(dag_id=dag_id, schedule=None, start_date=datetime(2026, 1, 1), catchup=False)
    build_task(dag)
    return dag


def _registry() -> dict[str, Callable[[Any], Any]]:
    # The DagBag imports this file under another module name: reach the benchmark's registry by name.
    import sys

    module = sys.modules.get("bench.dags.bench_dagtest")
    return module.REGISTRY if module is not None else {}


for _dag_id, _build in _registry().items():
    globals()[_dag_id] = make_dag(_dag_id, _build)
