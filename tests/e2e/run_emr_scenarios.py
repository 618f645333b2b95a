"""Run the EMR end-to-end scenarios of one EMR flavour through real ``dag.test()``; print JSON summaries.

Usage: ``python -m tests.e2e.run_emr_scenarios steps|serverless|containers``

One process runs four DAG runs (scenarios × {durable, upstream} operator), each against the same
moto-backed emulator on loopback, reached by the unmodified provider hook (botocore) and trigger
(aiobotocore) through ``aws_default``'s ``endpoint_url``:

* ``crash_after_defer`` — try 1 deferred; the trigger's first status read fails (HTTP 500, which the
  provider's wait does not retry), so the deferred try fails while the job keeps running. The retry
  must reconnect and defer again, submitting nothing.
* ``already_succeeded`` — the same failure, but the job finishes meanwhile: the retry must return the
  provider's result without submitting or deferring.
"""

from __future__ import annotations

import argparse
import io
import json
import os
import sys
from contextlib import redirect_stderr, redirect_stdout
from datetime import datetime, timezone
from typing import Any

from tests.e2e.run_scenario import DECISIONS

FLAVOURS = {
    # emulator class name, status read of the trigger, submit operation, succeeded state
    "steps": ("EmrEmulator", "/elasticmapreduce/ListSteps", "AddJobFlowSteps", "COMPLETED"),
    "serverless": ("EmrServerlessEmulator", "/emr-serverless/GetJobRun", "StartJobRun", "SUCCESS"),
    "containers": ("EmrContainersEmulator", "/emr-containers/DescribeJobRun", "StartJobRun", "COMPLETED"),
}


def _date_arg() -> str:
    import inspect

    from airflow.models.dag import DAG

    # Airflow 3 names it logical_date, Airflow 2 execution_date.
    return "logical_date" if "logical_date" in inspect.signature(DAG.test).parameters else "execution_date"


def main() -> int:
    date_arg = _date_arg()
    parser = argparse.ArgumentParser()
    parser.add_argument("flavour", choices=sorted(FLAVOURS))
    args = parser.parse_args()
    emulator_name, status_path, submit_op, succeeded = FLAVOURS[args.flavour]

    from airflow_durable.testing import emr

    emulator = getattr(emr, emulator_name)()
    emulator.start()
    emulator.install_connection(os.environ.__setitem__, conn_id="aws_default")
    os.environ["E2E_EMR_CLUSTER_ID"] = getattr(emulator, "cluster_id", "")
    os.environ["E2E_EMR_APPLICATION_ID"] = getattr(emulator, "application_id", "")
    os.environ["E2E_EMR_VIRTUAL_CLUSTER_ID"] = getattr(emulator, "virtual_cluster_id", "")

    import importlib

    module = importlib.import_module("durable_emr_e2e")
    day = 1
    for impl in ("durable", "upstream"):
        for scenario in ("crash_after_defer", "already_succeeded"):
            emulator.ledger.clear()
            emulator.faults.clear()
            emulator.lifecycle = ["PENDING"] + ["RUNNING"] * 3 + [succeeded]

            def fail_once(request: Any, _scenario: str = scenario) -> bool:
                if _scenario == "already_succeeded":  # the job finishes while the failed try is down
                    emulator.set_state(emulator.latest_job().job_id, succeeded)
                return True

            emulator.faults.add(
                method=None,
                path_contains=status_path,
                status=500,
                times=1,
                transport="async",
                predicate=fail_once,
            )
            polls_before = len(emulator.server.requests_to(status_path, transport="async"))
            dag = module.dags[f"emr_e2e_{args.flavour}_{impl}"]
            log = io.StringIO()
            with redirect_stdout(log), redirect_stderr(log):
                dag_run = dag.test(**{date_arg: datetime(2026, 1, day, tzinfo=timezone.utc)})
            day += 1
            output = log.getvalue()
            sys.stderr.write(output[-8000:])
            summary = {
                "operator": f"emr_{args.flavour}" + ("" if impl == "durable" else "(upstream)"),
                "impl": impl,
                "scenario": scenario,
                "path": "deferrable",
                "dag_run_state": str(getattr(dag_run, "state", None)),
                "submissions": len(emulator.ledger.submissions()),
                "submit_calls": len([e for e in emulator.ledger.entries if e.operation == submit_op]),
                "tokens": [e.token for e in emulator.ledger.submissions()],
                "decisions": [d for line in output.splitlines() for d in DECISIONS if f"[{d}]" in line],
                "trigger_polls": len(emulator.server.requests_to(status_path, transport="async"))
                - polls_before,
                "tries": _tries(dag_run.run_id, dag.dag_id),
                "result": _return_value(dag_run.run_id, dag.dag_id),
            }
            print("E2E-SUMMARY " + json.dumps(summary, default=str))
    emulator.stop()
    return 0


def _tries(run_id: str, dag_id: str) -> list[dict[str, Any]]:
    from airflow.settings import Session
    from sqlalchemy import text

    with Session() as session:
        rows = session.execute(
            text(
                "SELECT try_number, state FROM task_instance_history WHERE task_id='durable_job' "
                "AND run_id=:run AND dag_id=:dag UNION ALL SELECT try_number, state FROM task_instance "
                "WHERE task_id='durable_job' AND run_id=:run AND dag_id=:dag ORDER BY 1"
            ),
            {"run": run_id, "dag": dag_id},
        ).all()
    return [{"try": r[0], "state": r[1]} for r in rows]


def _return_value(run_id: str, dag_id: str) -> Any:
    from airflow.settings import Session
    from sqlalchemy import text

    with Session() as session:
        row = session.execute(
            text(
                "SELECT value FROM xcom WHERE task_id='durable_job' AND key='return_value' "
                "AND run_id=:run AND dag_id=:dag"
            ),
            {"run": run_id, "dag": dag_id},
        ).first()
    if row is None:
        return None
    value = row[0]
    try:
        return json.loads(value)
    except (TypeError, ValueError):
        return value


if __name__ == "__main__":
    sys.exit(main())
