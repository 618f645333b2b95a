"""Report every end-to-end scenario's submission count at the end of the run (the numbers CI prints)."""

from __future__ import annotations

from typing import Any

from tests.reporting import record


def record_summary(s: dict[str, Any]) -> None:
    import airflow

    record(
        f"end-to-end dag.test() submissions (Airflow {airflow.__version__})",
        f"{s['operator']:<11} {s['path']:<11} {s['scenario']:<24} submissions={s['submissions']} "
        f"tries={len(s['tries'])} decisions={','.join(s['decisions']) or '-'} final={s['dag_run_state']}",
    )
