"""A user's action on a deferred task reaches the owned trigger's ``on_kill`` through Airflow's own
triggerer code, wherever the provider trigger was waiting (model finding N1).

Airflow's ``TriggerRunner.run_trigger`` calls ``on_kill`` only when the ``CancelledError`` that ends the
trigger carries the user-action message (``cancel_triggers``); asgiref's ``sync_to_async`` turns the
cancel it receives into a new error without it. The provider trigger here parks in ``sync_to_async`` as
the BigQuery trigger does between polls (a stand-in for a provider trigger, not our code); the wrapper,
its kill decision and Airflow's runner are the real ones, and the supervisor's channel is a stand-in
that answers what Airflow would.
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import AsyncIterator
from types import SimpleNamespace
from typing import Any

import pytest

from airflow_durable import shims

pytestmark = pytest.mark.skipif(not shims.DURABLE_RUNTIME, reason="the owned trigger needs Airflow >= 3.3")

#: What the parked provider trigger saw: "on_kill" when Airflow called it, "portal" if its own task had
#: greenback's portal (sync SDK calls from ``run()`` work).
SEEN: list[str] = []
#: Releases the provider trigger's blocking call (set at the end of each test: no thread outlives it).
RELEASE = threading.Event()


def _blocking_poll() -> None:
    RELEASE.wait(30)


class ParkedTrigger:
    """A provider trigger whose ``run()`` waits in asgiref's ``sync_to_async`` (as BigQuery's polls)."""

    def __init__(self, mode: str = "park") -> None:
        self.mode = mode
        self.task_instance: Any = None

    def serialize(self) -> tuple[str, dict[str, Any]]:
        return f"{__name__}.ParkedTrigger", {"mode": self.mode}

    async def run(self) -> AsyncIterator[Any]:
        from airflow.triggers.base import TriggerEvent
        from asgiref.sync import sync_to_async

        if shims.has_trigger_task_portal():
            SEEN.append("portal")
        if self.mode == "fire":
            yield TriggerEvent({"status": "success", "run_id": 1})
            return
        await sync_to_async(_blocking_poll)()
        yield TriggerEvent({"status": "success", "run_id": 1})

    async def on_kill(self) -> None:
        SEEN.append("on_kill")

    async def cleanup(self) -> None:
        return None


class _Supervisor:
    """The triggerer supervisor's side of the channel: the task instance was marked failed."""

    def __init__(self, state: str) -> None:
        self.state = state
        self.xcoms: dict[str, Any] = {}

    async def asend(self, message: Any) -> Any:
        from airflow.sdk.execution_time.comms import GetXCom, SetXCom, TaskStatesResult, XComResult

        if isinstance(message, SetXCom):
            self.xcoms[message.key] = message.value
            return None
        if isinstance(message, GetXCom):
            return XComResult(key=message.key, value=self.xcoms.get(message.key))
        return TaskStatesResult(task_states={message.run_ids[0]: {message.task_ids[0]: self.state}})


def _owned(mode: str = "park") -> Any:
    from airflow_durable.triggers.owned import DurableOwnedTrigger

    trigger = DurableOwnedTrigger.wrap(
        ParkedTrigger(mode), dag_id="d", run_id="r", task_id="t", map_index=-1, job=None
    )
    trigger.task_instance = SimpleNamespace(
        id="01a2449e-0000-7000-8000-000000000001",
        dag_id="d",
        run_id="r",
        task_id="t",
        map_index=-1,
        try_number=1,
        context_carrier=None,
    )
    return trigger


async def _run_in_airflows_runner(trigger: Any, *, cancel: str | None) -> tuple[Any, list[Any]]:
    """Start ``trigger`` as ``TriggerRunner.create_triggers`` does; with ``cancel``, wait until the provider
    trigger is parked, then cancel it as Airflow does: ``"user"`` through ``cancel_triggers`` (a user's
    clear or mark), ``"shutdown"`` with a bare ``task.cancel()`` (the triggerer stopping)."""
    from airflow.jobs.triggerer_job_runner import TriggerRunner

    runner = TriggerRunner()
    task = asyncio.create_task(runner.run_trigger(1, trigger))
    runner.triggers[1] = {"task": task, "name": "owned", "events": 0, "is_watcher": False}
    if cancel is not None:
        for _ in range(200):
            if "portal" in SEEN:
                break
            await asyncio.sleep(0.01)
        await asyncio.sleep(0.1)  # inside sync_to_async by now
        if cancel == "user":
            runner.to_cancel.append(1)
            await runner.cancel_triggers()
        else:
            task.cancel()
    RELEASE.set()
    await asyncio.wait({task}, timeout=20)
    assert task.done(), "the trigger did not end"
    return task, list(runner.events)


@pytest.fixture(autouse=True)
def _fresh(monkeypatch: pytest.MonkeyPatch) -> Any:
    from airflow.sdk.execution_time import task_runner

    SEEN.clear()
    RELEASE.clear()
    supervisor = _Supervisor("failed")
    monkeypatch.setattr(task_runner, "SUPERVISOR_COMMS", supervisor, raising=False)
    yield supervisor
    RELEASE.set()


def test_a_user_action_while_the_provider_trigger_waits_in_sync_to_async_runs_on_kill() -> None:
    # The task was marked failed: the owned trigger decides to cancel and, with no job of its own
    # recorded, asks the provider trigger to (its on_kill).
    asyncio.run(_run_in_airflows_runner(_owned(), cancel="user"))
    assert "on_kill" in SEEN, f"Airflow never called on_kill: {SEEN}"


def test_a_shutdown_while_the_provider_trigger_waits_runs_no_on_kill() -> None:
    # A triggerer stopping cancels without the message: the job goes on, another triggerer takes over.
    asyncio.run(_run_in_airflows_runner(_owned(), cancel="shutdown"))
    assert "on_kill" not in SEEN


def test_the_provider_trigger_runs_with_a_portal_and_its_events_pass_through() -> None:
    task, events = asyncio.run(_run_in_airflows_runner(_owned("fire"), cancel=None))
    assert task.exception() is None
    assert [e.event.payload for e in events] == [{"status": "success", "run_id": 1}]
    assert SEEN == ["portal"], "sync SDK calls from the provider trigger's run() need greenback's portal"
