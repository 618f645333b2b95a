"""Airflow 3.3.2's side of the model: the rows a task's life touches, and the execution API a try talks to.

Each function follows one function of Airflow 3.3.2 (``.venv/lib/python3.11/site-packages/airflow``), named
in its docstring; only what decides the task instance's fate is kept. The DAG has two tasks: ``job`` (the
durable operator under test) and ``other`` (finished long ago), so a clear of *another* task can happen.

The task process reaches Airflow only through the supervisor channel (``SUPERVISOR_COMMS``): `ModelComms`
answers the messages the operators send (task-state-store calls keyed by task-instance id, task states,
XComs) the way the supervisor and the execution API routes do, after parking the calling actor at a gate.
"""

from __future__ import annotations

import datetime as dt
import itertools
import json
import uuid
from dataclasses import dataclass, field
from typing import Any

from tests.harness import WorkerCrash
from tests.model.coop import Coop, ModelError

DAG_ID, RUN_ID, TASK_ID = "model", "manual__2026-12-05", "job"

# TaskInstanceState values (airflow.utils.state.TaskInstanceState); None is "no state" (scheduled by the
# scheduler's next pass).
NONE, SCHEDULED, QUEUED, RUNNING, DEFERRED = None, "scheduled", "queued", "running", "deferred"
UP_FOR_RETRY, RESTARTING, SUCCESS, FAILED = "up_for_retry", "restarting", "success", "failed"
#: airflow.sdk.bases.operator.TRIGGER_FAIL_REPR and TriggerFailureReason values.
TRIGGER_FAIL, TRIGGER_TIMEOUT, TRIGGER_FAILURE = "__fail__", "Trigger timeout", "Trigger failure"

_CLOCK = itertools.count(1)
_EPOCH = dt.datetime(2026, 12, 5, tzinfo=dt.UTC)


def tick() -> dt.datetime:
    """A strictly increasing instant: start dates the engine hashes must differ between incarnations."""
    return _EPOCH + dt.timedelta(seconds=next(_CLOCK))


@dataclass
class TaskInstanceRow:
    """The ``task_instance`` row of ``job`` (airflow.models.taskinstance.TaskInstance)."""

    id: uuid.UUID
    state: str | None = NONE
    try_number: int = 0
    max_tries: int = 0
    next_method: str | None = None
    next_kwargs: dict[str, Any] | None = None
    trigger_id: int | None = None
    #: When the deferral times out (``ti_update_state``: ``timezone.utcnow() + trigger_timeout``), on the
    #: model's clock; ``None``: the deferral has no timeout.
    trigger_timeout: dt.datetime | None = None
    #: ``next_retry_datetime()`` of an UP_FOR_RETRY task instance (``end_date + retry_delay``): the
    #: scheduler's ``NotInRetryPeriodDep`` holds it back until then.
    retry_at: dt.datetime | None = None
    start_date: dt.datetime | None = None
    #: The process running it (ti_run records hostname + pid; ti_heartbeat compares them).
    pid: int | None = None
    #: ``new_task_run_carrier(dag_run.context_carrier)``: set at creation (``insert_mapping``) and by
    #: ``clear_task_instances`` for each task instance it clears; retries and marks keep it. The worker
    #: receives it as ``RuntimeTaskInstance.context_carrier``.
    context_carrier: dict[str, str] = field(default_factory=dict)


@dataclass
class DagRunRow:
    """The ``dag_run`` row (airflow.models.dagrun.DagRun); ``incarnation`` counts delete + re-create."""

    incarnation: int
    start_date: dt.datetime | None
    clear_number: int = 0
    state: str = "running"
    #: W3C trace carrier (``new_dagrun_trace_carrier``): new at creation and at every clear that resets
    #: the run (``clear_task_instances`` with a ``dag_run_state``).
    context_carrier: dict[str, str] = field(default_factory=dict)


@dataclass(eq=False)
class TriggerRow:
    """A ``trigger`` row (airflow.models.trigger.Trigger). ``serial`` tells two rows that got the same id
    apart (SQLite reuses the id of a deleted newest row)."""

    id: int
    serial: int
    classpath: str
    kwargs: dict[str, Any]
    ti_id: uuid.UUID  # the task instance whose deferral created it
    triggerer: str | None = None


@dataclass
class AirflowDB:
    """The metadata database, as far as one task instance's life goes."""

    retries: int  # the task's ``retries`` in the DAG file as parsed now
    trigger_ids: str = "sqlite"  # "sqlite": a new row takes max(id) + 1; "postgres": a sequence
    run: DagRunRow | None = None
    ti: TaskInstanceRow | None = None
    #: task_state_store rows of the task instance's scope (dag, run, task, map_index).
    store: dict[str, Any] = field(default_factory=dict)
    xcom: dict[str, Any] = field(default_factory=dict)
    triggers: dict[int, TriggerRow] = field(default_factory=dict)
    other_task_state: str = SUCCESS
    _serial: itertools.count = field(default_factory=lambda: itertools.count(1))
    _incarnations: itertools.count = field(default_factory=lambda: itertools.count(1))
    _sequence: itertools.count = field(default_factory=lambda: itertools.count(1))
    clear_on_success: bool = False

    # ------------------------------------------------------------------ DAG run
    def create_run(self) -> None:
        """``airflow dags trigger`` / the scheduler creating a run: a new DagRun row, its task instances
        with ``max_tries = retries`` (DagRun.verify_integrity → TaskInstance.insert_mapping)."""
        incarnation = next(self._incarnations)  # never reused: a deleted run's tries are not the new run's
        self.run = DagRunRow(incarnation=incarnation, start_date=tick(), context_carrier=dag_run_carrier())
        self.ti = TaskInstanceRow(
            id=uuid.uuid4(),
            max_tries=self.retries,
            context_carrier=task_run_carrier(self.run.context_carrier),
        )
        self.store.clear()
        self.xcom.clear()

    def delete_run(self) -> None:
        """Deleting the DAG run (UI / REST ``DELETE dagRuns``): its task instances and their state-store
        rows go with it (foreign keys, ``ON DELETE CASCADE``)."""
        self.run = None
        self.ti = None
        self.store.clear()
        self.xcom.clear()

    def dag_run_model(self) -> Any:
        """The DagRun a try receives in ``TIRunContext.dag_run`` (ti_run builds it from the row)."""
        from airflow.sdk.api.datamodels._generated import DagRun

        assert self.run is not None
        return DagRun(
            dag_id=DAG_ID,
            run_id=RUN_ID,
            logical_date=None,
            data_interval_start=None,
            data_interval_end=None,
            run_after=_EPOCH,
            start_date=self.run.start_date,
            end_date=None,
            clear_number=self.run.clear_number,
            run_type="manual",
            state=self.run.state,
            consumed_asset_events=[],
            partition_key=None,
        )

    def refresh_run_state(self) -> None:
        """The scheduler's ``DagRun.update_state``: the run finishes once every task is finished, and a
        finished run that gets a task back to do runs again."""
        assert self.run is not None and self.ti is not None
        finished = self.ti.state in (SUCCESS, FAILED) and self.other_task_state in (SUCCESS, FAILED)
        if finished:
            self.run.state = FAILED if FAILED in (self.ti.state, self.other_task_state) else SUCCESS
        elif self.run.state != "running":
            self.run.state = "running"

    # ------------------------------------------------------------------ triggers
    def new_trigger(self, classpath: str, kwargs: dict[str, Any], ti_id: uuid.UUID) -> TriggerRow:
        """``session.add(Trigger(...)); session.flush()`` in ti_update_state's DEFERRED branch: the id comes
        from the database. SQLite's ``INTEGER PRIMARY KEY`` without AUTOINCREMENT is ``max(rowid) + 1``, so
        a newer row can get the id of the just-deleted newest one; PostgreSQL's sequence never repeats."""
        if self.trigger_ids == "sqlite":
            trigger_id = max(self.triggers, default=0) + 1
        else:
            trigger_id = next(self._sequence)
        row = TriggerRow(trigger_id, next(self._serial), classpath, kwargs, ti_id)
        self.triggers[trigger_id] = row
        return row


def dag_run_carrier() -> dict[str, str]:
    """Airflow's own ``new_dagrun_trace_carrier`` (a fresh trace id)."""
    from airflow._shared.observability.traces import new_dagrun_trace_carrier

    return dict(new_dagrun_trace_carrier())


def task_run_carrier(dag_run_carrier: dict[str, str]) -> dict[str, str]:
    """What Airflow's ``new_task_run_carrier`` gives with no OpenTelemetry SDK configured (``[traces]
    otel_on`` off, the default): the run's carrier (its no-op span carries the parent's context).

    Not computed by calling it: that goes through the process-wide tracer provider, and a full ``make
    test`` once gave the model a new carrier for a clear without a run reset (a test that passes alone),
    i.e. a recording tracer in that worker; the model's Airflow must not depend on what another test did.
    With OpenTelemetry on, every clear gives a new carrier, which only helps the engine.
    """
    return dict(dag_run_carrier)


# ---------------------------------------------------------------------------- the supervisor channel
class ChannelLock:
    """The channel's non-reentrant lock as seen from the calling actor's process: ``CommsDecoder.send``
    holds it from the request until the answer, so it is held when SIGTERM's ``on_kill`` runs on the main
    thread while that thread is inside a channel call (`Process.holds_comms_lock`). Each process has its
    own channel; the model's one `ModelComms` answers for all of them, hence the lookup by actor."""

    def __init__(self, coop: Coop) -> None:
        self.coop = coop

    def locked(self) -> bool:
        actor = self.coop.current
        holds = getattr(getattr(actor, "owner", None), "holds_comms_lock", None)
        return bool(holds()) if callable(holds) else False


class ModelComms:
    """``SUPERVISOR_COMMS`` for every actor: the supervisor's ``_handle_request`` plus the execution API.

    The task-state-store routes (``airflow.api_fastapi.execution_api.routes.task_state_store``) resolve
    the task instance by its id (``_get_task_scope_for_ti``): a superseded try's id (every retry and every
    clear mints a new one in ``prepare_db_for_next_try``) is 404. The client turns a 404 on ``get`` into
    ``TASK_STORE_NOT_FOUND`` (the accessor returns the default: indistinguishable from "no record"), and a
    404 on ``set``/``delete`` into an ``API_SERVER_ERROR`` the accessor raises (``AirflowRuntimeError``).
    """

    def __init__(self, coop: Coop, db: AirflowDB) -> None:
        self.coop = coop
        self.db = db
        #: ``CommsDecoder._thread_lock``, as far as a caller can see it (``shims.supervisor_comms_busy``).
        self._thread_lock = ChannelLock(coop)
        #: Injected execution-API failures: {"get": n, "set": n} calls left to fail.
        self.faults: dict[str, int] = {}
        #: (actor, key, value) of every effective write, in order.
        self.writes: list[tuple[Any, str, Any]] = []
        self.on_write: Any = None
        #: Called with the actor whenever a call takes effect (before it is answered).
        self.on_call: Any = None

    # The real channel's ``send`` (and the triggerer's ``asend``) take one message and answer it.
    def send(self, msg: Any) -> Any:
        from airflow.sdk.exceptions import AirflowRuntimeError, ErrorType
        from airflow.sdk.execution_time import comms

        name = type(msg).__name__
        if name == "MaskSecret":
            return None
        actor = self.coop.current
        # Every call parks before it takes effect, XComs too: a triggerer's first channel call takes
        # seconds (its supervisor builds the execution API), so a user may act while the owned trigger's
        # try note (``SetXCom``) is in flight, or while a new try clears the XComs (``DeleteXCom``).
        kinds = {
            "GetTaskStateStore": "store_get",
            "SetTaskStateStore": "store_set",
            "DeleteTaskStateStore": "store_delete",
            "GetTaskStates": "task_states",
            "GetDagRun": "dag_run",
            "SetXCom": "xcom_set",
            "GetXCom": "xcom_get",
            "DeleteXCom": "xcom_delete",
        }
        kind = kinds.get(name)
        if kind is None:
            raise ModelError(f"the model's supervisor channel does not answer {name}: {msg!r}")
        owner = getattr(actor, "owner", None)
        if actor is not None and actor.role == "on_kill" and owner is not None and owner.holds_comms_lock():
            # The SIGTERM handler runs on the main thread, which is inside a blocking send holding the
            # channel's non-reentrant _thread_lock (CommsDecoder.send): this call never returns, and the
            # supervisor escalates to SIGKILL.
            owner.deadlocked = True
            park = self.coop.park("comms_deadlock", name)
            raise WorkerCrash("on_kill deadlocked on the supervisor channel")
        park = self.coop.park(kind, getattr(msg, "key", "") or name)
        if park.refused:
            raise WorkerCrash(f"{getattr(actor, 'name', '?')} died before {name}")
        if self.on_call is not None:
            self.on_call(actor)

        def api_error(status: int, message: str) -> AirflowRuntimeError:
            return AirflowRuntimeError(
                comms.ErrorResponse(
                    error=ErrorType.API_SERVER_ERROR, detail={"status_code": status, "message": message}
                )
            )

        if kind == "task_states":
            return self._task_states(msg)
        if kind == "dag_run":
            # ``handle_get_dag_run`` → execution API ``GET /dag-runs/{dag_id}/{run_id}``.
            if self.db.run is None or msg.run_id != RUN_ID:
                raise api_error(404, f"DAG run {msg.run_id} not found")
            return comms.DagRunResult.from_api_response(self.db.dag_run_model())
        if kind.startswith("xcom_"):
            return self._xcom(msg, actor)
        op = kind.removeprefix("store_")
        if self.faults.get(op if op != "delete" else "set", 0) > 0:
            self.faults[op if op != "delete" else "set"] -= 1
            if actor is not None and owner is not None:
                owner.store_faults_hit += 1
            raise api_error(503, "execution API: 503 Service Unavailable (injected)")
        ti = self.db.ti
        found = ti is not None and ti.id == msg.ti_id
        if kind == "store_get":
            if not found or msg.key not in self.db.store:
                return comms.ErrorResponse(error=ErrorType.TASK_STORE_NOT_FOUND, detail={"key": msg.key})
            return comms.TaskStateStoreResult(value=json.loads(json.dumps(self.db.store[msg.key])))
        if not found:
            raise api_error(404, f"Task instance {msg.ti_id} not found")
        if kind == "store_set":
            self.db.store[msg.key] = json.loads(json.dumps(msg.value))
            self.writes.append((actor, msg.key, self.db.store[msg.key]))
            if self.on_write is not None:
                self.on_write(actor)
        else:
            self.db.store.pop(msg.key, None)
        return comms.OKResponse(ok=True)

    async def asend(self, msg: Any) -> Any:
        # The triggerer's channel; the actor parks on its event loop's thread (nothing else runs there).
        return self.send(msg)

    def _task_states(self, msg: Any) -> Any:
        """``handle_get_task_states`` → execution API ``GET /task-instances/states``: the states of the
        asked task instances in the asked runs; a run that does not exist answers with nothing."""
        from airflow.sdk.execution_time import comms

        if self.db.run is None or self.db.ti is None or RUN_ID not in (msg.run_ids or [RUN_ID]):
            return comms.TaskStatesResult(task_states={})
        states = {TASK_ID: self.db.ti.state, "other": self.db.other_task_state}
        wanted = msg.task_ids or list(states)
        return comms.TaskStatesResult(task_states={RUN_ID: {t: states[t] for t in wanted if t in states}})

    def _xcom(self, msg: Any, actor: Any) -> Any:
        from airflow.sdk.execution_time import comms

        name = type(msg).__name__
        if name == "SetXCom":
            value = json.loads(json.dumps(msg.value))
            self.db.xcom[msg.key] = value
            owner = getattr(actor, "owner", None)
            if owner is not None and hasattr(owner, "xcoms"):
                owner.xcoms[msg.key] = value
            return None
        if name == "DeleteXCom":
            self.db.xcom.pop(msg.key, None)
            return None
        return comms.XComResult(key=msg.key, value=self.db.xcom.get(msg.key))


# ---------------------------------------------------------------------------- plugin listeners
class ListenerSession:
    """Airflow's own ORM objects in an in-memory SQLite database, for the moments Airflow hands them to
    plugin listeners: the listener runs exactly as in the scheduler or the API server, on a real
    ``TaskInstance`` whose attribute history and session are Airflow's (`airflow_durable.shims.
    mark_cleared_while_running` reads both), and its writes to ``task_state_store`` rows come back to the
    model's store.

    Each call copies the ``dag_run``, ``task_instance`` and ``task_state_store`` rows in inside one
    transaction, applies Airflow's steps to the loaded task instance, calls the hook, reads the store rows
    back and rolls the transaction back (nothing stays between calls).
    """

    _engine: Any = None

    @classmethod
    def engine(cls) -> Any:
        if cls._engine is None:
            from airflow.models import import_all_models
            from airflow.models.base import Base
            from sqlalchemy import create_engine
            from sqlalchemy.pool import StaticPool

            import_all_models()  # every table the ORM's relationships and foreign keys name
            engine = create_engine(
                "sqlite://", poolclass=StaticPool, connect_args={"check_same_thread": False}
            )
            Base.metadata.create_all(engine)
            cls._engine = engine
        return cls._engine

    @classmethod
    def on_task_instance_failed(
        cls, db: AirflowDB, *, new_state: str, previous_state: str | None, error: str, flush_first: bool
    ) -> None:
        """Load ``db.ti`` as Airflow does (``refresh_from_db``), set ``new_state`` on it, flush first when
        Airflow does (``TaskInstance.set_state`` on a mark), then ``get_listener_manager().hook.
        on_task_instance_failed(...)`` with Airflow's own exception guard; the store rows as the listener
        left them (flushed, as Airflow's ``save_to_db`` / the request's commit does) become ``db.store``."""
        from airflow.listeners.listener import get_listener_manager
        from airflow.models.dagrun import DagRun
        from airflow.models.task_state_store import TaskStateStoreModel
        from airflow.models.taskinstance import TaskInstance
        from sqlalchemy import insert, select
        from sqlalchemy.orm import Session

        from airflow_durable.plugins import listener

        manager = get_listener_manager()
        if not manager.pm.is_registered(listener):
            raise ModelError("airflow_durable.plugins.listener is not loaded by Airflow's listener manager")
        assert db.run is not None and db.ti is not None
        ti_row = db.ti
        with Session(cls.engine()) as session:
            run_id_pk = 1
            session.execute(
                insert(DagRun.__table__).values(
                    id=run_id_pk,
                    dag_id=DAG_ID,
                    run_id=RUN_ID,
                    run_type="manual",
                    state=db.run.state,
                    clear_number=db.run.clear_number,
                    run_after=_EPOCH,
                    start_date=db.run.start_date,
                )
            )
            session.execute(
                insert(TaskInstance.__table__).values(
                    id=ti_row.id,
                    dag_id=DAG_ID,
                    run_id=RUN_ID,
                    task_id=TASK_ID,
                    map_index=-1,
                    try_number=ti_row.try_number,
                    max_tries=ti_row.max_tries,
                    state=ti_row.state,
                    pool="default_pool",
                    pool_slots=1,
                    queue="default",
                    priority_weight=1,
                    dag_version_id=uuid.UUID(int=1),
                )
            )
            for key, value in db.store.items():
                session.execute(
                    insert(TaskStateStoreModel.__table__).values(
                        dag_run_id=run_id_pk,
                        dag_id=DAG_ID,
                        run_id=RUN_ID,
                        task_id=TASK_ID,
                        map_index=-1,
                        key=key,
                        value=json.dumps(value),
                        updated_at=_EPOCH,
                    )
                )
            ti = session.get(TaskInstance, ti_row.id)  # refresh_from_db: the state as loaded
            ti.state = new_state
            if flush_first:
                session.flush()
            try:  # exactly Airflow's guard around the hook: a listener's error is logged, never raised
                manager.hook.on_task_instance_failed(
                    previous_state=previous_state, task_instance=ti, error=error
                )
            except Exception:
                import logging

                logging.getLogger(__name__).exception("error calling listener")
            session.flush()
            rows = session.scalars(select(TaskStateStoreModel)).all()
            db.store.clear()
            db.store.update({row.key: json.loads(row.value) for row in rows})
            session.rollback()
