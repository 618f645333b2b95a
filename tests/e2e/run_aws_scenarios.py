"""Run the AWS end-to-end scenarios of one operator through real ``dag.test()``; print JSON summaries.

Usage: ``python -m tests.e2e.run_aws_scenarios --system redshift|batch [--sync] [--runs KIND:SCENARIO,...]``

One process runs every scenario of one system and path (each a fresh DAG run against a fresh ledger),
for the durable operator and for the upstream one, so that the two counts come from the same scenario.
The emulator runs here on loopback; the hooks (botocore) and triggers (aiobotocore) reach it through
``AIRFLOW_CONN_AWS_DEFAULT``.

Scenarios:
* ``dies_after_deferral`` — the job runs to success under the trigger; the resumed try dies in
  ``execute_complete`` (its first status read fails hard). The retry must find the job already
  succeeded: no second submission. (Sync: the try dies mid-poll after the job succeeded.)
* ``dies_before_defer`` — the try dies right after submitting (its first status read fails hard) while
  the job keeps running; the retry must reconnect (and defer again), submitting nothing.
"""

from __future__ import annotations

import argparse
import io
import json
import os
import sys
from contextlib import redirect_stderr, redirect_stdout
from typing import Any

from tests.e2e.run_scenario import DECISIONS, _tries, _xcoms

SERVICE = {"redshift": ("redshift-data", "DescribeStatement"), "batch": ("batch", "DescribeJobs")}


def configure(emulator: Any, system: str, scenario: str, sync: bool) -> None:
    service, status_operation = SERVICE[system]
    path = f"/{service}/{status_operation}"
    running = "STARTED" if system == "redshift" else "RUNNING"
    done = "FINISHED" if system == "redshift" else "SUCCEEDED"
    emulator.lifecycle = [running] * 3 + [done]
    # A hard, non-retryable failure of one sync status read stands in for the worker dying there.
    crash = dict(path_contains=path, status=403, times=1, transport="sync")
    if scenario == "dies_before_defer":
        emulator.faults.add(**crash)
    elif scenario == "dies_after_deferral" and not sync:
        # The first sync read after the trigger has polled: the resumed try's execute_complete.
        emulator.faults.add(
            **crash, predicate=lambda request: bool(emulator.server.requests_to(path, transport="async"))
        )
    elif scenario == "dies_after_deferral":
        # Sync: the try polls until the job is done, then dies on a later read (result / links).
        def after_done(request: Any) -> bool:
            return any(job.reported == done for job in emulator.jobs.values())

        emulator.faults.add(**crash, predicate=after_done)
    else:
        raise SystemExit(f"unknown scenario {scenario!r}")


def run(emulator: Any, system: str, kind: str, scenario: str, sync: bool) -> dict[str, Any]:
    import importlib

    emulator.ledger.clear()
    emulator.faults.clear()
    emulator.server.log.clear()
    configure(emulator, system, scenario, sync)
    module = importlib.import_module("durable_aws_e2e")
    path = "sync" if sync else "deferrable"
    dag = getattr(module, f"aws_e2e__{system}__{kind}__{path}")
    log = io.StringIO()
    with redirect_stdout(log), redirect_stderr(log):
        dag_run = dag.test()
    output = log.getvalue()
    sys.stderr.write(output[-8000:])
    service, status_operation = SERVICE[system]
    return {
        "scenario": scenario,
        "operator": f"{system}-{kind}",
        "path": path,
        "dag_run_state": str(getattr(dag_run, "state", None)),
        "submissions": len(emulator.ledger.submissions()),
        "tokens": [e.token for e in emulator.ledger.submissions()],
        "decisions": [d for line in output.splitlines() for d in DECISIONS if f"[{d}]" in line],
        "trigger_polls": len(
            emulator.server.requests_to(f"/{service}/{status_operation}", transport="async")
        ),
        "tries": _tries(dag_run.run_id),
        "xcoms": _xcoms(dag_run.run_id),
    }


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--system", required=True, choices=sorted(SERVICE))
    parser.add_argument("--sync", action="store_true")
    parser.add_argument(
        "--runs",
        default="durable:dies_after_deferral,durable:dies_before_defer,upstream:dies_after_deferral",
        help="comma-separated KIND:SCENARIO, KIND = durable | upstream",
    )
    args = parser.parse_args()

    from airflow_durable.testing import BatchEmulator, RedshiftDataEmulator

    emulator = (RedshiftDataEmulator if args.system == "redshift" else BatchEmulator)().start()
    emulator.install_connection(os.environ.__setitem__, conn_id="aws_default")
    emulator.install_fast_botocore(os.environ.__setitem__)
    for planned in args.runs.split(","):
        kind, _, scenario = planned.partition(":")
        summary = run(emulator, args.system, kind, scenario, args.sync)
        print("E2E-SUMMARY " + json.dumps(summary, default=str), flush=True)
    emulator.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main())
