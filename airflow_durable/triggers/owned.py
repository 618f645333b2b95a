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

An answer is only about the try it names: the wrapper asks for the task instance's try number with its
state (one row, one read), and `decide_on_kill` (pure) compares it with the try that deferred
(``self.task_instance.try_number``). A newer try owns the job whatever its state: it reconnected to it,
or, as a new logical job, ends it itself. Where Airflow does not say which try (see `shims.aget_current_try`)
the decision falls back to the state alone, which is safe for the states that cancel: an ended task
instance waits on no job, whichever try ended.

The first question a triggerer's supervisor answers builds its in-process execution API (seconds:
Cadwyn generates every API version's routes on the first request), so a trigger that waited for the
user's mark to ask first answered late (9.5 s measured). The first wrapper a triggerer runs asks once
in the background (`_prime_channel`), so that the answer on a kill takes milliseconds.
"""

from __future__ import annotations

import asyncio
import importlib
from collections.abc import AsyncIterator
from dataclasses import dataclass
from typing import Any

from airflow.triggers.base import BaseTrigger, TriggerEvent

from airflow_durable import shims

__all__ = ["DurableOwnedTrigger", "KillDecision", "TryAnswer", "decide_on_kill"]

#: Attributes the triggerer sets on a trigger before running it; the wrapped trigger gets them too.
_RUNTIME_ATTRIBUTES = ("trigger_id", "triggerer_job_id", "timeout_after", "asset_state_store")
#: How long ``on_kill`` waits to learn the task's state; the triggerer gives ``on_kill`` 30 s in all, and
#: the cancel needs the rest. The supervisor answers between its DB steps (within about a second), but its
#: first answer builds its in-process execution API (`_prime_channel` does that early): 9.5 s was measured
#: on an idle triggerer, 14 s under load.
_STATE_QUERY_TIMEOUT = 20.0
#: Task-instance states from which no try runs again without a user's clear (which starts a new logical
#: job): nothing waits on the job any more.
ENDED_STATES = frozenset({"success", "failed", "skipped", "upstream_failed", "removed"})
#: The background question that builds the triggerer supervisor's execution API client (one per process).
_PRIMING: set[asyncio.Task[Any]] = set()
_PRIMED = False
#: Kill decisions still at work after Airflow cancelled the ``on_kill`` that started them (see `on_kill`).
_KILLING: set[asyncio.Task[Any]] = set()


@dataclass(frozen=True)
class TryAnswer:
    """What Airflow answered when a killed trigger asked about its task instance.

    ``try_number`` is the try the answer is about, ``None`` where Airflow did not say; ``exists=False``
    when Airflow knows no such task instance (its DAG run was deleted); ``error`` when there was no answer.
    """

    state: str | None = None
    try_number: int | None = None
    exists: bool = True
    error: str | None = None


@dataclass(frozen=True)
class KillDecision:
    """Whether a killed trigger cancels its job, and why (logged as is)."""

    cancel: bool
    reason: str


def decide_on_kill(my_try: int | None, answer: TryAnswer, *, cancel_on_kill: bool = True) -> KillDecision:
    """The owned trigger's kill policy (DESIGN §8: only the owner cancels, and a mark ends the job).

    ``my_try`` is the try that deferred (the trigger's own task instance), ``None`` if unknown; ``answer``
    what Airflow said about the task instance *now*. Pure: no I/O, no clock.
    """

    def cancel(why: str) -> KillDecision:
        if not cancel_on_kill:
            return KillDecision(False, f"{why}; cancel_on_kill=False leaves the job running (still tracked)")
        return KillDecision(True, why)

    if answer.error is not None:
        return KillDecision(
            False, f"no answer about the task instance ({answer.error}); its record keeps tracking the job"
        )
    if not answer.exists:
        return cancel("the task instance is gone (its DAG run was deleted): no try will wait on the job")
    state, theirs = answer.state, answer.try_number
    known = my_try is not None and theirs is not None
    if my_try is not None and theirs is not None and theirs > my_try:
        return KillDecision(
            False,
            f"superseded: try {theirs} ({state}) is newer than this trigger's try {my_try} and owns the "
            "job (it reconnected to it, or as a new logical job ends it itself)",
        )
    if my_try is not None and theirs is not None and theirs < my_try:
        return cancel(
            f"the task instance was re-created (try {theirs} after this trigger's try {my_try}: its DAG "
            "run was deleted and run again): no try will wait on the job"
        )
    about = f"try {my_try}" if known else "the task instance (which try is not known)"
    if state in ENDED_STATES:
        return cancel(f"{about} is {state}: a user ended it, nothing waits on the job")
    if state == "deferred":
        if known:
            return KillDecision(
                False,
                f"{about} is still deferred: this trigger was handed to another triggerer, not killed by a "
                "user (apache/airflow#73454)",
            )
        return KillDecision(False, f"{about} is deferred: a try waits on a job (this one or a newer one)")
    if state is None or state == "restarting":
        return KillDecision(
            False,
            f"{about} was cleared: the next try starts a new logical job and ends this job itself",
        )
    if state in ("up_for_retry", "up_for_reschedule"):
        return KillDecision(False, f"{about} is {state}: the next try reconnects to the job")
    return KillDecision(
        False,
        f"{about} is {state}: it resumed (the trigger fired on the triggerer that took it over) or runs "
        "again, and decides itself",
    )


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
        logical_date: str | None = None,
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
        #: The DAG run's logical date (ISO 8601), if it has one: it pins which task instance
        #: ``GetPreviousTI`` answers about (see `shims.aget_current_try`).
        self.logical_date = logical_date
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
        logical_date: str | None = None,
    ) -> BaseTrigger:
        if isinstance(trigger, cls):
            return trigger
        classpath, kwargs = trigger.serialize()
        return cls(classpath, dict(kwargs), dag_id, run_id, task_id, map_index, job, logical_date)

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
                # only when known: a row written by this release reads back in an older one
                **({"logical_date": self.logical_date} if self.logical_date else {}),
            },
        )

    def _hand_down(self) -> None:
        if self.task_instance is not None:
            self.inner.task_instance = self.task_instance
        for name in _RUNTIME_ATTRIBUTES:
            if hasattr(self, name):
                setattr(self.inner, name, getattr(self, name))

    async def run(self) -> AsyncIterator[TriggerEvent]:
        self._hand_down()
        self._prime_channel()
        async for event in self.inner.run():
            yield event

    def _prime_channel(self) -> None:
        """Once per trigger-runner process, ask the supervisor a question in the background.

        Its first answer builds the supervisor's in-process execution API (Airflow does that lazily, and
        it takes seconds); asked only when a user marks the task, the answer came 9.5 s late. Only on the
        triggerer's channel (``asend``): ``dag.test()`` runs a trigger with a channel of its own.
        """
        global _PRIMED
        if _PRIMED or not shims.triggerer_channel():
            return
        _PRIMED = True

        async def ask() -> None:
            try:
                await shims.aget_task_states(self.dag_id, self.run_id, self.owner_task_id, self.map_index)
            except Exception as err:  # noqa: BLE001 - a warm-up: on_kill asks again and handles failures
                self.log.debug("priming the triggerer's task-state channel failed: %s", err)

        task = asyncio.get_running_loop().create_task(ask(), name="airflow-durable-prime-channel")
        _PRIMING.add(task)  # a strong reference until it is done (the loop keeps only weak ones)
        task.add_done_callback(_PRIMING.discard)

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
        work = asyncio.get_running_loop().create_task(
            self._kill(), name=f"airflow-durable-kill-{self.run_id}"
        )
        _KILLING.add(work)
        work.add_done_callback(_KILLING.discard)
        await asyncio.shield(work)

    async def _kill(self) -> None:
        answer = await self._ask_current_try()
        ti = self.task_instance
        my_try = getattr(ti, "try_number", None) if ti is not None else None
        cancel_on_kill = bool((self.job or {}).get("cancel", True))
        decision = decide_on_kill(my_try, answer, cancel_on_kill=cancel_on_kill)
        external_id = (self.job or {}).get("external_id")
        self.log.info(
            "%s job %s of task %s: %s",
            "cancelling" if decision.cancel else "not cancelling",
            external_id if self.job is not None else f"(known to {self.trigger_classpath})",
            self.owner_task_id,
            decision.reason,
        )
        if not decision.cancel:
            return
        if self.job is None:
            # A deferral of an earlier release: only the provider trigger knows its job.
            self._hand_down()
            await self.inner.on_kill()
            return
        await self._cancel_job(answer.state)

    async def _ask_current_try(self) -> TryAnswer:
        """Which try of the task instance is current, and its state (one answer), or why there is none."""
        try:
            state, try_number = await asyncio.wait_for(
                shims.aget_current_try(
                    self.dag_id, self.run_id, self.owner_task_id, self.map_index, self.logical_date
                ),
                timeout=_STATE_QUERY_TIMEOUT,
            )
        except KeyError:
            return TryAnswer(exists=False)  # Airflow no longer knows the task instance
        except Exception as err:
            return TryAnswer(error=f"{type(err).__name__}: {err}")
        return TryAnswer(state=state, try_number=try_number)

    async def _cancel_job(self, state: str | None) -> None:
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
