"""Run one end-to-end scenario through real Airflow ``dag.test()`` and print a JSON summary.

Usage: ``python -m tests.e2e.run_scenario SCENARIO --operator submit_run|run_now [--sync]``

Runs in its own process (the test suite starts one per scenario) with a throwaway AIRFLOW_HOME that
the caller prepared (``airflow db migrate`` done). The emulator runs here, on loopback, so the
unmodified provider hook (requests) and trigger (aiohttp) reach it exactly as they would Databricks.

Scenarios (issue 2, §6 of DESIGN.md):
* ``crash_before_defer`` — try 1 dies after submitting, before its deferral lands (its first status
  read fails hard) while the run keeps going; the retry must reconnect and defer, submitting nothing.
* ``already_succeeded`` — the same death, but the run is done when the retry starts; the retry must
  return the result and XComs without submitting or deferring.
* ``run_failed`` — the run fails; the retry must submit a second run with a new token.
* ``status_5xx_before_defer`` — the status API answers 5xx past the hook's retries; the retry reconnects.
* ``sync_status_error`` — (sync) the poll meets 5xx past the hook's retries; the retry reconnects.

A trigger that *raises* cannot be shown here: ``dag.test()`` marks the task failed without a retry when
an inline trigger raises, unlike the real triggerer (``__fail__`` → retry). Those cells run against a
real scheduler + triggerer in ``tests/e2e_runtime`` and in the conformance suite.
"""

from __future__ import annotations

import argparse
import io
import json
import os
import sys
from contextlib import redirect_stderr, redirect_stdout
from typing import Any

DECISIONS = ("fresh_submit", "resume_submit", "reconnect", "already_succeeded", "terminal_resubmit", "not_durable")


def configure(emulator: Any, scenario: str) -> None:
    # Reads before the provider defers: get_job_id, get_run_page_url, get_run (all runs/get).
    first_read_after_submit = dict(method="GET", path_contains="runs/get", transport="sync")
    if scenario == "crash_before_defer":
        # Try 1 dies between submitting and deferring (its first status read fails hard); the run goes on.
        emulator.lifecycle = ["PENDING"] * 4 + ["RUNNING"] * 3 + ["TERMINATED:SUCCESS"]
        emulator.faults.add(status=400, times=1, **first_read_after_submit)
    elif scenario == "already_succeeded":
        # Same death, but the run is already done when the retry reads it.
        emulator.lifecycle = ["TERMINATED:SUCCESS"]
        emulator.faults.add(status=400, times=1, **first_read_after_submit)
    elif scenario == "run_failed":
        emulator.lifecycle = ["PENDING"] * 4 + ["RUNNING"] * 2 + ["TERMINATED:SUCCESS"]
        emulator.queue_lifecycles(["PENDING"] * 4 + ["RUNNING"] * 2 + ["TERMINATED:FAILED"])
    elif scenario == "status_5xx_before_defer":
        # The status API answers 503 past the hook's retries (databricks_retry_limit=2) right after submit.
        emulator.lifecycle = ["PENDING"] * 4 + ["RUNNING"] * 3 + ["TERMINATED:SUCCESS"]
        emulator.faults.add(status=503, times=2, **first_read_after_submit)
    elif scenario == "sync_status_error":
        emulator.lifecycle = ["PENDING"] * 3 + ["RUNNING"] * 3 + ["TERMINATED:SUCCESS"]
        emulator.faults.add(
            method="GET",
            path_contains="runs/get",
            status=503,
            times=2,
            transport="sync",
            predicate=lambda request, _calls=[0]: _count_after(_calls, 3),
        )
    elif scenario != "happy":
        raise SystemExit(f"unknown scenario {scenario!r}")


def _count_after(calls: list[int], n: int) -> bool:
    # Let the first n status reads through (submission checks, first polls), then fail: "mid-poll".
    calls[0] += 1
    return calls[0] > n


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("scenario")
    parser.add_argument("--operator", default="submit_run", choices=["submit_run", "run_now"])
    parser.add_argument("--sync", action="store_true")
    args = parser.parse_args()

    from airflow_durable.testing import DatabricksEmulator

    emulator = DatabricksEmulator()
    emulator.add_job(job_id=42, name="nightly-etl")
    configure(emulator, args.scenario)
    emulator.start()
    emulator.install_connection(os.environ.__setitem__, conn_id="databricks_default")
    os.environ["E2E_OPERATOR"] = args.operator
    os.environ["E2E_DEFERRABLE"] = "0" if args.sync else "1"

    import importlib

    module = importlib.import_module("durable_databricks_e2e")
    log = io.StringIO()
    with redirect_stdout(log), redirect_stderr(log):
        dag_run = module.dag.test()
    output = log.getvalue()
    sys.stderr.write(output[-20000:])

    summary = {
        "scenario": args.scenario,
        "operator": args.operator,
        "path": "sync" if args.sync else "deferrable",
        "dag_run_state": str(getattr(dag_run, "state", None)),
        "submissions": len(emulator.ledger.submissions()),
        "submit_calls": len([e for e in emulator.ledger.entries if e.operation in ("runs/submit", "run-now")]),
        "tokens": [e.token for e in emulator.ledger.submissions()],
        "decisions": [d for line in output.splitlines() for d in DECISIONS if f"[{d}]" in line],
        # The trigger's polls are the only aiohttp status reads (the hook's sync path uses requests).
        "trigger_polls": len(emulator.server.requests_to("runs/get", transport="async")),
        "tries": _tries(dag_run.run_id),
        "xcoms": _xcoms(dag_run.run_id),
    }
    emulator.stop()
    print("E2E-SUMMARY " + json.dumps(summary, default=str))
    return 0


def _tries(run_id: str, dag_id: str = "%") -> list[dict[str, Any]]:
    from sqlalchemy import text

    from airflow.settings import Session

    with Session() as session:
        rows = session.execute(
            text(
                "SELECT try_number, state FROM task_instance_history WHERE task_id='durable_job' "
                "AND run_id=:run AND dag_id LIKE :dag UNION ALL SELECT try_number, state FROM task_instance "
                "WHERE task_id='durable_job' AND run_id=:run AND dag_id LIKE :dag ORDER BY 1"
            ),
            {"run": run_id, "dag": dag_id},
        ).all()
    return [{"try": r[0], "state": r[1]} for r in rows]


def _xcoms(run_id: str, dag_id: str = "%") -> dict[str, Any]:
    from sqlalchemy import text

    from airflow.settings import Session

    with Session() as session:
        rows = session.execute(
            text(
                "SELECT key, value FROM xcom WHERE task_id='durable_job' AND run_id=:run AND dag_id LIKE :dag"
            ),
            {"run": run_id, "dag": dag_id},
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
