"""The reliability matrix of the runtime tier: which fault, on which operator, on which path.

Shared by the DAG file (``matrix_dags/runtime_matrix.py``, parsed by the Airflow components), the
emulator runner (a subprocess per system) and the tests. Imports nothing from Airflow.

A *cell* is one DAG run: ``(system, fault, side, path)``. Its DAG id ``rt_<system>_<fault>_<side>_<path>``
names it; no DAG id is a substring of another (the emulators find a DAG's jobs by its id in the job's
name, SQL comment or run name).
"""

from __future__ import annotations

import hashlib
import os
import subprocess
from dataclasses import dataclass
from typing import Any

from airflow_durable import catalogue

#: The catalogue's job kinds (``--system``) the matrix runs, and the short key of each kind's first
#: operator in the DAG ids (no ``_``: `parse_dag_id` splits on it). Keys are stable: docs/reliability.json
#: stores results under these DAG ids. ``test_matrix_catalogue.py`` fails when a catalogue job kind has no
#: key here, or a catalogue operator neither runs in the matrix nor is named in `NOT_IN_MATRIX`.
KEYS: dict[str, str] = {
    "databricks": "databricks",
    "snowflake": "snowflake",
    "bigquery": "bigquery",
    "dbt-cloud": "dbtcloud",
    "redshift": "redshift",
    "batch": "batch",
    "emr-eks": "emreks",
    "emr-steps": "emr",
    "emr-serverless": "emrserverless",
}
#: A kind's other operators that run as matrix systems of their own (durable class -> key): their engine
#: path differs where a fault strikes. Databricks run-now cannot look its runs up by task instance (it
#: names no run): a stopped try learns its run by resending its idempotency token.
MORE_KEYS: dict[str, str] = {"DurableDatabricksRunNowOperator": "dbrunnow"}
#: Catalogue operators the matrix leaves out, and why (the kind's first operator runs under `KEYS`).
NOT_IN_MATRIX: dict[str, str] = {}


def _systems() -> dict[str, tuple[str, str, str]]:
    out = {}
    for kind, key in KEYS.items():
        op = next(
            o
            for o in catalogue.operators_of(kind)
            if o.durable_class not in NOT_IN_MATRIX and o.durable_class not in MORE_KEYS
        )
        out[key] = (catalogue.kind_title(kind), op.provider_class, op.durable_class)
    for durable, key in MORE_KEYS.items():
        op = catalogue.operator(durable)
        out[key] = (f"{catalogue.kind_title(op.system)} {op.title}", op.provider_class, op.durable_class)
    return out


#: system key -> (title, upstream operator class, durable operator class), from the catalogue.
SYSTEMS: dict[str, tuple[str, str, str]] = _systems()
#: Systems whose cells docs/reliability.json does not hold yet (added to the matrix since it was last
#: run; ``make reliability`` records them). docs/reliability.md lists their cells as not run. Take a system
#: out once its cells are recorded: test_reliability_doc.py fails while a listed system has all of them.
UNMEASURED: tuple[str, ...] = ("dbrunnow",)
#: The job kind (catalogue ``system``) of each matrix key.
KINDS: dict[str, str] = {
    **{key: kind for kind, key in KEYS.items()},
    **{key: catalogue.operator(durable).system for durable, key in MORE_KEYS.items()},
}
#: The systems whose connection is an AWS one (each gets its own ``aws_<system>`` connection: every
#: AWS emulator is its own moto server).
AWS_SYSTEMS: tuple[str, ...] = tuple(
    key
    for key in SYSTEMS
    if catalogue.integration(catalogue.operators_of(KINDS[key])[0].integration).extra == "amazon"
)
TASK_ID = "job"
#: ``execution_timeout`` of the ``exectimeout`` cells (seconds); the job itself runs until told to end.
EXECUTION_TIMEOUT = 20
#: The ``storeslow`` cells: each task-state-store call of try 1 is answered this much later (seconds).
STORE_DELAY = 3
#: A pod stop (``podstop``, ``podcomplete``): SIGKILL this long after the SIGTERM (Kubernetes'
#: ``terminationGracePeriodSeconds``, 30 s by default: shorter here to fit the test's budget; the task's
#: ``on_kill`` runs within the first second).
POD_GRACE = 10
#: A scheduler stop (``schedstop``): SIGKILL of what is left of the scheduler's session this long after the
#: SIGTERM to its process group (Kubernetes' default grace; systemd's ``TimeoutStopSec`` is 90 s). A
#: LocalExecutor scheduler waits for its running tasks before it exits, and a durable try left its job
#: running and polls on: the SIGKILL ends it.
SCHED_STOP_GRACE = 30
#: A Celery warm/cold shutdown: how long the test lets a worker drain before it SIGKILLs what is left
#: (try 1's held status read keeps it busy up to 90 s after its submit; then it polls and its job ends).
CELERY_STOP_WAIT = 150
#: What try 1's log says once the DAG file holds it inside ``execute_complete`` (``completekill``,
#: ``podcomplete``): a SIGTERM before that can land before the task runner handles it, and kill the task.
COMPLETE_HOLD_MARK = "runtime matrix: holding try 1 inside"
SIDES = ("upstream", "durable")
PATHS = ("deferrable", "sync")


@dataclass(frozen=True)
class Fault:
    key: str
    title: str
    #: The paths this fault applies to.
    paths: tuple[str, ...]
    #: Only meaningful with the CeleryExecutor / several triggerers; ``"local"``: the fault strikes the
    #: scheduler together with the LocalExecutor workers inside it, so its cells run on a deployment of that
    #: executor (`DEPLOYMENT_OF`).
    needs: str = ""
    #: Depends on engine work not on main yet: the test is xfail(strict=False) with this reason
    #: (for the cells of ``pending_paths`` only; the others are judged as usual).
    pending: str = ""
    pending_paths: tuple[str, ...] = ("deferrable", "sync")
    #: The durable promise under this fault: jobs on the service and the task's final state (nothing
    #: left running untracked, always). A clear starts a new logical job (DESIGN §8): a second job.
    jobs: int = 1
    final: str = "success"
    #: Text the durable task's log must hold (the clear task error of a state-store fault).
    log: str = ""
    #: The durable task's XComs must name its one job (the job id among their values): the try that
    #: ran again reconnected to the job the stopped try left, not only pushed the provider's keys.
    xcom_job: bool = False
    #: What the promise does not cover under this fault (printed under its table in the report).
    limit: str = ""
    #: Systems whose promise differs in its job count (``{system: jobs}``), for the reason ``limit`` gives.
    jobs_of: tuple[tuple[str, int], ...] = ()

    def expected_jobs(self, system: str) -> int:
        """The jobs the durable promise allows on ``system`` under this fault."""
        return dict(self.jobs_of).get(system, self.jobs)


FAULTS: dict[str, Fault] = {
    f.key: f
    for f in (
        Fault(
            "workerkill",
            "SIGKILL supervisor + task right after submit (worker death)",
            ("deferrable", "sync"),
        ),
        Fault("taskkill", "SIGKILL the task process mid-poll", ("sync",)),
        Fault(
            "supkill",
            "SIGKILL only the supervisor after submit: try 1 runs on beside try 2",
            ("deferrable", "sync"),
        ),
        Fault(
            "celerykill",
            "SIGKILL every Celery worker (main process + pool) after submit, then start them again",
            ("deferrable",),
            needs="celery",
        ),
        Fault(
            "trigkill",
            "SIGKILL one of two triggerers mid-deferral: the other takes the trigger over",
            ("deferrable",),
            needs="triggerers",
        ),
        Fault(
            "schedrestart",
            "SIGKILL the scheduler mid-run, start a new one",
            ("deferrable",),
        ),
        Fault(
            "completekill",
            "SIGKILL supervisor + task inside execute_complete, after the trigger's success event",
            ("deferrable",),
        ),
        Fault(
            "clear",
            "A user clears the finished task: a new logical job",
            ("deferrable", "sync"),
            jobs=2,
        ),
        Fault(
            "markfailed",
            "A user marks the running task failed",
            ("deferrable", "sync"),
            final="failed",
            limit=(
                "a mark that lands before any triggerer has picked the trigger up reaches no trigger: "
                "Airflow calls no on_kill, so nothing cancels the job then. Its record keeps tracking it and "
                "`airflow-durable orphans` reports it (these cells mark once the trigger has polled)"
            ),
        ),
        Fault(
            "exectimeout",
            f"`execution_timeout` ({EXECUTION_TIMEOUT} s) runs out while deferred (no retries)",
            ("deferrable",),
            final="failed",
        ),
        Fault(
            "clear34",
            "Airflow 3.4's default clear while the task waits on its job (deferred, or running): the task's "
            "state is discarded in the same step",
            ("deferrable", "sync"),
            jobs=2,
            limit=(
                "3.4 itself is not installable here: the deployment's Airflow is patched in one test-only "
                "place to have 3.4's `keep_task_state` clear field, and the test deletes the task's state "
                "rows right after the REST clear, as 3.4's endpoint does in the same request"
            ),
        ),
        Fault(
            "keepstate",
            "Airflow 3.4's clear with `keep_task_state` while the task waits on its job: carry on",
            ("deferrable", "sync"),
            limit=(
                "systems whose jobs cannot be looked up without their record (Databricks run-now) end the "
                "job on such a clear and start a new one: the kill cannot tell it from a default clear, and "
                "after that nothing else could find the job (Snowflake carries on: its "
                "statements are found by QUERY_HISTORY_BY_USER)"
            ),
            jobs_of=(("dbrunnow", 2),),
        ),
        # Graceful stops (DESIGN §8 "Stopped is not cancelled"): Airflow runs on_kill, then retries the task.
        Fault(
            "podstop",
            "A pod stop while try 1 is on its worker: SIGTERM to its supervisor (forwarded to the task: "
            f"on_kill), SIGKILL of supervisor and task {POD_GRACE} s later (sync: while it polls; "
            "deferrable: in execute, before it defers)",
            ("deferrable", "sync"),
        ),
        Fault(
            "podcomplete",
            "A pod stop inside execute_complete, after the trigger's success event: SIGTERM to the "
            f"supervisor, SIGKILL of supervisor and task {POD_GRACE} s later",
            ("deferrable",),
        ),
        Fault(
            "warmstop",
            "Celery warm shutdown: SIGTERM to every Celery worker's main process while try 1 runs on it; "
            f"the running task finishes if it can (the test waits up to {CELERY_STOP_WAIT} s, then SIGKILLs "
            "what is left), then the workers start again",
            ("deferrable", "sync"),
            needs="celery",
        ),
        Fault(
            "coldstop",
            "Celery cold shutdown: SIGTERM, then SIGQUIT 2 s later (Celery 5.6 ignores a second SIGTERM), to "
            "every Celery worker's main process while try 1 runs on it: Celery terminates the running tasks; "
            "what is left of a worker when its main process exits is SIGKILLed (a container ends with it), "
            "then the workers start again",
            ("deferrable", "sync"),
            needs="celery",
        ),
        # The scheduler's own stops, with the LocalExecutor: its workers are the tasks' supervisors.
        Fault(
            "schedstop",
            "A scheduler restart with the LocalExecutor (`systemctl restart`, a pod's stop) while try 1 "
            "polls: SIGTERM to the scheduler's process group (its workers, the tasks' supervisors, forward "
            f"it to the tasks: on_kill), SIGKILL of what is left of its session {SCHED_STOP_GRACE} s later, "
            "a new scheduler; it resets the orphaned task instances (or fails them for their missing "
            "heartbeat) and the tasks run again",
            ("sync",),
            needs="local",
            xcom_job=True,
        ),
        Fault(
            "failover",
            "A scheduler failover with the LocalExecutor while try 1 polls: the scheduler alone SIGKILLed "
            "(its workers, orphaned, supervise their tries on), a new scheduler resets the orphaned task "
            "instances; the old tries' heartbeats are refused and their supervisors SIGTERM them "
            "(on_kill), the tasks run again",
            ("sync",),
            needs="local",
            xcom_job=True,
        ),
        Fault(
            "storeread",
            "The task-state store fails (api-server route down) at the read before deciding",
            ("deferrable",),
            log="could not read task_state_store",
        ),
        Fault(
            "storeintent",
            "The task-state store fails at the write of the submission intent",
            ("deferrable",),
            log="could not write the submission intent",
        ),
        Fault(
            "storeid",
            "The task-state store fails at the write of the job id, after submit",
            ("deferrable",),
            jobs=2,
            log="because its id could not be persisted",
        ),
        Fault(
            "storeslow",
            f"A slow task-state store: every call of try 1 answered after {STORE_DELAY} s",
            ("deferrable",),
        ),
    )
}
#: The faults a test process applies to one task (the others strike a component of the deployment).
PER_TASK_FAULTS = ("workerkill", "taskkill", "supkill", "completekill", "podstop", "podcomplete")
#: Per-task faults that stop a try as a pod's stop does: SIGTERM, then SIGKILL after `POD_GRACE`.
POD_STOP_FAULTS = ("podstop", "podcomplete")
#: Faults that strike the Celery workers while every cell's try 1 is held in one (one batch per worker
#: slots' worth of cells).
CELERY_FAULTS = ("celerykill", "warmstop", "coldstop")
#: The Celery workers' own graceful shutdowns (a deployment-wide fault each, run one after the other).
CELERY_STOP_FAULTS = ("warmstop", "coldstop")
#: The scheduler's own stops, on a LocalExecutor deployment (the run's second deployment, after the
#: Celery one; each fault a batch of its own).
LOCAL_SCHEDULER_FAULTS = ("schedstop", "failover")
#: Faults that a user's action (through the REST API) or the task's own limits bring about.
USER_FAULTS = ("clear", "markfailed", "exectimeout", "clear34", "keepstate")
#: Faults that need the deployment to clear as Airflow 3.4 does (the tier patches it, see
#: ``tests/e2e_runtime/airflow34``): a deployment serving any of their cells clears that way for all.
AIRFLOW34_FAULTS = ("clear34", "keepstate")
#: Faults added to the matrix since docs/reliability.json was last recorded: their cells are awaited (not
#: run yet) until ``make reliability`` records them; take a fault out once its cells are recorded
#: (test_reliability_doc.py fails while a listed fault has all of them).
UNMEASURED_FAULTS: tuple[str, ...] = (
    "podstop",
    "podcomplete",
    "warmstop",
    "coldstop",
    "schedstop",
    "failover",
)
#: Faults of the task-state store, injected by the loopback proxy in front of the execution API.
STORE_FAULTS = ("storeread", "storeintent", "storeid", "storeslow")


#: The deployments a run starts, by results key (``docs/reliability.json``'s configurations): the
#: Celery one serves every fault but those that need the LocalExecutor, which run on a second one.
CELERY_DEPLOYMENT = "postgres+celery"
LOCAL_DEPLOYMENT = "postgres+local"


def deployment_of(fault: str) -> str:
    """The results key of the deployment ``fault``'s cells run on."""
    return LOCAL_DEPLOYMENT if FAULTS[fault].needs == "local" else CELERY_DEPLOYMENT


@dataclass(frozen=True)
class Cell:
    system: str
    fault: str
    side: str
    path: str

    @property
    def dag_id(self) -> str:
        return f"rt_{self.system}_{self.fault}_{self.side}_{self.path}"

    @property
    def operator(self) -> str:
        _, upstream, durable = SYSTEMS[self.system]
        return durable if self.side == "durable" else upstream


def cells(faults: tuple[str, ...] | None = None, systems: tuple[str, ...] | None = None) -> list[Cell]:
    """Every cell of ``faults`` x ``systems`` (default: all), both sides, each fault's paths."""
    out = []
    for fault in faults or tuple(FAULTS):
        for system in systems or tuple(SYSTEMS):
            for path in FAULTS[fault].paths:
                for side in SIDES:
                    out.append(Cell(system, fault, side, path))
    return out


def unexplained_jobs(result: dict[str, Any]) -> int:
    """Jobs of a recorded cell that its fault does not explain: a state-store fault that never reached
    the try (no store call of it was failed: the provider's deferrable path makes none) leaves nothing to
    start a second job, so any job past the first is unexplained (not a duplicate the fault caused)."""
    if result.get("reschedules"):
        return 0  # explained: Airflow rescheduled a start (see `rescheduled_jobs`)
    if result.get("fault") in STORE_FAULTS and not result.get("store_failed") and not result.get("error"):
        return max(0, int(result.get("jobs", 0)) - 1)
    return 0


def rescheduled_jobs(result: dict[str, Any]) -> int:
    """Jobs past what the cell's fault calls for, in a cell where Airflow rescheduled a start because the
    DAG could not be loaded (a parse past ``dagbag_import_timeout``): the reschedule clears a deferral's
    ``next_method``, so a start after the trigger fired ran ``execute()`` again. A second fault Airflow
    brought, not the test's."""
    if not result.get("reschedules") or result.get("error"):
        return 0
    expected = 1 if result.get("fault") in STORE_FAULTS and not result.get("store_failed") else None
    if expected is None:
        expected = (
            FAULTS[result["fault"]].expected_jobs(result.get("system", ""))
            if result.get("fault") in FAULTS
            else 1
        )
    return max(0, int(result.get("jobs", 0)) - expected)


def pending(cell: Cell) -> str:
    """Why ``cell``'s durable result is not judged yet (engine work pending), or ``""``."""
    fault = FAULTS[cell.fault]
    return fault.pending if fault.pending and cell.path in fault.pending_paths else ""


def parse_dag_id(dag_id: str) -> Cell:
    _, system, fault, side, path = dag_id.split("_")
    return Cell(system, fault, side, path)


#: Systems whose operator starts a job defined on the service (dbt Cloud's job, Databricks run-now's):
#: the emulator defines one per DAG (`defined_job_id`), named by the DAG id, and tells their runs apart.
DEFINED_JOB_SYSTEMS: tuple[str, ...] = ("dbtcloud", "dbrunnow")


def defined_job_id(dag_id: str) -> int:
    """The defined job a DAG starts a run of (`DEFINED_JOB_SYSTEMS`): one per DAG."""
    return 10_000 + int(hashlib.sha256(dag_id.encode()).hexdigest()[:6], 16) % 890_000


#: Environment variable listing the DAG ids the DAG file defines (comma-separated; unset: every cell).
CELLS_ENV = "AFD_RT_CELLS"


def selected_dag_ids() -> list[str]:
    raw = os.environ.get(CELLS_ENV, "")
    return [d for d in raw.split(",") if d] if raw else [c.dag_id for c in cells()]


#: The matrix test's phases: one pytest test each, its cells run concurrently in the shared deployment.
PHASES: dict[str, tuple[str, ...]] = {
    "pertask": ("workerkill", "taskkill", "supkill"),
    "celerykill": ("celerykill",),
    "trigkill": ("trigkill",),
    "schedrestart": ("schedrestart",),
    # A kill inside execute_complete, and what a user (or the task's own timeout) does to a task.
    "user": ("completekill", "clear", "markfailed", "exectimeout"),
    # The task-state store failing or slow at each step, through the loopback proxy.
    "store": STORE_FAULTS,
    # Airflow 3.4's clear, both ways, while the task waits on its job (a deployment patched to clear as 3.4).
    "clear34": AIRFLOW34_FAULTS,
    # Graceful stops of one task's worker: a pod's SIGTERM, then SIGKILL after its grace period.
    "podstop": POD_STOP_FAULTS,
    # Graceful stops of the Celery workers: warm, then (a batch of its own) cold shutdown.
    "celerystop": CELERY_STOP_FAULTS,
    # The scheduler's graceful restart and its failover, on the LocalExecutor deployment (started after the
    # Celery one is stopped: the phases of this dict run in order, these last).
    "schedstop": ("schedstop",),
    "failover": ("failover",),
}
#: The phases that run on the LocalExecutor deployment (the others on the Celery one).
LOCAL_PHASES: tuple[str, ...] = ("schedstop", "failover")
#: The phases whose fault strikes one cell only (its task, a user's action on it, its own store calls):
#: their cells run side by side in one batch. The others strike the whole deployment and run alone.
PER_CELL_PHASES: tuple[str, ...] = ("pertask", "user", "store", "clear34", "podstop")
#: Which phases a run covers (see :func:`selected_phases`).
PHASES_ENV = "AFD_RT_PHASES"
#: The phase sets a CI push alternates between (the commit hash picks one, as it picks the systems):
#: both at once do not fit the stage's budget. The Celery-worker kill runs in ``make reliability`` only.
#: Measured for one system (Databricks, 2 loaded cores): ``podstop`` alone 2 min 20 s side by side (its
#: cells wait beside the other per-cell phases' cells), ``celerystop`` 6 min 10 s (alone: warm, then cold),
#: so the long one joins the set without deployment-wide phases. The scheduler's own stops need the
#: LocalExecutor deployment: a set of their own starts only that one (no Celery deployment to pay for):
#: 1 min 53 s for Databricks (deployment start 18 s, ``schedstop`` 48 s, ``failover`` 36 s). With the Celery
#: stops beside ``user`` and ``store`` whole CI runs took 2,548 s (4a908fb) and 2,878 s (f9537bb), near the
#: 50-minute budget, so the Celery stops (6 min 10 s of it) make a set of their own.
CI_PHASE_SETS: tuple[tuple[str, ...], ...] = (
    ("pertask", "trigkill", "schedrestart", "clear34", "podstop"),
    ("user", "store"),
    ("celerystop",),
    ("schedstop", "failover"),
)

#: Which systems a run covers (see :func:`selected_systems`).
GROUP_ENV = "AFD_RT_GROUP"
#: Groups of systems when the commit picks one (CI): each push runs one, ``make reliability`` all.
#: One system a group, so a CI push costs what one system's cells cost.
CI_GROUPS = len(SYSTEMS)


def _commit() -> str:
    try:
        root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
        return subprocess.run(
            ["git", "rev-parse", "HEAD"], capture_output=True, text=True, cwd=root, timeout=10
        ).stdout.strip()
    except (OSError, subprocess.SubprocessError):
        return ""


def selected_systems(raw: str | None = None, commit: str | None = None) -> tuple[str, ...]:
    """The systems a run covers, from ``AFD_RT_GROUP``: ``all``, ``<i>/<n>`` (group i of n), a comma
    list of systems, or unset/empty: the group of :data:`CI_GROUPS` that the commit hash picks."""
    raw = os.environ.get(GROUP_ENV, "") if raw is None else raw
    names = tuple(SYSTEMS)
    if raw == "all":
        return names
    if raw and "/" not in raw:
        unknown = set(raw.split(",")) - set(names)
        if unknown:
            raise ValueError(f"{GROUP_ENV}: unknown systems {sorted(unknown)}; known: {', '.join(names)}")
        return tuple(raw.split(","))
    if raw:
        index, count = (int(x) for x in raw.split("/"))
    else:
        commit = _commit() if commit is None else commit
        index, count = (int(commit[:8], 16) if commit else 0) % CI_GROUPS, CI_GROUPS
    if not 0 <= index < count:
        raise ValueError(f"{GROUP_ENV}={raw!r}: the group index must be in 0..{count - 1}")
    return names[index::count]


def selected_phases(raw: str | None = None, commit: str | None = None) -> tuple[str, ...]:
    """The phases a run covers, from ``AFD_RT_PHASES``: ``all``, a comma list of phases, or unset/empty:
    the set of :data:`CI_PHASE_SETS` that the commit hash picks (independently of its system group)."""
    raw = os.environ.get(PHASES_ENV, "") if raw is None else raw
    if raw == "all":
        return tuple(PHASES)
    if raw:
        unknown = set(raw.split(",")) - set(PHASES)
        if unknown:
            raise ValueError(f"{PHASES_ENV}: unknown phases {sorted(unknown)}; known: {', '.join(PHASES)}")
        return tuple(p for p in PHASES if p in raw.split(","))
    commit = _commit() if commit is None else commit
    index = (int(commit[:8], 16) // CI_GROUPS if commit else 0) % len(CI_PHASE_SETS)
    return CI_PHASE_SETS[index]
