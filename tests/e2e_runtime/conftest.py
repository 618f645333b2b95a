"""Report each real-runtime scenario's submission count and wall time at the end of the run."""

from __future__ import annotations

from typing import Any

from tests.reporting import record


class _Summaries:
    """Scenario summaries, reported through ``tests.reporting`` so they survive xdist workers."""

    def append(self, s: dict[str, Any]) -> None:
        import airflow

        section = f"real-runtime scenarios (Airflow {airflow.__version__})"
        if "submissions" not in s:
            extra = {k: v for k, v in s.items() if k not in ("scenario", "seconds")}
            record(section, f"{s['scenario']:<28} {s['seconds']:6.1f}s {extra or ''}".rstrip())
            return
        shown = ("scenario", "operator", "submissions", "tries", "seconds")
        extra = {k: v for k, v in s.items() if k not in shown}
        record(
            section,
            f"{s['scenario']:<28} {s['seconds']:6.1f}s {s['operator']:<8} submissions={s['submissions']} "
            f"tries={s['tries']} {extra or ''}",
        )


SUMMARIES = _Summaries()
