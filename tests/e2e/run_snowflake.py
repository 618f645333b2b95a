"""Run Snowflake end-to-end scenarios through real Airflow ``dag.test()``, all in this one process.

Usage: ``python -m tests.e2e.run_snowflake IMPL:PATH:SCENARIO [...]`` with IMPL ``durable|upstream``,
PATH ``deferrable|sync``. Prints one ``E2E-SUMMARY <json>`` line per scenario.

The SQL API emulator runs here on loopback TLS; the unmodified provider hook (requests) and trigger
(aiohttp) reach it as ``https://emulator.snowflakecomputing.com``. Each scenario runs against a fresh
ledger and fault plan. Scenarios (two-statement requests):

* ``crash_after_submit`` — try 1 submits, then dies before its deferral lands (deferrable) or as
  polling starts (sync): its first status read fails hard (HTTP 400, not retried) while the statements
  keep running. The retry must reconnect, submitting nothing.
* ``already_succeeded`` — the same death, but the statements are done when the retry starts: it must
  return the result and ``query_ids`` without submitting (or deferring).
* ``response_lost`` — the submission executes but its answer is lost (connection dropped); the
  hook's own retry resends the request with the same ``requestId``. Only ``retry=true`` (ours) lets
  the SQL API recognise it.
"""

from __future__ import annotations

import io
import json
import os
import sys
from contextlib import redirect_stderr, redirect_stdout
from typing import Any

from tests.e2e.run_scenario import DECISIONS, _tries, _xcoms


def configure(emulator: Any, scenario: str) -> None:
    first_status_read = dict(method="GET", path_contains="/api/v2/statements/", transport="sync")
    if scenario == "crash_after_submit":
        emulator.lifecycle = ["RUNNING"] * 3 + ["SUCCESS"]
        emulator.faults.add(status=400, times=1, **first_status_read)
    elif scenario == "already_succeeded":
        emulator.lifecycle = ["SUCCESS"]
        emulator.faults.add(status=400, times=1, **first_status_read)
    elif scenario == "response_lost":
        emulator.lifecycle = ["RUNNING", "SUCCESS"]
        emulator.faults.add(
            method="POST", predicate=lambda r: r.path == "/api/v2/statements", drop=True, after=True, times=1
        )
    else:
        raise SystemExit(f"unknown scenario {scenario!r}")


def run(emulator: Any, module: Any, impl: str, path: str, scenario: str) -> dict[str, Any]:
    emulator.ledger.clear()
    emulator.faults.clear()
    emulator.server.log.clear()
    configure(emulator, scenario)
    dag = module.DAGS[f"snowflake_e2e_{impl}_{path}"]
    log = io.StringIO()
    with redirect_stdout(log), redirect_stderr(log):
        dag_run = dag.test()
    output = log.getvalue()
    sys.stderr.write(output[-8000:])
    submit_calls = [e for e in emulator.ledger.entries if e.operation == "statements"]
    return {
        "operator": f"{impl}_snowflake_sql_api",
        "impl": impl,
        "path": path,
        "scenario": scenario,
        "dag_run_state": str(getattr(dag_run, "state", None)),
        "submissions": len(emulator.ledger.submissions()),
        "submit_calls": len(submit_calls),
        "retry_flags": [e.payload.get("retry") for e in submit_calls],
        "decisions": [d for line in output.splitlines() for d in DECISIONS if f"[{d}]" in line],
        # The trigger's polls are the only aiohttp reads (the hook's sync path uses requests).
        "trigger_polls": len(emulator.server.requests_to("/api/v2/statements/", transport="async")),
        "handles": [e.external_id for e in emulator.ledger.submissions()],
        "tries": _tries(dag_run.run_id, dag.dag_id),
        "xcoms": _xcoms(dag_run.run_id, dag.dag_id),
        "emulator_errors": [repr(e) for e in emulator.server.errors],
    }


def main() -> int:
    specs = [tuple(arg.split(":")) for arg in sys.argv[1:]]
    if not specs or any(len(s) != 3 for s in specs):
        raise SystemExit(__doc__)

    from airflow_durable.testing import SnowflakeEmulator

    emulator = SnowflakeEmulator().start()
    emulator.install_connection(os.environ.__setitem__, conn_id="snowflake_default")

    import importlib

    module = importlib.import_module("durable_snowflake_e2e")
    for impl, path, scenario in specs:
        summary = run(emulator, module, impl, path, scenario)
        print("E2E-SUMMARY " + json.dumps(summary, default=str), flush=True)
    emulator.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main())
