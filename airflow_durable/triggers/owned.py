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
The trigger cannot tell those apart (the triggerer's channel reports a state, not which try or clear),
and a cancel there would end a job that its owner still waits on.
"""

from __future__ import annotations

import asyncio
import importlib
from collections.abc import AsyncIterator
from typing import Any

from airflow.triggers.base import BaseTrigger, TriggerEvent

from airflow_durable import shims

__all__ = ["DurableOwnedTrigger"]

#: Attributes the triggerer sets on a trigger before running it; the wrapped trigger gets them too.
_RUNTIME_ATTRIBUTES = ("trigger_id", "triggerer_job_id", "timeout_after", "asset_state_store")
#: How long ``on_kill`` waits to learn the task's state; the triggerer gives ``on_kill`` 30 s in all.
_STATE_QUERY_TIMEOUT = 10.0
#: Task-instance states from which no try runs again without a user's clear (which starts a new logical
#: job): nothing waits on the job any more.
ENDED_STATES = frozenset({"success", "failed", "skipped", "upstream_failed", "removed"})


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
        self._hand_down()
        async for event in self.inner.run():
            yield event

    def cleanup(self) -> Any:
        return self.inner.cleanup()

    async def on_kill(self) -> None:
        state: str | None
        try:
            state = await asyncio.wait_for(
                shims.aget_task_states(self.dag_id, self.run_id, self.owner_task_id, self.map_index),
                timeout=_STATE_QUERY_TIMEOUT,
            )
        except KeyError:
            state = "removed"  # Airflow no longer knows the task instance: its DAG run was deleted
        except Exception as err:
            self.log.warning(
                "not cancelling the job of %s: could not ask whether task %s still waits on it (%s: %s); the "
                "task instance's record keeps tracking the job",
                self.trigger_classpath,
                self.owner_task_id,
                type(err).__name__,
                err,
            )
            return
        if state == "deferred":
            self.log.info(
                "not cancelling the job of %s: task %s is still deferred, so this trigger was handed to "
                "another triggerer, not killed by a user (apache/airflow#73454)",
                self.trigger_classpath,
                self.owner_task_id,
            )
            return
        if state not in ENDED_STATES:
            self.log.info(
                "not cancelling the job of %s: task %s is %s, so a try of it runs (again) and decides: it "
                "resumes on the event, reconnects, or (if the task was cleared) ends this job itself",
                self.trigger_classpath,
                self.owner_task_id,
                state,
            )
            return
        if self.job is None:
            # A deferral of an earlier release: only the provider trigger knows its job.
            self._hand_down()
            await self.inner.on_kill()
            return
        await self._cancel_job(state)

    async def _cancel_job(self, state: str | None) -> None:
        """The engine's kill policy on the deferrable path: a user ended the task, so its job ends too.

        Done here rather than by the provider trigger, since most provider triggers cancel nothing on kill
        (and the operator's ``cancel_on_kill`` never reaches them).
        """
        job = self.job or {}
        external_id = job.get("external_id")
        if not job.get("cancel", True):
            self.log.info(
                "task %s is %s: cancel_on_kill=False, leaving job %s running (its record keeps tracking it)",
                self.owner_task_id,
                state,
                external_id,
            )
            return
        from airflow_durable.jobs import systems

        self.log.info("task %s is %s: cancelling its job %s", self.owner_task_id, state, external_id)
        from asgiref.sync import sync_to_async

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
