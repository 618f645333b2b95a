"""The runtime tier's driver: one real deployment per configuration, many matrix cells at once.

:class:`Tier` starts every needed system's emulator out of process (``emulator_runner``), then one
:class:`~airflow_durable.demo.deployment.Deployment` whose DAG file defines exactly the selected cells.
:meth:`Tier.run_phase` triggers a set of cells (a bounded number in flight), injects each cell's fault
at the right moment, lets the jobs finish once the retry (or the surviving component) is waiting on
them, and reads the outcome from the emulator's ledger and Airflow's metadata DB.

A cell's outcome (:class:`CellResult`) is what ``docs/reliability.md`` tabulates: jobs the service
started, the task's final state, jobs left running that nothing tracks, the provider's XCom keys.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import signal
import subprocess
import tempfile
import threading
import time
from collections.abc import Iterable
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from airflow_durable.demo.deployment import Deployment
from tests.e2e_runtime import actions
from tests.e2e_runtime.emulator_runner import EmulatorProcess, merge_environments
from tests.e2e_runtime.matrix import (
    AIRFLOW34_FAULTS,
    CELERY_FAULTS,
    CELERY_STOP_FAULTS,
    CELERY_STOP_WAIT,
    CELLS_ENV,
    COMPLETE_HOLD_MARK,
    EXECUTION_TIMEOUT,
    FAULTS,
    LOCAL_SCHEDULER_FAULTS,
    PER_TASK_FAULTS,
    POD_GRACE,
    POD_STOP_FAULTS,
    SCHED_STOP_GRACE,
    STORE_DELAY,
    STORE_FAULTS,
    TASK_ID,
    USER_FAULTS,
    Cell,
    _commit,
    unexplained_jobs,
)
from tests.e2e_runtime.store_proxy import StoreFault, StoreProxy

MATRIX_DAGS = Path(__file__).resolve().parent / "matrix_dags"
#: A ``sitecustomize`` that gives the deployment's Airflow 3.4's clear field (``keep_task_state``).
AIRFLOW34 = Path(__file__).resolve().parent / "airflow34"
#: How long the emulator holds try 1's first status read after its submit (the fault comes first).
HOLD_SECONDS = 90.0
#: A cell's budget from trigger to the end of its DAG run.
CELL_BUDGET = 420.0
#: How long a DAG run may take to end once its jobs finished.
END_BUDGET = 90.0
#: After a DAG run ended with a job still running (mark failed, timeout), how long a cancel may take: the
#: triggerer gives a trigger's on_kill 30 s, and its state query alone was seen to take 7 s under load.
CANCEL_GRACE = 30.0
#: How long a cell's result waits for its task process to finish its finalize step (seconds).
FINALIZE_GRACE = 20.0
#: ``exectimeout``: past this long after the trigger the timeout was not enforced; the job is let end.
TIMEOUT_IGNORED_AFTER = EXECUTION_TIMEOUT + 70.0
#: The state-store faults, as the proxy applies them to try 1: the outage outlasts the Task SDK's
#: retries of a 5xx (about 31 s by default), as an api-server that is down would.
STORE_OUTAGE = 60.0
STORE_RULES = {
    "storeread": dict(mode="fail", method="GET", nth=1, window=STORE_OUTAGE),
    "storeintent": dict(mode="fail", method="PUT", nth=1, window=STORE_OUTAGE),
    "storeid": dict(mode="fail", method="PUT", nth=2, window=STORE_OUTAGE),
    "storeslow": dict(mode="delay", seconds=float(STORE_DELAY)),
}
#: Faster detection of dead workers, schedulers and triggerers than the defaults (minutes).
SETTINGS = {
    "AIRFLOW__SCHEDULER__TASK_INSTANCE_HEARTBEAT_TIMEOUT": "30",  # generous: a loaded 2-core CI
    "AIRFLOW__SCHEDULER__TASK_INSTANCE_HEARTBEAT_TIMEOUT_DETECTION_INTERVAL": "2",
    "AIRFLOW__WORKERS__MIN_HEARTBEAT_INTERVAL": "2",
    "AIRFLOW__SCHEDULER__SCHEDULER_HEALTH_CHECK_THRESHOLD": "10",
    "AIRFLOW__SCHEDULER__ORPHANED_TASKS_CHECK_INTERVAL": "10",
    "AIRFLOW__TRIGGERER__TRIGGERER_HEALTH_CHECK_THRESHOLD": "10",
    "AIRFLOW__TRIGGERER__JOB_HEARTBEAT_SEC": "2",
    # A burst of task starts on a loaded 2-core machine: the execution API can take longer than its
    # 5 s default, and the start's ReadTimeout then fails try 1 before it ran (seen in the first runs).
    "AIRFLOW__WORKERS__EXECUTION_API_TIMEOUT": "60",
    # A task that cannot load its DAG at a start is rescheduled (same try, [workers] missing_dag_retries)
    # and the reschedule clears a deferral's next_method: a start after the trigger fired then runs
    # execute() again, and the provider operator submits again. A parse past the 30 s default was seen
    # under a load of 20 (google's import): an unplanned second fault, so the matrix allows 5 min.
    "AIRFLOW__CORE__DAGBAG_IMPORT_TIMEOUT": "300",
    # The DAG file never changes during a run: parsed once at the start (and for any callback), not every
    # 5 s. Each parse of the whole matrix imports all nine systems' providers: a fifth of a core, measured.
    "AIRFLOW__DAG_PROCESSOR__MIN_FILE_PROCESS_INTERVAL": "3600",
    "AIRFLOW__DAG_PROCESSOR__REFRESH_INTERVAL": "3600",
}
#: On a LocalExecutor deployment, on top of `SETTINGS`. The scheduler health threshold keeps its default: at
#: 10 s a new scheduler whose loop lagged under load marked its own job failed and reset the tries its
#: workers were running, which is a second, unplanned scheduler fault here.
LOCAL_SETTINGS = {"AIRFLOW__SCHEDULER__SCHEDULER_HEALTH_CHECK_THRESHOLD": "30"}


@dataclass
class CellResult:
    """What one cell measured (a row of ``docs/reliability.md``)."""

    dag_id: str
    system: str
    fault: str
    side: str
    path: str
    operator: str
    #: Jobs the service started for this DAG run.
    jobs: int = 0
    #: Submit calls that reached the service (idempotent replays included).
    submissions: int = 0
    #: Jobs still running, other than the one the task waited on, when the test let the jobs finish.
    untracked: int = 0
    final_state: str | None = None
    tries: list[list[Any]] = field(default_factory=list)
    xcom_keys: list[str] = field(default_factory=list)
    seconds: float = 0.0
    #: Why the cell could not be driven to the end (``""``: it was).
    error: str = ""
    #: The fault's log text (``Fault.log``) was in try 1's log (``None``: the fault names none).
    log_ok: bool | None = None
    #: The durable task's XComs name its one job (``Fault.xcom_job``; ``None``: not checked).
    xcom_job: bool | None = None
    #: Store faults: how many task-state-store calls of try 1 the proxy failed.
    store_failed: int = 0
    #: The commit the cell ran on.
    commit: str = ""
    #: Seconds from the trigger to each job's creation on the service, oldest first.
    job_starts: list[float] = field(default_factory=list)
    #: ``[try, seconds from the trigger to the try's start]`` of each try that started.
    try_starts: list[list[Any]] = field(default_factory=list)
    #: Jobs the fault does not explain (see `matrix.unexplained_jobs`): where the cell's logs were kept.
    evidence: str = ""
    #: Starts that Airflow rescheduled because the DAG could not be loaded ("Rescheduling task during
    #: startup"): one after the trigger fired runs execute() again (see `SETTINGS`).
    reschedules: int = 0

    @property
    def durable_ok(self) -> bool:
        """The promise under this cell's fault (``Fault.jobs``/``final``/``log``): that many jobs (one,
        unless a clear started a new logical job), that final state, nothing left running untracked."""
        fault = FAULTS[self.fault]
        return (
            not self.error
            and self.jobs == fault.expected_jobs(self.system)
            and self.final_state == fault.final
            and self.untracked == 0
            and self.log_ok is not False
            and self.xcom_job is not False
        )


@dataclass
class _Run:
    cell: Cell
    emulator: EmulatorProcess
    run_id: str = ""
    stage: str = "pending"
    started: float = 0.0
    #: ``time.time()`` at the trigger: the emulators and the DB stamp jobs and tries in wall time.
    started_wall: float = 0.0
    #: The try that was running (and held) when the fault struck; the retry is any later one.
    kill_try: int = 0
    baseline_jobs: int = 0
    baseline_reads: int = 0
    running_at_finish: int = 0
    finished_at: float = 0.0
    #: Jobs left running that no try tracked, counted by the stages that let jobs end one by one.
    untracked: int | None = None
    #: When the DAG run was first seen ended (stages that wait for a cancel to land).
    ended_at: float = 0.0
    store_fault: StoreFault | None = None
    result: CellResult | None = None
    #: (try, status reads) when that try was first seen deferred: later reads are its trigger's.
    deferred_reads: tuple[int, int] | None = None
    #: A pod stop in its grace period: (supervisor, task) and each one's start time (``/proc``), when to
    #: SIGKILL what is left of them, the stage after.
    grace_pids: tuple[tuple[int, str], ...] = ()
    grace_until: float = 0.0
    after_grace: str = ""
    #: After a Celery shutdown: ((try, jobs), status reads) when that try was first seen waiting on a
    #: running job among that many; two reads later it polls it (see stage ``s_after``). After a scheduler
    #: stop: ((task instance id, try, jobs), status reads), stage ``r_again``.
    watch: tuple[tuple[Any, ...], int] | None = None
    #: The task instance id of the try the fault struck (a scheduler's reset gives the task a new one).
    kill_ti: str = ""


class Tier:
    """One deployment (``database``/``executor``/``triggerers``) serving ``cells``; a context manager.

    The emulators know every cell of ``cells``; the deployment defines those of ``serve`` (default: all).
    `redeploy` replaces the deployment by one of another configuration serving other cells, against the
    same emulators: a run's second deployment costs only its own start."""

    def __init__(
        self,
        cells: Iterable[Cell],
        *,
        serve: Iterable[Cell] | None = None,
        database: str = "postgres",
        executor: str = "celery",
        triggerers: int = 2,
        celery_workers: int = 2,
        worker_concurrency: int = 4,
    ) -> None:
        self.cells = list(cells)
        self.served = self.cells if serve is None else list(serve)
        if set(self.served) - set(self.cells):
            raise ValueError("a Tier serves only cells its emulators know (`serve` within `cells`)")
        self._configure(database, executor, triggerers, celery_workers, worker_concurrency)
        self._emulator_env: dict[str, str] = {}
        self.tmp = Path(tempfile.mkdtemp(prefix="afd-runtime-tier-"))
        self.emulators: dict[str, EmulatorProcess] = {}
        self.dep: Deployment | None = None
        self.proxy: StoreProxy | None = None
        self._pg: Any = None
        self._pg_lock = threading.Lock()
        #: Celery workers told to shut down: component -> (give up waiting at, processes of its session).
        self._stopping: dict[str, tuple[float, set[int]]] = {}
        #: The session of a scheduler a failover SIGKILLed (``0``: none): its workers outlive it.
        self._failed_over = 0
        self.commit = _commit()[:12]

    def _configure(
        self, database: str, executor: str, triggerers: int, celery_workers: int, worker_concurrency: int
    ) -> None:
        self.config = {"database": database, "executor": executor, "triggerers": triggerers}
        self.deployment_args: dict[str, Any] = dict(
            database=database,
            executor=executor,
            triggerers=triggerers,
            celery_workers=celery_workers,
            worker_concurrency=worker_concurrency,
        )

    @property
    def key(self) -> str:
        """The results key of this deployment's configuration (``postgres+celery``)."""
        return f"{self.config['database']}+{self.config['executor']}"

    # ------------------------------------------------------------------ lifecycle
    def __enter__(self) -> Tier:
        try:
            self.start()
        except BaseException:
            self.stop()
            raise
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def start(self, timeout: float = 240) -> None:
        systems = sorted({c.system for c in self.cells})
        for system in systems:
            dag_ids = [c.dag_id for c in self.cells if c.system == system]
            self.emulators[system] = EmulatorProcess(system, dag_ids, self.tmp)
        self._emulator_env = merge_environments([e.call("env") for e in self.emulators.values()], self.tmp)
        self._deploy(timeout)

    def _deploy(self, timeout: float) -> None:
        env = dict(self._emulator_env)
        env.update(SETTINGS)
        if self.config["executor"] == "local":
            env.update(LOCAL_SETTINGS)
            # One LocalExecutor worker per task running at once: a deployment-wide fault's batch holds every
            # cell's try 1 (the Deployment's default is 3).
            env["AIRFLOW__CORE__PARALLELISM"] = str(len(self.served) + 2)
        env[CELLS_ENV] = ",".join(c.dag_id for c in self.served)
        if any(c.fault in AIRFLOW34_FAULTS for c in self.served):
            # Every component clears (and the shim detects a clear) as Airflow 3.4 does; see airflow34/.
            env["PYTHONPATH"] = os.pathsep.join(p for p in (str(AIRFLOW34), env.get("PYTHONPATH")) if p)
        self.dep = Deployment(dags_folder=MATRIX_DAGS, extra_env=env, **self.deployment_args)
        # Every component reaches the execution API through the store-fault proxy.
        self.proxy = StoreProxy(self.dep.api_port, self._resolve_ti).start()
        self.dep.env["AIRFLOW__CORE__EXECUTION_API_SERVER_URL"] = self.proxy.url
        self.dep.start(dag_ids=[c.dag_id for c in self.served], timeout=timeout)

    def _stop_deployment(self) -> None:
        try:
            if self.dep is not None:
                self.dep.stop(grace=5)
        finally:
            if self.proxy is not None:
                self.proxy.stop()
            if self._pg is not None:
                with contextlib.suppress(Exception):
                    self._pg.close()
                self._pg = None

    def redeploy(
        self,
        serve: Iterable[Cell],
        *,
        database: str = "postgres",
        executor: str = "local",
        triggerers: int = 1,
        celery_workers: int = 2,
        worker_concurrency: int = 4,
        timeout: float = 240,
    ) -> None:
        """Stop this deployment (every process of it, its servers) and start one of another configuration
        that serves ``serve``, against the same emulators."""
        served = list(serve)
        if set(served) - set(self.cells):
            raise ValueError("a Tier serves only cells its emulators know (`serve` within `cells`)")
        old = self.dep
        self._stop_deployment()
        if old is not None and old.stray_pids():
            raise AssertionError(f"a process of the {self.key} deployment outlived it: {old.stray_pids()}")
        self.dep = self.proxy = None
        self.served = served
        self._configure(database, executor, triggerers, celery_workers, worker_concurrency)
        self._deploy(timeout)

    def stop(self) -> None:
        try:
            self._stop_deployment()
        finally:
            for emulator in self.emulators.values():
                emulator.stop()
            shutil.rmtree(self.tmp, ignore_errors=True)

    def describe(self) -> dict[str, Any]:
        assert self.dep is not None
        import importlib.metadata

        version = self.dep.query("SHOW server_version") if self.dep.database == "postgres" else []
        return {
            "airflow": importlib.metadata.version("apache-airflow"),
            "database": (f"PostgreSQL {str(version[0][0]).split()[0]}" if version else "SQLite"),
            "executor": "CeleryExecutor" if self.dep.executor == "celery" else "LocalExecutor",
            "triggerers": self.dep.triggerers,
            "celery_workers": self.dep.celery_workers,
        }

    # ------------------------------------------------------------------ reading
    def _resolve_ti(self, ti_id: str) -> tuple[str, int] | None:
        """``(dag_id, try_number)`` of a task instance id (the proxy's question; its own connection)."""
        import psycopg2  # type: ignore[import-untyped]

        assert self.dep is not None and self.dep.postgres is not None
        sql = (
            "SELECT dag_id, try_number FROM task_instance WHERE id = %s::uuid UNION ALL "
            "SELECT dag_id, try_number FROM task_instance_history WHERE task_instance_id = %s::uuid"
        )
        with self._pg_lock:
            for attempt in range(2):
                try:
                    if self._pg is None:
                        self._pg = psycopg2.connect(
                            host="127.0.0.1",
                            port=self.dep.postgres.port,
                            user="postgres",
                            dbname=self.dep.postgres.database,
                        )
                        self._pg.autocommit = True
                    with self._pg.cursor() as cur:
                        cur.execute(sql, (ti_id, ti_id))
                        rows = cur.fetchall()
                    return (str(rows[0][0]), int(rows[0][1])) if rows else None
                except psycopg2.Error:
                    self._pg = None
                    if attempt:
                        raise
        return None

    def _ti(self, run: _Run) -> Any:
        assert self.dep is not None
        return self.dep.task_instance(run.cell.dag_id, run.run_id, TASK_ID)

    def _states(self, runs: list[_Run]) -> dict[str, dict[str, Any]]:
        out: dict[str, dict[str, Any]] = {}
        by_system: dict[str, list[str]] = {}
        for run in runs:
            by_system.setdefault(run.cell.system, []).append(run.cell.dag_id)
        for system, dag_ids in by_system.items():
            out.update(self.emulators[system].call("state", dag_ids=dag_ids))
        return out

    # ------------------------------------------------------------------ faults
    def _kill(self, pids: Iterable[int | None]) -> None:
        for pid in pids:
            if pid:
                with contextlib.suppress(ProcessLookupError):
                    os.kill(pid, signal.SIGKILL)

    def _per_task_fault(self, run: _Run, ti: Any, then: str) -> bool:
        """Kill what the cell's fault kills in the try's worker and go on to stage ``then`` (a pod stop:
        SIGTERM now, its grace period in stage ``p_grace`` first); False if its processes are not found
        yet."""
        assert self.dep is not None
        task = self.dep.task_pid(ti.id)
        supervisor = self.dep.supervisor_pid(task) if task else None
        if not task or not supervisor:
            return False
        fault = run.cell.fault
        run.kill_try = ti.try_number
        if fault in POD_STOP_FAULTS:
            # What the kubelet does to a pod: SIGTERM to its main process (here the task's supervisor, which
            # forwards it to the task process: on_kill runs), SIGKILL of everything left after the grace.
            run.grace_pids = ((supervisor, _started(supervisor)), (task, _started(task)))
            os.kill(supervisor, signal.SIGTERM)
            run.grace_until = time.monotonic() + POD_GRACE
            run.after_grace = then
            run.stage = "p_grace"
            return True
        run.stage = then
        if fault in ("workerkill", "completekill"):
            self._kill([supervisor, task])
        elif fault == "taskkill":
            self._kill([task])
        elif fault == "supkill":
            self._kill([supervisor])
        else:
            raise AssertionError(fault)
        return True

    def _global_fault(self, fault: str) -> None:
        assert self.dep is not None
        dep = self.dep
        if fault == "celerykill":
            workers = [c for c in dep.components if c.startswith("celery-worker-")]
            for name in workers:  # the whole tree: main process, pool, supervisors, task processes
                dep.kill_component(name, tree=True)
            for name in workers:
                dep.start_component(name)
        elif fault in CELERY_STOP_FAULTS:
            # A graceful shutdown is a signal to the worker's main process only (what `kill <pid>`, a
            # container's stop or Celery's own tooling sends); Celery decides what its pool and tasks get.
            workers = [c for c in dep.components if c.startswith("celery-worker-")]
            for name in workers:
                self._stopping[name] = (time.monotonic() + CELERY_STOP_WAIT, set(dep.session_pids(name)))
                dep.procs[name].send_signal(signal.SIGTERM)  # warm shutdown: stop consuming, let tasks end
            if fault == "coldstop":
                time.sleep(2)
                for name in workers:  # cold shutdown (Celery 5.6: SIGQUIT; a second SIGTERM is ignored)
                    dep.procs[name].send_signal(signal.SIGQUIT)
        elif fault == "trigkill":
            dep.kill_component("triggerer")
        elif fault == "schedrestart":
            dep.kill_component("scheduler")
            time.sleep(2)
            dep.start_component("scheduler")
        elif fault == "schedstop":
            self._stop_scheduler()
            dep.start_component("scheduler")
        elif fault == "failover":
            # The scheduler process alone: its LocalExecutor workers, each supervising a try, are orphaned
            # and run on (a crashed scheduler; a standby takes over).
            scheduler = dep.procs["scheduler"]
            self._failed_over = scheduler.pid
            os.kill(scheduler.pid, signal.SIGKILL)
            scheduler.wait(timeout=30)
            alive = len(dep.session_pids("scheduler"))
            print(f"[tier] scheduler SIGKILLed; its session runs on: {alive} processes")
            dep.start_component("scheduler")
        else:
            raise AssertionError(fault)

    def _stop_scheduler(self) -> None:
        """Stop the scheduler as systemd (``systemctl restart``) or the kubelet does: SIGTERM to its process
        group (the scheduler and its LocalExecutor workers, which forward it to their tasks: each task's
        process group is its own), then, once it exited or `SCHED_STOP_GRACE` ran out, SIGKILL of whatever
        is left of its session (the service's control group, or the pod, ends with it)."""
        assert self.dep is not None
        scheduler = self.dep.procs["scheduler"]
        stopped = time.monotonic()
        with contextlib.suppress(ProcessLookupError):
            os.killpg(scheduler.pid, signal.SIGTERM)
        try:
            scheduler.wait(timeout=SCHED_STOP_GRACE)
            how = f"exited ({scheduler.returncode}) after {time.monotonic() - stopped:.0f} s"
        except subprocess.TimeoutExpired:
            how = f"still running {SCHED_STOP_GRACE} s after the SIGTERM"
        left = self.dep.session_pids("scheduler")
        self._kill(left)
        scheduler.wait(timeout=30)
        print(f"[tier] scheduler {how}; SIGKILL what is left of its session: {sorted(left)}")
        deadline = time.monotonic() + 30
        while self.dep.session_pids("scheduler") and time.monotonic() < deadline:
            time.sleep(0.2)

    def _end_failed_over(self) -> None:
        """After a failover batch: what is left of the SIGKILLed scheduler's session (its idle LocalExecutor
        workers wait on a queue nobody feeds) ends, as the failed scheduler's machine or container would."""
        if not self._failed_over:
            return
        left = (
            [pid for pid in self.dep.stray_pids() if self._alive_in_session(pid, self._failed_over)]
            if self.dep
            else []
        )
        if left:
            print(f"[tier] left of the failed-over scheduler's session: {sorted(left)}: SIGKILL")
        self._kill(left)
        self._failed_over = 0

    def _left_of_pod(self, run: _Run) -> list[int]:
        """What a pod stop's SIGKILL strikes once its grace ended: the task process if it still runs, and
        its supervisor only while it still supervises it. A Celery pool process outlives its task: once the
        try ended within the grace it may already run another cell's try, which no stop of this one kills."""
        (supervisor, supervisor_started), (task, task_started) = run.grace_pids
        if _started(task) != task_started:
            return []  # the try ended within the grace
        assert self.dep is not None
        alive = [task]
        if _started(supervisor) == supervisor_started and self.dep.supervisor_pid(task) == supervisor:
            alive.append(supervisor)
        return alive

    def _held_in_completion(self, run: _Run) -> bool:
        """Whether try 1's log says the DAG file holds it inside ``execute_complete`` (its SIGTERM handler
        is installed by then: a stop any earlier, at the resumption's start, kills the task outright)."""
        assert self.dep is not None
        root = self.dep.home / "logs" / f"dag_id={run.cell.dag_id}" / f"run_id={run.run_id}"
        return any(
            COMPLETE_HOLD_MARK in log.read_text(errors="replace")
            for log in root.glob(f"task_id={TASK_ID}/attempt=1.log")
        )

    def _tend_stopping_workers(self) -> None:
        """Start again each Celery worker told to shut down, once its main process exited (SIGKILLing what
        is left of its session then, as a container ends with its main process) or, past its wait, after
        SIGKILLing all of it (the end of a grace period)."""
        assert self.dep is not None
        dep = self.dep
        for name, (deadline, seen) in list(self._stopping.items()):
            proc = dep.procs[name]
            seen |= set(dep.session_pids(name)) if proc.poll() is None else set()
            if proc.poll() is None and time.monotonic() < deadline:
                continue
            if proc.poll() is None:
                print(f"[tier] {name} still running {CELERY_STOP_WAIT} s after its shutdown began: SIGKILL")
            left = [pid for pid in seen if self._alive_in_session(pid, proc.pid)]
            if left:
                print(f"[tier] {name} exited ({proc.poll()}); SIGKILL what is left of it: {sorted(left)}")
            self._kill(left)
            dep.kill_component(name, tree=True)  # the main process, if still there; waits for it
            dep.start_component(name)
            del self._stopping[name]

    @staticmethod
    def _alive_in_session(pid: int, session: int) -> bool:
        try:
            stat = Path(f"/proc/{pid}/stat").read_text()
        except OSError:
            return False
        fields = stat[stat.rindex(")") + 2 :].split()  # "pid (comm) state ppid pgrp session ..."
        return fields[0] != "Z" and int(fields[3]) == session

    # ------------------------------------------------------------------ the phase
    def _first_stage(self, cell: Cell) -> str:
        fault = cell.fault
        if fault in ("trigkill", "schedrestart"):
            return "defer"
        if fault in LOCAL_SCHEDULER_FAULTS:
            return "l_poll"
        if fault in ("completekill", "podcomplete"):
            return "c_defer"
        if fault in ("clear", "markfailed", *AIRFLOW34_FAULTS):
            return "u_wait"
        if fault == "exectimeout":
            return "t_wait"
        if fault in STORE_FAULTS:
            return "drain"
        return "submit"

    def run_phase(self, cells: Iterable[Cell], max_in_flight: int = 8) -> list[CellResult]:
        """Drive ``cells`` to their end: the per-cell faults' side by side, then each global fault's alone
        (one after the other)."""
        assert self.dep is not None
        runs = [_Run(cell, self.emulators[cell.system]) for cell in cells]
        per_cell = set(PER_TASK_FAULTS) | set(USER_FAULTS) | set(STORE_FAULTS)
        groups: dict[str | None, list[_Run]] = {}
        for run in runs:
            groups.setdefault(None if run.cell.fault in per_cell else run.cell.fault, []).append(run)
        results: list[CellResult] = []
        for global_fault, group in groups.items():
            results += self._run_fault(group, global_fault, max_in_flight)
        return results

    def _run_fault(self, runs: list[_Run], global_fault: str | None, max_in_flight: int) -> list[CellResult]:
        assert self.dep is not None
        if global_fault in CELERY_FAULTS:
            # Every cell's try 1 must still be running (held) in a Celery worker when the workers die:
            # as many at once as the workers have task slots, one kill per batch. With more cells than
            # slots, the first ones' holds ran out (they deferred) before the last ones even started,
            # and the kill then struck no try at all (the "not measured" cells of the first report).
            assert self.dep is not None
            slots = max(1, self.dep.celery_workers * self.dep.worker_concurrency - 2)
            results: list[CellResult] = []
            for start in range(0, len(runs), slots):
                results += self._run_batch(runs[start : start + slots], global_fault, len(runs))
            return results
        return self._run_batch(runs, global_fault, max_in_flight)

    def _run_batch(self, runs: list[_Run], global_fault: str | None, max_in_flight: int) -> list[CellResult]:
        assert self.dep is not None
        in_flight = max_in_flight if global_fault is None else len(runs)
        stamp = int(time.time())
        for run in runs:
            if run.cell.fault in PER_TASK_FAULTS + CELERY_FAULTS and run.cell.fault not in (
                "completekill",
                "podcomplete",
            ):
                run.emulator.call("hold", dag_id=run.cell.dag_id, seconds=HOLD_SECONDS)
        pending = list(runs)
        global_done = False
        while any(r.stage != "done" for r in runs) or self._stopping:
            active = [r for r in runs if r.stage not in ("pending", "done")]
            while pending and len(active) < in_flight:
                run = pending.pop(0)
                run.run_id = f"rt__{stamp}__{run.cell.dag_id}"
                if run.cell.fault in STORE_RULES and self.proxy is not None:
                    run.store_fault = StoreFault(**STORE_RULES[run.cell.fault])  # type: ignore[arg-type]
                    self.proxy.set_fault(run.cell.dag_id, run.store_fault)
                run.started_wall = time.time()
                self.dep.trigger(run.cell.dag_id, run.run_id)
                run.started = time.monotonic()
                run.stage = self._first_stage(run.cell)
                active.append(run)
            states = self._states(active)
            for run in active:
                self._step(run, states[run.cell.dag_id])
            ready = [r for r in runs if r.stage == "ready"]
            if global_fault and not global_done and ready and all(r.stage in ("ready", "done") for r in runs):
                self._global_fault(global_fault)
                global_done = True
                states = self._states(ready)
                for run in ready:
                    # After a kill the retry waits on the job; after a Celery shutdown the same try may.
                    run.stage = {
                        "celerykill": "retry",
                        "warmstop": "s_after",
                        "coldstop": "s_after",
                        "schedstop": "r_again",
                        "failover": "r_again",
                    }.get(global_fault, "after")
                    self._baseline(run, states[run.cell.dag_id])
            self._tend_stopping_workers()
            time.sleep(1.0)
        self._end_failed_over()
        return [r.result for r in runs if r.result is not None]

    def _baseline(self, run: _Run, state: dict[str, Any]) -> None:
        jobs = state["jobs"]
        run.baseline_jobs = len(jobs)
        run.baseline_reads = state["status_reads"]

    def _polled_since_baseline(self, run: _Run, state: dict[str, Any], reads: int = 2) -> bool:
        if len(state["jobs"]) > run.baseline_jobs:  # a new job: its reads count from 0
            return state["status_reads"] >= reads
        return state["status_reads"] >= run.baseline_reads + reads

    def _waiting_on_job(self, run: _Run, ti: Any, state: dict[str, Any]) -> bool:
        """The task (sync: running, deferrable: deferred) polls a job of this DAG run.

        Deferred, it polls only once a triggerer runs its trigger: a status read counted after the task
        instance was first seen deferred is the trigger's (the operator's own reads come before it defers).
        A user's action that lands before any triggerer picked the trigger up reaches no trigger at all.
        """
        if run.cell.path == "sync":
            return (
                ti is not None
                and ti.state == "running"
                and bool(state["jobs"])
                and state["status_reads"] >= 2
            )
        if ti is None or ti.state != "deferred" or not state["jobs"]:
            return False
        if run.deferred_reads is None or run.deferred_reads[0] != ti.try_number:
            run.deferred_reads = (ti.try_number, state["status_reads"])
            return False
        return state["status_reads"] > run.deferred_reads[1]

    def _step(self, run: _Run, state: dict[str, Any]) -> None:
        assert self.dep is not None
        if run.stage not in ("end",) and time.monotonic() - run.started > CELL_BUDGET:
            self._finish(run, state, error=f"timed out in stage {run.stage!r}")
            return
        ti = self._ti(run)
        if run.stage == "submit":
            # The first try that runs holds the job (a try that never ran, e.g. requeued, does not).
            if ti is None or ti.state != "running" or not state["held"]:
                return self._ended_early(run, state)
            if run.cell.fault in CELERY_FAULTS:
                if self.dep.task_pid(ti.id):
                    run.kill_try = ti.try_number
                    run.stage = "ready"
                return None
            if self._per_task_fault(run, ti, then="retry"):
                self._baseline(run, state)
        elif run.stage == "p_grace":  # a pod stop: SIGTERM sent; SIGKILL what is left once the grace ends
            if time.monotonic() >= run.grace_until:
                self._kill(self._left_of_pod(run))
                run.stage = run.after_grace
                self._baseline(run, state)
        elif run.stage == "defer":
            if ti is not None and ti.state == "deferred" and state["status_reads"] >= 2:
                run.stage = "ready"
            else:
                self._ended_early(run, state)
        elif run.stage == "c_defer":  # completekill, podcomplete: the job succeeds while try 1 is deferred
            if self._waiting_on_job(run, ti, state):
                run.emulator.call("finish", dag_id=run.cell.dag_id)
                run.stage = "c_resume"
            else:
                self._ended_early(run, state)
        elif run.stage == "c_resume":  # try 1 resumed on the success event: held in execute_complete
            if (
                ti is not None
                and ti.state == "running"
                and ti.next_method
                and (run.cell.fault != "podcomplete" or self._held_in_completion(run))
                and self._per_task_fault(run, ti, then="drain")
            ):
                self._baseline(run, state)
                run.untracked = 0
            else:
                self._ended_early(run, state)
        elif run.stage == "u_wait":  # clear / markfailed: the task waits on its job
            if self._waiting_on_job(run, ti, state):
                assert ti is not None
                if run.cell.fault == "clear":
                    run.emulator.call("finish", dag_id=run.cell.dag_id)
                    run.stage = "u_cleared"
                elif run.cell.fault in AIRFLOW34_FAULTS:
                    # 3.4's clear of the waiting task: state discarded (clear34) or kept (keepstate).
                    run.kill_try = ti.try_number
                    actions.clear_task(
                        self.dep,
                        run.cell.dag_id,
                        run.run_id,
                        TASK_ID,
                        keep_task_state=run.cell.fault == "keepstate",
                    )
                    run.untracked = 0
                    run.stage = "u_next"
                else:
                    actions.mark_task(self.dep, run.cell.dag_id, run.run_id, TASK_ID, "failed")
                    run.stage = "u_after"
            else:
                self._ended_early(run, state)
        elif run.stage == "u_next":  # a 3.4 clear: the jobs go on until the next try has polled its own
            # The reads of the killed try (or of its trigger, until the task is queued) say nothing about what
            # the next try decided: its reads are counted from when it is first seen running.
            if ti is not None and ti.try_number > run.kill_try and ti.state in ("deferred", "running"):
                self._baseline(run, state)
                run.stage = "drain"
            elif self.dep.dag_run_state(run.cell.dag_id, run.run_id) in ("success", "failed"):
                run.stage = "drain"
        elif run.stage == "u_cleared":  # the first logical job ended; the user clears the finished task
            if self.dep.dag_run_state(run.cell.dag_id, run.run_id) in ("success", "failed"):
                run.kill_try = ti.try_number if ti is not None else 0
                actions.clear_task(self.dep, run.cell.dag_id, run.run_id, TASK_ID)
                self._baseline(run, state)
                run.untracked = 0
                run.stage = "drain"
        elif run.stage == "t_wait":  # exectimeout: the job runs on; the task must end by its timeout
            if self.dep.dag_run_state(run.cell.dag_id, run.run_id) in ("success", "failed"):
                run.stage = "u_after"
                self._step(run, state)
            elif time.monotonic() - run.started > TIMEOUT_IGNORED_AFTER:
                run.untracked = 0  # the timeout was not enforced: the task waits on, let its job end
                run.stage = "drain"
        elif run.stage == "u_after":  # the DAG run ends with no task waiting: any running job is untracked
            if not run.ended_at:
                if self.dep.dag_run_state(run.cell.dag_id, run.run_id) not in ("success", "failed"):
                    return None
                run.ended_at = time.monotonic()
            running = sum(1 for j in state["jobs"] if j["running"])
            # Nothing left running: the cancel landed (a job that ended stays ended), no need to wait on.
            if not running or time.monotonic() - run.ended_at >= CANCEL_GRACE:
                run.untracked = running
                run.emulator.call("finish", dag_id=run.cell.dag_id)
                self._collect(run)
        elif run.stage == "drain":  # let each job a try waits on end; count any other still running
            if self.dep.dag_run_state(run.cell.dag_id, run.run_id) in ("success", "failed"):
                if not run.ended_at:
                    run.ended_at = time.monotonic()
                elif time.monotonic() - run.ended_at >= 3:
                    run.untracked = (run.untracked or 0) + sum(1 for j in state["jobs"] if j["running"])
                    run.emulator.call("finish", dag_id=run.cell.dag_id)
                    self._collect(run)
            elif (
                ti is not None
                and ti.try_number > run.kill_try
                and ti.state in ("deferred", "running")
                and any(j["running"] for j in state["jobs"])
                and self._polled_since_baseline(run, state)
            ):
                running = sum(1 for j in state["jobs"] if j["running"])
                run.untracked = max(run.untracked or 0, running - 1)
                run.emulator.call("finish", dag_id=run.cell.dag_id)
                self._baseline(run, run.emulator.call("state", dag_ids=[run.cell.dag_id])[run.cell.dag_id])
        elif run.stage == "retry":
            # Only a running job's reads count: a retry that reads the job its try 1 cancelled (a lookup
            # before its own submit) would otherwise let the jobs end before its own one exists, which then
            # runs on (Batch podstop, durable deferrable, before the engine's stop-is-not-a-cancel).
            if (
                ti is not None
                and ti.try_number > run.kill_try
                and ti.state in ("deferred", "running")
                and any(j["running"] for j in state["jobs"])
                and self._polled_since_baseline(run, state)
            ):
                self._finish(run, state)
            else:
                self._ended_early(run, state)
        elif run.stage == "s_after":  # a Celery shutdown: let the job end once a try polls a running one
            # The same try if it lived through the shutdown (warm; or cold, whose SIGTERM the supervisor
            # forwards and then waits for its task), else the next one. Reads of no running job (on_kill's,
            # or a dying try's read of the job it cancelled) never count: `after` counted those, and let
            # the retry's new job run on forever.
            running = sum(1 for j in state["jobs"] if j["running"])
            if ti is None or ti.state not in ("deferred", "running") or not running:
                self._ended_early(run, state)
                return None
            key = (ti.try_number, len(state["jobs"]))
            if run.watch is None or run.watch[0] != key:
                run.watch = (key, state["status_reads"])
            elif state["status_reads"] >= run.watch[1] + 2:
                run.untracked = running - 1
                self._finish(run, state)
        elif run.stage == "l_poll":  # a scheduler stop: try 1 polls its job, in a LocalExecutor worker
            if self._waiting_on_job(run, ti, state) and self.dep.task_pid(ti.id):
                run.kill_try, run.kill_ti = ti.try_number, ti.id
                run.stage = "ready"
            else:
                self._ended_early(run, state)
        elif run.stage == "r_again":  # after a scheduler stop: let the job end once the task polls it again
            # Again: a reset task instance (a new id) or a later try, once the struck try's process is gone
            # (a failover's old try polls on until its heartbeat is refused; its on_kill decides then). Reads
            # of no running job never count, as in ``s_after``.
            running = sum(1 for j in state["jobs"] if j["running"])
            again = ti is not None and (ti.id != run.kill_ti or ti.try_number > run.kill_try)
            if (
                ti is None
                or ti.state != "running"
                or not running
                or not again
                or self.dep.task_pid(run.kill_ti)
            ):
                self._ended_early(run, state)
                return None
            seen = (ti.id, ti.try_number, len(state["jobs"]))
            if run.watch is None or run.watch[0] != seen:
                run.watch = (seen, state["status_reads"])
            elif state["status_reads"] >= run.watch[1] + 2:
                run.untracked = running - 1
                self._finish(run, state)
        elif run.stage == "after":  # a component was replaced: the job is being waited on again
            if (
                ti is not None
                and ti.state in ("deferred", "running")
                and self._polled_since_baseline(run, state)
            ):
                self._finish(run, state)
            else:
                self._ended_early(run, state)
        elif run.stage == "end":
            dag_state = self.dep.dag_run_state(run.cell.dag_id, run.run_id)
            if dag_state in ("success", "failed"):
                self._collect(run)
            elif time.monotonic() - run.finished_at > END_BUDGET:
                self._collect(run, error="the DAG run did not end after its jobs finished")
        return None

    def _ended_early(self, run: _Run, state: dict[str, Any]) -> None:
        assert self.dep is not None
        if self.dep.dag_run_state(run.cell.dag_id, run.run_id) in ("success", "failed"):
            running = sum(1 for j in state["jobs"] if j["running"])
            run.running_at_finish = running
            run.emulator.call("finish", dag_id=run.cell.dag_id)
            self._collect(
                run,
                error=""
                if run.stage in ("retry", "after", "s_after", "r_again")
                else f"DAG run ended in stage {run.stage!r}",
            )

    def _finish(self, run: _Run, state: dict[str, Any], error: str = "") -> None:
        run.running_at_finish = sum(1 for j in state["jobs"] if j["running"])
        run.emulator.call("finish", dag_id=run.cell.dag_id)
        run.finished_at = time.monotonic()
        run.stage = "end"
        if error:
            self._collect(run, error=error)

    def _log_ok(self, run: _Run) -> bool | None:
        """Whether try 1's log holds the fault's text (the clear task error); None if it names none."""
        assert self.dep is not None
        wanted = FAULTS[run.cell.fault].log
        if not wanted:
            return None
        root = self.dep.home / "logs" / f"dag_id={run.cell.dag_id}" / f"run_id={run.run_id}"
        logs = root.glob(f"task_id={TASK_ID}/attempt=1*")
        return any(wanted in log.read_text(errors="replace") for log in logs)

    def _collect(self, run: _Run, error: str = "") -> None:
        assert self.dep is not None
        cell = run.cell
        ti = self._ti(run)
        if ti is not None:
            # The task runner reports the task's state before its finalize step pushes the operator-link
            # XComs (`_link_*`): read them once the task process is gone, not when the state turns.
            deadline = time.monotonic() + FINALIZE_GRACE
            while self.dep.task_pid(ti.id) and time.monotonic() < deadline:
                time.sleep(0.5)
        state = self._states([run])[cell.dag_id]
        history = [list(t) for t in self.dep.try_history(cell.dag_id, run.run_id, TASK_ID)]
        xcoms = self.dep.xcoms(cell.dag_id, run.run_id, TASK_ID)
        if ti is not None:
            history.append([ti.try_number, ti.state])
        run.result = CellResult(
            dag_id=cell.dag_id,
            system=cell.system,
            fault=cell.fault,
            side=cell.side,
            path=cell.path,
            operator=cell.operator,
            jobs=len(state["jobs"]),
            submissions=state["submissions"],
            # The task waits on one job; any other one still running then is an orphan.
            untracked=run.untracked if run.untracked is not None else max(0, run.running_at_finish - 1),
            final_state=ti.state if ti else None,
            tries=history,
            xcom_keys=sorted(xcoms),
            seconds=round(time.monotonic() - run.started, 1),
            error=error,
            log_ok=self._log_ok(run) if cell.side == "durable" else None,
            xcom_job=_xcom_job(cell, self._job_ids(run), ti.state if ti else None, xcoms),
            store_failed=run.store_fault.failed if run.store_fault is not None else 0,
            commit=self.commit,
            job_starts=[round(float(j["started_at"]) - run.started_wall, 1) for j in state["jobs"]],
            try_starts=self._try_starts(run),
            reschedules=self._reschedules(run),
        )
        if unexplained_jobs(asdict(run.result)) or run.result.reschedules:
            run.result.evidence = self._keep_evidence(run, state)
        run.stage = "done"

    def _job_ids(self, run: _Run) -> list[str]:
        """The full ids of the cell's jobs (``state`` shortens long ones), oldest first."""
        if not FAULTS[run.cell.fault].xcom_job:
            return []
        ids = run.emulator.call("ids", dag_ids=[run.cell.dag_id])[run.cell.dag_id]
        return [j["id"] for j in ids]

    def _reschedules(self, run: _Run) -> int:
        assert self.dep is not None
        root = self.dep.home / "logs" / f"dag_id={run.cell.dag_id}" / f"run_id={run.run_id}"
        return sum(
            log.read_text(errors="replace").count("Rescheduling task during startup")
            for log in root.glob(f"task_id={TASK_ID}/attempt=*.log")
        )

    def _try_starts(self, run: _Run) -> list[list[Any]]:
        assert self.dep is not None
        where = "WHERE dag_id=? AND run_id=? AND task_id=?"
        rows = self.dep.query(
            f"SELECT try_number, start_date FROM task_instance_history {where} "
            f"UNION ALL SELECT try_number, start_date FROM task_instance {where}",
            (run.cell.dag_id, run.run_id, TASK_ID) * 2,
        )
        return sorted(
            [int(t), round(started.timestamp() - run.started_wall, 1)]
            for t, started in rows
            if started is not None and hasattr(started, "timestamp")
        )

    def _keep_evidence(self, run: _Run, state: dict[str, Any]) -> str:
        """Copy a cell's task and trigger logs and the service's view of its jobs where they outlive the
        deployment: beside the results file, else in the system's temporary directory. Returns the path."""
        assert self.dep is not None
        results = os.environ.get(RESULTS_ENV)
        base = (
            Path(results).parent / "evidence" if results else Path(tempfile.gettempdir()) / "afd-rt-evidence"
        )
        target = base / run.cell.dag_id
        shutil.rmtree(target, ignore_errors=True)
        logs = self.dep.home / "logs" / f"dag_id={run.cell.dag_id}"
        if logs.exists():
            shutil.copytree(logs, target / "logs")
        target.mkdir(parents=True, exist_ok=True)
        (target / "jobs.json").write_text(json.dumps({"run_started": run.started_wall, **state}, indent=1))
        return str(target)

    def task_logs(self, dag_id: str) -> str:
        assert self.dep is not None
        return self.dep.task_logs(dag_id, chars=3000)


def _xcom_job(cell: Cell, ids: list[str], final: str | None, xcoms: dict[str, Any]) -> bool | None:
    """Whether a durable task that ended ``success`` on one job (full ``ids`` of its jobs, from the
    emulator) holds that job's id as an XCom value, an item of one, or a list's items joined by commas (an
    EMR job is the steps one call added) (``None``: the fault does not ask, or the cell is not such a
    task). Whole values only: a short numeric id is inside many a URL."""
    if not FAULTS[cell.fault].xcom_job or cell.side != "durable" or final != "success" or len(ids) != 1:
        return None
    values: set[str] = set()
    for value in xcoms.values():
        if isinstance(value, list):
            values.update(str(v) for v in value)
            values.add(",".join(str(v) for v in value))
        else:
            values.add(str(value))
    return ids[0] in values


def _started(pid: int) -> str:
    """A process's start time (``/proc/<pid>/stat`` field 22; ``""`` if it is gone): with its pid, it names
    one process, not whichever reuses the pid."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return ""
    fields = stat[stat.rindex(")") + 2 :].split()
    return "" if fields[0] == "Z" else fields[19]


# --------------------------------------------------------------------------- results file
RESULTS_ENV = "AFD_RT_RESULTS"
COMMITTED = Path(__file__).resolve().parents[2] / "docs" / "reliability.json"


def write_results(path: Path, key: str, config: dict[str, Any], results: list[CellResult]) -> None:
    """Merge ``results`` into the JSON results file at ``path`` under configuration ``key``
    (``"postgres+celery"``); ``config`` describes it (versions)."""
    data: dict[str, Any] = json.loads(path.read_text()) if path.exists() else {"configurations": {}}
    entry = data["configurations"].setdefault(key, {"environment": config, "cells": {}})
    entry["environment"] = config
    for result in results:
        entry["cells"][result.dag_id] = {**asdict(result), "durable_ok": result.durable_ok}
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(data, indent=1, sort_keys=True) + "\n")


def write_run(path: Path, run: dict[str, Any]) -> None:
    """Record in the results file at ``path`` the run its cells come from (commit, time, load)."""
    data: dict[str, Any] = json.loads(path.read_text()) if path.exists() else {"configurations": {}}
    data["run"] = run
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(data, indent=1, sort_keys=True) + "\n")


def committed_cell(config_key: str, dag_id: str) -> dict[str, Any] | None:
    if not COMMITTED.exists():
        return None
    data = json.loads(COMMITTED.read_text())
    return data.get("configurations", {}).get(config_key, {}).get("cells", {}).get(dag_id)


def fault_title(fault: str) -> str:
    return FAULTS[fault].title
