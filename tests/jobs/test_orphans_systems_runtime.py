"""On a real deployment (PostgreSQL; api-server, scheduler, dag-processor, triggerer; LocalExecutor) and the
Databricks emulator: a DAG run deleted while its Databricks run goes on is found by ``airflow-durable
orphans`` with an empty cache, from the system itself, shown by the "Durable jobs" page's API, and ended
by ``--cancel``; the run a deferred task still waits for is never touched. Job counts before and after are
printed. The same for dbt Cloud (its emulator on HTTPS, the run's identity in its cause), on the same
deployment, and for every other system family with a lookup: Snowflake (one QUERY_HISTORY_BY_USER statement
through the SQL API), BigQuery, Redshift Data, AWS Batch, EMR steps, EMR Serverless and EMR on EKS, each
emulator in its own process as the reliability matrix runs them (``tests/e2e_runtime/emulator_runner.py``),
their DAG runs side by side. Databricks run-now is not here: its runs carry no identity a list call could
find (the catalogue says why), so a run whose record went with its DAG run cannot be found.
"""

from __future__ import annotations

import contextlib
import glob
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
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
from tests.e2e_runtime.emulator_runner import EmulatorProcess, merge_environments  # noqa: E402
from tests.e2e_runtime.matrix import KEYS  # noqa: E402
from tests.jobs.dags_systems.afd_sys_dbt_orphans import TASK_ID as DBT_TASK_ID  # noqa: E402
from tests.jobs.dags_systems.afd_sys_dbt_orphans import job_id_of  # noqa: E402
from tests.jobs.dags_systems.afd_sys_families_orphans import FAMILIES, dag_id_of  # noqa: E402
from tests.jobs.dags_systems.afd_sys_families_orphans import TASK_ID as FAMILY_TASK_ID  # noqa: E402

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
ROLES = ("deleted", "tracked")
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
def families(dbt: DbtCloudEmulator) -> Iterator[dict[str, EmulatorProcess]]:
    """One emulator process per other family (``FAMILIES``), started by the reliability matrix's runner; the
    environment of all of them and of dbt Cloud's (connections, one CA bundle, the loopback routes) in this
    process's environment before the components start (they inherit it; the command run by the test needs
    it too), restored after."""
    tmp = Path(tempfile.mkdtemp(prefix="afd-orphans-fam-"))
    procs: dict[str, EmulatorProcess] = {}
    previous: dict[str, str | None] = {}
    try:
        # Side by side: each start waits for its own moto server (seconds each on a loaded machine).
        with ThreadPoolExecutor(len(FAMILIES)) as pool:
            futures = {
                kind: pool.submit(EmulatorProcess, KEYS[kind], [dag_id_of(kind, r) for r in ROLES], tmp)
                for kind in FAMILIES
            }
        # Every one that started is stopped below, whichever failed.
        procs.update({kind: f.result() for kind, f in futures.items() if f.exception() is None})
        for future in futures.values():
            if (failure := future.exception()) is not None:
                raise failure
        env = merge_environments([dbt.environ(), *(p.call("env") for p in procs.values())], tmp)
        previous = {name: os.environ.get(name) for name in env}
        os.environ.update(env)
        yield procs
    finally:
        for name, value in previous.items():
            if value is None:
                os.environ.pop(name, None)
            else:
                os.environ[name] = value
        for proc in procs.values():
            proc.stop()
        shutil.rmtree(tmp, ignore_errors=True)


@pytest.fixture(scope="module")
def deployment(
    emulator: DatabricksEmulator, dbt: DbtCloudEmulator, families: dict[str, EmulatorProcess]
) -> Iterator[Deployment]:
    dep = Deployment(
        dags_folder=DAGS,
        database="postgres",
        home_prefix="afd-orphans-sys-",
        extra_env={
            "AIRFLOW__SCHEDULER__TASK_INSTANCE_HEARTBEAT_TIMEOUT": "300",
            # The families' DAG file imports the Google and Amazon providers: slow on a loaded machine.
            "AIRFLOW__CORE__DAGBAG_IMPORT_TIMEOUT": "300",
        },
    )
    family_dags = tuple(dag_id_of(kind, role) for kind in FAMILIES for role in ROLES)
    try:
        dep.start(dag_ids=(DELETED, TRACKED, DBT_DELETED, DBT_TRACKED, *family_dags), timeout=240)
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
    deployment: Deployment, dbt: DbtCloudEmulator, family_triggered: FamilyPhase, tmp_path: Path
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


# --------------------------------------------------------------------------- every other family
#: From the families' triggers to each one's deleted task failed and tracked task deferred (all side by side).
FAMILY_BUDGET = 360.0
#: How long the cancels may take to show on the emulators; the tracked tasks to succeed once their jobs end.
CANCEL_BUDGET, SUCCESS_BUDGET = 30.0, 120.0


@dataclass
class Family:
    """One family's part of the side-by-side phase: what its test judges."""

    kind: str
    problem: str = ""
    deleted_job: dict[str, Any] = field(default_factory=dict)
    tracked_job: dict[str, Any] = field(default_factory=dict)
    #: Its jobs by the emulator's ledger before the cancel (after the deletion) and after it.
    before: dict[str, int] = field(default_factory=dict)
    after: dict[str, int] = field(default_factory=dict)
    #: Its rows of each command's JSON answer: ``--no-scan``, the scan, the cancel, the scan after it.
    blind: list[dict[str, Any]] = field(default_factory=list)
    found: list[dict[str, Any]] = field(default_factory=list)
    cancelled: list[dict[str, Any]] = field(default_factory=list)
    again: list[dict[str, Any]] = field(default_factory=list)
    tracked_final: str | None = None


@dataclass
class FamilyPhase:
    run_ids: dict[str, str]
    #: ``time.monotonic()`` at the triggers.
    started: float
    families: dict[str, Family] = field(default_factory=dict)
    #: The commands' answers as a whole (exit code, scans), for the messages of a failed test.
    commands: dict[str, Any] = field(default_factory=dict)


@pytest.fixture(scope="module")
def family_triggered(deployment: Deployment, families: dict[str, EmulatorProcess]) -> FamilyPhase:
    """Every family's two DAG runs, triggered at once (both defer). The dbt Cloud test asks for this so that
    they run beside it (it looks at dbt Cloud only)."""
    stamp = int(time.time() * 1000)
    dag_ids = [dag_id_of(kind, role) for kind in FAMILIES for role in ROLES]
    phase = FamilyPhase({dag_id: f"fam__{dag_id}__{stamp}" for dag_id in dag_ids}, time.monotonic())
    for dag_id in dag_ids:
        deployment.trigger(dag_id, phase.run_ids[dag_id])
    return phase


def _counts(proc: EmulatorProcess, dag_ids: list[str]) -> dict[str, int]:
    """A family's jobs by its emulator's ledger: submit calls that started one, jobs, and active ones."""
    state = proc.call("state", dag_ids=dag_ids)
    return {
        "submissions": sum(int(s["submissions"]) for s in state.values()),
        "jobs": sum(len(s["jobs"]) for s in state.values()),
        "active": sum(1 for s in state.values() for job in s["jobs"] if job["running"]),
    }


@pytest.fixture(scope="module")
def family_phase(
    deployment: Deployment,
    families: dict[str, EmulatorProcess],
    family_triggered: FamilyPhase,
    tmp_path_factory: pytest.TempPathFactory,
) -> FamilyPhase:
    """The families side by side, each command once for all of them (``--system`` per family): once each
    deleted task failed and each tracked one deferred, the deleted DAG runs are deleted (their records with
    them), then ``orphans --no-scan``, ``orphans`` (the scans), ``orphans --cancel``, ``orphans`` again, and
    the tracked jobs are let end. What each family saw is its own test's to judge."""
    dep, phase = deployment, family_triggered
    url = f"http://127.0.0.1:{dep.api_port}"
    cache = tmp_path_factory.mktemp("families")
    phase.families = {kind: Family(kind) for kind in FAMILIES}

    def state(dag_id: str) -> str | None:
        ti = dep.task_instance(dag_id, phase.run_ids[dag_id], FAMILY_TASK_ID)
        return ti.state if ti else None

    def settled(kind: str) -> bool:
        deleted = dag_id_of(kind, "deleted")
        return (
            state(deleted) == "failed"
            and state(dag_id_of(kind, "tracked")) == "deferred"
            # The API refuses to delete a running DAG run (409): it must have ended (failed).
            and dep.dag_run_state(deleted, phase.run_ids[deleted]) == "failed"
        )

    def jobs(kind: str, role: str) -> list[dict[str, Any]]:
        dag_id = dag_id_of(kind, role)
        return list(families[kind].call("ids", dag_ids=[dag_id])[dag_id])

    def ended(kind: str) -> Callable[[], bool]:
        return lambda: not jobs(kind, "deleted")[0]["running"]

    def succeeded(dag_id: str) -> Callable[[], bool]:
        return lambda: state(dag_id) == "success"

    # Once a deleted DAG's task deferred, its trigger's next read of the job is refused: the trigger fails,
    # the task fails (no retries), its job goes on.
    armed: set[str] = set()
    waiting = set(FAMILIES)
    while waiting and time.monotonic() < phase.started + FAMILY_BUDGET:
        for kind in waiting - armed:
            if state(dag_id_of(kind, "deleted")) == "deferred":
                families[kind].call("fail_trigger", dag_id=dag_id_of(kind, "deleted"))
                armed.add(kind)
        waiting -= {kind for kind in waiting if settled(kind)}
        time.sleep(1)
    took = time.monotonic() - phase.started
    print(
        f"\nfamilies: {len(FAMILIES) - len(waiting)} of {len(FAMILIES)} settled {took:.0f} s after triggering"
    )
    api = AirflowApi.connect(url)
    try:
        for kind, family in phase.families.items():
            deleted, tracked = dag_id_of(kind, "deleted"), dag_id_of(kind, "tracked")
            hits = families[kind].call("fault_hits").get(deleted, 0)
            if kind in waiting:
                logs = "\n".join(dep.task_logs(d, chars=2500) for d in (deleted, tracked))
                family.problem = (
                    f"not settled in {FAMILY_BUDGET:.0f} s: {deleted}={state(deleted)} "
                    f"{tracked}={state(tracked)}, trigger fault hits {hits}\n{logs}"
                )
                continue
            if hits != 1:
                logs = "\n".join(dep.task_logs(d, chars=2500) for d in (deleted, tracked))
                family.problem = f"the trigger fault struck {hits} times, not once\n{logs}"
                continue
            api.request("DELETE", f"/api/v2/dags/{deleted}/dagRuns/{phase.run_ids[deleted]}")
            if dep.dag_run_state(deleted, phase.run_ids[deleted]) is not None:
                family.problem = f"the DAG run {phase.run_ids[deleted]} outlived its deletion"
                continue
            started = {role: jobs(kind, role) for role in ROLES}
            if [len(started[role]) for role in ROLES] != [1, 1]:
                family.problem = f"one job a DAG run expected: {started}"
                continue
            family.deleted_job, family.tracked_job = started["deleted"][0], started["tracked"][0]
            family.before = _counts(families[kind], [deleted, tracked])
    finally:
        api.close()
    ready = [kind for kind, family in phase.families.items() if not family.problem]
    if not ready:
        return phase

    def orphans(name: str, *args: str) -> dict[str, Any]:
        systems = [arg for kind in ready for arg in ("--system", kind)]
        done = _cli(url, cache, "orphans", "--no-cache", *systems, "--format", "json", *args)
        # The JSON document is the output's last part: provider hooks may log to stdout before it.
        start = 0 if done.stdout.startswith("{") else done.stdout.find("\n{\n") + 1
        try:
            document = json.loads(done.stdout[start:]) if start or done.stdout.startswith("{") else {}
        except ValueError:
            document = {}
        phase.commands[name] = {
            "exit": done.returncode,
            "before_json": done.stdout[: start or len(done.stdout)][-1500:],
            "scans": document.get("scans"),
            "unknown": document.get("unknown"),
            "stderr": done.stderr[-3000:],
        }
        return document

    def rows(document: dict[str, Any], key: str, kind: str) -> list[dict[str, Any]]:
        return [row for row in document.get(key) or [] if row.get("system") == kind]

    blind = orphans("--no-scan", "--no-scan")
    found = orphans("scan")
    cancelled = orphans("--cancel", "--cancel", "--yes")
    for kind in ready:
        family = phase.families[kind]
        family.blind, family.found = rows(blind, "orphans", kind), rows(found, "orphans", kind)
        family.cancelled = rows(cancelled, "cancelled", kind)
        with contextlib.suppress(DeploymentError):  # judged by the test: the job still running
            dep.wait_for(ended(kind), CANCEL_BUDGET, "the cancel")
        family.after = _counts(families[kind], [dag_id_of(kind, role) for role in ROLES])
        family.deleted_job, family.tracked_job = jobs(kind, "deleted")[0], jobs(kind, "tracked")[0]
    again = orphans("again")
    for kind in ready:
        phase.families[kind].again = rows(again, "orphans", kind)
        # End the tracked job so the deployment stops with nothing in flight.
        families[kind].call("finish", dag_id=dag_id_of(kind, "tracked"))
    deadline = time.monotonic() + SUCCESS_BUDGET
    for kind in ready:
        tracked = dag_id_of(kind, "tracked")
        with contextlib.suppress(DeploymentError):
            dep.wait_for(succeeded(tracked), deadline - time.monotonic(), "success")
        phase.families[kind].tracked_final = state(tracked)
    return phase


def _same_job(external_id: Any, emulator_id: str) -> bool:
    """Whether a record's external id (one id, or a list: EMR's steps) names the emulator's job (some
    emulators key a job by a longer form of the id the service answers)."""
    ids = [str(i) for i in (external_id if isinstance(external_id, list) else [external_id])]
    return any(i == emulator_id or i.endswith(emulator_id) or emulator_id.endswith(i) for i in ids)


@pytest.mark.parametrize("kind", FAMILIES)
def test_a_deleted_runs_job_is_found_on_every_family_and_cancelled(
    kind: str, family_phase: FamilyPhase
) -> None:
    """Each family: a DAG run deleted while its job goes on. ``--no-scan`` (records and an empty cache)
    finds nothing; the listing of the place the tracked task's record names finds it by the identity the
    job carries; ``--cancel`` ends it and not the job a deferred task waits for."""
    family = family_phase.families[kind]
    if family.problem:
        pytest.fail(f"{kind}: {family.problem}")
    commands = json.dumps(family_phase.commands, indent=1, default=str)[-6000:]
    deleted, tracked = dag_id_of(kind, "deleted"), dag_id_of(kind, "tracked")
    before, after = family.before, family.after
    print(
        f"\n{kind}: before the cancel {before['jobs']} jobs ({before['submissions']} started), "
        f"{before['active']} active; after it {after['jobs']} jobs ({after['submissions']} started), "
        f"{after['active']} active (the tracked one); the deleted run's job {family.deleted_job['state']}, "
        f"the tracked one {family.tracked_job['state']} until the test ended it"
    )
    assert before["active"] == 2 and before["jobs"] == 2, before
    # Without the systems (the cache empty): nothing names it, nothing finds it.
    assert family.blind == [], (family.blind, commands)
    # With them: the tracked task's record names the place; the deleted run's job carries its identity.
    assert len(family.found) == 1, (family.found, commands)
    (orphan,) = family.found
    assert orphan["source"] == "system" and _same_job(orphan["external_id"], family.deleted_job["id"]), orphan
    assert not _same_job(orphan["external_id"], family.tracked_job["id"]), orphan
    assert orphan["identity"] == task_identity(deleted, family_phase.run_ids[deleted], FAMILY_TASK_ID, -1)
    assert orphan["found_in"].startswith(f"{kind}:") and orphan["live"]["phase"] == "active", orphan
    assert [(c["cancelled"], str(c["external_id"])) for c in family.cancelled] == [
        (True, str(orphan["external_id"]))
    ], (family.cancelled, commands)
    assert not family.deleted_job["running"], family.deleted_job
    assert family.tracked_job["running"], family.tracked_job
    assert after == {**before, "active": 1}, (before, after)
    assert family.again == [], (family.again, commands)
    assert family.tracked_final == "success", f"{tracked} ended {family.tracked_final}"
