"""Print every end-to-end scenario's submission count at the end of the run (the numbers CI reports)."""

from __future__ import annotations

from typing import Any

SUMMARIES: list[dict[str, Any]] = []


def pytest_terminal_summary(terminalreporter: Any) -> None:
    if not SUMMARIES:
        return
    import airflow

    terminalreporter.section(f"end-to-end submissions (Airflow {airflow.__version__})")
    for s in SUMMARIES:
        terminalreporter.write_line(
            f"{s['operator']:<11} {s['path']:<11} {s['scenario']:<24} submissions={s['submissions']} "
            f"tries={len(s['tries'])} decisions={','.join(s['decisions']) or '-'} final={s['dag_run_state']}"
        )
