"""The end-to-end tests' migrated Airflow home, and the runner of one registry case's cells.

Every scenario's submission count is reported at the end of the run (the numbers CI prints).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

import pytest

from tests.e2e.dagrun import migrated_home
from tests.e2e.runner import Cell, Plan
from tests.reporting import record

DAGS = Path(__file__).parent / "dags"


@pytest.fixture(scope="session")
def airflow_home(tmp_path_factory: pytest.TempPathFactory) -> dict[str, str]:
    return migrated_home(tmp_path_factory.mktemp("e2e-airflow-home"), DAGS)


RunCells = Callable[[str, Iterable[Cell]], dict[Cell, dict[str, Any]]]


@pytest.fixture(scope="session")
def run_cells(airflow_home: dict[str, str]) -> RunCells:
    """``run_cells(case_id, cells)``: the cells of one registry case in one subprocess, summaries by cell."""

    def run(case_id: str, cells: Iterable[Cell]) -> dict[Cell, dict[str, Any]]:
        found = Plan(case_id, list(cells)).run(airflow_home)
        for summary in found.values():
            record_summary(summary)
        return found

    return run


def record_summary(s: dict[str, Any]) -> None:
    import airflow

    record(
        f"end-to-end dag.test() submissions (Airflow {airflow.__version__})",
        f"{s['operator']:<34} {s['path']:<11} {s['scenario']:<24} submissions={s['submissions']} "
        f"tries={len(s['tries'])} decisions={','.join(s['decisions']) or '-'} final={s['dag_run_state']}",
    )


def cells(impl: str, path: str, *scenarios: str) -> list[Cell]:
    return [Cell(impl, path, scenario) for scenario in scenarios]
