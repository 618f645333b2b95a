"""The model's world: one task instance of a durable operator, the Airflow machinery around it, the
emulated service, and the invariants checked after every step.

Every transition is a method here and cites the Airflow 3.3.2 function it follows. The operators are
driven only through Airflow's entry points (``execute``, ``resume_execution`` → ``execute_complete``,
``on_kill``, ``defer``, the trigger's ``run``/``on_kill``), never through the engine's internals, and the
invariants read only what Airflow and the external system can see: the emulator's ledger and job states,
the task-state-store rows, XComs, return values and trigger rows.

Definitions (also in docs/dev/model.md):

* **logical job (LJ)**: what the task instance asks for between two user actions. A new LJ begins with a
  user's clear or mark of the task, a DAG run deleted (and re-created), or the task's record deleted by
  an outside hand (retention, the Storage tab). A try belongs to the LJ current when it started
  (``ti_run`` of a fresh try); its resumed deferrals and its SIGTERM handler belong to it too. A job
  belongs to the LJ of the try whose process created it.
* **named by the record**: one of the job's ids appears anywhere in the task's current task-state-store
  rows, outside the ``history`` audit trail.
* **knows**: an actor knows a job it created, or whose id appeared in one of its requests to the
  service or in the service's answer to it; a trigger knows the jobs its serialized kwargs name.
* **tracked**: an active job is tracked while the current record names it, a live actor (a process
  not yet exited or killed, a running trigger instance) knows it, the trigger row of the task instance's
  current deferral names it (a triggerer will run it), or the try that decides next will find it by a
  lookup (`World.coming_lookup_misses`: issue 23; every job carries its task instance's identity).
* **owner**: at a given moment, the owner of the current LJ's jobs is the newest try (the process whose
  task-instance id is the row's current id) and the trigger instance built from its current deferral's
  trigger row on the triggerer that row is assigned to.
"""

from __future__ import annotations

import asyncio
import contextlib
import datetime as dt
import importlib
import itertools
import json
import logging
import sys
import threading
import time as _time
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from airflow_durable import catalogue
from airflow_durable.engine.identity import tokens_in
from tests.harness import WorkerCrash
from tests.model import airflow_side as af
from tests.model.coop import Actor, Coop, interruptible_reads, park_async
from tests.model.systems import (
    EmulatorHost,
    atoms,
    deep_atoms,
    end_job,
    job_state,
    request_text,
    text_atoms,
    without_history,
)

log = logging.getLogger(__name__)

COMMS_KINDS = frozenset(
    {"store_get", "store_set", "store_delete", "task_states", "xcom_set", "xcom_get", "xcom_delete"}
)
#: The emulator modules whose ``time.time`` is the model's clock (`World._install_clock`).
_EMULATOR_CLOCKS = (
    "airflow_durable.testing._core",
    "airflow_durable.testing._http",
    "airflow_durable.testing.aws",
    "airflow_durable.testing.databricks",
    "airflow_durable.testing.redshift_data",
    "airflow_durable.testing.snowflake",
)
_USER_ACTION = "__airflow_user_action__"  # airflow.jobs.triggerer_job_runner._USER_ACTION_CANCEL_MSG
_SHUTDOWN = "model: triggerer killed"


# ---------------------------------------------------------------------------- findings
@dataclass(frozen=True)
class Violation:
    invariant: str  # "1" … "5"
    key: str  # "<invariant>:<situation>", what KNOWN_VIOLATIONS and the summary group by
    message: str
    step: int


# ---------------------------------------------------------------------------- actors' owners
@dataclass(eq=False)
class Process:
    """One task process: ``ti_run`` of a try (or of a resumed deferral) until it exits or is killed."""

    pid: int
    kind: str  # "execute" | "resume"
    try_number: int
    ti_id: uuid.UUID
    lj: int
    operator: Any
    should_retry: bool
    next_method: str | None = None
    next_kwargs: dict[str, Any] | None = None
    main: Actor | None = None
    killer: Actor | None = None  # the SIGTERM handler's on_kill, on the same operator object
    sigterm: bool = False
    sigterm_in_call: bool = False
    node_lost: bool = False  # the supervisor died with it: nobody reports its end
    frozen: bool = False
    dead: bool = False
    exited: bool = False
    incarnation: int = 0  # of the DAG run it belongs to
    deadlocked: bool = False
    #: SIGTERM landed while the main thread held the channel's lock: on_kill could not ask Airflow anything.
    sigterm_locked: bool = False
    #: Who sent the SIGTERM: "told" (the supervisor, on a refused heartbeat: Airflow's word) or "shutdown"
    #: (the supervisor forwarding the SIGTERM of a worker, pod or scheduler shutdown: Airflow still shows the
    #: try as it was).
    stop: str | None = None
    #: The number of logical jobs begun when the SIGTERM landed (a mark after it did not cause it).
    sigterm_lj: int = 0
    #: Its supervisor is shutting down too: the grace period ends with both SIGKILLed (nobody reports).
    doomed: bool = False
    #: The task-instance id a scheduler's reset gave its task instance while this try lived (``None``: none).
    reset_to: uuid.UUID | None = None
    #: When SIGALRM fires (``timeout(execution_timeout)`` armed around ``execute`` / ``resume_execution`` as
    #: the process starts: ``_run_execute_callable``), on the model's clock; ``None``: no execution_timeout.
    alarm_at: dt.datetime | None = None
    #: Inside ``_run_execute_callable``'s ``with timeout(...)``: the alarm can fire.
    armed: bool = False
    #: The alarm fired: AirflowTaskTimeout raised in the main thread, which runs ``on_kill`` and fails.
    timed_out: bool = False
    #: When the alarm fired, the try was the owner (current id, RUNNING, its logical job current), and
    #: still was when its ``on_kill`` first asked Airflow (`World._on_channel_call`).
    timed_out_owning: bool = False
    #: An outside hand deleted the record while this try ran: its own reads then find nothing, as a
    #: superseded try's do (Airflow 3.3's client answers both 404s ``TASK_STORE_NOT_FOUND``).
    record_deleted: bool = False
    #: The timed-out main thread made its first supervisor-channel call (its ``on_kill``'s first question).
    timeout_asked: bool = False
    xcoms: dict[str, Any] = field(default_factory=dict)
    store_faults_hit: int = 0
    writes: int = 0  # successful task-state-store writes
    #: Created (or was handed by a replay) a job since its last successful store write.
    pending_submit: bool = False
    knows: set[str] = field(default_factory=set)
    created: set[str] = field(default_factory=set)
    outcome: str | None = None
    view: dict[str, Any] = field(default_factory=dict)

    @property
    def name(self) -> str:
        return f"p{self.pid}(try {self.try_number}{', resume' if self.kind == 'resume' else ''})"

    def holds_comms_lock(self) -> bool:
        """Whether the main thread is inside a supervisor-channel call (``CommsDecoder.send`` holds its
        non-reentrant lock until the answer) when SIGTERM lands: parked at a channel gate, and the model
        chose "during the call" rather than "just before it"."""
        park = self.main.parked if self.main is not None and not self.main.done else None
        return park is not None and park.kind in COMMS_KINDS and self.sigterm_in_call

    @property
    def alive(self) -> bool:
        return not self.dead and not self.exited


@dataclass(eq=False)
class TriggerInstance:
    """A trigger running in one triggerer, built from one trigger row (``TriggerRunner.create_triggers``)."""

    serial: int
    row: af.TriggerRow
    triggerer: Triggerer
    trigger: Any
    lj: int
    actor: Actor | None = None
    loop: asyncio.AbstractEventLoop | None = None
    task: asyncio.Task[Any] | None = None
    #: The task playing the triggerer's loop for it (`World._triggerer_loop`): outlives ``task``.
    root: asyncio.Task[Any] | None = None
    events: int = 0
    raised: BaseException | None = None
    timed_out: bool = False
    in_on_kill: bool = False
    on_kill_done: bool = False
    cancelled: str | None = None
    knows: set[str] = field(default_factory=set)

    @property
    def name(self) -> str:
        return f"trigger#{self.row.id}.{self.serial}@{self.triggerer.name}"

    @property
    def running(self) -> bool:
        return self.actor is not None and self.actor.live


@dataclass(eq=False)
class Triggerer:
    name: str
    alive: bool = True
    healthy: bool = True
    instances: dict[int, TriggerInstance] = field(default_factory=dict)
    events: list[tuple[int, Any, TriggerInstance]] = field(default_factory=list)
    failed: list[tuple[int, TriggerInstance]] = field(default_factory=list)


@dataclass
class Job:
    ledger_id: Any
    key: str
    atoms: tuple[str, ...]
    lj: int
    creator: str
    step: int
    cancel_failed: bool = False
    answer_lost: bool = False  # the submission took effect but its answer never reached the try
    #: The airflow-durable tokens its submission carried (the ledger's token, and any in its payload).
    tokens: frozenset[str] = frozenset()
    #: The token the system deduplicates its submission by (``None``: the system has none, or it lapsed).
    native_token: str | None = None
    #: (run incarnation, try number) of the try the model last expected to find it by a lookup.
    awaited_by: tuple[int, int] | None = None
    #: The live actors that knew it when its record went (who could still have ended it).
    holders: list[Any] = field(default_factory=list)
    #: Step at which the record last named it, and what stopped naming it.
    last_named: int | None = None
    unnamed_by: str | None = None


@dataclass
class LogicalJob:
    number: int
    cause: str  # "run created", "clear of <state>", "mark <state> while <state>", ...
    step: int
    #: For a mark: the states it happened in; for a clear of a running task: whether its worker lived.
    detail: dict[str, Any] = field(default_factory=dict)


# ---------------------------------------------------------------------------- the world
class World:
    """One example: a DAG run with the task ``job`` (a durable operator) and the machinery around it."""

    def __init__(
        self,
        host: EmulatorHost,
        case: Any,
        *,
        deferrable: bool,
        retries: int,
        trigger_ids: str = "sqlite",
        clear_on_success: bool = False,
        execution_timeout: float | None = None,
        retry_delay: float = 0.0,
    ) -> None:
        self.host = host
        #: The model's clock is the real one plus ``offset``; only `time_passes` moves the offset. The engine
        #: and the HTTP emulators read it (`_install_clock`), so deadlines, intent times and the systems'
        #: creation times stay on one clock.
        self.offset = dt.timedelta(0)
        self.execution_timeout = (
            dt.timedelta(seconds=execution_timeout) if execution_timeout is not None else None
        )
        self.retry_delay = dt.timedelta(seconds=retry_delay)
        self._clock_saved: list[tuple[Any, str, Any]] = []
        #: What a scenario learned that its test checks (e.g. which limit timed a deferral out).
        self.notes: dict[str, Any] = {}
        self.emulator = host.emulator
        self.case = case
        self.deferrable = deferrable
        self.coop = Coop()
        self.db = af.AirflowDB(retries=retries, trigger_ids=trigger_ids, clear_on_success=clear_on_success)
        self.comms = af.ModelComms(self.coop, self.db)
        self.comms.on_write = self._on_store_write
        self.comms.on_call = self._on_channel_call
        self.triggerers = {name: Triggerer(name) for name in ("t1", "t2")}
        self.processes: list[Process] = []
        self.instances: list[TriggerInstance] = []
        self.jobs: dict[str, Job] = {}
        self.ljs: list[LogicalJob] = []
        self.violations: list[Violation] = []
        self.transitions: dict[str, int] = {}
        self.log: list[str] = []
        self.step = 0
        self._pids = itertools.count(1)
        self._serials = itertools.count(1)
        self._ledger_seen = 0
        self._seen: list[tuple[Any, set[str]]] = []
        self._saved_comms: Any = None
        self._answer_lost_by: Any = None
        #: A scheduler stopped with LocalExecutor workers: the new one resets what it cannot adopt.
        self.orphaned = False
        self._saved_sleep: Any = asyncio.sleep
        self._lj_of_try: dict[tuple[int, int], int] = {}  # (run incarnation, try_number) → LJ
        #: The operator as the DAG declares it (what a coming try will run): its record key, whether it
        #: waits, whether its system can list a task instance's jobs (issue 23's lookup).
        self._declared = case.make(self.emulator, deferrable, retries=retries)
        self._declared.execution_timeout = self.execution_timeout
        self._awaited: tuple[int, int] | None = None  # set by `coming_try`
        self.emulator.lifecycle = [case.initial, case.running]
        host.gate = self._gate_http
        host.seen = self._seen_http
        self._begin_lj("run created")
        self.db.create_run()

    # ------------------------------------------------------------------ setup / teardown
    def __enter__(self) -> World:
        from airflow.sdk.execution_time import task_runner

        self._saved_comms = getattr(task_runner, "SUPERVISOR_COMMS", None)
        task_runner.SUPERVISOR_COMMS = self.comms
        self._saved_sleep = asyncio.sleep
        asyncio.sleep = self._sleep_gate  # type: ignore[assignment]
        self._install_clock()
        self._reads = interruptible_reads()
        self._reads.__enter__()
        return self

    # ------------------------------------------------------------------ the clock
    def now(self) -> dt.datetime:
        return dt.datetime.now(dt.UTC) + self.offset

    def _install_clock(self) -> None:
        """Point the engine's clock (``mixin._utcnow``, its only read of the time) and the HTTP emulators'
        (their modules' ``time.time``: creation times, token windows, list lags) at the model's. Only clock
        reads are replaced; the engine decides on what it reads, as it would at that time."""
        import types

        from airflow_durable.engine import mixin

        world = self

        def utcnow() -> dt.datetime:
            return world.now()

        shifted = types.SimpleNamespace(
            **{name: getattr(_time, name) for name in dir(_time) if not name.startswith("__")}
        )
        shifted.time = lambda: _time.time() + world.offset.total_seconds()
        self._clock_saved = [(mixin, "_utcnow", mixin._utcnow)]
        mixin._utcnow = utcnow
        for name in _EMULATOR_CLOCKS:
            module = sys.modules.get(name)
            if module is not None and getattr(module, "time", None) is _time:
                self._clock_saved.append((module, "time", _time))
                module.time = shifted  # type: ignore[attr-defined]

    def _remove_clock(self) -> None:
        for module, name, value in reversed(self._clock_saved):
            setattr(module, name, value)
        self._clock_saved = []

    def time_passes(self, seconds: float) -> list[Process]:
        """The model's clock moves on by ``seconds``. Whatever depends on it comes due: a try's SIGALRM
        (``execution_timeout``: `_alarm`), the deferral's ``trigger_timeout`` (the `trigger_timeout`
        transition becomes possible), an up-for-retry task instance's retry delay (`queue`). Returns the
        processes whose alarm fired."""
        self.offset += dt.timedelta(seconds=seconds)
        self.log.append(f"    clock: +{seconds:g} s (model time {self.offset.total_seconds():g} s in)")
        fired = []
        for process in list(self.processes):
            if self._alarm_due(process):
                self._alarm(process)
                fired.append(process)
        return fired

    def _alarm_due(self, process: Process) -> bool:
        """SIGALRM reaches the main thread: armed, due, the process alive and running (a frozen one gets it
        when it thaws), and not inside its SIGTERM handler (the model does not interrupt ``on_kill``)."""
        main = process.main
        return (
            process.alarm_at is not None
            and process.armed
            and not process.timed_out
            and process.alive
            and not process.frozen
            and main is not None
            and main.parked is not None
            and not main.dead
            and (process.killer is None or process.killer.done)
            and self.now() >= process.alarm_at
        )

    def _alarm(self, process: Process) -> None:
        """``timeout``'s SIGALRM handler raises ``AirflowTaskTimeout`` in the main thread where it is;
        ``_run_execute_callable`` catches it, calls ``task.on_kill()`` and raises it again: the try fails
        (``_handle_current_task_failed``: up for retry if ``should_retry``)."""
        from airflow.sdk.exceptions import AirflowTaskTimeout

        assert process.main is not None
        process.timed_out = True
        process.timed_out_owning = self._owns(process)
        self.log.append(f"    SIGALRM {process.name}: execution_timeout ran out, on_kill on the main thread")
        main = process.main
        self._drive(lambda: self.coop.interrupt(main, AirflowTaskTimeout()), main)

    def _owns(self, process: Process) -> bool:
        """The try owns its logical job: its id current, RUNNING, its logical job the current one."""
        ti = self.db.ti
        return ti is not None and ti.id == process.ti_id and ti.state == af.RUNNING and process.lj == self.lj

    def _on_channel_call(self, actor: Any) -> None:
        """A supervisor-channel call takes effect. A timed-out try's first is its ``on_kill``'s first question
        to Airflow: if a scheduler's reset, a clear, a mark or a deleted run superseded the try between the
        alarm and that question, the try cannot prove it owns the job (its record reads "not found"), and
        the job is the next owner's to end or adopt (invariants 2 and 3), not the timed-out try's (5)."""
        owner = getattr(actor, "owner", None)
        if isinstance(owner, Process) and actor is owner.main and owner.timed_out and not owner.timeout_asked:
            owner.timeout_asked = True
            owner.timed_out_owning = owner.timed_out_owning and self._owns(owner)

    async def _sleep_gate(self, delay: float, result: Any = None) -> Any:
        """A provider trigger's poll interval, on a trigger's thread: a gate, so a cancellation can land
        there (with its message intact) as well as inside a request. Everything else sleeps as usual."""
        caller = sys._getframe(1).f_globals.get("__name__", "")
        actor = self.coop.current
        on_trigger = (
            actor is not None and actor.role == "trigger" and actor.thread is threading.current_thread()
        )
        if on_trigger and caller.startswith("airflow.providers."):
            park = await park_async(self.coop, "sleep", f"{caller.rsplit('.', 1)[-1]} poll interval")
            if park.refused:
                raise asyncio.CancelledError(_SHUTDOWN)
            return result
        return await self._saved_sleep(delay, result)

    def __exit__(self, *exc: object) -> None:
        from airflow.sdk.execution_time import task_runner

        try:
            self.shutdown()
        finally:
            task_runner.SUPERVISOR_COMMS = self._saved_comms
            asyncio.sleep = self._saved_sleep  # type: ignore[assignment]
            self._remove_clock()
            self._reads.__exit__(None, None, None)
            self.host.gate = None
            self.host.seen = None

    def shutdown(self) -> None:
        """End every actor (a model run must leave no thread behind)."""
        for instance in self.instances:
            if instance.actor is not None and not instance.actor.done:
                self._kill_instance(instance)
        for process in self.processes:
            for actor in (process.killer, process.main):
                if actor is not None and not actor.done:
                    self.coop.kill(actor)
        for actor in self.coop.actors:
            if actor.thread is not None:
                actor.thread.join(timeout=10)

    # ------------------------------------------------------------------ bookkeeping
    def note(self, transition: str, text: str) -> None:
        self.step += 1
        self.transitions[transition] = self.transitions.get(transition, 0) + 1
        self.log.append(f"{self.step:3d} {text}")

    def _begin_lj(self, cause: str, **detail: Any) -> LogicalJob:
        lj = LogicalJob(len(self.ljs) + 1, cause, self.step, detail)
        self.ljs.append(lj)
        return lj

    @property
    def lj(self) -> int:
        return len(self.ljs)

    def violate(self, invariant: str, situation: str, message: str) -> None:
        key = f"{invariant}:{situation}"
        if any(v.key == key for v in self.violations):
            return
        self.violations.append(Violation(invariant, key, message, self.step))
        self.log.append(f"    !! violation {key}: {message}")

    def record(self) -> dict[str, Any]:
        """The task's current task-state-store rows (every key: a newer engine may use more than one)."""
        return dict(self.db.store)

    def named(self, job: Job) -> bool:
        found = deep_atoms(without_history(self.record()))
        return any(atom in found for atom in job.atoms)

    def active(self, job: Job) -> bool:
        return job_state(self.emulator, job.ledger_id)[1]

    def job_by_atom(self, atom: str) -> Job | None:
        for job in self.jobs.values():
            if atom in job.atoms:
                return job
        return None

    def jobs_named_in(self, value: Any) -> set[str]:
        found = deep_atoms(value)
        return {job.key for job in self.jobs.values() if any(a in found for a in job.atoms)}

    # ------------------------------------------------------------------ gates (server thread)
    def _gate_http(self, request: Any) -> Any:
        park = self.coop.park("http", self.host.describe(request))
        if park.refused:
            return self.host.refusal("model: the calling process is dead")
        return None

    def _seen_http(self, request: Any, answer: Any) -> None:
        actor = self.coop.current
        if actor is not None:
            self._seen.append((actor, text_atoms(request_text(request, answer))))

    # ------------------------------------------------------------------ running actors
    def _drive(self, action: Callable[[], Any], actor: Actor) -> None:
        """Run one coop action on ``actor``, then attribute what it did and react to its end."""
        action()
        self._absorb(actor)
        owner = actor.owner
        if isinstance(owner, Process):
            if actor is owner.main and actor.done and not owner.dead and not owner.exited:
                self._process_exit(owner)
            elif actor is owner.killer and actor.done and not actor.dead:
                self.check_sigterm_done(owner)
        elif isinstance(owner, TriggerInstance) and actor.done:
            self._instance_ended(owner)
        self.check()

    def _absorb(self, actor: Actor) -> None:
        """Attribute the ledger's new entries and the requests seen to the actor that just ran."""
        entries = self.emulator.ledger.entries
        new, self._ledger_seen = entries[self._ledger_seen :], len(entries)
        owner = actor.owner
        for entry in new:
            if entry.created:
                key = "|".join(atoms(entry.external_id))
                lj = owner.lj if isinstance(owner, (Process, TriggerInstance)) else self.lj
                job = Job(entry.external_id, key, atoms(entry.external_id), lj, actor.name, self.step)
                job.tokens = frozenset(
                    tokens_in(json.dumps(entry.payload, default=str)) | tokens_in(entry.token)
                )
                job.answer_lost = self._answer_lost_by is actor
                job.native_token = entry.token if hasattr(self.emulator, "forget_token") else None
                self._answer_lost_by = None
                self.jobs[key] = job
                if isinstance(owner, Process):
                    owner.created.add(key)
                    owner.knows.add(key)
                    owner.pending_submit = True
                self.log.append(f"    {actor.name} created job {entry.external_id} (LJ {lj})")
                self._check_new_job(job, owner)
            elif entry.operation == self.case.cancel_operation or entry.operation.endswith("cancel"):
                for atom in atoms(entry.external_id):
                    job = self.job_by_atom(atom)
                    if job is not None:
                        self._check_cancel(job, actor, bool(entry.payload.get("changed", True)))
                if isinstance(owner, Process) and owner.pending_submit and owner.writes:
                    owner.pending_submit = len(self._own_active(owner)) > 1  # converged once one is left
            elif entry.operation in self.case.submit_operations:  # an idempotent replay: hands a job back
                job = self.job_by_atom(atoms(entry.external_id)[0])
                if job is not None and isinstance(owner, Process):
                    owner.knows.add(job.key)
                    owner.pending_submit = True
        seen, self._seen = self._seen, []
        for who, words in seen:
            knower = who.owner
            for job in self.jobs.values():
                if any(a in words for a in job.atoms) and hasattr(knower, "knows"):
                    knower.knows.add(job.key)

    def _on_store_write(self, actor: Any) -> None:
        owner = getattr(actor, "owner", None)
        if isinstance(owner, Process):
            # On a system without an idempotency key the try cancels the other jobs carrying its token
            # right after the write that names the one it keeps (`_cancel_duplicates`): until then it is
            # still converging, as it is between its submit and that write.
            converges = bool(getattr(owner.operator, "durable_converge_after_submit", False))
            owner.pending_submit = converges and len(self._own_active(owner)) > 1
            owner.writes += 1

    def _own_active(self, process: Process) -> list[str]:
        """The still-active jobs of ``process``'s logical job that it knows."""
        return [
            key
            for key in process.knows
            if (job := self.jobs.get(key)) is not None and job.lj == process.lj and self.active(job)
        ]

    def is_status_read(self, park: Any) -> bool:
        """Whether a park is a status read of the service (a try polling, a trigger, a decision)."""
        if park is None or park.kind != "http":
            return False
        calls = [self.case.status_call] + ([self.case.status_call_sync] if self.case.status_call_sync else [])
        return any(park.detail.startswith(method) and path in park.detail for method, path in calls)

    def steppable(self) -> list[Actor]:
        """Actors the model may advance: parked, alive, not frozen, not deadlocked, and a process's main
        thread not while its SIGTERM handler runs."""
        found: list[Actor] = []
        for process in self.processes:
            if not process.alive or process.frozen:
                continue
            if process.killer is not None and not process.killer.done:
                if not process.deadlocked and process.killer.parked is not None:
                    found.append(process.killer)
                continue
            if process.main is not None and process.main.parked is not None and not process.main.dead:
                found.append(process.main)
        for instance in self.instances:
            if instance.actor is not None and instance.actor.live and instance.actor.parked is not None:
                found.append(instance.actor)
        return found

    def advance(self, actor: Actor, gates: int = 1) -> None:
        """Let an actor make the call it is parked at, and go on to its next gate, ``gates`` times."""
        for _ in range(gates):
            if actor not in self.steppable():
                return
            park = actor.parked
            self.log.append(f"      {actor.name}: {park.kind if park else '?'} {park.detail if park else ''}")
            self._drive(lambda: self.coop.step(actor), actor)

    # ------------------------------------------------------------------ scheduler: try start
    def queue(self) -> bool:
        """The scheduler queues a schedulable task instance (``DagRun.schedule_tis``: a fresh try gets
        ``try_number + 1``; one resuming from a deferral keeps it) and the executor takes the workload."""
        ti = self.db.ti
        if ti is None or ti.state not in (af.NONE, af.UP_FOR_RETRY, af.SCHEDULED):
            return False
        if not self.retry_due():
            return False
        if ti.next_method is None:
            ti.try_number += 1
        ti.state = af.QUEUED
        return True

    def retry_due(self) -> bool:
        """``NotInRetryPeriodDep``: an UP_FOR_RETRY task instance is not queued before
        ``next_retry_datetime()`` (its end date plus ``retry_delay``)."""
        ti = self.db.ti
        if ti is None or ti.state != af.UP_FOR_RETRY or ti.retry_at is None:
            return True
        return self.now() >= ti.retry_at

    def up_for_retry(self, ti: af.TaskInstanceRow) -> None:
        """UP_FOR_RETRY, with ``end_date`` now: the retry waits ``retry_delay`` (`retry_due`)."""
        ti.state = af.UP_FOR_RETRY
        ti.retry_at = self.now() + self.retry_delay

    def start_try(self) -> Process | None:
        """``ti_run`` (``airflow.api_fastapi.execution_api.routes.task_instances.ti_run``): QUEUED → RUNNING,
        the TIRunContext (dag run, ``max_tries``, ``should_retry``, ``next_method``/``next_kwargs``, and for
        a fresh try, not a resumed deferral, ``xcom_keys_to_clear``: the keys of the task instance's XComs,
        ``if not ti.next_method``); then the task runner parses the DAG (the operator has the DAG's current
        ``retries``), deletes those XComs through the channel (``task_runner.run``: ``XCom.delete`` of each
        key, before anything else) and calls ``execute`` or ``resume_execution``
        (``task_runner._execute_task``)."""
        from airflow.sdk.api.datamodels._generated import TIRunContext
        from airflow.sdk.execution_time.context import TaskStateStoreAccessor
        from airflow.sdk.execution_time.task_runner import RuntimeTaskInstance

        ti, run = self.db.ti, self.db.run
        if ti is None or run is None or ti.state != af.QUEUED:
            return None
        previous = ti.state
        resuming = ti.next_method is not None
        xcom_keys_to_clear: list[str] = []
        if not resuming:
            # On the model's clock (the engine's execution deadline counts from it), and strictly later
            # than any earlier start (start dates the engine hashes differ between tries).
            ti.start_date = max(self.now(), (ti.start_date or af.tick()) + dt.timedelta(seconds=1))
            xcom_keys_to_clear = sorted(self.db.xcom)
        ti.state = af.RUNNING
        pid = next(self._pids)
        ti.pid = pid
        self.db.refresh_run_state()
        should_retry = ti.max_tries != 0 and ti.try_number <= ti.max_tries  # _is_eligible_to_retry
        del previous
        key = (run.incarnation, ti.try_number)
        lj = self._lj_of_try.setdefault(key, self.lj)
        operator = self.case.make(self.emulator, self.deferrable, retries=self.db.retries)
        operator.execution_timeout = self.execution_timeout
        process = Process(
            pid=pid,
            kind="resume" if resuming else "execute",
            try_number=ti.try_number,
            incarnation=run.incarnation,
            ti_id=ti.id,
            lj=lj,
            operator=operator,
            should_retry=should_retry,
            next_method=ti.next_method,
            next_kwargs=_deserde(ti.next_kwargs) if ti.next_kwargs is not None else None,
            alarm_at=self.now() + self.execution_timeout if self.execution_timeout is not None else None,
        )
        context_from_server = TIRunContext(
            dag_run=self.db.dag_run_model(),
            max_tries=ti.max_tries,
            should_retry=should_retry,
            next_method=ti.next_method,
            next_kwargs=ti.next_kwargs,
            start_date=ti.start_date if resuming else None,
            xcom_keys_to_clear=xcom_keys_to_clear,
        )
        rti = RuntimeTaskInstance.model_construct(
            id=ti.id,
            task_id=af.TASK_ID,
            dag_id=af.DAG_ID,
            run_id=af.RUN_ID,
            try_number=ti.try_number,
            map_index=-1,
            task=operator,
            max_tries=ti.max_tries,
            start_date=ti.start_date,
            dag_version_id=uuid.UUID(int=1),
            context_carrier=dict(ti.context_carrier),
        )
        rti._ti_context_from_server = context_from_server
        context = {
            "ti": rti,
            "task_instance": rti,
            "task": operator,
            "run_id": af.RUN_ID,
            "dag_run": context_from_server.dag_run,
            "params": {},
            "task_state_store": TaskStateStoreAccessor(ti_id=ti.id, scope=None),  # type: ignore[arg-type]
        }

        def body() -> Any:
            from airflow.sdk.exceptions import AirflowTaskTimeout
            from airflow.sdk.execution_time.xcom import XCom

            for key in context_from_server.xcom_keys_to_clear:
                XCom.delete(key=key, dag_id=af.DAG_ID, task_id=af.TASK_ID, run_id=af.RUN_ID, map_index=-1)
            # task_runner._run_execute_callable, with the model's alarm (`_alarm`) for SIGALRM's.
            process.armed = True
            try:
                if process.next_method is not None:
                    result = operator.resume_execution(process.next_method, process.next_kwargs, context)
                else:
                    result = operator.execute(context)
            except AirflowTaskTimeout:
                operator.on_kill()
                raise
            finally:
                process.armed = False
            if result is not None and getattr(operator, "do_xcom_push", True):
                rti.xcom_push("return_value", result)  # task_runner._push_xcom_if_needed
            return result

        process.view = self._view(rti, context_from_server, operator)
        process.main = Actor(f"p{pid}", body, "try", owner=process)
        self.processes.append(process)
        self._drive(lambda: self.coop.spawn(process.main), process.main)
        return process

    def _view(self, rti: Any, context: Any, operator: Any) -> dict[str, Any]:
        """Everything a try can learn when it starts, from Airflow and the system: the runtime task
        instance, the TIRunContext ``ti_run`` answered, the DAG as parsed, the task-state-store rows, the
        task states ``GetTaskStates`` would answer, and the states of the jobs the system holds."""
        run = context.dag_run
        ti = self.db.ti
        return {
            "ti.id": str(rti.id),
            "ti.try_number": rti.try_number,
            "ti.max_tries": rti.max_tries,
            "ti.map_index": rti.map_index,
            "ti.context_carrier": json.dumps(rti.context_carrier, sort_keys=True),
            "context.max_tries": context.max_tries,
            "context.should_retry": context.should_retry,
            "context.next_method": context.next_method,
            "context.task_reschedule_count": context.task_reschedule_count,
            "dag_run.clear_number": run.clear_number,
            "dag_run.start_date": str(run.start_date),
            "dag_run.state": str(run.state),
            "dag_run.run_after": str(run.run_after),
            "dag_run.end_date": str(run.end_date),
            "task.retries": getattr(operator, "retries", None),
            "task_state_store": json.dumps(self.record(), sort_keys=True),
            # The fields of each stored value (the listener's mark is one): what the values say, not which.
            "task_state_store.fields": json.dumps(
                {k: sorted(v) if isinstance(v, dict) else type(v).__name__ for k, v in self.record().items()},
                sort_keys=True,
            ),
            "task_states": json.dumps({"job": ti.state if ti else None, "other": self.db.other_task_state}),
            "jobs": json.dumps({j.key: job_state(self.emulator, j.ledger_id)[0] for j in self.jobs.values()}),
        }

    # ------------------------------------------------------------------ a process ends
    def _process_exit(self, process: Process) -> None:
        """The task runner reports the try's outcome through the execution API
        (``ti_update_state``: SUCCESS, DEFERRED — a new Trigger row —, UP_FOR_RETRY via ``RetryTask`` when
        ``should_retry`` — ``prepare_db_for_next_try`` — else FAILED), then the executor reports the
        workload finished (``process_executor_events``)."""
        from airflow.sdk.exceptions import TaskDeferred

        assert process.main is not None
        process.exited = True
        error = process.main.error
        if error is None:
            outcome = "success"
        elif isinstance(error, TaskDeferred):
            outcome = "deferred"
        elif isinstance(error, WorkerCrash):
            outcome = "crashed"
        else:
            outcome = "failed"
        process.outcome = outcome
        detail = "" if error is None else f": {type(error).__name__}: {str(error)[:160]}"
        self.log.append(f"    {process.name} ended {outcome}{detail}")
        self._check_try_end(process, outcome, error)
        if process.timed_out:
            self.check_timeout_done(process)
        ti = self.db.ti
        current = ti is not None and ti.id == process.ti_id and ti.state == af.RUNNING
        if current and outcome == "failed" and process.stop == "shutdown" and "told to stop" in str(error):
            # A stop is not a cancel: a try whose worker shuts down while Airflow shows it running goes on.
            self.violate(
                "4",
                "shutdown-fails-the-try" + ("-record-deleted" if process.record_deleted else ""),
                f"{process.name} failed as told to stop, but its SIGTERM was a shutdown and Airflow still "
                "shows it running",
            )
        if current and ti is not None:
            if outcome == "success":
                ti.state = af.SUCCESS
                ti.next_method = ti.next_kwargs = None
                if self.db.clear_on_success:  # ti_update_state: [state_store] clear_on_success
                    self.db.store.clear()
                    self._record_gone("clear_on_success")
            elif outcome == "deferred":
                assert isinstance(error, TaskDeferred)
                # task_runner._defer_task: trigger kwargs and next_kwargs travel serde-serialized.
                classpath, kwargs = error.trigger.serialize()
                row = self.db.new_trigger(classpath, _serde(kwargs), ti.id)
                ti.state = af.DEFERRED
                ti.trigger_id = row.id
                ti.next_method = error.method_name
                ti.next_kwargs = _serde(error.kwargs or {})
                timeout = error.timeout
                if isinstance(timeout, (int, float)) and not isinstance(timeout, bool):
                    timeout = dt.timedelta(seconds=timeout)
                ti.trigger_timeout = self.now() + timeout if timeout is not None else None
                self.log.append(f"    trigger row {row.id} (serial {row.serial}) for {process.name}")
            else:
                self._fail_running(ti, process.should_retry)
            self.db.refresh_run_state()
        self._executor_event(process)

    def _fail_running(self, ti: af.TaskInstanceRow, retry: bool) -> None:
        """A RUNNING try failed: UP_FOR_RETRY with a new task-instance id (``prepare_db_for_next_try``), or
        FAILED (``TaskInstance.fetch_handle_failure_context`` / the RetryTask and TaskState payloads)."""
        ti.next_method = ti.next_kwargs = None
        if retry:
            ti.id = uuid.uuid4()
            self.up_for_retry(ti)
        else:
            ti.state = af.FAILED

    def _executor_event(self, process: Process) -> None:
        """``SchedulerJobRunner.process_executor_events``: the executor reports the workload finished with
        SUCCESS (``supervise`` returned). For a task instance cleared while running (RESTARTING, same try):
        ``max_tries = try_number + task.retries`` and state None, so it is scheduled again."""
        ti = self.db.ti
        if ti is not None and ti.state == af.RESTARTING and ti.try_number == process.try_number:
            ti.max_tries = ti.try_number + self.db.retries
            ti.state = af.NONE
            self.log.append(
                f"    executor: {process.name} terminated after a clear: max_tries={ti.max_tries}"
            )

    # ------------------------------------------------------------------ worker death and heartbeats
    def kill_process(self, process: Process, node_lost: bool) -> None:
        """SIGKILL of the task process. With its supervisor alive, the supervisor reports the exit
        (``ActivitySubprocess.final_state``: UP_FOR_RETRY if ``should_retry`` else FAILED, through the
        ``finish`` route) and the executor the workload's end; with the node lost, nobody reports and the
        task instance stays RUNNING until the heartbeat timeout."""
        process.dead = True
        process.node_lost = node_lost
        for actor in (process.killer, process.main):
            if actor is not None:
                self._drive(lambda a=actor: self.coop.kill(a), actor)
        self.log.append(f"    {process.name} killed{' with its node' if node_lost else ''}")
        if not node_lost:
            ti = self.db.ti
            if ti is not None and ti.id == process.ti_id and ti.state == af.RUNNING:
                self._fail_running(ti, process.should_retry)
                self.db.refresh_run_state()
            self._executor_event(process)
        self.check()

    def heartbeat(self, process: Process, in_call: bool = False) -> bool:
        """The supervisor's ``_send_heartbeat_if_needed`` → ``ti_heartbeat``: 404/410 (the id was
        superseded by a retry or a clear, or the run deleted) or 409 (no longer RUNNING: marked) →
        ``kill(SIGTERM)``; the task runner's ``_on_term`` calls ``task.on_kill()`` on the main thread."""
        if not process.alive or process.frozen or process.node_lost or process.sigterm:
            return False
        ti = self.db.ti
        fine = ti is not None and ti.id == process.ti_id and ti.state == af.RUNNING and ti.pid == process.pid
        if fine:
            return False
        self._sigterm(process, in_call, "told")
        return True

    def _sigterm(self, process: Process, in_call: bool, stop: str) -> None:
        """SIGTERM reaches the task process: ``task_runner._on_term`` calls ``task.on_kill()`` on the main
        thread and returns (the main thread goes on until the process exits or is SIGKILLed)."""
        process.sigterm = True
        process.stop = stop
        process.sigterm_lj = self.lj
        process.sigterm_in_call = in_call
        process.sigterm_locked = process.holds_comms_lock()
        operator = process.operator
        process.killer = Actor(f"p{process.pid}.on_kill", operator.on_kill, "on_kill", owner=process)
        self.log.append(f"    SIGTERM {process.name} ({stop}): on_kill")
        self._drive(lambda: self.coop.spawn(process.killer), process.killer)

    def worker_shutdown(self, process: Process, in_call: bool = False) -> None:
        """A graceful stop of the worker, pod or systemd service running ``process``: the supervisor gets
        SIGTERM and forwards it to the task process (``supervisor.ActivitySubprocess.wait`` installs
        ``_forward_signal`` for SIGTERM/SIGINT "so the operator's on_kill() hook runs on graceful shutdown";
        systemd's ``KillMode=control-group`` signals the task process directly): ``on_kill`` runs while
        Airflow still shows the try as it was. After the grace (Kubernetes ``terminationGracePeriodSeconds``,
        systemd ``TimeoutStopSec``) everything is SIGKILLed, the supervisor with it: `grace_expires`."""
        process.doomed = True
        if not process.sigterm:
            self._sigterm(process, in_call, "shutdown")

    def grace_expires(self, process: Process) -> None:
        """The grace period of a shutdown ends: the task process and its supervisor are SIGKILLed, so
        nobody reports the exit (``ActivitySubprocess.final_state`` never runs); the task instance stays
        RUNNING until the scheduler's heartbeat timeout (`purge`) fails it or retries it."""
        self.kill_process(process, node_lost=True)

    def scheduler_restart(self, executor: str, in_call: bool = False) -> None:
        """The scheduler stops and a new one starts. ``local``: LocalExecutor's workers are the scheduler's
        children (``LocalExecutor`` ``multiprocessing`` workers running ``supervise``): a graceful stop
        forwards SIGTERM to every task process (`worker_shutdown`) and they die with it after the grace;
        the new scheduler then resets the orphaned task instance (`reset_orphans`). ``celery``: the workers
        are not the scheduler's; the new scheduler adopts the running task instance
        (``CeleryExecutor.try_adopt_task_instances``, by its ``external_executor_id``): nothing happens to
        the try."""
        if executor == "celery":
            self.log.append("    new scheduler adopts the task instance (CeleryExecutor): the try runs on")
            return
        for process in self.processes:
            if process.alive and not process.node_lost:
                if process.frozen:  # the signal waits for a thaw that the grace's SIGKILL forestalls
                    process.doomed = True
                    continue
                self.worker_shutdown(process, in_call)
        self.orphaned = True

    def reset_orphans(self) -> bool:
        """``SchedulerJobRunner.adopt_or_reset_orphaned_tasks`` of the new scheduler: a task instance in
        ``State.adoptable_states`` (queued, running, restarting) whose scheduler job is gone, not adopted by
        the executor (LocalExecutor adopts nothing), is reset: ``prepare_db_for_next_try`` (history kept, a
        new task-instance id), ``state = None``, ``external_executor_id = None``, ``next_method`` cleared;
        ``max_tries``, the run's ``clear_number`` and the trace carrier are unchanged. The scheduler then
        queues it (``DagRun.schedule_tis``): a new try, whatever its retries. Not a clear: the logical job
        goes on."""
        self.orphaned = False
        ti = self.db.ti
        if ti is None or ti.state not in (af.QUEUED, af.RUNNING, af.RESTARTING):
            return False
        old = ti.id
        ti.id = uuid.uuid4()
        ti.state = af.NONE
        ti.next_method = ti.next_kwargs = None
        for process in self.processes:
            if process.ti_id == old and process.alive:
                process.reset_to = ti.id
        self.log.append(f"    scheduler: task instance reset (new id, no state, max_tries={ti.max_tries})")
        self.db.refresh_run_state()
        return True

    def escalate(self, process: Process) -> None:
        """The supervisor's SIGTERM → SIGKILL escalation (``WatchedSubprocess.kill``, 5 s later)."""
        self.kill_process(process, node_lost=False)

    def purge(self) -> bool:
        """Heartbeat timeout: ``SchedulerJobRunner._find_task_instances_without_heartbeats`` (RUNNING or
        RESTARTING, no recent heartbeat) → ``_purge_task_instances_without_heartbeats`` → the executor
        reports FAILED → ``process_executor_events`` → ``TaskInstance.handle_failure`` →
        ``fetch_handle_failure_context``: ``is_eligible_to_retry`` (RESTARTING: always; else ``task.retries
        and try_number <= max_tries``) → UP_FOR_RETRY (a RUNNING one through ``prepare_db_for_next_try``: new
        id), else FAILED; then, still in the scheduler's session before ``save_to_db``,
        ``get_listener_manager().hook.on_task_instance_failed(previous_state=RUNNING, task_instance=ti,
        error=...)`` (``models/taskinstance.py``, the end of ``fetch_handle_failure_context``): the plugins'
        listeners, ours among them (`airflow_durable.plugins.listener`), run on the ORM task instance."""
        ti = self.db.ti
        if ti is None or ti.state not in (af.RUNNING, af.RESTARTING):
            return False
        holder = next((p for p in self.processes if p.pid == ti.pid), None)
        silent = holder is None or (holder.dead and holder.node_lost) or (holder.alive and holder.frozen)
        if not silent:
            return False
        loaded = ti.state
        if ti.state == af.RESTARTING:
            new_state = af.UP_FOR_RETRY
        else:
            eligible = bool(self.db.retries) and ti.try_number <= ti.max_tries
            new_state = af.UP_FOR_RETRY if eligible else af.FAILED
        ti.next_method = ti.next_kwargs = None
        # The hook sees the task instance as loaded (its state history: loaded → new) under its current id.
        ti.state = loaded
        before = dict(self.db.store)
        af.ListenerSession.on_task_instance_failed(
            self.db,
            new_state=new_state,
            previous_state=af.RUNNING,
            error="Task did not emit heartbeat within time limit",
            flush_first=False,
        )
        if self.db.store != before:
            self.log.append(
                f"    listener: on_task_instance_failed marked the record ({loaded} → {new_state})"
            )
        if loaded == af.RESTARTING:
            self.up_for_retry(ti)
        else:
            self._fail_running(ti, new_state == af.UP_FOR_RETRY)
        self.db.refresh_run_state()
        return True

    # ------------------------------------------------------------------ triggers
    def triggerer_sync(self, triggerer: Triggerer) -> None:
        """``TriggerRunnerSupervisor.load_triggers``: ``Trigger.assign_unassigned`` (rows whose triggerer
        is not alive and healthy), ``ids_for_triggerer``, then ``update_triggers``: new ids → built from
        their row (``build_trigger_workloads``: only a row a task instance still references), running ids no
        longer requested → ``cancel_triggers`` with the user-action message → ``run_trigger`` calls
        ``on_kill`` unless the trigger timed out."""
        if not triggerer.alive:
            return
        for row in self.db.triggers.values():
            holder = self.triggerers.get(row.triggerer or "")
            if triggerer.healthy and (holder is None or not holder.alive or not holder.healthy):
                row.triggerer = triggerer.name
        requested = {i for i, row in self.db.triggers.items() if row.triggerer == triggerer.name}
        running = {i for i, inst in triggerer.instances.items() if inst.running}
        known = running | {e[0] for e in triggerer.events} | {f[0] for f in triggerer.failed}
        for trigger_id in sorted(requested - known):
            row = self.db.triggers[trigger_id]
            ti = self.db.ti
            if ti is None or ti.trigger_id != trigger_id:
                continue  # "TaskInstance of Trigger is None ... Skipping trigger instantiation"
            self._build_instance(triggerer, row)
        for trigger_id in sorted(running - requested):
            self._cancel_instance(triggerer.instances[trigger_id], user_action=True)

    def _build_instance(self, triggerer: Triggerer, row: af.TriggerRow) -> None:
        from airflow.executors.workloads.task import TaskInstanceDTO

        module, _, name = row.classpath.rpartition(".")
        trigger = getattr(importlib.import_module(module), name)(**_deserde(row.kwargs))
        ti = self.db.ti
        assert ti is not None
        trigger.task_instance = TaskInstanceDTO.model_construct(
            id=ti.id,
            dag_id=af.DAG_ID,
            run_id=af.RUN_ID,
            task_id=af.TASK_ID,
            map_index=-1,
            try_number=ti.try_number,
            pool_slots=1,
            priority_weight=1,
            dag_version_id=uuid.UUID(int=1),
        )
        trigger.trigger_id = row.id
        trigger.triggerer_job_id = triggerer.name
        lj = next((p.lj for p in reversed(self.processes) if p.ti_id == row.ti_id), self.lj)
        instance = TriggerInstance(next(self._serials), row, triggerer, trigger, lj)
        instance.knows = self.jobs_named_in(row.kwargs)
        triggerer.instances[row.id] = instance
        self.instances.append(instance)
        instance.actor = Actor(
            instance.name, lambda: self._run_trigger_thread(instance), "trigger", owner=instance
        )
        self.log.append(
            f"    {triggerer.name} runs trigger row {row.id} (serial {row.serial}) as {instance.name}"
        )
        self._drive(lambda: self.coop.spawn(instance.actor), instance.actor)

    def _run_trigger_thread(self, instance: TriggerInstance) -> None:
        loop = asyncio.new_event_loop()
        instance.loop = loop
        asyncio.set_event_loop(loop)
        try:
            with contextlib.suppress(asyncio.CancelledError):
                loop.run_until_complete(self._triggerer_loop(instance))
        finally:
            with contextlib.suppress(Exception):
                loop.run_until_complete(loop.shutdown_asyncgens())
            with contextlib.suppress(Exception):
                # A trigger's work on executor threads ends with it (no call of it outlives the actor).
                loop.run_until_complete(loop.shutdown_default_executor())
            loop.close()

    async def _triggerer_loop(self, instance: TriggerInstance) -> None:
        """The triggerer's event loop, as far as one trigger goes: ``TriggerRunner.run`` runs ``arun`` with
        ``asyncio.run``, one loop for the triggerer's life, and each trigger is a task on it
        (``create_triggers`` → ``run_trigger``). When that task ends, ``cleanup_finished_triggers`` drops it,
        but the loop runs on, and so do the tasks the trigger started: the owned trigger's note
        (``_note_try``) and its shielded ``on_kill`` work (``_kill``), which outlives the re-cancel
        ``cancel_triggers`` sends the trigger's task on every runner loop. So the actor stays live (it
        parks, and it knows the trigger's jobs) until none of the tasks its trigger started is left; a
        killed triggerer (`_kill_instance`) stops them all."""
        from asgiref.sync import ThreadSensitiveContext

        # asgiref runs thread-sensitive sync_to_async calls on one process-wide thread; each triggerer is
        # a process of its own, so each trigger here gets its own (one parked trigger must not block another).
        # Entered around the background tasks too: they inherit it, and must not outlive it.
        instance.root = asyncio.current_task()
        async with ThreadSensitiveContext():
            instance.task = asyncio.get_running_loop().create_task(self._run_trigger(instance))
            await asyncio.wait({instance.task})
            me = asyncio.current_task()
            while pending := [t for t in asyncio.all_tasks() if t is not me and not t.done()]:
                await asyncio.wait(pending)
        # The triggerer ran the trigger's on_kill to its end: the shielded work included.
        instance.on_kill_done = instance.in_on_kill and not (
            instance.actor is not None and instance.actor.dead
        )

    async def _run_trigger(self, instance: TriggerInstance) -> None:
        """``TriggerRunner.run_trigger``: iterate the trigger's events into the triggerer's outbound queue;
        cancelled with the user-action message → ``await trigger.on_kill()`` (not if it timed out); always
        ``trigger.cleanup()``."""
        trigger = instance.trigger
        try:
            async for event in trigger.run():
                if instance.actor is not None and instance.actor.dead:
                    return
                instance.events += 1
                instance.triggerer.events.append((instance.row.id, event.payload, instance))
        except asyncio.CancelledError as err:
            if not instance.timed_out and err.args and err.args[0] == _USER_ACTION:
                instance.in_on_kill = True
                try:
                    await trigger.on_kill()
                except Exception as kill_err:  # "on_kill() raised an exception"
                    log.info("on_kill raised: %s", kill_err)
            raise
        except Exception as err:
            instance.raised = err
        finally:
            with contextlib.suppress(Exception):
                await trigger.cleanup()

    def _cancel_instance(self, instance: TriggerInstance, user_action: bool) -> None:
        """``TriggerRunner.cancel_triggers``: ``task.cancel(msg)`` on the trigger's asyncio task.

        The runner learns what to cancel from the supervisor's answer to its own request
        (``sync_state_to_supervisor``), on the channel the trigger's calls travel too, and the supervisor
        answers in order: a channel call the trigger had in flight is answered before the cancel lands.
        Only the trigger's own task is cancelled: a task it started (its note, its shielded ``on_kill``
        work) goes on where it is parked, and so does the re-cancel of a trigger already in ``on_kill``
        (it ends the task that awaits the shielded work, nothing else)."""
        actor = instance.actor
        if actor is None or not actor.live or instance.loop is None or instance.task is None:
            return
        if instance.task.done():
            return  # only its background work runs on (the actor is parked: the loop is idle)
        park = actor.parked
        if park is not None and park.kind in COMMS_KINDS:
            self.log.append(f"      {actor.name}: {park.kind} {park.detail} (answered before the cancel)")
            self._drive(lambda: self.coop.step(actor), actor)
            if not actor.live:
                return
        instance.cancelled = _USER_ACTION if user_action else _SHUTDOWN
        self.log.append(f"    cancel {instance.name}{' (user action: on_kill)' if user_action else ''}")
        loop, task, message = instance.loop, instance.task, instance.cancelled
        parked = actor.parked
        if instance.in_on_kill or (parked is not None and parked.kind in COMMS_KINDS):
            # The task awaits its shielded on_kill (or the loop is busy in a background task's call): the
            # cancel reaches it when the loop next runs; it parks nowhere and changes nothing the model sees.
            with contextlib.suppress(RuntimeError):
                loop.call_soon_threadsafe(task.cancel, message)
            return
        self.coop.abandon(actor)

        def kick() -> None:
            # The cancel is queued on the loop before the abandoned call is answered (with a refusal no
            # one reads), so the coroutine sees the cancellation, never the answer.
            with contextlib.suppress(RuntimeError):  # the loop closed: the trigger is ending anyway
                loop.call_soon_threadsafe(task.cancel, message)
            self.coop.refuse_abandoned(actor, locked=True)

        self._drive(lambda: self.coop.resume(actor, kick), actor)

    def _kill_instance(self, instance: TriggerInstance) -> None:
        actor = instance.actor
        if actor is None or actor.done:
            return
        loop = instance.loop

        def stop_all() -> None:
            # The triggerer process dies: every task on its loop stops, the background ones too.
            for task in asyncio.all_tasks():
                if task is not instance.root:
                    task.cancel(_SHUTDOWN)

        def kick() -> None:
            if loop is not None:
                with contextlib.suppress(RuntimeError):  # the loop closed: the trigger is ending anyway
                    loop.call_soon_threadsafe(stop_all)

        self._drive(lambda: self.coop.kill(actor, kick), actor)

    def _instance_ended(self, instance: TriggerInstance) -> None:
        """``TriggerRunner.cleanup_finished_triggers``: a trigger that ended without an event (or raised)
        is a failed trigger (``failed_triggers``), unless it was cancelled."""
        if instance.actor is not None and instance.actor.dead:
            return
        if instance.cancelled is None and instance.events == 0:
            instance.triggerer.failed.append((instance.row.id, instance))
            why = instance.raised or (instance.actor.error if instance.actor else None)
            self.log.append(
                f"    {instance.name} ended without an event: {type(why).__name__}: {str(why)[:200]}"
            )
        if instance.on_kill_done:
            self._check_on_kill_done(instance)
        elif instance.cancelled == _USER_ACTION and not instance.timed_out:
            self._check_on_kill_skipped(instance)

    def triggerer_events(self, triggerer: Triggerer) -> None:
        """``handle_events`` → ``Trigger.submit_event``: every DEFERRED task instance whose ``trigger_id``
        is the event's trigger id resumes (``handle_event_submit``: ``next_kwargs["event"]``, ``trigger_id``
        None, SCHEDULED); ``handle_failed_triggers`` → ``Trigger.submit_failure``: SCHEDULED with
        ``__fail__`` / TRIGGER_FAILURE."""
        if not triggerer.alive:
            return
        events, triggerer.events = triggerer.events, []
        for trigger_id, payload, instance in events:
            ti = self.db.ti
            if ti is not None and ti.state == af.DEFERRED and ti.trigger_id == trigger_id:
                # handle_event_submit: decode next_kwargs, add the event, serialize again.
                ti.next_kwargs = _serde({**_deserde(ti.next_kwargs or {}), "event": payload})
                ti.trigger_id = None
                ti.state = af.SCHEDULED
                self.log.append(
                    f"    event of {instance.name} resumes try {ti.try_number}: {str(payload)[:120]}"
                )
            else:
                self.log.append(f"    event of {instance.name} reaches no deferred task instance")
        failures, triggerer.failed = triggerer.failed, []
        for trigger_id, instance in failures:
            ti = self.db.ti
            if ti is not None and ti.state == af.DEFERRED and ti.trigger_id == trigger_id:
                ti.next_method = af.TRIGGER_FAIL
                ti.next_kwargs = _serde({"error": af.TRIGGER_FAILURE, "traceback": [str(instance.raised)]})
                ti.trigger_id = None
                ti.state = af.SCHEDULED
                self.log.append(f"    {instance.name} failed: try {ti.try_number} resumes to fail")
        for trigger_id, instance in list(triggerer.instances.items()):
            if instance.actor is None or instance.actor.done:
                del triggerer.instances[trigger_id]

    def clean_unused(self) -> None:
        """``Trigger.clean_unused``: task instances not DEFERRED lose their ``trigger_id``; trigger rows no
        task instance references are deleted. The filter is SQL's ``state != 'deferred'``, which a NULL state
        does not pass: a task instance a clear left with no state keeps its trigger (and the trigger runs
        on) until the scheduler gives it one."""
        ti = self.db.ti
        if ti is not None and ti.state is not None and ti.state != af.DEFERRED:
            ti.trigger_id = None
        keep = {ti.trigger_id} if ti is not None else set()
        for trigger_id in list(self.db.triggers):
            if trigger_id not in keep:
                del self.db.triggers[trigger_id]

    def trigger_due(self) -> bool:
        """A DEFERRED task instance's ``trigger_timeout`` has passed on the model's clock."""
        ti = self.db.ti
        return (
            ti is not None
            and ti.state == af.DEFERRED
            and ti.trigger_timeout is not None
            and self.now() >= ti.trigger_timeout
        )

    def trigger_timeout(self) -> bool:
        """``SchedulerJobRunner.check_trigger_timeouts``: a DEFERRED task instance past its
        ``trigger_timeout`` → SCHEDULED with ``__fail__`` / TRIGGER_TIMEOUT, ``trigger_id`` None; its
        trigger, cancelled later, gets no ``on_kill`` (``run_trigger``: the timeout passed)."""
        ti = self.db.ti
        if ti is None or ti.state != af.DEFERRED or not self.trigger_due():
            return False
        for instance in self.instances:
            if instance.row.id == ti.trigger_id and instance.row.ti_id == ti.id:
                instance.timed_out = True
        ti.state = af.SCHEDULED
        ti.next_method = af.TRIGGER_FAIL
        ti.next_kwargs = _serde({"error": af.TRIGGER_TIMEOUT})
        ti.trigger_id = None
        return True

    def kill_triggerer(self, triggerer: Triggerer) -> None:
        """SIGKILL of a triggerer: its triggers stop without ``on_kill`` or ``cleanup``; their rows stay
        assigned to it until a live triggerer's ``assign_unassigned`` takes them."""
        triggerer.alive = False
        for instance in list(triggerer.instances.values()):
            self._kill_instance(instance)
        triggerer.instances.clear()
        triggerer.events.clear()
        triggerer.failed.clear()

    # ------------------------------------------------------------------ user actions
    def clear(self, reset_dag_run: bool = True) -> None:
        """``airflow.models.taskinstance.clear_task_instances`` (UI / REST ``clearTaskInstances``):
        ``prepare_db_for_next_try`` (a new task-instance id); RUNNING → RESTARTING, ``max_tries`` untouched;
        any other state → None, ``max_tries = try_number + task.retries``, ``next_method``/``next_kwargs``
        cleared (``trigger_id`` is left for ``Trigger.clean_unused``). With a ``dag_run_state`` (the REST
        body's ``reset_dag_runs``, default true): the run's ``clear_number`` + 1, a new run trace carrier,
        and a finished run queued again with a new ``start_date``. Last, every cleared task instance gets
        ``new_task_run_carrier(dag_run.context_carrier)``."""
        ti, run = self.db.ti, self.db.run
        assert ti is not None and run is not None
        before = ti.state
        holder = next((p for p in self.processes if p.pid == ti.pid and p.try_number == ti.try_number), None)
        worker = "none"
        if before == af.RUNNING and holder is not None:
            worker = "dead" if (holder.dead and holder.node_lost) else ("frozen" if holder.frozen else "live")
        ti.id = uuid.uuid4()
        if before == af.RUNNING:
            ti.state = af.RESTARTING
        else:
            ti.max_tries = ti.try_number + self.db.retries
            ti.state = af.NONE
            ti.next_method = ti.next_kwargs = None
        if reset_dag_run:
            self._reset_run_for_clear()
        ti.context_carrier = af.task_run_carrier(run.context_carrier)
        cause = f"clear of {before or 'none'}" + ("" if reset_dag_run else " (reset_dag_runs=false)")
        self._begin_lj(cause, state=before, worker=worker, reset_dag_run=reset_dag_run)

    def clear_discarding_state(self, reset_dag_run: bool = True) -> None:
        """Airflow 3.4's default task clear (REST ``POST .../clearTaskInstances`` without ``keep_task_state``:
        the UI's clear dialog, airflowctl), done on 3.3.2 as 3.4 does it: ``clear_task_instances`` as in
        `clear`, then, in the same request once the clear succeeded, the cleared task instance's
        ``task_state_store`` rows are deleted (/work/shared/reference/airflow-3.4-clear.md; upstream
        apache/airflow#72100). A DAG-run clear and a mark keep the state on 3.4 (3.5 discards on DAG-run
        clears too): only this clear kind discards. The engine needs nothing of 3.4 here: the next try finds
        no record, and the clear is its evidence of an earlier lifetime (``clear_number``, ``max_tries``)."""
        self.clear(reset_dag_run=reset_dag_run)
        self.ljs[-1].detail["state_discarded"] = True
        if self.db.store:
            self.db.store.clear()
            self._record_gone("clear discarding state")

    def _reset_run_for_clear(self) -> None:
        run = self.db.run
        assert run is not None
        run.clear_number += 1
        run.context_carrier = af.dag_run_carrier()
        if run.state != "running":
            run.state = "running"
            run.start_date = af.tick()

    def clear_other(self, reset_dag_run: bool = True) -> None:
        """``clear_task_instances`` of the run's other task: for ``job`` only the run changes (with
        ``reset_dag_runs``: ``clear_number`` + 1, a new run trace carrier, a finished run queued again
        with a new ``start_date``); ``job``'s own ``context_carrier`` stays."""
        if reset_dag_run:
            self._reset_run_for_clear()
        self.db.other_task_state = af.SUCCESS  # it runs again at once and succeeds

    def mark(self, state: str) -> bool:
        """Mark success / failed through the public API (``patch_task_instance`` →
        ``DAG.set_task_instance_state`` → ``TaskInstance.set_state``; then, for success,
        ``_clear_task_state_store_on_success`` and, for failed, ``_emit_state_listener_hooks`` →
        ``on_task_instance_failed``): the state changes and nothing else — same id, ``next_method`` and
        ``trigger_id`` kept. A RUNNING try
        learns it at its next heartbeat (409 → SIGTERM → ``on_kill``); a DEFERRED one's trigger is removed
        by ``Trigger.clean_unused`` and cancelled with the user-action message (``on_kill``)."""
        ti = self.db.ti
        assert ti is not None
        if ti.state == state:
            return False
        before = ti.state
        ti.state = state
        if state == af.SUCCESS and self.db.clear_on_success:
            # _patch_task_instance_state → _clear_task_state_store_on_success ([state_store] clear_on_success)
            self.db.store.clear()
            self._record_gone("clear_on_success")
        elif state == af.FAILED and self.db.run is not None:
            # _emit_state_listener_hooks: on_task_instance_failed(previous_state=None, ...) after set_state
            # flushed the new state (so a listener sees no state change pending on the ORM object).
            ti.state = before
            af.ListenerSession.on_task_instance_failed(
                self.db,
                new_state=state,
                previous_state=None,
                error=f"TaskInstance's state was manually set to `{state}`.",
                flush_first=True,
            )
            ti.state = state
        self.db.refresh_run_state()
        self._begin_lj(f"mark {state} while {before or 'none'}", state=before, mark=state)
        return True

    def edit_retries(self, retries: int) -> None:
        """A DAG file edit of the task's ``retries``: later parses (new tries, resumed deferrals) and
        later clears / RESTARTING resets see it; ``max_tries`` of the task instance does not change."""
        self.db.retries = retries

    def delete_record(self, why: str) -> bool:
        """The record deleted by an outside hand: retention (``[state_store] default_retention_days``
        expiry), the UI's Storage tab. The next try cannot know what it tracked: a new LJ begins."""
        if not self.db.store:
            return False
        self.db.store.clear()
        for process in self.processes:
            if process.alive:
                process.record_deleted = True
        self._record_gone(why)
        self._begin_lj(f"record deleted ({why})")
        return True

    def _record_gone(self, why: str) -> None:
        holders = self._live_holders()
        for job in self.jobs.values():
            if job.unnamed_by is None and job.last_named is not None and self.active(job):
                job.holders = [h for h in holders if job.key in h.knows]
                job.unnamed_by = f"{why}-{'holder-left-it' if job.holders else 'nobody-held-it'}"

    def _live_holders(self) -> list[Any]:
        found: list[Any] = [p for p in self.processes if p.alive]
        return found + [i for i in self.instances if i.running]

    def delete_run(self) -> bool:
        """The DAG run deleted (REST ``DELETE dagRuns``): its task instances and task-state-store rows go;
        trigger rows no task instance references are removed by the next ``Trigger.clean_unused``."""
        if self.db.run is None:
            return False
        self.db.delete_run()
        self._record_gone("run deleted")
        self._begin_lj("run deleted")
        return True

    def create_run(self) -> bool:
        """The DAG run triggered again with the same run_id: a new row, a new start_date, try 0."""
        if self.db.run is not None:
            return False
        self.db.create_run()
        self._begin_lj("run re-created")
        return True

    # ------------------------------------------------------------------ the external system
    def end_job(self, job: Job, outcome: str) -> None:
        end_job(self.case, self.emulator, job.ledger_id, outcome)

    def token_window_lapses(self, job: Job) -> None:
        """The system's deduplication window for ``job``'s token passes while the job runs (the emulator's
        ``forget_token``): a submission with that token starts a new job."""
        assert job.native_token is not None
        self.emulator.forget_token(job.native_token)
        job.native_token = None

    def service_fault(self, kind: str) -> None:
        """One failure of the emulated service, at the transport level (its FaultPlan): the next status
        read answers 5xx (whoever makes it: a try's poll, the decision, a trigger), the next cancel
        answers 5xx (the job keeps running), or the next submission takes effect and its answer is lost
        (a 5xx after the job was created)."""
        case, faults = self.case, self.emulator.faults
        aws = case.cancel_operation[:1].isupper()
        # As many failures in a row as the provider's client retries (the conformance case knows): one
        # outage the caller sees, not one its retries hide.
        if kind == "status":
            method, path = case.status_call
            faults.add(
                method=method,
                path_contains=path,
                status=case.transient_status,
                times=case.status_errors_to_give_up,
            )
            if case.status_call_sync is not None:
                method, path = case.status_call_sync
                faults.add(
                    method=method,
                    path_contains=path,
                    status=case.transient_status,
                    times=case.status_errors_to_give_up_sync or case.status_errors_to_give_up,
                )
        elif kind == "cancel":
            path = f"/{case.cancel_operation}" if aws else "cancel"
            faults.add(
                path_contains=path,
                status=503,
                times=max(2, case.status_errors_to_give_up),
                predicate=self._cancel_seen,
            )
        else:

            def lose_answer(request: Any) -> bool:
                if not case.is_submit(request):
                    return False
                self._answer_lost_by = self.coop.current
                return True

            faults.add(method="POST", status=503, times=1, after=True, predicate=lose_answer)

    def _cancel_seen(self, request: Any) -> bool:
        # The cancel is refused: whichever job it was about keeps running, and the record must keep it.
        for job in self.jobs.values():
            if any(a in text_atoms(request_text(request, None)) for a in job.atoms):
                job.cancel_failed = True
        return True

    # ------------------------------------------------------------------ invariants
    def check(self) -> None:
        """Invariants (1) and (3) after every step; (2), (4) and (5) are checked where their events
        happen (a try ends or defers, a job is cancelled or created, an on_kill completes)."""
        self._track_naming()
        by_lj: dict[int, list[Job]] = {}
        live_knowers = self._live_knowers()
        for job in self.jobs.values():
            if not self.active(job):
                continue
            by_lj.setdefault(job.lj, []).append(job)
            if self.named(job) or any(job.key in knows for knows in live_knowers):
                job.awaited_by = None  # found (or still held): a later loss is a new one
            else:
                missed = self.coming_lookup_misses(job)
                if missed is None:
                    # The try that decides next finds it by the task instance's identity (or its token).
                    job.awaited_by = self._awaited
                    continue
                if missed:
                    # No try to come finds it now (e.g. a clear set max_tries = try_number + retries and
                    # took away the evidence of an earlier lifetime): one expected before is no longer.
                    job.awaited_by = None
                if not missed and job.awaited_by is not None and self._decided(job.awaited_by):
                    missed = "missed-by-lookup"  # the try expected to find it decided without naming it
                situation = (f"{missed}-" if missed else "") + self._untracked_situation(job)
                self.violate(
                    "3",
                    situation,
                    f"job {job.ledger_id} (LJ {job.lj}) is active "
                    "and nothing tracks it: no record names it, no live process or trigger knows it"
                    + (f" ({missed})" if missed else ", and no try is to come that would find it"),
                )
        for lj, jobs in by_lj.items():
            if len(jobs) < 2:
                continue
            inflight = any(p.alive and p.lj == lj and p.pending_submit for p in self.processes)
            # A try to come that reaches every job but (at most) the one the record names converges them:
            # it resends the recorded token and keeps the earliest job carrying it, or ends what its
            # lookup finds (a try that fails to do so shows as missed-by-lookup, (3)).
            reached = [j for j in jobs if not self.named(j) and self.coming_lookup_misses(j) is None]
            # A duplicate whose cancel failed and that the record keeps (`unended`) is the record's to end
            # (the next try, or `orphans`), as in invariant 5.
            kept = [j for j in jobs if j.cancel_failed and self.named(j)]
            if not inflight and len(jobs) - len(reached) - len(kept) > 1:
                ids = [j.ledger_id for j in jobs]
                # Why a try to come misses them, when one comes (as invariant 3's keys start).
                misses = sorted(
                    {m for j in jobs if not self.named(j) and (m := self.coming_lookup_misses(j))}
                )
                self.violate(
                    "1",
                    "".join(f"{m}-" for m in misses) + self._two_jobs_situation(lj, jobs),
                    f"LJ {lj} has {len(jobs)} live jobs {ids} "
                    "and no try of it is between a submit and its persist",
                )

    # ------------------------------------------------------------------ a try to come (issue 23)
    def coming_try(self) -> tuple[int, int, int, int] | None:
        """``(try_number, max_tries, clear_number, retries)`` as the try that decides next will see them: a
        fresh try Airflow 3.3.2 will start unless a user acts first, or the current one if it has not
        decided yet; ``None`` when no such try is certain.

        * ``running`` with its try alive, not frozen or SIGTERMed, and before its first store write (its
          lookup comes before any write: `ResumableJobMixin._track_found_jobs`): that try, as it started;
        * no state, ``up_for_retry``, ``scheduled`` (not a resumed deferral: ``next_method`` unset): the
          scheduler queues it (``DagRun.schedule_tis``: ``try_number + 1``); ``queued``: it already has it;
        * ``restarting`` (cleared while running): always. Its worker, told at its next heartbeat (404),
          exits, or is killed, and ``process_executor_events`` sets no state with ``max_tries = try_number
          + task.retries``; a silent worker is failed by the heartbeat timeout, and ``is_eligible_to_retry``
          is true for ``restarting`` (``handle_failure`` → ``up_for_retry``). The try after it is try
          ``try_number + 1`` (≥ 2);
        * ``running`` whose worker is gone with its node (or there is no worker): the heartbeat timeout
          (``_purge_task_instances_without_heartbeats``) → ``TaskInstance.handle_failure`` →
          ``fetch_handle_failure_context``: ``is_eligible_to_retry`` (``task.retries and try_number <=
          max_tries``) → ``up_for_retry``, else ``failed`` (no try);
        * anything else: a live worker may still succeed, a frozen one may thaw, a deferral resumes the same
          try (``execute_complete``, no lookup), a finished task instance runs again only if a user clears it
          (``clear_task_instances``).
        """
        ti, run = self.db.ti, self.db.run
        self._awaited = None
        if ti is None or run is None:
            return None
        later = (run.clear_number, self.db.retries)
        coming = self._coming_try(ti, run, later)
        if coming is not None:
            self._awaited = (run.incarnation, coming[0])
        return coming

    def _coming_try(
        self, ti: af.TaskInstanceRow, run: af.DagRunRow, later: tuple[int, int]
    ) -> tuple[int, int, int, int] | None:
        if ti.next_method is None and ti.state in (af.NONE, af.UP_FOR_RETRY, af.SCHEDULED):
            return ti.try_number + 1, ti.max_tries, *later
        if ti.next_method is None and ti.state == af.QUEUED:
            return ti.try_number, ti.max_tries, *later
        if ti.state == af.RESTARTING:
            return ti.try_number + 1, ti.max_tries, *later
        if ti.state == af.RUNNING:
            holder = next((p for p in self.processes if p.pid == ti.pid), None)
            if (
                holder is not None
                and holder.alive
                and holder.ti_id == ti.id
                and holder.kind == "execute"
                and not (holder.frozen or holder.sigterm or holder.writes or holder.created)
            ):
                view = holder.view
                return (
                    holder.try_number,
                    int(view["ti.max_tries"]),
                    int(view["dag_run.clear_number"]),
                    int(view["task.retries"]),
                )
            if holder is not None and not (holder.dead and holder.node_lost):
                return None
            if self.db.retries and ti.try_number <= ti.max_tries:
                return ti.try_number + 1, ti.max_tries, *later
        return None

    def _decided(self, which: tuple[int, int]) -> bool:
        """Whether the try ``(run incarnation, try number)`` got past its lookup: its first store write (the
        intent, which names what the lookup found) or a submit."""
        return any(
            (p.incarnation, p.try_number) == which and p.kind == "execute" and (p.writes or p.created)
            for p in self.processes
        )

    def _lookup_ends_jobs(self) -> bool:
        """Whether a try of this operator that looks its task instance's jobs up ends the older ones: the
        system lists them (catalogue ``Lookup.implemented``), the list does not lag, the operator waits."""
        operator = self._declared
        lookup = catalogue.LOOKUPS.get(operator.external_id_key)
        return (
            lookup is not None
            and lookup.implemented
            and not getattr(self.emulator, "list_lag_reads", 0)
            and not getattr(self.emulator, "list_lag_seconds", 0)
            and bool(operator.durable_waits())
            and bool(getattr(operator, "cancel_on_kill", True))
        )

    def _lists_jobs(self) -> bool:
        """Whether this operator's system lists a task instance's jobs (catalogue ``Lookup.implemented``)."""
        lookup = catalogue.LOOKUPS.get(self._declared.external_id_key)
        return lookup is not None and lookup.implemented

    def coming_lookup_misses(self, job: Job) -> str | None:
        """Whether the try to come finds ``job`` by a lookup and ends it (then it is tracked): ``None`` if
        it does, else why not (``""``: no try is to come; only the opt-in reaper or ``orphans`` through the
        systems can end the job, issue 23 items 4 and 5).

        Every job the model's operators submit carries the task instance's identity (its dag, run_id, task
        and map index: a deleted and re-created run has the same). The engine looks the identity up
        (``durable_find``) when the try finds no record and Airflow shows an earlier lifetime
        (``TryIdentity.may_have_run_before``: ``try_number > 1`` or ``max_tries > retries``), and ends
        every still-active job of another lifetime. A try whose record names a job by its token only
        reaches it too: an intent of its own clear epoch is resent with that token (the
        system's idempotency key, or the token lookup after submitting: issue 22), an older epoch's intent
        or a token kept in ``unended`` is found by the token (``_left_by_old_epoch``) or resolved by the
        identity lookup (``_resolve_tokens``). Only an operator that waits ends what it found (one that only
        submits leaves earlier jobs, as the provider operator does)."""
        operator = self._declared
        coming = self.coming_try()
        if coming is None:
            return ""
        # First whether the try to come would look for it at all (its cause is the situation's, whatever
        # the system), then whether this system and operator let that lookup find and end it.
        record = self.db.store.get(operator.external_id_key)
        if record is None:
            try_number, max_tries, _clear_number, retries = coming
            if not (try_number > 1 or max_tries > retries):
                return "no-evidence"
        elif not job.tokens & deep_atoms(without_history(record)):
            return "record-kept"
        lookup = catalogue.LOOKUPS.get(operator.external_id_key)
        if lookup is None or not lookup.implemented:
            return "no-lookup"  # the try looks, and nothing lists the job: the system's limit
        if getattr(self.emulator, "list_lag_reads", 0) or getattr(self.emulator, "list_lag_seconds", 0):
            return "list-lags"
        if not operator.durable_waits() or not getattr(operator, "cancel_on_kill", True):
            return "submit-only"
        return None

    def _live_knowers(self) -> list[set[str]]:
        found = [p.knows for p in self.processes if p.alive]
        found += [i.knows for i in self.instances if i.running]
        # The trigger row of the task instance's current deferral: a live, healthy triggerer builds it
        # (``Trigger.assign_unassigned``, ``build_trigger_workloads``) and it waits on the jobs it names.
        ti = self.db.ti
        row = self.db.triggers.get(ti.trigger_id) if ti is not None and ti.trigger_id is not None else None
        if ti is not None and ti.state == af.DEFERRED and row is not None and row.ti_id == ti.id:
            found.append(self.jobs_named_in(row.kwargs))
        return found

    def _track_naming(self) -> None:
        for job in self.jobs.values():
            if self.named(job):
                job.last_named, job.unnamed_by = self.step, None
            elif job.last_named is not None and job.unnamed_by is None:
                job.unnamed_by = "overwritten"

    def _creator_fate(self, job: Job) -> str:
        creator = next((p for p in self.processes if job.key in p.created), None)
        if creator is None:
            return "unknown"
        if creator.deadlocked:
            return "killed-after-on-kill-deadlock"
        if creator.sigterm_locked and creator.dead:
            return "killed-after-on-kill-in-channel-call"
        if creator.stop == "shutdown" and creator.dead:
            # A worker or scheduler shutdown, the grace ended: after on_kill left the job, or during it.
            during = creator.killer is not None and not creator.killer.done
            return "shutdown-killed" + ("-during-on-kill" if during else "")
        if creator.sigterm and creator.dead and creator.killer is not None and not creator.killer.done:
            return "killed-during-on-kill"  # the supervisor's SIGKILL came before on_kill could end it
        if creator.sigterm:
            return "sigtermed"
        if creator.dead:
            return "killed"
        return f"ended-{creator.outcome}"

    def _untracked_situation(self, job: Job) -> str:
        if job.last_named is None:
            creator = next((p for p in self.processes if job.key in p.created), None)
            fate = self._creator_fate(job)
            # One of two jobs its (failed) creator made with one token: a lost answer's resend, or the
            # converging lookup's duplicate; the try ended without ending it.
            duplicate = "-duplicate" if fate == "ended-failed" and len(creator.created) > 1 else ""
            run = self.db.run
            # Its run was deleted (and maybe re-created) before the id was written: the record went with it.
            gone = creator is not None and (run is None or creator.incarnation != run.incarnation)
            return (
                f"never-recorded{duplicate}{'-answer-lost' if job.answer_lost else ''}-creator-{fate}"
                + ("-run-deleted" if gone else "")
                # Airflow 3.4's clear deleted the record after the job's submit began: no token of it stays.
                + (
                    "-state-discarded"
                    if any(x.detail.get("state_discarded") for x in self.ljs[job.lj :])
                    else ""
                )
                + ("-cancel-failed" if job.cancel_failed else "")  # its creator tried to end it: refused
            )
        situation = f"unnamed-by-{(job.unnamed_by or 'overwritten').replace(' ', '-')}"
        if job.unnamed_by in (None, "overwritten") and job.cancel_failed:
            situation += "-after-failed-cancel"
        elif job.cancel_failed:
            situation += "-cancel-failed"
        if situation.startswith("unnamed-by-run-deleted") and any(
            x.cause == "run re-created" for x in self.ljs
        ):
            situation = situation.replace("run-deleted", "run-recreated", 1)
        if job.holders:
            situation += "-" + "-".join(sorted({_fate(h) for h in job.holders}))
        return situation

    def _two_jobs_situation(self, lj: int, jobs: list[Job]) -> str:
        gone = sorted({j.unnamed_by for j in jobs if j.unnamed_by not in (None, "overwritten")})
        if not gone and any(x.number > lj and x.cause == "run deleted" for x in self.ljs):
            # Neither was ever recorded (the try's writes failed once its run was deleted): the same.
            gone = ["run deleted"]
        if not gone and any(j.last_named is None and j.answer_lost for j in jobs):
            # A lost answer, then the resend's answer lost too or its converge lookup failed, on a system
            # without idempotency: the job of the lost answer was never recorded (N2's double fault).
            gone = ["answer lost"]
        if gone:
            # A try that began before the record went (here: frozen meanwhile) finds none and submits anew:
            # only a lookup of the older job by its identity can end it.
            return "two-live-jobs-after-" + "-".join(g.replace(" ", "-") for g in gone)
        lost = next((j for j in jobs if j.answer_lost), None)
        if lost is not None:  # the resend of a lost answer made the second
            return f"two-live-jobs-after-lost-answer-creator-{self._creator_fate(lost)}"
        return "two-live-jobs"

    def _check_new_job(self, job: Job, owner: Any) -> None:
        """(5) A user's clear or mark ends the old job: when a try of a newer LJ creates a job, no job of
        an LJ that a clear or mark ended may still be active (unless its cancel failed and it is still
        named by the record)."""
        self._check_old_jobs_ended(job.lj, f"when LJ {job.lj} created job {job.ledger_id}")

    def _check_old_jobs_ended(self, lj: int, when: str) -> None:
        for old in self.jobs.values():
            if old.lj >= lj or not self.active(old):
                continue
            between = [x for x in self.ljs if old.lj < x.number <= lj]
            ended_by = [x for x in between if x.cause.startswith(("clear", "mark"))]
            if not ended_by or any(x.cause.startswith(("run", "record")) for x in between):
                # A deleted run or record in between: the new try cannot know the old job ((3) covers it).
                continue
            if (
                old.unnamed_by not in (None, "overwritten")
                and not self.named(old)
                and not (old.unnamed_by.startswith("clear discarding state") and self._lookup_ends_jobs())
            ):
                # Airflow deleted the record that named it (a mark success under clear_on_success): the
                # same, the new try cannot know it. After 3.4's clear it can: the clear is its evidence,
                # and it looks the task instance's jobs up (where the system lists them).
                continue
            if old.cancel_failed and self.named(old):
                continue
            # A clear no field tells from a retry hides the boundaries before it (see `_boundary`).
            cause = next((x for x in ended_by if _slug(x).endswith("no-run-reset")), ended_by[0])
            # Airflow 3.4's clear deleted the record in between: no record keeps the old intent's token.
            discarded = "-state-discarded" if any(x.detail.get("state_discarded") for x in between) else ""
            if old.last_named is None and not self.named(old):
                # No record ever named it (its creator failed before the id write, and the creator's own
                # cancel may have failed too): the next issue's lookup by token, whatever the cancel did.
                situation = f"never-recorded-old-job-survives-{_slug(cause)}{discarded}"
                if not self._lookup_ends_jobs():
                    situation += "-no-lookup"  # only a lookup could resolve the token the record keeps
            elif old.cancel_failed:
                situation = "old-job-dropped-after-failed-cancel"
            elif self.named(old):  # kept in the record (e.g. its status unknown) but never cancelled
                situation = f"old-job-left-running-named-after-{_slug(cause)}"
            elif old.last_named is None:  # no record ever named it (its creator failed before the id write)
                situation = f"never-recorded-old-job-survives-{_slug(cause)}{discarded}"
                if not self._lookup_ends_jobs():
                    situation += "-no-lookup"  # only a lookup could resolve the token the record keeps
            else:
                situation = f"old-job-survives-{_slug(cause)}"
            self.violate(
                "5",
                situation,
                f"job {old.ledger_id} of LJ {old.lj} is still active {when}; LJ "
                f"{cause.number} began with a {cause.cause} ({cause.detail})"
                + ("; its cancel failed and no record names it any more" if old.cancel_failed else ""),
            )

    def _boundary(self, older: int, newer: int) -> str:
        """The cause of the first LJ boundary between two LJs, as a key suffix."""
        low, high = sorted((older, newer))
        between = [lj for lj in self.ljs if low < lj.number <= high]
        for lj in between:
            if _slug(lj).endswith("no-run-reset"):
                # A clear no field tells from a retry (IMPOSSIBLE_ON_AIRFLOW_3_3) hides every boundary before
                # it from the try: name it, whatever came first.
                return _slug(lj)
        return _slug(between[0]) if between else "same-lj"

    def _check_try_end(self, process: Process, outcome: str, error: BaseException | None) -> None:
        """(2) A new logical job never receives an older job or its result; (5) at the try's decision."""
        lj = process.lj
        if outcome == "success":
            referenced = self.jobs_named_in(
                {"result": process.main.result if process.main else None, "xcoms": process.xcoms}
            )
            foreign = [self.jobs[k] for k in referenced if self.jobs[k].lj != lj]
            if foreign:
                self.violate(
                    "2",
                    f"result-of-older-lj-after-{self._boundary(foreign[0].lj, lj)}",
                    f"{process.name} of LJ {lj} succeeded with "
                    f"job(s) {[j.ledger_id for j in foreign]} of LJ {[j.lj for j in foreign]}",
                )
        if process.kind == "resume" and process.next_kwargs and "event" in process.next_kwargs:
            about = self.jobs_named_in(process.next_kwargs["event"])
            foreign = [self.jobs[k] for k in about if self.jobs[k].lj != lj]
            if foreign and outcome == "failed":
                self.violate(
                    "2",
                    f"foreign-event-failed-try-after-{self._boundary(foreign[0].lj, lj)}",
                    f"{process.name} of LJ {lj} resumed with an event "
                    f"about job {[j.ledger_id for j in foreign]} (LJ {[j.lj for j in foreign]}) and "
                    f"failed: {type(error).__name__}: {str(error)[:200]}",
                )
        if outcome == "deferred":
            from airflow.sdk.exceptions import TaskDeferred

            assert isinstance(error, TaskDeferred)
            _, kwargs = error.trigger.serialize()
            waits_on = [self.jobs[k] for k in self.jobs_named_in(kwargs)]
            foreign = [j for j in waits_on if j.lj != lj]
            if foreign:
                self.violate(
                    "2",
                    f"waits-on-older-lj-after-{self._boundary(foreign[0].lj, lj)}",
                    f"{process.name} of LJ {lj} defers on job(s) "
                    f"{[j.ledger_id for j in foreign]} of LJ {[j.lj for j in foreign]}",
                )
        # A try has decided once it waits (defers) or is done; a failed try decided nothing: the next
        # try ends the old job (and until then the record keeps naming it, invariant 3).
        if outcome in ("success", "deferred"):
            self._check_old_jobs_ended(lj, f"when {process.name} of LJ {lj} ended {outcome}")

    def _check_cancel(self, job: Job, actor: Actor, changed: bool) -> None:
        """(4) Only the owner cancels. A cancel that ends an active job is legitimate when the job's LJ
        has ended (a user's clear or mark, a deleted run or record: ending it is everyone's duty); when the
        owner does it on kill (SIGTERM, the trigger's on_kill, the execution timeout); when the owner's own
        decision cancels a job no record names (a duplicate); or when a try cancels a job it created itself
        that neither the record nor the owner knows."""
        self.log.append(
            f"    {actor.name} cancels job {job.ledger_id}{'' if changed else ' (already ended)'}"
        )
        if not changed:
            return
        if job.lj < self.lj:
            return
        owner = actor.owner
        ti = self.db.ti
        if ti is None or ti.state in (af.SUCCESS, af.FAILED):
            # The task instance finished: no try of this LJ will run again (a clear starts a new one), so
            # nothing waits on the job any more (the owned trigger's rule: cancel once the task ended).
            return
        if (
            actor.role == "on_kill"
            and isinstance(owner, Process)
            and owner.stop == "shutdown"
            and ti is not None
        ):
            # A stop from outside the task's lifecycle is not a cancel (DESIGN §8, "Stopped is not
            # cancelled"): while Airflow still shows the try running, or shows the scheduler's reset of it
            # (no state, the same clear_number), on_kill leaves the job to the next try. Not once the try's
            # execution_timeout ran out while Airflow shows it running: the try fails by it whatever the
            # shutdown, and the timeout ends the generation (5), so an on_kill past the deadline ends the
            # job (the engine's `_stop_reason`). A reset still hands the job to the reset's try.
            still = ti.id == owner.ti_id and ti.state == af.RUNNING and not owner.timed_out
            reset = owner.reset_to == ti.id and ti.state in (af.NONE, af.SCHEDULED, af.QUEUED)
            if still or reset:
                held = "tracked" if self.named(job) else "held"
                self.violate(
                    "4",
                    f"{'shutdown' if still else 'reset'}-on-kill-cancels-{held}-job",
                    f"{actor.name} cancelled job {job.ledger_id} of the current LJ {job.lj} on a "
                    + (
                        "worker or scheduler shutdown (Airflow shows the try running)"
                        if still
                        else "scheduler's reset of the task instance (not a clear)"
                    ),
                )
                return
        is_owner = False
        context = "decision"
        if isinstance(owner, Process):
            is_owner = ti is not None and owner.ti_id == ti.id
            if actor.role == "on_kill":
                context = "on_kill"
            elif owner.timed_out:
                context = "timeout"  # _run_execute_callable's on_kill, on the main thread
            elif owner.kind == "resume" and owner.next_method == af.TRIGGER_FAIL:
                context = "timeout"
        elif isinstance(owner, TriggerInstance):
            current = self.db.triggers.get(ti.trigger_id) if ti is not None and ti.trigger_id else None
            is_owner = (
                current is not None
                and current is owner.row
                and current.triggerer == owner.triggerer.name
                and ti is not None
                and owner.row.ti_id == ti.id
            )
            context = "on_kill" if owner.in_on_kill else "decision"
        named = self.named(job)
        if is_owner and context != "decision":
            return
        if is_owner and not named:
            return
        owners = [p for p in self.processes if p.alive and ti is not None and p.ti_id == ti.id]
        if not is_owner and not named and job.key in getattr(owner, "created", set()):
            if not any(job.key in p.knows for p in owners):
                return
        who = "the owner" if is_owner else "not the owner"
        role = "owner" if is_owner else "non-owner"
        situation = f"{role}-{actor.role}-{context}-cancels-{'tracked' if named else 'held'}-job"
        self.violate(
            "4",
            situation,
            f"{actor.name} ({who}, {context}) cancelled job {job.ledger_id} of the "
            f"current LJ {job.lj}{' which the record names' if named else ''}",
        )

    def _check_on_kill_done(self, instance: TriggerInstance) -> None:
        """(5) for a mark while deferred: once the trigger's on_kill ran because the user marked the task,
        the job it waited on has ended (or its cancel failed)."""
        marked = [x for x in self.ljs if x.number > instance.lj and x.cause.startswith("mark")]
        if not marked:
            return
        if any(instance.lj < x.number < marked[0].number and x.cause.startswith("run") for x in self.ljs):
            return  # the mark is of a re-created run's task instance: the trigger's went with its run ((3))
        if any(x.number > marked[0].number and x.cause.startswith("run") for x in self.ljs):
            # The run was deleted after the mark (as check_sigterm_done has it): its record went with it, and
            # a re-created run's task instance answers for the trigger's; (3) applies.
            return
        # A clear after the mark and a new try begun before the trigger decided (it cleared the XComs
        # before the trigger's note was written): the trigger cannot tell that try from its own.
        cleared = any(x.number > marked[0].number and x.cause.startswith("clear") for x in self.ljs) and any(
            p.lj > marked[0].number - 1 and p.lj > instance.lj for p in self.processes
        )
        for key in instance.knows:
            job = self.jobs.get(key)
            if job is not None and job.lj == instance.lj and self.active(job) and not job.cancel_failed:
                ti = self.db.ti
                state = ti.state if ti is not None else "gone"
                situation = "mark-then-clear-deferred" if cleared else "mark-deferred"
                if any(
                    instance.lj < x.number < marked[0].number and x.detail.get("state_discarded")
                    for x in self.ljs
                ):
                    # Airflow 3.4's clear deleted the record first: a newer try's start (its XCom clear)
                    # no longer means the record keeps the job for it.
                    situation += "-after-clear-discarding-state"
                elif any(
                    instance.lj < x.number < marked[0].number and x.cause.startswith("clear")
                    for x in self.ljs
                ):
                    # Cleared first (the record kept): the new try's start took the trigger's note, so
                    # Airflow's "ended" cannot be told to be about the trigger's own try. Cleared again
                    # after the mark, a new try runs: the trigger leaves the job to it.
                    situation = (
                        "clear-then-mark-then-clear-deferred" if cleared else "clear-then-mark-deferred"
                    )
                self.violate(
                    "5",
                    f"{situation}-trigger-left-job",
                    f"{instance.name} ran on_kill after a "
                    f"{marked[0].cause} but job {job.ledger_id} still runs (task now {state})",
                )

    def _check_on_kill_skipped(self, instance: TriggerInstance) -> None:
        """(5) for a mark while deferred, when the trigger was cancelled with the user-action message but
        its ``on_kill`` never ran (the CancelledError reached ``run_trigger`` without its message)."""
        marked = [x for x in self.ljs if x.number > instance.lj and x.cause.startswith("mark")]
        if not marked:
            return
        for key in instance.knows:
            job = self.jobs.get(key)
            if job is not None and job.lj == instance.lj and self.active(job) and not job.cancel_failed:
                self.violate(
                    "5",
                    "mark-deferred-trigger-on-kill-never-ran",
                    f"{instance.name} was cancelled "
                    f"after a {marked[0].cause} but its on_kill never ran (the cancellation reached "
                    f"run_trigger without the user-action message); job {job.ledger_id} still runs",
                )

    def check_sigterm_done(self, process: Process) -> None:
        """(5) for a mark while running: once the SIGTERM handler's on_kill ran after a mark, the job the
        try held has ended (or its cancel failed, or SIGTERM landed inside a supervisor-channel call: the
        handler cannot ask Airflow who owns the job, and (3) applies)."""
        marked = [x for x in self.ljs if x.number > process.lj and x.cause.startswith("mark")]
        if process.stop == "shutdown":
            # A shutdown's SIGTERM: only a mark before it is what on_kill answers to (a later mark is told
            # by Airflow's next heartbeat refusal, which the model does not send to a stopping worker).
            marked = [x for x in marked if x.number <= process.sigterm_lj]
        if not marked or process.deadlocked or process.sigterm_locked:
            return
        if any(x.number > marked[0].number and x.cause.startswith("run") for x in self.ljs):
            return  # the run was deleted after the mark: its record went with it, (3) applies
        # A clear after the mark, before the handler ran: its try id is superseded, its record unreadable.
        cleared = any(x.number > marked[0].number and x.cause.startswith("clear") for x in self.ljs)
        for key in process.knows:
            job = self.jobs.get(key)
            if job is not None and job.lj == process.lj and self.active(job) and not job.cancel_failed:
                # A job whose submission's answer was lost: the try never had its id to cancel, and on_kill
                # finds it only by its token, where the system lists jobs (catalogue Lookup.implemented).
                lost = "-answer-lost" if job.answer_lost else ""
                if lost and not self._lists_jobs():
                    lost += "-no-lookup"
                self.violate(
                    "5",
                    (
                        "mark-then-clear-running-on-kill-left-job"
                        if cleared
                        else "mark-running-on-kill-left-job"
                    )
                    + lost,
                    f"{process.name}'s on_kill ran after a "
                    f"{marked[0].cause} but job {job.ledger_id} still runs",
                )

    def check_timeout_done(self, process: Process) -> None:
        """(5) for an execution timeout: a try that owned its logical job when its execution_timeout ran out
        has ended the jobs of that logical job it knew once its ``on_kill`` returned (or their cancel
        failed): the timeout ends the logical job's current generation, and a retry starts a new one."""
        if not process.timed_out_owning or not getattr(process.operator, "cancel_on_kill", True):
            return
        for key in process.knows:
            job = self.jobs.get(key)
            if job is not None and job.lj == process.lj and self.active(job) and not job.cancel_failed:
                lost = "-answer-lost" if job.answer_lost else ""
                self.violate(
                    "5",
                    f"timeout-left-job{lost}",
                    f"{process.name}'s execution_timeout ran out while it owned job {job.ledger_id}, and the "
                    "job still runs after its on_kill",
                )


def _fate(holder: Any) -> str:
    """How a holder of a job ended (for the key of a job it left untracked)."""
    if isinstance(holder, TriggerInstance):
        if holder.on_kill_done:
            return "trigger-on-kill-ran"
        if holder.cancelled == _USER_ACTION and not holder.timed_out:
            return "trigger-on-kill-never-ran"
        if holder.actor is not None and holder.actor.dead:
            return "trigger-killed"
        return "trigger-ended" if holder.actor is not None and holder.actor.done else "trigger-running"
    if holder.deadlocked:
        return "process-on-kill-deadlocked"
    if holder.dead:
        return "process-killed"
    if holder.sigterm and holder.killer is not None and holder.killer.done:
        return f"process-on-kill-ran-then-{holder.outcome or 'running'}"
    return f"process-{holder.outcome or 'running'}"


def _serde(value: Any) -> Any:
    """What Airflow stores: ``airflow.sdk.serde.serialize`` (JSON-able, types tagged)."""
    from airflow.sdk.serde import serialize

    return json.loads(json.dumps(serialize(value)))


def _deserde(value: Any) -> Any:
    from airflow.sdk.serde import deserialize

    return deserialize(json.loads(json.dumps(value)))


def _slug(lj: LogicalJob) -> str:
    discarded = "-state-discarded" if lj.detail.get("state_discarded") else ""
    if lj.cause.startswith("clear of running"):
        reset = "" if lj.detail.get("reset_dag_run", True) else "-no-run-reset"
        return f"clear-of-running-{lj.detail.get('worker', '?')}-worker{reset}{discarded}"
    return (
        lj.cause.replace(" (reset_dag_runs=false)", "-no-run-reset")
        .replace(" ", "-")
        .replace("(", "")
        .replace(")", "")
    ) + discarded
