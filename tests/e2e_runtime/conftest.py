"""Report each real-runtime scenario's submission count and wall time at the end of the run."""

from __future__ import annotations

from typing import Any

SUMMARIES: list[dict[str, Any]] = []


def pytest_terminal_summary(terminalreporter: Any) -> None:
    if not SUMMARIES:
        return
    import airflow

    terminalreporter.section(f"real-runtime scenarios (Airflow {airflow.__version__})")
    for s in SUMMARIES:
        if "submissions" not in s:
            terminalreporter.write_line(f"{s['scenario']:<28} {s['seconds']:6.1f}s")
            continue
        extra = {
            k: v for k, v in s.items() if k not in ("scenario", "operator", "submissions", "tries", "seconds")
        }
        terminalreporter.write_line(
            f"{s['scenario']:<28} {s['seconds']:6.1f}s {s['operator']:<8} submissions={s['submissions']} "
            f"tries={s['tries']} {extra or ''}"
        )
