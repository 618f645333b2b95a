"""The provider's trigger, wrapped so that only a kill that ends the task cancels the job.

Airflow 3.3 calls a trigger's ``on_kill()`` when a user clears or marks a deferred task, and the
provider triggers (Databricks, BigQuery, Redshift Data, EMR, …) cancel their job there. It also calls it
when a triggerer that lost its heartbeat finds that its triggers were handed to another triggerer
(apache/airflow#73454): the provider trigger then cancels a job that the task is still waiting for.

`DurableOwnedTrigger` runs the provider trigger unchanged — same ``run()``, same events, same
``cleanup()`` — and cancels the job on ``on_kill()`` only when no try of the task will ever wait on it
again: the task instance ended (a user marked it success, failed or skipped) or no longer exists (its DAG
run was deleted). Then the wrapper cancels the job itself through the system's hook, as the operator's
``on_kill`` would on the sync path (``cancel_on_kill=False`` leaves it running): most provider triggers
cancel nothing on kill, so leaving it to them would leave a job that no task waits on.

In every other state a try of the task runs (again) and its engine owns the decision: ``deferred``, the
trigger just moved to another triggerer; ``scheduled``/``queued``/``running``, the task resumes because
the trigger fired on the triggerer that took it over (the job ended), or it was cleared, and the new try
ends the older epoch's job itself before it submits (DESIGN §8); ``up_for_retry``, the retry reconnects.
A cancel there would end a job that its owner still waits on.

An answer counts only for the try it is about, and `may_cancel_on_kill` (pure, in
`airflow_durable.engine.ownership` beside the engine's `may_cancel`) compares that try with the one that
deferred (``self.task_instance``: its id and try number). A newer try that may still run owns the job:
it reconnected to it, or, as a new logical job, finds and ends it itself. An ended task instance waits on
no job whichever try ended it: a newer try marked before it reached the job (after Airflow 3.4's clear
discarded the record, before its lookup) would otherwise leave it running, named by nothing.

Airflow 3.3 tells a trigger a task instance's state but not which try that state belongs to
(``GetTaskStates``; the runner cannot even decode the answer to ``GetPreviousTI``), so each wrapper leaves
a note in its task instance's XComs when it starts (``airflow_durable.deferred_try``: its try's id and
number). A new try's task process clears the task instance's XComs before it runs, so on a kill the wrapper
reads the state, then the note: its own note means no newer try has started, another try's note names that
try, and a missing note that it wrote means a newer try started. Where the note says nothing (never
written) the decision falls back to the state alone, which is safe for the states that cancel: an ended
task instance waits on no job, whichever try ended.

The first question a triggerer's supervisor answers builds its in-process execution API (seconds: Cadwyn
generates every API version's routes on its first request), so a kill that asked first answered late
(9.5 s measured on an idle triggerer). The note is written in the background as the trigger starts, so
that cost is paid before any user acts, and the answer on a kill takes milliseconds.
"""

from __future__ import annotations

import asyncio
import contextlib
import importlib
import time
from collections.abc import AsyncIterator
from typing import Any

from airflow.triggers.base import BaseTrigger, TriggerEvent

from airflow_durable import shims
from airflow_durable.engine.ownership import TryAnswer, may_cancel_on_kill

__all__ = ["TRY_NOTE_KEY", "DurableOwnedTrigger"]

#: Attributes the triggerer sets on a trigger before running it; the wrapped trigger gets them too.
_RUNTIME_ATTRIBUTES = ("trigger_id", "triggerer_job_id", "timeout_after", "asset_state_store")
#: How long ``on_kill`` waits to learn the task's state; the triggerer gives ``on_kill`` 30 s in all, and
#: the cancel needs the rest. The supervisor answers between its DB steps (within about a second), but its
#: first answer builds its in-process execution API (the note a trigger writes as it starts does that
#: early): 9.5 s was measured on an idle triggerer, 14 s under load.
_STATE_QUERY_TIMEOUT = 20.0
#: The XCom in which a running wrapper notes which try deferred (see the module docstring).
TRY_NOTE_KEY = "airflow_durable.deferred_try"
#: Notes being written, and kill decisions still at work after Airflow cancelled the ``on_kill`` that
#: started them (see `on_kill`): the event loop keeps only weak references to its tasks.
_BACKGROUND: set[asyncio.Task[Any]] = set()


def _in_background(coro: Any, name: str) -> asyncio.Task[Any]:
    task = asyncio.get_running_loop().create_task(coro, name=name)
    _BACKGROUND.add(task)
    task.add_done_callback(_BACKGROUND.discard)
    return task


#: What `_next_event` returns when the provider trigger has no more events.
_NO_MORE: Any = object()


def _inner_cancel_message(cancel: asyncio.CancelledError) -> str | None:
    """The message the provider trigger is cancelled with: Airflow's user-action message whenever Airflow
    has one, so that a provider trigger's own pre-3.3 cancel path (EMR Serverless': it cancels the job when
    the message is missing and the task is not deferred) stands down and ``on_kill`` alone decides. Without
    it a deferral timeout's cancel ended the job the retry was about to reconnect to (model, EMR
    Serverless). Below 3.3 Airflow calls no ``on_kill``: the provider's own path stays."""
    user_action = shims.user_action_cancel_message()
    if user_action is not None:
        return user_action
    return str(cancel.args[0]) if cancel.args else None


async def _next_event(events: AsyncIterator[TriggerEvent], portal: bool) -> Any:
    await shims.trigger_task_portal(portal)
    try:
        return await events.__anext__()
    except StopAsyncIteration:  # a task cannot end with it (asyncio treats it as an error)
        return _NO_MORE


def _load(classpath: str) -> type[BaseTrigger]:
    module, _, name = classpath.rpartition(".")
    return getattr(importlib.import_module(module), name)


class DurableOwnedTrigger(BaseTrigger):
    """Runs ``trigger_classpath(**trigger_kwargs)``; cancels on kill only when the task stopped waiting."""

    def __init__(
        self,
        trigger_classpath: str,
        trigger_kwargs: dict[str, Any],
        dag_id: str,
        run_id: str,
        task_id: str,
        map_index: int = -1,
        job: dict[str, Any] | None = None,
    ) -> None:
        super().__init__()
        self.trigger_classpath = trigger_classpath
        self.trigger_kwargs = trigger_kwargs
        self.dag_id = dag_id
        self.run_id = run_id
        self.owner_task_id = task_id
        self.map_index = map_index
        #: ``{"system", "locator", "external_id", "cancel"}``: the job this deferral waits on, reachable
        #: without the operator, and whether the operator's ``cancel_on_kill`` asks to cancel it.
        self.job = job
        #: Whether this wrapper's note (`TRY_NOTE_KEY`) was written, by this process.
        self._noted = False
        self.inner = _load(trigger_classpath)(**trigger_kwargs)

    def __getattr__(self, name: str) -> Any:
        # Reads of the provider trigger's own attributes (``run_id``, ``end_time``, …) reach it, as they
        # would without the wrapper.
        inner = self.__dict__.get("inner")
        if inner is None:
            raise AttributeError(name)
        return getattr(inner, name)

    @classmethod
    def wrap(
        cls,
        trigger: BaseTrigger,
        *,
        dag_id: str,
        run_id: str,
        task_id: str,
        map_index: int,
        job: dict[str, Any] | None = None,
    ) -> BaseTrigger:
        if isinstance(trigger, cls):
            return trigger
        classpath, kwargs = trigger.serialize()
        return cls(classpath, dict(kwargs), dag_id, run_id, task_id, map_index, job)

    def serialize(self) -> tuple[str, dict[str, Any]]:
        return (
            f"{type(self).__module__}.{type(self).__qualname__}",
            {
                "trigger_classpath": self.trigger_classpath,
                "trigger_kwargs": self.trigger_kwargs,
                "dag_id": self.dag_id,
                "run_id": self.run_id,
                "task_id": self.owner_task_id,
                "map_index": self.map_index,
                "job": self.job,
            },
        )

    def _hand_down(self) -> None:
        if self.task_instance is not None:
            self.inner.task_instance = self.task_instance
        for name in _RUNTIME_ATTRIBUTES:
            if hasattr(self, name):
                setattr(self.inner, name, getattr(self, name))

    async def run(self) -> AsyncIterator[TriggerEvent]:
        """The provider trigger's events, each awaited as a task of its own.

        Airflow tells a user's action from a shutdown by the message of the ``CancelledError`` that reaches
        ``run_trigger`` (only the user-action message leads to ``on_kill``). A cancel that lands while the
        provider trigger awaits asgiref's ``sync_to_async`` (BigQuery polls through it, AWS builds its
        client with it) comes out of it as a new ``CancelledError`` without the message, so ``on_kill``
        never ran and a marked task's job ran on. Awaiting the provider trigger's next event as a separate
        task, the cancel reaches this coroutine with its message intact; the provider trigger is then
        cancelled in turn and the original error goes on to Airflow.
        """
        self._hand_down()
        if shims.triggerer_channel() is not None and self._my_try()[0] is not None:
            _in_background(self._note_try(), f"airflow-durable-note-{self.run_id}")
        portal = shims.has_trigger_task_portal()
        events = self.inner.run().__aiter__()
        loop = asyncio.get_running_loop()
        step: asyncio.Task[Any] | None = None
        try:
            while True:
                step = loop.create_task(
                    _next_event(events, portal), name=f"airflow-durable-run-{self.run_id}"
                )
                try:
                    await asyncio.wait({step})  # a cancel of this coroutine leaves `step` alone
                except asyncio.CancelledError as cancel:
                    step.cancel(_inner_cancel_message(cancel))
                    await asyncio.wait({step})  # the provider trigger's own cancel handling, then Airflow's
                    raise
                event = step.result()
                if event is _NO_MORE:
                    return
                yield event
        finally:
            if step is None or step.done():
                aclose = getattr(events, "aclose", None)
                if aclose is not None:
                    with contextlib.suppress(Exception):
                        await aclose()

    def _my_try(self) -> tuple[str | None, int | None]:
        """The id and try number of the try that deferred, as the triggerer handed them to this trigger."""
        ti = self.task_instance
        ti_id = getattr(ti, "id", None)
        try_number = getattr(ti, "try_number", None)
        return (None if ti_id is None else str(ti_id)), (None if try_number is None else int(try_number))

    async def _note_try(self) -> None:
        """Note this try in the task instance's XComs (read back by `_ask_current_try`); off the trigger's
        path: the first write of a triggerer also builds its supervisor's execution API."""
        ti_id, try_number = self._my_try()
        began = time.monotonic()
        try:
            await shims.aset_xcom(
                self.dag_id,
                self.run_id,
                self.owner_task_id,
                self.map_index,
                TRY_NOTE_KEY,
                {"ti_id": ti_id, "try_number": try_number},
            )
        except Exception as err:  # noqa: BLE001 - without the note a kill decides by the state alone
            self.log.warning("could not note try %s of task %s: %s", try_number, self.owner_task_id, err)
            return
        self._noted = True
        # The note's cost, per deferral (docs/dev/runtime-findings.md measures it on a real triggerer).
        self.log.info(
            "noted try %s of task %s in %.0f ms",
            try_number,
            self.owner_task_id,
            (time.monotonic() - began) * 1000,
        )

    def cleanup(self) -> Any:
        return self.inner.cleanup()

    async def on_kill(self) -> None:
        """Ask which try is current and decide; the work outlives a second cancel of this coroutine.

        Airflow's triggerer cancels a killed trigger's task again on every runner loop (about once a
        second) until the trigger is done (``TriggerRunner.cancel_triggers`` with the supervisor's whole
        ``cancelling_triggers`` set), which interrupts ``on_kill`` at its first ``await`` after that: an
        answer that took longer than a loop, or the cancel request itself, would be dropped. So the work
        runs in a task of its own, shielded, and finishes on the runner's loop.
        """
        await asyncio.shield(_in_background(self._kill(), f"airflow-durable-kill-{self.run_id}"))

    async def _kill(self) -> None:
        began = time.monotonic()
        answer = await self._ask_current_try()
        asked_ms = (time.monotonic() - began) * 1000
        my_ti_id, my_try = self._my_try()
        cancel_on_kill = bool((self.job or {}).get("cancel", True))
        decision = may_cancel_on_kill(
            my_try,
            answer,
            my_ti_id=my_ti_id,
            cancel_on_kill=cancel_on_kill,
            clear_keeps=shims.clear_discards_task_state(),
            # A deferral of an earlier release says nothing: its job is taken as not findable (ended here).
            findable=bool((self.job or {}).get("findable", False)),
        )
        external_id = (self.job or {}).get("external_id")
        self.log.info(
            "%s job %s of task %s: %s (answered in %.0f ms)",
            "cancelling" if decision.allowed else "not cancelling",
            external_id if self.job is not None else f"(known to {self.trigger_classpath})",
            self.owner_task_id,
            decision.reason,
            asked_ms,
        )
        if not decision.allowed:
            return
        if self.job is None:
            # A deferral of an earlier release: only the provider trigger knows its job.
            self._hand_down()
            await self.inner.on_kill()
            return
        await self._cancel_job()

    async def _ask_current_try(self) -> TryAnswer:
        """The task instance's state now, and which try it is about (from the notes), or why not known."""
        key = (self.dag_id, self.run_id, self.owner_task_id, self.map_index)
        try:
            state = await asyncio.wait_for(shims.aget_task_states(*key), timeout=_STATE_QUERY_TIMEOUT)
        except KeyError:
            return TryAnswer(exists=False)  # Airflow no longer knows the task instance
        except Exception as err:
            return TryAnswer(error=f"{type(err).__name__}: {err}")
        # The note is read after the state: the note this try wrote means no newer try had started when
        # the state was read either.
        note: Any = None
        if shims.triggerer_channel() is not None:
            try:
                note = await asyncio.wait_for(
                    shims.aget_xcom(*key, TRY_NOTE_KEY), timeout=_STATE_QUERY_TIMEOUT
                )
            except Exception as err:  # noqa: BLE001 - without the note, the state alone decides
                self.log.warning(
                    "could not read which try of task %s is current: %s", self.owner_task_id, err
                )
                return TryAnswer(state=state)
        if isinstance(note, dict) and isinstance(note.get("try_number"), int):
            return TryAnswer(state=state, try_number=note["try_number"], ti_id=note.get("ti_id"))
        _, my_try = self._my_try()
        if note is None and self._noted and my_try is not None:
            # Its note is gone: a newer try's task process cleared the task instance's XComs as it started.
            return TryAnswer(state=state, try_number=my_try + 1)
        return TryAnswer(state=state)

    async def _cancel_job(self) -> None:
        """The engine's kill policy on the deferrable path: a user ended the task, so its job ends too.

        Done here rather than by the provider trigger, since most provider triggers cancel nothing on kill
        (and the operator's ``cancel_on_kill`` never reaches them).
        """
        job = self.job or {}
        external_id = job.get("external_id")
        from asgiref.sync import sync_to_async

        from airflow_durable.jobs import systems

        try:
            # As the provider triggers' own on_kill call their sync hooks (asgiref, not a bare thread).
            await sync_to_async(systems.cancel)(
                str(job.get("system")), dict(job.get("locator") or {}), external_id
            )
        except Exception as err:
            self.log.warning(
                "could not cancel job %s of task %s (%s: %s); its record keeps tracking it",
                external_id,
                self.owner_task_id,
                type(err).__name__,
                err,
            )
