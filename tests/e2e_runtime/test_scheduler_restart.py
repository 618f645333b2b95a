"""A graceful restart of the scheduler with the LocalExecutor while a sync task polls (issue 30, item 3).

``systemctl restart`` (or a pod's stop) sends SIGTERM to the scheduler's whole process group: the
LocalExecutor's workers, each a task's supervisor, get it too and forward it to their task process, so
the operator's ``on_kill`` runs. The workers die with the scheduler; what is left of its session is
SIGKILLed (the service's control group, or the pod, ends with it). The new scheduler finds the task
instance still ``running`` with no live scheduler job and resets it (``adopt_or_reset_orphaned_tasks``:
the LocalExecutor adopts nothing; a new task-instance id, state None, ``max_tries`` and the run's
``clear_number`` unchanged), and the task runs again. Neither the stop nor the reset is a user's clear or
mark (DESIGN §8 "Stopped is not cancelled"): the durable operator must end with one Databricks run and
``success``; the provider's operator (``*_upstream``) is measured beside it.

One deployment (LocalExecutor, PostgreSQL where its binaries are installed, as the logical-job
scenarios), both DAGs triggered together, one SIGTERM for both.
"""

from __future__ import annotations

import contextlib
import os
import signal
import time
from pathlib import Path
from typing import Any

import airflow
import pytest

if int(airflow.__version__.split(".")[0]) < 3:
    pytest.skip("real-runtime harness is written for Airflow 3.x component CLI", allow_module_level=True)

from airflow_durable import shims  # noqa: E402

if not shims.DURABLE_RUNTIME:
    pytest.skip("the durable runtime needs the task state store (Airflow >= 3.3)", allow_module_level=True)

from tests.e2e_runtime import actions  # noqa: E402
from tests.e2e_runtime.conftest import SUMMARIES  # noqa: E402
from tests.e2e_runtime.test_logical_job import BASE_ENV, Case, _deploy, _start  # noqa: E402

pytestmark = pytest.mark.runtime

DURABLE = "lj_sched_restart_sync"
UPSTREAM = "lj_sched_restart_sync_upstream"
ENV = {
    **BASE_ENV,
    "AFD_LJ_DAGS": f"{DURABLE},{UPSTREAM}",
    # The new scheduler looks for orphaned task instances every 10 s (default 300 s). The old scheduler
    # ends its job row on SIGTERM, so its task instances are orphans at once; the health threshold keeps
    # its default (30 s): at 10 s the new scheduler, its loop slowed by a loaded machine, once marked its
    # own job failed ("Marked 1 SchedulerJob instances as failed") and reset the retry it was running.
    "AIRFLOW__SCHEDULER__ORPHANED_TASKS_CHECK_INTERVAL": "10",
}
#: How long the stopped scheduler may take to exit after SIGTERM before it is SIGKILLed (systemd's
#: TimeoutStopSec, 90 s by default; Kubernetes' grace, 30 s).
STOP_GRACE = 30.0


def _polling(c: Case) -> Any:
    ti = c.ti()
    run = c.latest()
    return ti is not None and ti["state"] == "running" and run is not None and run.gets >= 3 and ti


def _running_again(c: Case, old: dict[str, Any]) -> Any:
    """A condition: a try other than ``old`` (a reset's new task-instance id, or a later try) is running
    and has polled a running Databricks run twice since it was first seen (the run it submitted or
    reconnected to, not the one try 1 left), or the DAG run ended."""
    seen: dict[str, Any] = {}

    def check() -> Any:
        if c.ended():
            return True
        ti = c.ti()
        run = c.latest()
        if ti is None or ti["state"] != "running" or run is None or run.is_terminal:
            return False
        if ti["id"] == old["id"] and ti["try_number"] == old["try_number"]:
            return False
        key = (ti["id"], run.run_id)
        if seen.get("key") != key:
            seen.update(key=key, gets=run.gets)
            return False
        return run.gets >= seen["gets"] + 2 and ti

    return check


def _restart_scheduler(dep: Any, cases: list[Case]) -> dict[str, Any]:
    """SIGTERM the scheduler's process group, wait for it to exit (SIGKILL after `STOP_GRACE`), SIGKILL
    what is left of its session, start a new scheduler."""
    scheduler = dep.procs["scheduler"]
    stopped = time.monotonic()
    for c in cases:
        c.note("SIGTERM to the scheduler's process group")
    dep.kill_component("scheduler", sig=signal.SIGTERM)  # waits up to 60 s, then SIGKILLs the group
    took = round(time.monotonic() - stopped, 1)
    left = [pid for pid in dep.stray_pids() if _session(pid) == scheduler.pid]
    for pid in left:
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGKILL)
    for c in cases:
        c.note(f"scheduler exited after {took} s; SIGKILLed what was left of its session: {left}")
    dep.start_component("scheduler")
    for c in cases:
        c.note("a new scheduler started")
    return {"scheduler_exit_seconds": took, "killed_after_exit": left}


def _session(pid: int) -> int | None:
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    return int(stat[stat.rindex(")") + 2 :].split()[3])


def run_scheduler_restart() -> dict[str, Any]:
    started = time.monotonic()
    results: dict[str, Any] = {}
    with actions.installed_databricks_emulator() as dbx:
        dep = _deploy(ENV, {})
        try:
            _start(dep, (DURABLE, UPSTREAM))
            cases = [Case(dep, dbx, DURABLE), Case(dep, dbx, UPSTREAM, "upstream")]
            for c in cases:
                c.trigger()
            before = {c.dag_id: c.wait(lambda c=c: _polling(c), "try 1 polling its run") for c in cases}
            stop = _restart_scheduler(dep, cases)
            for c in cases:
                old = before[c.dag_id]
                c.result.update(stop, ti_before={k: str(v) for k, v in old.items()})
                # The reset (or, had the new scheduler adopted it, a retry) runs the task again: a task
                # instance of another id, or a later try, running and polling a run.
                again = c.wait(
                    _running_again(c, old),
                    "the task running again after the restart (or its DAG run ended)",
                    timeout=180,
                    until_end=True,
                )
                c.note(f"running again: {again}")
                c.result["ti_after"] = {
                    k: str(v) for k, v in (again if isinstance(again, dict) else {}).items()
                }
                c.finish_and_wait_end()
                results[c.dag_id] = c.conclude()
                results[c.dag_id]["logs"] = c.logs()[-8000:]
        finally:
            dep.stop()
            results["stray_pids"] = dep.stray_pids()
    results["seconds"] = round(time.monotonic() - started, 1)
    return results


@pytest.fixture(scope="module")
def restart() -> dict[str, Any]:
    results = run_scheduler_restart()
    SUMMARIES.append({"scenario": "scheduler restart (LocalExecutor)", "seconds": results["seconds"]})
    for dag_id in (DURABLE, UPSTREAM):
        r = results.get(dag_id) or {}
        if r:
            SUMMARIES.append(
                {
                    "scenario": "scheduler restart, sync",
                    "operator": r["operator"],
                    "submissions": r["created"],
                    "tries": r["tries"],
                    "seconds": r["seconds"],
                    "final": r["final_state"],
                    "cancelled": r["cancelled"],
                    "decisions": r["decisions"],
                }
            )
    return results


def _why(r: dict[str, Any]) -> str:
    shown = {k: v for k, v in r.items() if k != "logs"}
    return f"\n{shown}\n----- task logs -----\n{r.get('logs', '')[-6000:]}"


def test_a_scheduler_restart_keeps_one_job_and_succeeds(restart: dict[str, Any]) -> None:
    r = restart[DURABLE]
    w = _why(r)
    assert r["ti_after"].get("id") != r["ti_before"]["id"], f"the task instance was not reset{w}"
    assert r["created"] == 1, f"a graceful stop is not a cancel: the task must reconnect to its run{w}"
    assert r["cancelled"] == [], w
    assert r["final_state"] == "success", w
    assert r["left_running"] == [], w
    assert r["xcom_run_id"] == r["runs"][0], w


def test_upstream_scheduler_restart_is_measured(restart: dict[str, Any]) -> None:
    r = restart[UPSTREAM]
    assert r["final_state"] in ("success", "failed"), _why(r)  # measured: the summary shows its runs
    assert r["left_running"] == [], _why(r)


def test_the_restart_leaves_no_process(restart: dict[str, Any]) -> None:
    assert restart["stray_pids"] == []
