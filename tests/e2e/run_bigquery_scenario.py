"""Run BigQuery end-to-end scenarios through real Airflow ``dag.test()``; print one JSON summary each.

Usage: ``python -m tests.e2e.run_bigquery_scenario VARIANT:SCENARIO [VARIANT:SCENARIO ...]``
(variants: ``durable_deferrable``, ``durable_sync``, ``upstream_deferrable``, ``upstream_sync``).

Several scenarios run in one process (a process costs more than a scenario), each as a new DAG run
against a fresh emulator. The emulator runs here on loopback; the unmodified provider hook and
trigger reach it through ``BIGQUERY_EMULATOR_HOST`` and the ``google_cloud_default`` connection.

Scenarios (DESIGN.md §6):
* ``crash_after_deferral`` — try 1 submits and defers; the trigger's first poll meets an API error it
  does not retry, so the trigger yields an error event and the try fails, while the job keeps running.
  (sync: the poll meets that error mid-poll.) The retry must reconnect, submitting nothing.
* ``already_succeeded`` — the same failure, but the job is DONE when the retry starts: the retry must
  return the job id and XComs without submitting (or deferring).
"""

from __future__ import annotations

import argparse
import io
import json
import os
import sys
from contextlib import redirect_stderr, redirect_stdout
from typing import Any

from tests.e2e.run_scenario import DECISIONS

TASK_ID = "insert_job"


def configure(emulator: Any, scenario: str) -> None:
    if scenario == "crash_after_deferral":
        emulator.lifecycle = ["PENDING"] + ["RUNNING"] * 4 + ["DONE"]
    elif scenario == "already_succeeded":
        emulator.lifecycle = ["PENDING", "DONE"]
    else:
        raise SystemExit(f"unknown scenario {scenario!r}")
    # The operator's own first status read (deferrable: job.running() before deferring; sync: the
    # first poll) goes through; the next one — the trigger's first poll, or the second sync poll —
    # fails with a reason the google client does not retry.
    reads = [0]

    def after_first_read(request: Any) -> bool:
        reads[0] += 1
        return reads[0] == 2

    emulator.faults.add(method="GET", path_contains="/jobs/", status=503, times=1, predicate=after_first_read)


def run(variant: str, scenario: str) -> dict[str, Any]:
    from airflow_durable.testing import BigQueryEmulator

    emulator = BigQueryEmulator()
    configure(emulator, scenario)
    emulator.start()
    emulator.install(os.environ.__setitem__)
    import importlib

    module = importlib.import_module("durable_bigquery_e2e")
    dag = getattr(module, f"dag_{variant}")
    log = io.StringIO()
    with redirect_stdout(log), redirect_stderr(log):
        dag_run = dag.test()
    output = log.getvalue()
    sys.stderr.write(output[-15000:])
    summary = {
        "scenario": scenario,
        "operator": f"bigquery_{variant.split('_')[0]}",
        "variant": variant,
        "path": variant.split("_")[1],
        "dag_run_state": str(getattr(dag_run, "state", None)),
        "submissions": len(emulator.ledger.submissions()),
        "insert_calls": len(emulator.ledger.select(operation="jobs.insert")),
        "job_ids": [e.external_id for e in emulator.ledger.submissions()],
        "decisions": [d for line in output.splitlines() for d in DECISIONS if f"[{d}]" in line],
        # The provider trigger logs this once per success event it yields.
        "trigger_successes": output.count("BigQuery Job succeeded"),
        "tries": _tries(dag.dag_id, dag_run.run_id),
        "xcoms": _xcoms(dag.dag_id, dag_run.run_id),
        "emulator_errors": [repr(e) for e in emulator.server.errors],
    }
    emulator.stop()
    return summary


def _tries(dag_id: str, run_id: str) -> list[dict[str, Any]]:
    from airflow.settings import Session
    from sqlalchemy import text

    with Session() as session:
        rows = session.execute(
            text(
                "SELECT try_number, state FROM task_instance_history WHERE dag_id=:dag AND task_id=:task "
                "AND run_id=:run UNION ALL SELECT try_number, state FROM task_instance "
                "WHERE dag_id=:dag AND task_id=:task AND run_id=:run ORDER BY 1"
            ),
            {"dag": dag_id, "task": TASK_ID, "run": run_id},
        ).all()
    return [{"try": r[0], "state": r[1]} for r in rows]


def _xcoms(dag_id: str, run_id: str) -> dict[str, Any]:
    from airflow.settings import Session
    from sqlalchemy import text

    with Session() as session:
        rows = session.execute(
            text("SELECT key, value FROM xcom WHERE dag_id=:dag AND task_id=:task AND run_id=:run"),
            {"dag": dag_id, "task": TASK_ID, "run": run_id},
        ).all()
    out: dict[str, Any] = {}
    for key, value in rows:
        try:
            out[key] = json.loads(value)
        except (TypeError, ValueError):
            out[key] = value if not isinstance(value, bytes) else value.decode(errors="replace")
    return out


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("runs", nargs="+", metavar="VARIANT:SCENARIO")
    args = parser.parse_args()
    for pair in args.runs:
        variant, _, scenario = pair.partition(":")
        print("E2E-SUMMARY " + json.dumps(run(variant, scenario), default=str), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
