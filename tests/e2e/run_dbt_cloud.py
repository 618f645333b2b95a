"""Run the dbt Cloud end-to-end scenarios through real ``dag.test()`` in one process; print JSON summaries.

Usage: ``python -m tests.e2e.run_dbt_cloud durable|upstream``

Both scenarios on both paths run here one after the other (one interpreter start and one in-process
execution API for four DAG runs), against one dbt Cloud emulator on loopback HTTPS, reached by the
unmodified hook (requests) and trigger (aiohttp) through the connection and CA variables it installs.

Scenarios (DESIGN.md §6):
* ``crash`` — deferrable: the task has deferred, then the trigger's status poll fails (5xx past the
  hook's retries: an "error" event while the run keeps going) and the try fails. Sync: the poll fails
  mid-way. The retry must reconnect to the run, submitting nothing.
* ``already_succeeded`` — try 1 dies right after submitting (its first status read fails hard) and the
  run succeeds meanwhile; the retry must return the run id and XComs without submitting or deferring.
"""

from __future__ import annotations

import argparse
import io
import json
import os
import sys
from contextlib import redirect_stderr, redirect_stdout
from typing import Any

DECISIONS = (
    "fresh_submit",
    "resume_submit",
    "reconnect",
    "already_succeeded",
    "terminal_resubmit",
    "not_durable",
)
STATUS = "/runs/30"  # GET runs/{id}/ (run ids start at 300001), not the runs list


def configure(emulator: Any, scenario: str, path: str) -> None:
    emulator.faults.clear()
    emulator.ledger.clear()
    if scenario == "crash" and path == "deferrable":
        emulator.lifecycle = ["QUEUED"] + ["RUNNING"] * 3 + ["SUCCESS"]
        emulator.faults.add(method="GET", path_contains=STATUS, status=503, times=1, transport="async")
    elif scenario == "crash":
        emulator.lifecycle = ["QUEUED"] + ["RUNNING"] * 3 + ["SUCCESS"]
        emulator.faults.add(
            method="GET",
            path_contains=STATUS,
            status=503,
            times=1,
            transport="sync",
            predicate=lambda request, _calls=[0]: _count_after(_calls, 1),
        )
    elif scenario == "already_succeeded":
        emulator.lifecycle = ["SUCCESS"]
        emulator.faults.add(method="GET", path_contains=STATUS, status=400, times=1, transport="sync")
    else:
        raise SystemExit(f"unknown scenario {scenario!r}")


def _count_after(calls: list[int], n: int) -> bool:
    calls[0] += 1
    return calls[0] > n


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("kind", choices=["durable", "upstream"])
    args = parser.parse_args()

    from airflow_durable.testing.dbt_cloud import DbtCloudEmulator

    emulator = DbtCloudEmulator()
    emulator.add_job(job_id=42)
    emulator.start()
    emulator.install_connection(os.environ.__setitem__, conn_id="dbt_cloud_default")

    import importlib

    module = importlib.import_module("dbt_cloud_e2e")
    for path in ("deferrable", "sync"):
        for scenario in ("crash", "already_succeeded"):
            configure(emulator, scenario, path)
            dag = module.dags[f"dbt_cloud_e2e_{args.kind}_{path}"]
            polls_before = len(emulator.server.requests_to(STATUS, transport="async"))
            log = io.StringIO()
            with redirect_stdout(log), redirect_stderr(log):
                dag_run = dag.test()
            output = log.getvalue()
            sys.stderr.write(output[-8000:])
            submissions = emulator.ledger.submissions()
            summary = {
                "operator": f"dbt/{args.kind}",
                "path": path,
                "scenario": scenario,
                "dag_run_state": str(getattr(dag_run, "state", None)),
                "submissions": len(submissions),
                "run_ids": [e.external_id for e in submissions],
                "tokens": [e.token for e in submissions],
                "decisions": [d for line in output.splitlines() for d in DECISIONS if f"[{d}]" in line],
                "trigger_polls": len(emulator.server.requests_to(STATUS, transport="async")) - polls_before,
                "tries": _tries(dag.dag_id, dag_run.run_id),
                "xcoms": _xcoms(dag.dag_id, dag_run.run_id),
            }
            print("E2E-SUMMARY " + json.dumps(summary, default=str), flush=True)
    emulator.stop()
    return 0


def _tries(dag_id: str, run_id: str) -> list[dict[str, Any]]:
    from airflow.settings import Session
    from sqlalchemy import text

    with Session() as session:
        rows = session.execute(
            text(
                "SELECT try_number, state FROM task_instance_history WHERE dag_id=:dag AND run_id=:run "
                "UNION ALL SELECT try_number, state FROM task_instance WHERE dag_id=:dag AND run_id=:run "
                "ORDER BY 1"
            ),
            {"dag": dag_id, "run": run_id},
        ).all()
    return [{"try": r[0], "state": r[1]} for r in rows]


def _xcoms(dag_id: str, run_id: str) -> dict[str, Any]:
    from airflow.settings import Session
    from sqlalchemy import text

    with Session() as session:
        rows = session.execute(
            text("SELECT key, value FROM xcom WHERE dag_id=:dag AND run_id=:run"),
            {"dag": dag_id, "run": run_id},
        ).all()
    out: dict[str, Any] = {}
    for key, value in rows:
        try:
            out[key] = json.loads(value)
        except (TypeError, ValueError):
            out[key] = value if not isinstance(value, bytes) else value.decode(errors="replace")
    return out


if __name__ == "__main__":
    sys.exit(main())
