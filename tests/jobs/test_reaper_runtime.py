"""The reaper on a real deployment: jobs that no process will ever end are ended within minutes, by a DAG.

One deployment (api-server, scheduler, dag-processor, triggerer; LocalExecutor; PostgreSQL where its
binaries are installed, else SQLite) with the simple auth manager and a read-only user ``reaper`` whose
credentials the reaper DAG takes from its Airflow connection, against the Databricks emulator. The DAGs
are in ``reaper_dags/reaper_scenarios.py``:

1. ``rp_up_for_retry``'s try fails into ``up_for_retry`` with its job running: a reaper run passes and
   leaves the job alone. The user marks it failed: the reaper cancels the job.
2. The triggerer is stopped, ``rp_marked_deferred`` defers (its trigger row has no triggerer), the user
   marks it failed, the triggerer comes back: no trigger ever ran, and the reaper cancels the job.
3. ``rp_tracked`` stays deferred throughout: its job is never touched.
4. ``rp_dry``'s job, outside ``rp_reaper``'s scope: the dry-run reaper reports it and cancels nothing; a
   reaper whose API password is wrong fails and cancels nothing; a run that cannot read the job's status
   (the emulator answers 400) and a run whose cancel call fails (500) fail and cancel nothing; the next
   run cancels it.

Everything is one test so that pytest-xdist can never split it over two deployments.
"""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from datetime import datetime
from pathlib import Path
from typing import Any

import airflow
import pytest

if int(airflow.__version__.split(".")[0]) < 3:
    pytest.skip("the real-deployment harness drives Airflow 3's components", allow_module_level=True)

from airflow_durable import shims  # noqa: E402

if not shims.DURABLE_RUNTIME:
    pytest.skip("durable records need Airflow >= 3.3's task state store", allow_module_level=True)

from airflow_durable.demo.deployment import Deployment, DeploymentError  # noqa: E402
from airflow_durable.jobs.api import AirflowApi  # noqa: E402
from airflow_durable.testing.databricks import DatabricksEmulator  # noqa: E402
from tests.e2e_runtime import actions  # noqa: E402

pytestmark = pytest.mark.runtime

DAGS = Path(__file__).resolve().parent / "reaper_dags"
TASK_ID = "submit_run"
WORKLOADS = ("rp_marked_deferred", "rp_up_for_retry", "rp_tracked", "rp_dry")
REAPERS = ("rp_reaper", "rp_reaper_dry", "rp_reaper_badauth")
USERS = {"admin": ("ADMIN", "admin-pw"), "reaper": ("VIEWER", "reaper-pw")}
#: runs/get calls the provider's deferrable path makes before it defers (job id, page url, state).
SYNC_GETS_BEFORE_DEFER = 3
#: rp_reaper runs every minute: a mark is followed by a cancel within one period plus a task's start and
#: run. Generous for a loaded 2-core machine.
MARK_TO_CANCEL_LIMIT = 240.0
WAIT = 300.0


@pytest.fixture(scope="module")
def emulator() -> Iterator[DatabricksEmulator]:
    with actions.installed_databricks_emulator() as dbx:
        yield dbx


@pytest.fixture(scope="module")
def deployment(emulator: DatabricksEmulator) -> Iterator[Deployment]:
    dep = Deployment(
        dags_folder=DAGS,
        database=actions.chosen_database("AFD_REAPER_DATABASE"),
        home_prefix="afd-reaper-home-",
        extra_env={
            "AIRFLOW__CORE__SIMPLE_AUTH_MANAGER_ALL_ADMINS": "False",
            "AIRFLOW__CORE__SIMPLE_AUTH_MANAGER_USERS": ",".join(f"{u}:{r}" for u, (r, _) in USERS.items()),
            "AIRFLOW__SCHEDULER__TASK_INSTANCE_HEARTBEAT_TIMEOUT": "300",
            "AIRFLOW__WORKERS__EXECUTION_API_TIMEOUT": "60",
            "AIRFLOW__CORE__PARALLELISM": "6",
        },
    )
    passwords = dep.home / "passwords.json"
    passwords.write_text(json.dumps({user: pw for user, (_, pw) in USERS.items()}))
    api = f"127.0.0.1:{dep.api_port}"
    dep.env.update(
        {
            "AIRFLOW__CORE__SIMPLE_AUTH_MANAGER_PASSWORDS_FILE": str(passwords),
            # What a user configures for the reaper: the API as the workers reach it, a read-only user.
            "AIRFLOW_CONN_AIRFLOW_DURABLE_API": f"http://reaper:{USERS['reaper'][1]}@{api}",
            "AIRFLOW_CONN_AIRFLOW_DURABLE_API_BAD": f"http://reaper:wrong-pw@{api}",
        }
    )
    try:
        dep.start(dag_ids=(*WORKLOADS, *REAPERS), timeout=240)
        yield dep
    finally:
        dep.stop()
    assert not dep.stray_pids(), "a deployment process outlived the test"


def _epoch(value: Any) -> float | None:
    if value is None:
        return None
    if isinstance(value, str):
        value = datetime.fromisoformat(value.replace(" ", "T").replace("Z", "+00:00"))
    return float(value.timestamp())


def _run_logs(deployment: Deployment, dag_id: str, run_ids: list[str], chars: int = 6000) -> str:
    """The task logs of ``run_ids`` of ``dag_id`` (a failed run's own attempts, not every run's)."""
    parts = deployment.task_logs(dag_id, chars=chars).split("----- ")
    return "----- ".join(p for p in parts if any(f"run_id={r}" in p.split(" -----", 1)[0] for r in run_ids))


class Harness:
    def __init__(self, dep: Deployment, dbx: DatabricksEmulator) -> None:
        self.dep, self.dbx = dep, dbx
        self.api = AirflowApi.connect(
            f"http://127.0.0.1:{dep.api_port}", username="admin", password=USERS["admin"][1]
        )
        stamp = int(time.time() * 1000)
        self.run_ids = {dag: f"rp__{dag}__{stamp}" for dag in WORKLOADS}

    def run(self, dag_id: str) -> Any:
        runs = [r for r in list(self.dbx.runs.values()) if r.run_name.partition(" [afd-ti-")[0] == dag_id]
        assert len(runs) <= 1, (dag_id, [r.run_id for r in runs])
        return runs[0] if runs else None

    def owns(self, dag_id: str, after_gets: int = 0) -> Any:
        def predicate(request: Any) -> bool:
            try:
                run = self.dbx.runs.get(int(request.params.get("run_id")))
            except (TypeError, ValueError):
                return False
            return (
                run is not None
                and run.run_name.partition(" [afd-ti-")[0] == dag_id
                and run.gets >= after_gets
            )

        return predicate

    def cancel_calls(self, dag_id: str) -> list[float]:
        run = self.run(dag_id)
        return sorted(
            e.at for e in self.dbx.ledger.select(operation="runs/cancel") if e.external_id == run.run_id
        )

    def trigger(self, dag_id: str, run_id: str | None = None, conf: dict[str, Any] | None = None) -> str:
        run_id = run_id or self.run_ids[dag_id]
        body: dict[str, Any] = {"dag_run_id": run_id, "logical_date": None}
        if conf is not None:
            body["conf"] = conf
        self.api.request("POST", f"/api/v2/dags/{dag_id}/dagRuns", json=body)
        return run_id

    def mark_failed(self, dag_id: str) -> float:
        self.api.request(
            "PATCH",
            f"/api/v2/dags/{dag_id}/dagRuns/{self.run_ids[dag_id]}/taskInstances/{TASK_ID}",
            json={"new_state": "failed"},
        )
        return time.time()

    def ti_state(self, dag_id: str) -> str | None:
        ti = self.dep.task_instance(dag_id, self.run_ids[dag_id], TASK_ID)
        return ti.state if ti else None

    def reaper_runs(self, dag_id: str = "rp_reaper") -> list[dict[str, Any]]:
        rows = self.dep.query(
            "SELECT run_id, state, start_date, end_date FROM dag_run WHERE dag_id=? ORDER BY id", (dag_id,)
        )
        out = []
        for run_id, state, start, end in rows:
            xcom = self.dep.xcoms(dag_id, run_id, "reap").get("return_value")
            out.append(
                {"run_id": run_id, "state": state, "start": _epoch(start), "end": _epoch(end), "report": xcom}
            )
        return out

    def wait(self, condition: Any, what: str, timeout: float = WAIT) -> Any:
        try:
            return self.dep.wait_for(condition, timeout, what, interval=1.0)
        except DeploymentError as err:
            logs = "\n".join(self.dep.task_logs(d, chars=3000) for d in (*WORKLOADS, *REAPERS))
            raise DeploymentError(f"{err}\n{logs}") from None

    def reaper_run_after(self, since: float, dag_id: str = "rp_reaper") -> dict[str, Any] | None:
        """The first run of ``dag_id`` that started after ``since`` and finished."""
        return next(
            (
                r
                for r in self.reaper_runs(dag_id)
                if r["start"] and r["start"] > since and r["state"] in ("success", "failed")
            ),
            None,
        )

    def cancelled_by(self, dag_id: str) -> list[dict[str, Any]]:
        """The rp_reaper runs whose report says they cancelled ``dag_id``'s job, with that entry."""
        found = []
        for r in self.reaper_runs():
            for entry in (r["report"] or {}).get("cancelled", []):
                if entry["dag_id"] == dag_id:
                    found.append({**r, "entry": entry})
        return found

    def finished_run(self, dag_id: str, run_id: str) -> str:
        return self.wait(
            lambda: (s := self.dep.dag_run_state(dag_id, run_id)) in ("success", "failed") and s,
            f"{dag_id} run {run_id} to finish",
        )


def test_reaper_ends_the_jobs_no_process_will_end(
    deployment: Deployment, emulator: DatabricksEmulator
) -> None:
    h = Harness(deployment, emulator)
    numbers: dict[str, Any] = {"database": deployment.database}

    # --- 1. up_for_retry with its job running; rp_dry failed with its job running; rp_tracked deferred -----
    for dag in ("rp_up_for_retry", "rp_dry"):
        emulator.faults.add(
            method="GET",
            path_contains="jobs/runs/get",
            status=400,
            times=1,
            transport="async",
            predicate=h.owns(dag, after_gets=SYNC_GETS_BEFORE_DEFER + 2),
        )
    for dag in ("rp_up_for_retry", "rp_tracked", "rp_dry"):
        h.trigger(dag)
    h.wait(
        lambda: (
            h.ti_state("rp_up_for_retry") == "up_for_retry"
            and h.ti_state("rp_dry") == "failed"
            and h.ti_state("rp_tracked") == "deferred"
        ),
        "rp_up_for_retry up for retry, rp_dry failed, rp_tracked deferred",
    )
    for dag in ("rp_up_for_retry", "rp_tracked", "rp_dry"):
        assert h.run(dag) is not None and not h.run(dag).is_terminal, (dag, h.run(dag))
    retry_since = time.time()
    passed = h.wait(
        lambda: h.reaper_run_after(retry_since), "a reaper run while rp_up_for_retry is up for retry"
    )
    assert passed["state"] == "success", passed
    assert h.ti_state("rp_up_for_retry") == "up_for_retry"
    assert not h.cancel_calls("rp_up_for_retry") and h.run("rp_up_for_retry").state == "RUNNING"
    assert not h.cancel_calls("rp_tracked") and not h.cancel_calls("rp_dry"), "a reaper cancelled too much"

    # --- 2. a deferred task marked failed before any triggerer picked its trigger up ------------------------
    before: dict[str, str] = {}
    with deployment.paused("triggerer"):
        h.trigger("rp_marked_deferred")
        h.wait(lambda: h.ti_state("rp_marked_deferred") == "deferred", "rp_marked_deferred deferred")
        (triggerer_id,) = deployment.query(
            "SELECT t.triggerer_id FROM trigger t JOIN task_instance ti ON ti.trigger_id = t.id "
            "WHERE ti.dag_id=? AND ti.run_id=?",
            ("rp_marked_deferred", h.run_ids["rp_marked_deferred"]),
        )[0]
        assert triggerer_id is None, "the stopped triggerer picked the trigger up"
        before = {dag: h.run(dag).state for dag in ("rp_marked_deferred", "rp_up_for_retry")}
        marked = {dag: h.mark_failed(dag) for dag in ("rp_marked_deferred", "rp_up_for_retry")}
        for dag in marked:
            h.finished_run(dag, h.run_ids[dag])
        numbers["runs_ended_after_mark_s"] = round(time.time() - max(marked.values()), 1)
    resumed = time.time()
    assert h.ti_state("rp_marked_deferred") == "failed" and h.ti_state("rp_up_for_retry") == "failed"

    h.wait(
        lambda: all(h.cancel_calls(dag) for dag in marked),
        "the reaper to cancel both marked tasks' jobs",
        timeout=MARK_TO_CANCEL_LIMIT + 60,
    )
    for dag, at in marked.items():
        run = h.run(dag)
        h.wait(lambda run=run: run.state == "TERMINATED:CANCELED", f"{dag}'s job cancelled")
        calls = h.cancel_calls(dag)
        assert len(calls) == 1, (dag, calls)
        seconds = round(calls[0] - at, 1)
        numbers[dag] = {
            "job": run.run_id,
            "before": before[dag],
            "after": run.state,
            "mark_to_cancel_s": seconds,
            "resume_to_cancel_s": round(calls[0] - resumed, 1),
        }
        assert seconds <= MARK_TO_CANCEL_LIMIT, (dag, seconds)
        by = h.wait(
            lambda dag=dag: [b for b in h.cancelled_by(dag) if b["state"] in ("success", "failed")],
            f"the reaper's run that cancelled {dag}'s job to end",
            timeout=120,
        )
        assert len(by) == 1 and by[0]["state"] == "success", by
        entry = by[0]["entry"]
        assert entry["external_id"] == run.run_id and entry["orphan"] == "task instance failed", entry
        assert "its task instance is failed" in entry["reason"] and "TERMINATED:CANCELED" in entry["reason"]
        numbers[dag]["reaper_run"] = by[0]["run_id"]

    # --- 3. the deferred task's job was never touched; rp_dry is outside rp_reaper's scope ------------------
    assert h.ti_state("rp_tracked") == "deferred" and not h.cancel_calls("rp_tracked")
    assert h.run("rp_tracked").state == "RUNNING"
    assert not h.cancel_calls("rp_dry") and h.run("rp_dry").state == "RUNNING"
    failed_runs = [r for r in h.reaper_runs() if r["state"] == "failed"]
    failed_logs = _run_logs(deployment, "rp_reaper", [r["run_id"] for r in failed_runs])
    assert not failed_runs, (failed_runs, failed_logs)
    numbers["rp_reaper_runs"] = len(h.reaper_runs())

    # --- 4. dry run, an unreadable Airflow, a failing cancel, then the cancel ------------------------------
    dry = h.trigger("rp_reaper_dry", "dry-1")
    assert h.finished_run("rp_reaper_dry", dry) == "success"
    report = deployment.xcoms("rp_reaper_dry", dry, "reap")["return_value"]
    assert report["dry_run"] is True and report["cancelled"] == [] and report["errors"] == [], report
    assert [(o["dag_id"], o["external_id"]) for o in report["would_cancel"]] == [
        ("rp_dry", h.run("rp_dry").run_id)
    ]
    assert not h.cancel_calls("rp_dry") and h.run("rp_dry").state == "RUNNING"

    bad = h.trigger("rp_reaper_badauth", "bad-1")
    assert h.finished_run("rp_reaper_badauth", bad) == "failed"
    log = deployment.task_logs("rp_reaper_badauth", chars=20000)
    assert "could not reach Airflow's REST API; nothing cancelled" in log and "auth/token" in log, log[-3000:]
    assert not h.cancel_calls("rp_dry") and h.run("rp_dry").state == "RUNNING"

    unreadable = emulator.faults.add(
        method="GET",
        path_contains="jobs/runs/get",
        status=400,
        times=None,
        transport="sync",
        predicate=h.owns("rp_dry"),
    )
    blind = h.trigger("rp_reaper_dry", "status-fails", conf={"dry_run": False})
    assert h.finished_run("rp_reaper_dry", blind) == "failed"
    assert unreadable.hits >= 1 and not h.cancel_calls("rp_dry") and h.run("rp_dry").state == "RUNNING"
    log = deployment.task_logs("rp_reaper_dry", chars=40000)
    assert "could not read its status" in log, log[-3000:]
    unreadable.remove()

    refused = emulator.faults.add(
        method="POST", path_contains="jobs/runs/cancel", status=500, times=None, predicate=h.owns("rp_dry")
    )
    failing = h.trigger("rp_reaper_dry", "cancel-fails", conf={"dry_run": False})
    assert h.finished_run("rp_reaper_dry", failing) == "failed"
    assert refused.hits >= 1 and h.run("rp_dry").state == "RUNNING"
    log = deployment.task_logs("rp_reaper_dry", chars=40000)
    assert "ERROR databricks job" in log and "cancel failed" in log, log[-3000:]
    refused.remove()
    numbers["rp_dry_before"] = h.run("rp_dry").state
    ok = h.trigger("rp_reaper_dry", "cancel-ok", conf={"dry_run": False})
    assert h.finished_run("rp_reaper_dry", ok) == "success"
    report = deployment.xcoms("rp_reaper_dry", ok, "reap")["return_value"]
    assert report["dry_run"] is False and [o["dag_id"] for o in report["cancelled"]] == ["rp_dry"], report
    assert h.run("rp_dry").state == "TERMINATED:CANCELED"
    numbers["rp_dry_after"] = h.run("rp_dry").state

    # End the tracked job so the deployment stops with nothing in flight.
    emulator.set_state(h.run("rp_tracked").run_id, "TERMINATED:SUCCESS")
    h.wait(lambda: h.ti_state("rp_tracked") == "success", "rp_tracked to succeed")
    assert not h.cancel_calls("rp_tracked")
    print("REAPER-NUMBERS " + json.dumps(numbers, default=str))
