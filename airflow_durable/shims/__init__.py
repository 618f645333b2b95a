"""The version shim: the only place in airflow-durable that asks which Airflow is installed.

Modelled on ``airflow.providers.common.compat``: every name here tries the newest API first and
falls back once, here. Nothing else in the package branches on versions.

Durable behaviour needs two things that arrived together in Airflow 3.3: the per-task-instance
``task_state_store`` in the task context and ``airflow.sdk.ResumableJobMixin``. We detect the
feature by importing the new API, not by comparing version strings.
"""

from __future__ import annotations

try:
    import airflow  # noqa: F401
except ModuleNotFoundError as _missing:  # an install without Airflow: `check`/`migrate` only
    if (_missing.name or "").partition(".")[0] != "airflow":
        raise
    from airflow_durable import catalogue

    raise ModuleNotFoundError(
        "the durable operators need Apache Airflow, which is not installed. Install airflow-durable with "
        "the extra of your system, which brings Airflow and its provider: "
        'pip install "airflow-durable[<extra>]" '
        f"(extras: {', '.join(dict.fromkeys(s.extra for s in catalogue.SYSTEMS))}, all)",
        name="airflow",
    ) from None

import contextlib
import warnings
from collections.abc import Callable, Iterable, Iterator, Mapping
from typing import Any, Protocol, TypeVar

__all__ = [
    "DURABILITY_OFF",
    "DURABLE_RUNTIME",
    "TRIGGER_FAIL_METHOD",
    "TRIGGER_TIMEOUT",
    "aget_task_states",
    "aget_xcom",
    "aset_xcom",
    "clear_discards_task_state",
    "get_task_states",
    "triggerer_channel",
    "trigger_task_portal",
    "has_trigger_task_portal",
    "user_action_cancel_message",
    "StateStore",
    "apply_defaults",
    "durable_span",
    "get_task_state_store",
    "incr_metric",
    "resolve_durable",
    "mark_cleared_while_running",
    "supervisor_comms_busy",
]

F = TypeVar("F", bound=Callable[..., Any])


def _detect_durable_runtime() -> bool:
    try:
        from airflow.sdk import ResumableJobMixin  # noqa: F401  (Airflow >= 3.3)
    except ImportError:
        return False
    return True


#: True on Airflow >= 3.3, where the task context carries a ``task_state_store`` that survives retries.
DURABLE_RUNTIME: bool = _detect_durable_runtime()


class StateStore(Protocol):
    """The part of Airflow 3.3's ``TaskStateStoreAccessor`` that the engine uses."""

    def get(self, key: str, default: Any = None) -> Any: ...

    def set(self, key: str, value: Any, *, retention: Any = None) -> None: ...

    def delete(self, key: str) -> None: ...


def get_task_state_store(context: Mapping[str, Any]) -> StateStore | None:
    """Return the task state store of this try, or ``None`` where Airflow has none (below 3.3)."""
    if not DURABLE_RUNTIME:
        return None
    return context.get("task_state_store")


def _trigger_failure_names() -> tuple[str, str]:
    try:
        from airflow.sdk.bases.operator import TRIGGER_FAIL_REPR, TriggerFailureReason  # Airflow 3.x

        return TRIGGER_FAIL_REPR, TriggerFailureReason.TRIGGER_TIMEOUT.value
    except ImportError:  # Airflow 2.x spells them as literals
        return "__fail__", "Trigger timeout"


#: ``next_method`` of a task resumed to fail because its trigger failed or timed out, and the timeout reason.
TRIGGER_FAIL_METHOD, TRIGGER_TIMEOUT = _trigger_failure_names()


def supervisor_comms_busy() -> bool:
    """Whether this process is inside a call to its supervisor right now.

    Airflow 3 runs ``on_kill`` from the SIGTERM handler, on the main thread, possibly while that thread is
    inside a supervisor call (a task-state-store read, say) holding the channel's lock, which is not
    re-entrant: a second call from ``on_kill`` would wait on that lock forever (and could interleave two
    frames on the socket). Callers skip their own calls when this is true.
    """
    try:
        from airflow.sdk.execution_time import task_runner  # Airflow >= 3.0
    except ImportError:
        return False
    lock = getattr(getattr(task_runner, "SUPERVISOR_COMMS", None), "_thread_lock", None)
    locked = getattr(lock, "locked", None)
    return bool(locked()) if callable(locked) else False


def mark_cleared_while_running(task_instance: Any, keys: Iterable[str], field: str) -> list[str]:
    """In Airflow's own failure handling of a task instance a user cleared while it ran, mark its records.

    Called from the ``on_task_instance_failed`` listener. On Airflow 3.3 a clear of a running task sets
    ``restarting`` without touching ``max_tries``; when its worker is gone the scheduler fails it for a
    missing heartbeat (``TaskInstance.fetch_handle_failure_context``) and retries it, and the next try sees
    exactly what a plain retry sees. Here, and only here, Airflow still holds the fact: the ORM object's
    state was loaded as ``restarting`` and set to ``up_for_retry``, not yet flushed. Each record under
    ``keys`` gets ``field`` (the try that ran and when), written in the same session, so the next try
    knows a new logical job begins. A worker-side call (the task runner's listener, no ORM object) and any
    other failure mark nothing. Returns the keys marked.
    """
    import datetime as dt
    import json

    try:
        from sqlalchemy import inspect as sa_inspect
        from sqlalchemy import select
        from sqlalchemy.orm import object_session

        history = sa_inspect(task_instance).attrs.state.history
        session = object_session(task_instance)
    except Exception:  # not an ORM task instance (the worker's runtime one): nothing to look at
        return []
    if session is None or not any(str(state) == "restarting" for state in history.deleted or ()):
        return []
    from airflow.models.task_state_store import TaskStateStoreModel

    marked: list[str] = []
    with session.no_autoflush:  # Airflow flushes its own change when it saves the task instance
        rows = session.scalars(
            select(TaskStateStoreModel).where(
                TaskStateStoreModel.dag_id == task_instance.dag_id,
                TaskStateStoreModel.run_id == task_instance.run_id,
                TaskStateStoreModel.task_id == task_instance.task_id,
                TaskStateStoreModel.map_index == task_instance.map_index,
                TaskStateStoreModel.key.in_(list(keys)),
            )
        ).all()
        for row in rows:
            try:
                value = json.loads(row.value)
            except ValueError:
                continue
            if not isinstance(value, dict) or field in value:
                continue
            value[field] = {"try": task_instance.try_number, "at": dt.datetime.now(dt.UTC).isoformat()}
            row.value = json.dumps(value)
            marked.append(row.key)
    return marked


def clear_discards_task_state() -> bool:
    """Whether this Airflow's task clear discards the task's state unless the user keeps it (3.4's clear).

    Airflow 3.4's ``POST .../clearTaskInstances`` deletes the cleared task instances' ``task_state_store``
    rows unless its body says ``keep_task_state: true`` (the clear dialog's "keep task state" box); 3.3
    keeps them on every clear. Told by the feature, not the version, so that a deployment patched to clear
    as 3.4 does is treated as 3.4: the body's ``keep_task_state`` field first, then a ``keep_task_state``
    parameter of ``clear_task_instances`` (where a later Airflow may move it). Not cached: after the first
    call both are attribute reads of imported modules, and a process patched after import sees its patch.

    What follows from it (the engine and the owned trigger read only this): a record that survives a clear
    was kept by the user, who asked to carry on; a clear whose kill cannot see whether the record was kept
    leaves the job to the next try, which finds the record (carry on) or finds the job by lookup.
    """
    try:
        from airflow.api_fastapi.core_api.datamodels.task_instances import (  # Airflow >= 3.0, api-server
            ClearTaskInstancesBody,
        )
    except ImportError:
        pass
    else:
        if "keep_task_state" in getattr(ClearTaskInstancesBody, "model_fields", {}):
            return True
    try:
        import inspect

        from airflow.models.taskinstance import clear_task_instances
    except ImportError:  # pragma: no cover - every Airflow that runs a durable try has it
        return False
    try:
        return "keep_task_state" in inspect.signature(clear_task_instances).parameters
    except (TypeError, ValueError):  # pragma: no cover - a wrapped callable without a signature
        return False


def get_task_states(dag_id: str, run_id: str, task_id: str, map_index: int) -> str | None:
    """The current state of one task instance, asked from inside a trigger (or a task) through the
    supervisor channel; ``KeyError`` when Airflow does not know it."""
    from airflow.sdk.execution_time.task_runner import RuntimeTaskInstance  # Airflow >= 3.0

    states = RuntimeTaskInstance.get_task_states(
        dag_id=dag_id, task_ids=[task_id], run_ids=[run_id], map_index=None if map_index < 0 else map_index
    )
    key = task_id if map_index < 0 else f"{task_id}_{map_index}"
    state = states[run_id][key]
    return None if state is None else str(state)


def get_run_clear_number(dag_id: str, run_id: str) -> int | None:
    """How often tasks of one DAG run were cleared, asked now through the supervisor channel (``GetDagRun``);
    ``None`` when Airflow does not say. Every clear raises it; a scheduler's reset of a task does not."""
    from airflow.sdk.execution_time.comms import GetDagRun  # Airflow >= 3.0
    from airflow.sdk.execution_time.task_runner import SUPERVISOR_COMMS

    answer = SUPERVISOR_COMMS.send(GetDagRun(dag_id=dag_id, run_id=run_id))
    clear_number = getattr(answer, "clear_number", None)
    if isinstance(clear_number, bool) or not isinstance(clear_number, int):
        return None
    return clear_number


async def aget_task_states(dag_id: str, run_id: str, task_id: str, map_index: int) -> str | None:
    """`get_task_states` from a trigger's event loop: the async supervisor channel where there is one.

    The triggerer's channel (3.3) answers on the loop it runs on; the sync call, made from a worker thread,
    was seen never to return inside a real triggerer's ``on_kill``.
    """
    import asyncio

    from airflow.sdk.execution_time import task_runner  # Airflow >= 3.0

    asend = getattr(getattr(task_runner, "SUPERVISOR_COMMS", None), "asend", None)
    if asend is None:
        return await asyncio.to_thread(get_task_states, dag_id, run_id, task_id, map_index)
    from airflow.sdk.execution_time.comms import GetTaskStates

    result = await asend(
        GetTaskStates(
            dag_id=dag_id,
            task_ids=[task_id],
            run_ids=[run_id],
            map_index=None if map_index < 0 else map_index,
        )
    )
    key = task_id if map_index < 0 else f"{task_id}_{map_index}"
    state = result.task_states[run_id][key]
    return None if state is None else str(state)


def triggerer_channel() -> Any:
    """The supervisor channel a trigger can ``await`` on (``asend``): the trigger runner's in a triggerer
    (a task process has one too, but runs no trigger), else ``None`` (``dag.test()`` runs a trigger with a
    sync-only channel; no Airflow 3)."""
    try:
        from airflow.sdk.execution_time import task_runner  # Airflow >= 3.0
    except ImportError:
        return None
    comms = getattr(task_runner, "SUPERVISOR_COMMS", None)
    return comms if getattr(comms, "asend", None) is not None else None


async def trigger_task_portal(wanted: bool) -> None:
    """Give the current asyncio task greenback's portal when ``wanted`` (the task that started it had one).

    Airflow 3's triggerer opens a portal in each trigger's task (``TriggerRunner.run_trigger``), so that a
    trigger's sync SDK calls (``get_connection()``…) on the event loop's thread reach the supervisor; a
    task that a trigger starts for its own work needs one too. Without greenback (Airflow 2), nothing."""
    if not wanted:
        return
    import greenback  # an Airflow 3 triggerer dependency: `wanted` is only True where it was importable

    await greenback.ensure_portal()


def user_action_cancel_message() -> str | None:
    """The message Airflow's triggerer cancels a trigger with when a user acted on its task (3.3+: it then
    calls ``on_kill``; a deferral timeout's cancel carries it too), else ``None`` (no such message)."""
    try:
        from airflow.jobs.triggerer_job_runner import _USER_ACTION_CANCEL_MSG  # Airflow >= 3.3
    except ImportError:
        return None
    return str(_USER_ACTION_CANCEL_MSG)


def has_trigger_task_portal() -> bool:
    """Whether the current asyncio task has greenback's portal (see `trigger_task_portal`)."""
    try:
        import greenback
    except ImportError:
        return False
    return bool(greenback.has_portal())


async def aset_xcom(dag_id: str, run_id: str, task_id: str, map_index: int, key: str, value: Any) -> None:
    """Write one XCom of a task instance from a trigger, on the triggerer's channel (`triggerer_channel`).

    ``value`` goes as JSON, past any custom XCom backend (a trigger's note to itself, not a result)."""
    from airflow.sdk.execution_time.comms import SetXCom  # Airflow >= 3.0

    channel = triggerer_channel()
    if channel is None:
        raise RuntimeError("no triggerer channel: not running in a trigger runner")
    await channel.asend(
        SetXCom(
            key=key,
            value=value,
            dag_id=dag_id,
            run_id=run_id,
            task_id=task_id,
            map_index=None if map_index < 0 else map_index,
        )
    )


async def aget_xcom(dag_id: str, run_id: str, task_id: str, map_index: int, key: str) -> Any:
    """Read one XCom of a task instance from a trigger (``None`` when there is none)."""
    from airflow.sdk.execution_time.comms import GetXCom  # Airflow >= 3.0

    channel = triggerer_channel()
    if channel is None:
        raise RuntimeError("no triggerer channel: not running in a trigger runner")
    found = await channel.asend(
        GetXCom(key=key, dag_id=dag_id, run_id=run_id, task_id=task_id, map_index=map_index)
    )
    return getattr(found, "value", None)


#: The operator class that told this process durability is off (empty until one did). A set, so a test can
#: ``clear()`` it to see the warning again.
_warned_noop: set[str] = set()

#: The start of the warning below Airflow 3.3; ``warnings.filterwarnings("ignore", message=...)`` silences it.
DURABILITY_OFF = "airflow-durable: durability is off"


def resolve_durable(durable: bool | None, operator_class: str) -> bool:
    """Turn the user's ``durable=`` argument into what this Airflow can actually do.

    ``None`` (not given) means "durable where possible". Below Airflow 3.3 (no task state store) the
    first durable operator constructed in a process warns (``UserWarning``) that durability is off,
    whether or not ``durable=`` was passed, and every operator degrades to submitting fresh. Once per
    process: a DAG file with fifty durable tasks, or a worker running many tries, says it once.
    ``durable=False`` is the user's own choice and says nothing.
    """
    if DURABLE_RUNTIME:
        return durable is not False
    if durable is not False and not _warned_noop:
        _warned_noop.add(operator_class)
        warnings.warn(
            f"{DURABILITY_OFF} on this Airflow: `durable` has no effect on Airflow versions below 3.3 "
            f"(no task_state_store), so every try of {operator_class} and of every other durable operator "
            "submits a fresh job, as the provider operator does. Said once per process.",
            UserWarning,
            stacklevel=3,
        )
    return False


def _load_apply_defaults() -> Callable[[F], F]:
    try:
        from airflow.sdk.bases.operator import BaseOperatorMeta  # Airflow 3.x
    except ImportError:
        from airflow.models.baseoperator import (  # type: ignore[import-not-found,no-redef]  # Airflow 2.x
            BaseOperatorMeta,
        )
    return BaseOperatorMeta._apply_defaults  # type: ignore[return-value]  # same decorator, typed with its own TypeVar


#: Decorator that lets ``default_args`` fill a mixin's own ``__init__`` parameters (like ``durable``).
apply_defaults: Callable[[F], F] = _load_apply_defaults()


def _load_stats() -> Any:
    try:
        from airflow.sdk._shared.observability.metrics import stats  # Airflow >= 3.2

        return stats
    except ImportError:
        from airflow.stats import Stats  # Airflow 2.x / early 3.x

        return Stats


def incr_metric(name: str, tags: dict[str, str]) -> None:
    """Increment a ``resumable_job.*`` counter; metrics must never fail a task."""
    try:
        _load_stats().incr(name, tags=tags)
    except Exception:  # pragma: no cover - a broken metrics backend is not our failure
        pass


@contextlib.contextmanager
def durable_span(name: str) -> Iterator[Any]:
    """An OpenTelemetry span (the SDK mixin's span names), or a no-op where OTel is absent."""
    try:
        from opentelemetry import trace
    except ImportError:  # pragma: no cover - opentelemetry ships with every supported Airflow
        yield _NoSpan()
        return
    with trace.get_tracer("airflow_durable").start_as_current_span(name) as span:
        yield span


class _NoSpan:
    def set_attribute(self, key: str, value: Any) -> None:
        return None
