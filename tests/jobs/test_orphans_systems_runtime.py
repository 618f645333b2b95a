"""On a real deployment (PostgreSQL; api-server, scheduler, dag-processor, triggerer; LocalExecutor) and the
Databricks emulator: a DAG run deleted while its Databricks run goes on is found by ``airflow-durable
orphans`` with an empty cache, from the system itself, shown by the "Durable jobs" page's API, and ended
by ``--cancel``; the run a deferred task still waits for is never touched. Job counts before and after are
printed. The same for dbt Cloud (its emulator on HTTPS, the run's identity in its cause), on the same
deployment.
"""

from __future__ import annotations

import glob
import json
import os
import shutil
import subprocess
import sys
import time
from collections.abc import Iterator
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
from airflow_durable.identity_tags import task_identity  # noqa: E402
from airflow_durable.jobs.api import AirflowApi  # noqa: E402
from airflow_durable.testing.databricks import DatabricksEmulator  # noqa: E402
from airflow_durable.testing.dbt_cloud import DbtCloudEmulator  # noqa: E402
from tests.e2e_runtime import actions  # noqa: E402
from tests.jobs.dags_systems.afd_sys_dbt_orphans import TASK_ID as DBT_TASK_ID  # noqa: E402
from tests.jobs.dags_systems.afd_sys_dbt_orphans import job_id_of  # noqa: E402

pytestmark = [
    pytest.mark.runtime,
    pytest.mark.skipif(
        not (glob.glob("/usr/lib/postgresql/*/bin/initdb") or shutil.which("initdb")),
        reason="needs the PostgreSQL server binaries (apt-get install -y postgresql)",
    ),
]

DAGS = Path(__file__).resolve().parent / "dags_systems"
REPO = Path(__file__).resolve().parents[2]
TASK_ID = "submit_run"
DELETED, TRACKED = "afd_sys_deleted", "afd_sys_tracked"
DBT_DELETED, DBT_TRACKED = "afd_sys_dbt_deleted", "afd_sys_dbt_tracked"
#: runs/get calls the deferrable path makes before it defers (job id, page url, state).
SYNC_GETS_BEFORE_DEFER = 3
BUDGET = 300.0


@pytest.fixture(scope="module")
def emulator() -> Iterator[DatabricksEmulator]:
    with actions.installed_databricks_emulator() as dbx:
        yield dbx


@pytest.fixture(scope="module")
def dbt() -> Iterator[DbtCloudEmulator]:
    """The dbt Cloud emulator, runs RUNNING until the test ends them, one dbt Cloud job per DAG; its
    connection and CA trust in this process's environment before the components start (they inherit it),
    restored after."""
    emulator = DbtCloudEmulator(lifecycle=["QUEUED", "RUNNING"]).start()
    for dag_id in (DBT_DELETED, DBT_TRACKED):
        emulator.add_job(job_id=job_id_of(dag_id), name=dag_id)
    values = emulator.environ()
    previous = {name: os.environ.get(name) for name in values}
    os.environ.update(values)
    try:
        yield emulator
    finally:
        emulator.stop()
        for name, value in previous.items():
            if value is None:
                os.environ.pop(name, None)
            else:
                os.environ[name] = value


@pytest.fixture(scope="module")
def deployment(emulator: DatabricksEmulator, dbt: DbtCloudEmulator) -> Iterator[Deployment]:
    dep = Deployment(
        dags_folder=DAGS,
        database="postgres",
        home_prefix="afd-orphans-sys-",
        extra_env={"AIRFLOW__SCHEDULER__TASK_INSTANCE_HEARTBEAT_TIMEOUT": "300"},
    )
    try:
        dep.start(dag_ids=(DELETED, TRACKED, DBT_DELETED, DBT_TRACKED), timeout=180)
        yield dep
    finally:
        dep.stop()
    assert not dep.stray_pids(), "a deployment process outlived the test"


def _runs(dbx: DatabricksEmulator, dag_id: str) -> list[Any]:
    return [r for r in list(dbx.runs.values()) if r.run_name.partition(" [afd-ti-")[0] == dag_id]


def _active(dbx: DatabricksEmulator) -> int:
    return sum(1 for r in list(dbx.runs.values()) if not r.is_terminal)


def test_a_deleted_runs_job_is_found_on_its_system_and_cancelled(
    deployment: Deployment, emulator: DatabricksEmulator, tmp_path: Path
) -> None:
    dep, dbx = deployment, emulator
    url = f"http://127.0.0.1:{dep.api_port}"
    api = AirflowApi.connect(url)
    deadline = time.monotonic() + BUDGET
    stamp = int(time.time() * 1000)
    run_ids = {DELETED: f"sys__{DELETED}__{stamp}", TRACKED: f"sys__{TRACKED}__{stamp}"}

    def wait(condition: Any, what: str) -> Any:
        try:
            return dep.wait_for(condition, deadline - time.monotonic(), what)
        except DeploymentError as err:
            logs = "\n".join(dep.task_logs(d, chars=2500) for d in run_ids)
            raise DeploymentError(f"{err}\n{logs}") from None

    def state(dag_id: str) -> str | None:
        ti = dep.task_instance(dag_id, run_ids[dag_id], TASK_ID)
        return ti.state if ti else None

    def cli(*args: str) -> subprocess.CompletedProcess[str]:
        exe = Path(sys.executable).with_name("airflow-durable")
        env = {
            **os.environ,
            "AIRFLOW_DURABLE_API_URL": url,
            "XDG_CACHE_HOME": str(tmp_path / "cache"),  # empty, and --no-cache keeps it so
            "COLUMNS": "250",
            "PYTHONWARNINGS": "ignore",
            # The command of this checkout (a worktree sharing another checkout's venv has that one's).
            "PYTHONPATH": os.pathsep.join(p for p in (str(REPO), os.environ.get("PYTHONPATH")) if p),
        }
        return subprocess.run(
            [str(exe), *args], env=env, capture_output=True, text=True, timeout=120, stdin=subprocess.DEVNULL
        )

    # The trigger of DELETED fails once the task has deferred: the task fails, its run goes on.
    def owned(request: Any) -> bool:
        try:
            run = dbx.runs.get(int(request.params.get("run_id")))
        except (TypeError, ValueError):
            return False
        return (
            run is not None
            and run.run_name.partition(" [afd-ti-")[0] == DELETED
            and run.gets >= SYNC_GETS_BEFORE_DEFER + 2
        )

    dbx.faults.add(
        method="GET", path_contains="jobs/runs/get", status=400, times=1, transport="async", predicate=owned
    )
    for dag_id, run_id in run_ids.items():
        dep.trigger(dag_id, run_id)
    wait(lambda: state(DELETED) == "failed" and state(TRACKED) == "deferred", "one failed, one deferred")
    # The API refuses to delete a running DAG run (409): the run ends (failed), its job goes on.
    wait(lambda: dep.dag_run_state(DELETED, run_ids[DELETED]) == "failed", f"{DELETED}'s run to fail")
    (deleted_run,) = _runs(dbx, DELETED)
    (tracked_run,) = _runs(dbx, TRACKED)
    assert not deleted_run.is_terminal and not tracked_run.is_terminal

    # The DAG run is deleted while its job runs: the record goes with it; nothing in Airflow names the job.
    api.request("DELETE", f"/api/v2/dags/{DELETED}/dagRuns/{run_ids[DELETED]}")
    assert dep.dag_run_state(DELETED, run_ids[DELETED]) is None
    before = {"jobs": len(dbx.runs), "active": _active(dbx)}
    print(f"before: {before['jobs']} Databricks runs, {before['active']} active")

    # Without the systems (the cache empty): nothing names it, nothing finds it.
    blind = cli("orphans", "--no-cache", "--no-scan", "--format", "json")
    assert blind.returncode == 0 and json.loads(blind.stdout)["orphans"] == [], (
        blind.stdout + blind.stderr[-2000:]
    )

    # With them: the tracked task's record names the workspace; the deleted run's job carries its identity.
    found = cli("orphans", "--no-cache", "--format", "json")
    assert found.returncode == 1, (found.stdout[-2000:], found.stderr[-3000:])
    document = json.loads(found.stdout)
    (orphan,) = document["orphans"]
    assert orphan["source"] == "system" and orphan["external_id"] == deleted_run.run_id, orphan
    assert orphan["identity"] == task_identity(DELETED, run_ids[DELETED], TASK_ID, -1)
    assert orphan["found_in"] == "databricks:databricks_default" and orphan["live"]["status"] == "RUNNING"
    assert (
        document["scans"]["scanned"] == ["databricks:databricks_default"] and not document["scans"]["errors"]
    )
    # A cold start names the place itself: the same job.
    cold = cli("orphans", "--no-cache", "--scan", "databricks:databricks_default", "--format", "json")
    assert [o["external_id"] for o in json.loads(cold.stdout)["orphans"]] == [deleted_run.run_id]
    text = cli("orphans", "--no-cache")
    print(f"$ airflow-durable orphans --no-cache\n{text.stdout}")
    assert text.returncode == 1 and "1 orphan job(s)" in text.stdout

    # The "Durable jobs" page (its JSON) shows it, with where it was found.
    page = api.request("GET", "/durable-jobs/api/jobs")
    (shown,) = page["orphans"]
    assert shown["external_id"] == deleted_run.run_id and shown["found_in"] == "databricks:databricks_default"

    cancelled = cli("orphans", "--no-cache", "--cancel", "--yes")
    print(f"$ airflow-durable orphans --no-cache --cancel --yes\n{cancelled.stdout}")
    assert cancelled.returncode == 0, cancelled.stdout + cancelled.stderr[-3000:]
    assert deleted_run.cancelled and deleted_run.state == "TERMINATED:CANCELED", deleted_run.state
    assert not tracked_run.cancelled and not tracked_run.is_terminal
    after = {"jobs": len(dbx.runs), "active": _active(dbx)}
    print(f"after: {after['jobs']} Databricks runs, {after['active']} active (the tracked one)")
    assert after == {"jobs": before["jobs"], "active": before["active"] - 1} and after["active"] == 1
    again = cli("orphans", "--no-cache")
    assert again.returncode == 0 and "No orphan jobs" in again.stdout

    # End the tracked job so the deployment stops with nothing in flight.
    dbx.set_state(tracked_run.run_id, "TERMINATED:SUCCESS")
    wait(lambda: state(TRACKED) == "success", f"{TRACKED} to succeed")
    api.close()


def _cli(url: str, tmp_path: Path, *args: str) -> subprocess.CompletedProcess[str]:
    exe = Path(sys.executable).with_name("airflow-durable")
    env = {
        **os.environ,
        "AIRFLOW_DURABLE_API_URL": url,
        "XDG_CACHE_HOME": str(tmp_path / "cache"),  # empty, and --no-cache keeps it so
        "COLUMNS": "250",
        "PYTHONWARNINGS": "ignore",
        # The command of this checkout (a worktree sharing another checkout's venv has that one's).
        "PYTHONPATH": os.pathsep.join(p for p in (str(REPO), os.environ.get("PYTHONPATH")) if p),
    }
    return subprocess.run(
        [str(exe), *args], env=env, capture_output=True, text=True, timeout=120, stdin=subprocess.DEVNULL
    )


def test_a_deleted_runs_dbt_cloud_run_is_found_on_its_system_and_cancelled(
    deployment: Deployment, dbt: DbtCloudEmulator, tmp_path: Path
) -> None:
    """dbt Cloud: the run carries its task instance's identity in its cause. A DAG run deleted while its
    run goes on: ``--no-scan`` (records and an empty cache) finds nothing, the listing of the account the
    tracked task's record names finds it, ``--cancel`` ends it and not the run a deferred task waits for."""
    dep = deployment
    url = f"http://127.0.0.1:{dep.api_port}"
    api = AirflowApi.connect(url)
    deadline = time.monotonic() + BUDGET
    stamp = int(time.time() * 1000)
    run_ids = {DBT_DELETED: f"sys__{DBT_DELETED}__{stamp}", DBT_TRACKED: f"sys__{DBT_TRACKED}__{stamp}"}

    def wait(condition: Any, what: str) -> Any:
        try:
            return dep.wait_for(condition, deadline - time.monotonic(), what)
        except DeploymentError as err:
            logs = "\n".join(dep.task_logs(d, chars=2500) for d in run_ids)
            raise DeploymentError(f"{err}\n{logs}") from None

    def state(dag_id: str) -> str | None:
        ti = dep.task_instance(dag_id, run_ids[dag_id], DBT_TASK_ID)
        return ti.state if ti else None

    def runs(dag_id: str) -> list[Any]:
        return [r for r in list(dbt.jobs.values()) if r.job_id == job_id_of(dag_id)]

    def cli(*args: str) -> subprocess.CompletedProcess[str]:
        return _cli(url, tmp_path, "orphans", "--no-cache", "--system", "dbt-cloud", *args)

    # The trigger of DBT_DELETED gets a 400 on its first poll: it reports an error, the task fails, the
    # run goes on (the operator's own reads are sync: untouched).
    def owned(request: Any) -> bool:
        run_id = request.path.rstrip("/").rpartition("/runs/")[2]
        run = dbt.jobs.get(int(run_id)) if run_id.isdigit() else None
        return run is not None and run.job_id == job_id_of(DBT_DELETED)

    fault = dbt.faults.add(
        method="GET", path_contains="/runs/", status=400, times=1, transport="async", predicate=owned
    )
    for dag_id, run_id in run_ids.items():
        dep.trigger(dag_id, run_id)
    wait(
        lambda: state(DBT_DELETED) == "failed" and state(DBT_TRACKED) == "deferred",
        "one failed, one deferred",
    )
    assert fault.hits == 1
    wait(lambda: dep.dag_run_state(DBT_DELETED, run_ids[DBT_DELETED]) == "failed", "the run to fail")
    (deleted_run,) = runs(DBT_DELETED)
    (tracked_run,) = runs(DBT_TRACKED)
    assert not deleted_run.is_terminal and not tracked_run.is_terminal

    api.request("DELETE", f"/api/v2/dags/{DBT_DELETED}/dagRuns/{run_ids[DBT_DELETED]}")
    assert dep.dag_run_state(DBT_DELETED, run_ids[DBT_DELETED]) is None
    active = sum(1 for r in list(dbt.jobs.values()) if not r.is_terminal)
    print(f"before: {len(dbt.jobs)} dbt Cloud runs, {active} active")

    blind = cli("--no-scan", "--format", "json")
    assert blind.returncode == 0 and json.loads(blind.stdout)["orphans"] == [], (
        blind.stdout + blind.stderr[-2000:]
    )
    found = cli("--format", "json")
    assert found.returncode == 1, (found.stdout[-2000:], found.stderr[-3000:])
    document = json.loads(found.stdout)
    (orphan,) = document["orphans"]
    assert orphan["source"] == "system" and orphan["external_id"] == deleted_run.id, orphan
    assert orphan["identity"] == task_identity(DBT_DELETED, run_ids[DBT_DELETED], DBT_TASK_ID, -1)
    assert (
        orphan["found_in"].startswith("dbt-cloud:dbt_cloud_default") and orphan["live"]["status"] == "RUNNING"
    )
    assert document["unknown"] == [] and not document["scans"]["errors"]

    cancelled = cli("--cancel", "--yes")
    print(f"$ airflow-durable orphans --no-cache --system dbt-cloud --cancel --yes\n{cancelled.stdout}")
    assert cancelled.returncode == 0, cancelled.stdout + cancelled.stderr[-3000:]
    assert deleted_run.cancelled and deleted_run.state == "CANCELLED", deleted_run.state
    assert not tracked_run.cancelled and not tracked_run.is_terminal
    active_after = sum(1 for r in list(dbt.jobs.values()) if not r.is_terminal)
    print(f"after: {len(dbt.jobs)} dbt Cloud runs, {active_after} active (the tracked one)")
    assert active_after == active - 1 == 1
    again = cli()
    assert again.returncode == 0 and "No orphan jobs" in again.stdout, again.stdout + again.stderr[-2000:]

    dbt.set_state(tracked_run.id, "SUCCESS")
    wait(lambda: state(DBT_TRACKED) == "success", f"{DBT_TRACKED} to succeed")
    api.close()
