"""A small, faithful stand-in for Airflow's task runner, for the conformance suite.

It plays Airflow's part only — never ours: one task instance whose tries share a state store (as
``task_state_store`` rows are shared by all tries), XComs cleared at every new try but kept across a
deferral resume, ``TaskDeferred`` handled like the triggerer does (the trigger is serialized and rebuilt
from its classpath and kwargs, then its real async ``run()`` goes against the emulator), and trigger
failures turned into a failed try like ``__fail__``. Crashes are injected at the Airflow boundary: a
``WorkerCrash`` (``BaseException``, so no ``except Exception`` can swallow it) raised by the state store
around a chosen write models a worker killed at that instant.

The end-to-end tests (``tests/e2e``) run the same scenarios through real ``dag.test()``.
"""

from __future__ import annotations

import asyncio
import contextlib
import copy
import importlib
import json
import threading
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

from airflow_durable import shims

try:  # Airflow 3
    from airflow.sdk.exceptions import TaskDeferred
except ImportError:  # Airflow 2
    from airflow.exceptions import TaskDeferred


class WorkerCrash(BaseException):
    """The worker process died here (SIGKILL): nothing after this line of the try runs."""


class StoreUnavailable(RuntimeError):
    """What a failing execution API looks like to the task: the store call raised."""


@dataclass
class StoreCall:
    op: str
    key: str
    value: Any = None


class MemoryStateStore:
    """Airflow's ``TaskStateStoreAccessor`` semantics (JSON values, ``None`` refused), in memory.

    ``crash_when(predicate, before=True)`` raises ``WorkerCrash`` on the first ``set`` whose value matches,
    before or after the value is stored. ``fail_get`` / ``fail_set(predicate)`` make calls raise.
    """

    def __init__(self) -> None:
        self.data: dict[str, Any] = {}
        self.calls: list[StoreCall] = []
        self._crash: tuple[Callable[[Any], bool], bool] | None = None
        self.fail_get = False
        self._fail_set: Callable[[Any], bool] | None = None
        self._hold: tuple[Callable[[Any], bool], threading.Event, threading.Event] | None = None

    def get(self, key: str, default: Any = None) -> Any:
        self.calls.append(StoreCall("get", key))
        if self.fail_get:
            raise StoreUnavailable("execution API: 503 Service Unavailable")
        value = self.data.get(key, default)
        return copy.deepcopy(value)

    def set(self, key: str, value: Any, *, retention: Any = None) -> None:
        self.calls.append(StoreCall("set", key, copy.deepcopy(value)))
        if value is None:
            raise ValueError("Cannot set value as None")
        json.dumps(value)  # the real accessor sends JSON over the supervisor channel
        if self._fail_set is not None and self._fail_set(value):
            raise StoreUnavailable("execution API: 503 Service Unavailable")
        crash = self._crash
        if crash is not None and crash[0](value) and crash[1]:
            self._crash = None
            raise WorkerCrash(f"killed before storing {value!r}")
        self.data[key] = copy.deepcopy(value)
        if crash is not None and crash[0](value) and not crash[1]:
            self._crash = None
            raise WorkerCrash(f"killed after storing {value!r}")

    def delete(self, key: str) -> None:
        self.calls.append(StoreCall("delete", key))
        self.data.pop(key, None)

    def hold_when(self, predicate: Callable[[Any], bool]) -> tuple[threading.Event, threading.Event]:
        """Hold the first write whose value matches while it is in flight, until ``release`` is set: a try
        paused (a frozen worker, a slow execution API) between sending the write and its being handled.
        Returns ``(reached, release)``."""
        reached, release = threading.Event(), threading.Event()
        self._hold = (predicate, reached, release)
        return reached, release

    def in_flight(self, value: Any) -> None:
        hold = self._hold
        if hold is not None and hold[0](value):
            self._hold = None
            hold[1].set()
            if not hold[2].wait(60):
                raise RuntimeError("a held state-store write was never released")

    def crash_when(self, predicate: Callable[[Any], bool], *, before: bool) -> None:
        self._crash = (predicate, before)

    def fail_set(self, predicate: Callable[[Any], bool] | None, times: int | None = None) -> None:
        """Fail the writes of values ``predicate`` matches: every one, or the next ``times``."""
        if predicate is None or times is None:
            self._fail_set = predicate
            return
        left = [times]

        def counted(value: Any) -> bool:
            if left[0] > 0 and predicate(value):
                left[0] -= 1
                return True
            return False

        self._fail_set = counted


class TaskInstanceNotFound(RuntimeError):
    """What the execution API answers a store write of a task-instance id that no longer exists."""


class TryStateStore:
    """One try's ``task_state_store``: Airflow's accessor is bound to the try's task-instance id, and the
    execution API resolves that id to the task instance's rows. Every retry and every clear gives the task
    instance a new id (``TaskInstance.prepare_db_for_next_try``), after which the old id reads nothing
    (``TASK_STORE_NOT_FOUND``: the accessor returns the default) and writes fail."""

    def __init__(self, store: MemoryStateStore, ti: FakeTaskInstance, ti_id: str) -> None:
        self.store, self.ti, self.ti_id = store, ti, ti_id

    @property
    def current(self) -> bool:
        return self.ti.id == self.ti_id and not self.ti.gone

    def get(self, key: str, default: Any = None) -> Any:
        if not self.current:
            self.store.calls.append(StoreCall("get", key))
            return default
        return self.store.get(key, default)

    def set(self, key: str, value: Any, *, retention: Any = None) -> None:
        self.store.in_flight(value)  # the call is on its way; the execution API answers it after
        if not self.current:
            self.store.calls.append(StoreCall("set", key, copy.deepcopy(value)))
            raise TaskInstanceNotFound(f"404: task instance {self.ti_id} not found")
        self.store.set(key, value, retention=retention)

    def delete(self, key: str) -> None:
        if self.current:
            self.store.delete(key)


def record_state(state: str) -> Callable[[Any], bool]:
    """Predicate: a state-store value that is an engine record in ``state``."""
    return lambda value: isinstance(value, dict) and value.get("state") == state


class FakeDagRun:
    """The attributes of the runtime DAG run that the engine reads: when this incarnation started, and
    how often tasks in it were cleared."""

    def __init__(self) -> None:
        import datetime as dt

        self.start_date = dt.datetime.now(dt.UTC)
        self.clear_number = 0
        self.run_type = "manual"  # read by providers (e.g. BigQuery's job labels on Airflow 2)


def new_trace_carrier() -> dict[str, str]:
    """A ``context_carrier`` as Airflow 3.3 makes one (``new_task_run_carrier``): random ids."""
    return {"traceparent": f"00-{uuid.uuid4().hex}-{uuid.uuid4().hex[:16]}-00"}


class FakeTaskInstance:
    """The attributes of Airflow's runtime task instance that operators read."""

    def __init__(self, dag_id: str, run_id: str, task_id: str, retries: int) -> None:
        self.dag_id, self.run_id, self.task_id = dag_id, run_id, task_id
        self.map_index = -1
        self.try_number = 0
        self.max_tries = retries
        #: The task instance's id: new at every retry and every clear (``prepare_db_for_next_try``).
        self.id = uuid.uuid4().hex
        #: Its W3C trace context: Airflow gives a task instance a new one when it is created and when a
        #: clear clears it (``clear_task_instances``), never on a retry.
        self.context_carrier = new_trace_carrier()
        #: Its state as Airflow's ``GetTaskStates`` answers it; ``gone``: its DAG run was deleted.
        self.state: str | None = None
        self.gone = False
        #: Airflow does not answer questions about it (the API server is down, the channel broke).
        self.unanswered = False
        self.stats_tags: dict[str, str] = {}
        self.xcoms: dict[str, Any] = {}

    def xcom_push(self, key: str, value: Any) -> None:
        json.dumps(value)
        self.xcoms[key] = value

    def xcom_pull(self, task_ids: Any = None, key: str = "return_value", **_: Any) -> Any:
        return self.xcoms.get(key)


@dataclass
class TryOutcome:
    try_number: int
    state: str  # "success" | "failed" | "crashed"
    result: Any = None
    error: BaseException | None = None
    deferrals: int = 0
    xcoms: dict[str, Any] = field(default_factory=dict)


class TaskRunner:
    """Runs tries of one task instance the way Airflow would, against a real trigger."""

    def __init__(
        self,
        make_operator: Callable[[], Any],
        store: MemoryStateStore | None = None,
        retries: int = 3,
        trigger_interrupts: int = 0,
    ) -> None:
        self.make_operator = make_operator
        self.retries = retries
        self.store = store if store is not None else MemoryStateStore()
        self.ti = FakeTaskInstance("conformance", "manual__2026-12-02", "job", retries)
        _TASK_INSTANCES[(self.ti.dag_id, self.ti.run_id, self.ti.task_id, self.ti.map_index)] = self.ti
        self._id_is_new = True
        self.dag_run = FakeDagRun()
        _RUNNERS[(self.ti.dag_id, self.ti.run_id)] = self
        self.trigger_interrupts = trigger_interrupts  # "triggerer killed mid-deferral" this many times
        #: Replaces a trigger's event before the task resumes: a broken trigger or event serialization.
        self.event_filter: Callable[[Any], Any] | None = None
        self.outcomes: list[TryOutcome] = []
        self.last_operator: Any = None

    def context(self) -> dict[str, Any]:
        context: dict[str, Any] = {
            "ti": self.ti,
            "task_instance": self.ti,
            "run_id": self.ti.run_id,
            "dag_run": self.dag_run,
        }
        context["task_state_store"] = (
            TryStateStore(self.store, self.ti, self.ti.id)
            if isinstance(self.store, MemoryStateStore)
            else self.store
        )
        return context

    def new_ti_id(self) -> None:
        """Airflow's ``prepare_db_for_next_try``: the task instance gets a new id (a retry or a clear)."""
        self.ti.id = uuid.uuid4().hex
        self._id_is_new = True

    def start_try(self) -> tuple[Any, dict[str, Any]]:
        """A new try starts: its number, its task-instance id, a freshly parsed operator and its context."""
        if self.ti.try_number > 0 and not self._id_is_new:
            self.new_ti_id()  # the previous try ended (failed, died): its retry has a new task-instance id
        self._id_is_new = False
        self.ti.state = "running"
        self.ti.try_number += 1
        self.ti.xcoms = {}  # Airflow clears a task's XComs at the start of every new try
        operator = self.make_operator()  # every try is a fresh process with a freshly parsed operator
        self._parsed_with_retries(operator)
        self.last_operator = operator
        context = self.context()
        context["task"] = operator  # Airflow's context carries the task (Airflow 2 link helpers read it)
        return operator, context

    def _parsed_with_retries(self, operator: Any) -> None:
        """The task's ``retries`` is the runner's unless the operator was given its own (a DAG edit): Airflow
        creates a task instance with ``max_tries = retries``, so a first try never looks cleared."""
        if "retries" not in getattr(operator, "_BaseOperator__init_kwargs", {"retries": None}):
            operator.retries = self.retries

    def run_try(self) -> TryOutcome:
        operator, context = self.start_try()
        outcome = TryOutcome(self.ti.try_number, "failed")
        method: Callable[..., Any] = operator.execute
        kwargs: dict[str, Any] = {}
        try:
            while True:
                try:
                    outcome.result = method(context, **kwargs)
                    outcome.state = "success"
                    break
                except TaskDeferred as deferred:
                    outcome.deferrals += 1
                    event = self._run_trigger(deferred.trigger)
                    if self.event_filter is not None:
                        event = self.event_filter(event)
                    # A resumed try is a new process too: a fresh operator object.
                    operator = self.make_operator()
                    self._parsed_with_retries(operator)
                    self.last_operator = operator
                    method = getattr(operator, deferred.method_name)
                    context["task"] = operator
                    # As Airflow resumes: the deferral's kwargs (stored as JSON on the task instance) + event.
                    kwargs = {**json.loads(json.dumps(deferred.kwargs or {})), "event": event}
        except WorkerCrash as crash:
            outcome.state, outcome.error = "crashed", crash  # Airflow still thinks it runs
        except Exception as err:  # the try fails, Airflow marks it up_for_retry
            outcome.state, outcome.error = "failed", err
            self.ti.state = "up_for_retry" if self.ti.try_number <= self.ti.max_tries else "failed"
        if outcome.state == "success":
            self.ti.state = "success"
        outcome.xcoms = dict(self.ti.xcoms)
        self.outcomes.append(outcome)
        return outcome

    def run(self, max_tries: int | None = None) -> TryOutcome:
        """Run tries until one succeeds or the retries are used up; return the last outcome."""
        limit = (self.ti.max_tries + 1) if max_tries is None else max_tries
        outcome = self.run_try()
        while outcome.state != "success" and self.ti.try_number < limit:
            outcome = self.run_try()
        return outcome

    def clear(self, retries: int = 3, keep_task_state: bool = True) -> None:
        """A user clears the finished task: Airflow raises max_tries (models/taskinstance.py) and the run's
        clear_number (and restarts the run, if it had finished); the task instance gets a new id.

        ``keep_task_state=False`` is Airflow 3.4's default clear: the same request then deletes the task
        instance's ``task_state_store`` rows (3.3 keeps them on every clear)."""
        self.ti.max_tries = self.ti.try_number + retries
        self.dag_run.clear_number += 1
        self.ti.context_carrier = new_trace_carrier()
        self.new_ti_id()
        self.ti.state = None
        if not keep_task_state:
            self.store.data.clear()

    def clear_running(self, keep_task_state: bool = True) -> None:
        """A user clears the task while a try of it runs (``clear_task_instances``): the task instance gets a
        new id and a new trace carrier, the run's clear_number goes up, the task is ``restarting`` (its
        max_tries untouched until the try is reported terminated: `terminated`). ``keep_task_state=False``:
        Airflow 3.4's default clear, which deletes the task's state rows in the same request."""
        self.new_ti_id()
        self.ti.context_carrier = new_trace_carrier()
        self.dag_run.clear_number += 1
        self.ti.state = "restarting"
        if not keep_task_state:
            self.store.data.clear()

    def terminated(self, retries: int = 3) -> None:
        """The executor reports a try cleared while running terminated: Airflow resets max_tries as a clear
        does (``SchedulerJobRunner.process_executor_events``) and the task waits to be scheduled again."""
        self.ti.max_tries = self.ti.try_number + retries
        self.ti.state = None

    def reset(self) -> None:
        """A scheduler resets a task instance whose scheduler job is gone (``adopt_or_reset_orphaned_tasks``:
        ``prepare_db_for_next_try``, then no state): a new id, but ``max_tries``, the run's ``clear_number``
        and the trace carrier unchanged. Not a clear: the next try carries on with the logical job."""
        self.new_ti_id()
        self.ti.state = None

    def recreate_dag_run(self) -> None:
        """The DAG run is deleted (its state-store rows go with it) and created again with the same run_id."""
        self.store.data.clear()
        self.dag_run = FakeDagRun()
        self.ti.try_number = 0
        self.ti.max_tries = self.retries
        self.ti.context_carrier = new_trace_carrier()
        self.new_ti_id()
        self.ti.state = None

    def _run_trigger(self, trigger: Any) -> Any:
        for _ in range(self.trigger_interrupts):
            # The triggerer dies after the trigger's first poll; another one rebuilds it from the DB row.
            _killed_after(_rebuild(trigger), seconds=0.3)
            trigger = _rebuild(trigger)
        self.trigger_interrupts = 0
        return asyncio.run(_first_event(_rebuild(trigger), timeout=30))


#: Every runner's task instance, by (dag_id, run_id, task_id, map_index): what `airflow_task_states` answers.
_TASK_INSTANCES: dict[tuple[str, str, str, int], FakeTaskInstance] = {}
#: Every runner, by (dag_id, run_id): whose DAG run `airflow_run_clear_number` answers about.
_RUNNERS: dict[tuple[str, str], TaskRunner] = {}


def airflow_task_states(dag_id: str, run_id: str, task_id: str, map_index: int) -> str | None:
    """Airflow's answer to ``GetTaskStates`` for one task instance (``KeyError``: Airflow does not know it),
    for the harness's task instances; install it with `answering_task_states`."""
    ti = _TASK_INSTANCES.get((dag_id, run_id, task_id, map_index))
    if ti is not None and ti.unanswered:
        raise RuntimeError("the execution API did not answer")
    if ti is None or ti.gone:
        raise KeyError(task_id)
    return ti.state


def airflow_run_clear_number(dag_id: str, run_id: str) -> int | None:
    """Airflow's ``GetDagRun`` answer's ``clear_number`` for the harness's DAG runs (``KeyError``: no run)."""
    return _RUNNERS[(dag_id, run_id)].dag_run.clear_number


@contextlib.contextmanager
def answering_task_states() -> Iterator[None]:
    """Make the engine's questions "what state is this task instance in?" and "how often was its DAG run
    cleared?" reach the harness's Airflow."""
    saved = shims.get_task_states, shims.get_run_clear_number
    shims.get_task_states = airflow_task_states
    shims.get_run_clear_number = airflow_run_clear_number
    try:
        yield
    finally:
        shims.get_task_states, shims.get_run_clear_number = saved


@contextlib.contextmanager
def airflow_34_clear() -> Iterator[None]:
    """Give this process's Airflow 3.4's clear feature, as the shim detects it: the clear body's
    ``keep_task_state`` field (3.4's ``ClearTaskInstancesBody``). What a 3.4 clear does to the task's state
    rows the cells do themselves (`TaskRunner.clear`, `TaskRunner.clear_running`)."""
    from airflow.api_fastapi.core_api.datamodels import task_instances as datamodels

    body = datamodels.ClearTaskInstancesBody
    patched = type(
        "ClearTaskInstancesBody",
        (body,),
        {
            "__annotations__": {"keep_task_state": bool},
            "keep_task_state": False,
            "__module__": body.__module__,
        },
    )
    datamodels.ClearTaskInstancesBody = patched  # type: ignore[misc]
    try:
        assert shims.clear_discards_task_state()
        yield
    finally:
        datamodels.ClearTaskInstancesBody = body  # type: ignore[misc]


class TriggerFailure(RuntimeError):
    """The trigger raised: Airflow resumes the task with ``__fail__`` and the try fails."""


#: Event loops of triggerers "killed" mid-run: kept so their abandoned tasks are never finalized mid-test.
_KILLED_LOOPS: list[asyncio.AbstractEventLoop] = []


def _killed_after(trigger: Any, seconds: float) -> None:
    """Run ``trigger`` for ``seconds``, then abandon it as a SIGKILL would: no ``CancelledError`` reaches
    it, so none of its cancellation handlers run (e.g. a trigger asking the task's state before cancelling
    its job, which only a live triggerer can answer)."""

    async def first() -> Any:
        async for event in trigger.run():
            return event.payload
        return None

    loop = asyncio.new_event_loop()
    _KILLED_LOOPS.append(loop)
    task = loop.create_task(first())
    loop.run_until_complete(asyncio.wait([task], timeout=seconds))
    if task.done() and not task.cancelled() and task.exception() is not None:
        raise TriggerFailure(f"trigger failed: {task.exception()}") from task.exception()


def _rebuild(trigger: Any) -> Any:
    classpath, kwargs = trigger.serialize()
    module, _, name = classpath.rpartition(".")
    return getattr(importlib.import_module(module), name)(**kwargs)


async def _first_event(trigger: Any, timeout: float, allow_timeout: bool = False) -> Any:
    async def first() -> Any:
        async for event in trigger.run():
            return event.payload
        raise TriggerFailure("trigger ended without an event")

    try:
        return await asyncio.wait_for(first(), timeout)
    except TimeoutError:
        if allow_timeout:
            return None
        raise TriggerFailure(f"trigger produced no event within {timeout}s") from None
    except TriggerFailure:
        raise
    except Exception as err:
        raise TriggerFailure(f"trigger failed: {err}") from err


DURABLE = shims.DURABLE_RUNTIME
