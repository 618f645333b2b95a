"""Print every end-to-end scenario's submission count at the end of the run (the numbers CI reports).

Scenarios may run in pytest-xdist workers, so each summary is appended to a file that the controlling
process reads back for the terminal summary.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

_REPORT = Path(os.environ.get("AIRFLOW_DURABLE_E2E_REPORT", Path(__file__).resolve().parents[2] / ".e2e-report.jsonl"))


def record_summary(summary: dict[str, Any]) -> None:
    with _REPORT.open("a") as report:
        report.write(json.dumps(summary) + "\n")


def pytest_sessionstart(session: Any) -> None:
    if not hasattr(session.config, "workerinput"):  # the controller (or a run without xdist)
        _REPORT.unlink(missing_ok=True)


def pytest_terminal_summary(terminalreporter: Any) -> None:
    if not _REPORT.exists():
        return
    import airflow

    summaries = [json.loads(line) for line in _REPORT.read_text().splitlines() if line.strip()]
    summaries.sort(key=lambda s: (s["scenario"], s["operator"], s["path"]))
    terminalreporter.section(f"end-to-end submissions (Airflow {airflow.__version__})")
    for s in summaries:
        terminalreporter.write_line(
            f"{s['operator']:<11} {s['path']:<11} {s['scenario']:<24} submissions={s['submissions']} "
            f"tries={len(s['tries'])} decisions={','.join(s['decisions']) or '-'} final={s['dag_run_state']}"
        )
