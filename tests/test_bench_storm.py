"""The reconnect storm's report: the real deployment's rows and the in-process records of earlier runs.

The real storm itself runs minutes per side (``python -m bench --sections triggerer --storm-mode real``);
what CI checks here, in well under a second, is that the report renders both kinds of record (the published
``docs/benchmarks.json`` holds in-process ones), says which mode measured it, and shows a side that could
not run with its error instead of dropping it; and that the quick runs keep the in-process storm.
"""

from __future__ import annotations

from typing import Any

from bench import report, storm
from bench.__main__ import parse_args

REAL_ROW: dict[str, Any] = {
    "side": "upstream",
    "tasks": 100,
    "s_outage": 7.0,
    "seconds": 412.0,
    "s_side_total": 700.0,
    "api_submits": 100,
    "api_status_workers": 300,
    "api_status_triggerer": 300,
    "api_faulted": 300,
    "api_other": 0,
    "submissions": 100,
    "store_rows": 0,
    "store_rows_written_in_storm": 0,
    "decisions_try2": {},
    "jobs_running_untracked": 100,
    "deferred_try2": 100,
    "failed": 0,
    "load_max": 9.5,
}


def _record(rows: list[dict[str, Any]], mode: str) -> dict[str, Any]:
    return {"section": "triggerer", "ran": True, "rows": [], "storm": rows, "storm_mode": mode}


def test_real_storm_rows_render_with_their_mode_and_errors() -> None:
    ours = {**REAL_ROW, "side": "ours", "api_submits": 0, "submissions": 0, "jobs_running_untracked": 0}
    ours.update(store_rows=100, store_rows_written_in_storm=100, decisions_try2={"reconnect": 100})
    ours.update(
        s_retry_run_mean=4.2, s_retry_run_max=9.0, cpu_s_try1=150.2, cpu_s=310.0
    )  # the upstream row has none: an older record
    broken = {"side": "ours", "tasks": 100, "error": "DeploymentError: timed out after 1200 s waiting for x"}
    text = "\n".join(report._triggerer([_record([REAL_ROW, ours, broken], storm.describe())]))
    assert storm.describe() in text
    upstream = (
        "| 100 | upstream | 7 / 412 | – / – | – / – | 100 / 300 / 300 (300) / 0 | 100 | 0 / 0 | – | 100 |"
    )
    assert upstream + " 100 / 0 |" in text
    ours_row = "| 100 | ours | 7 / 412 | 4.2 / 9.0 | 150 / 310 | 0 / 300 / 300 (300) / 0 | 0 | 100 / 100 |"
    assert ours_row + " reconnect 100 | 0 |" in text
    assert "| 100 | ours | could not run |" in text and "timed out after 1200 s" in text
    assert "one after another" not in text  # the in-process caveat belongs to in-process records only


def test_in_process_records_of_earlier_runs_still_render() -> None:
    row = {
        "side": "ours",
        "tasks": 100,
        "api_calls": 100,
        "submissions": 0,
        "seconds": 17.26,
        "store_gets_per_task": 1.0,
        "store_sets_per_task": 1.0,
    }
    text = "\n".join(report._triggerer([_record([row], "in-process harness, retries one after another")]))
    assert "Reconnect storm (in-process harness, retries one after another)" in text
    assert "| 100 | ours | 100 | 0 | 1.0 / 1.0 | 17.26 |" in text


def test_storm_mode_setting() -> None:
    assert parse_args([]).storm_mode is None  # main(): real, or in-process with --quick / --tiny
    assert parse_args(["--storm-mode", "in-process"]).storm_mode == "in-process"
