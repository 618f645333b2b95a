"""Lines the test run reports at its end (submission counts, wall times), collected across xdist workers.

Workers append to one JSON-lines file; the controlling process prints it (``tests/conftest.py``).
"""

from __future__ import annotations

import json
import os
from pathlib import Path

REPORT = Path(
    os.environ.get(
        "AIRFLOW_DURABLE_TEST_REPORT", Path(__file__).resolve().parent.parent / ".test-report.jsonl"
    )
)


def record(section: str, line: str) -> None:
    with REPORT.open("a") as report:
        report.write(json.dumps({"section": section, "line": line}) + "\n")


def sections() -> dict[str, list[str]]:
    grouped: dict[str, list[str]] = {}
    if REPORT.exists():
        for raw in REPORT.read_text().splitlines():
            if raw.strip():
                entry = json.loads(raw)
                grouped.setdefault(entry["section"], []).append(entry["line"])
    return grouped
