"""The real ``DatabricksExecutionTrigger.run()`` (async path, ``aiohttp``) against the emulator."""

from __future__ import annotations

import asyncio
import json
from typing import Any

import pytest

pytest.importorskip("airflow.providers.databricks")

from airflow.providers.common.compat.sdk import AirflowException  # noqa: E402
from airflow.providers.databricks.hooks.databricks import RunState  # noqa: E402
from airflow.providers.databricks.triggers.databricks import DatabricksExecutionTrigger  # noqa: E402
from airflow.providers.databricks.utils.databricks import validate_trigger_event  # noqa: E402

from tests.testing.conftest import fast_retry_args  # noqa: E402

SUBMIT = {
    "run_name": "etl",
    "tasks": [{"task_key": "extract"}, {"task_key": "load"}],
}


def make_trigger(run_id: int, attempts: int = 3) -> DatabricksExecutionTrigger:
    trigger = DatabricksExecutionTrigger(
        run_id=run_id,
        databricks_conn_id="databricks_default",
        polling_period_seconds=0,
        retry_limit=attempts,
        retry_delay=0,
        run_page_url="page",
    )
    # The trigger refuses tenacity objects in retry_args (they cannot cross the triggerer's
    # serialization boundary), and its default back-off sleeps 1 s, 2 s, ... So drop only the
    # sleeps on the hook it built; its own async retry loop (stop, retry predicate) still runs.
    trigger.hook.retry_args["wait"] = fast_retry_args(attempts)["wait"]
    return trigger


async def first_event(trigger: DatabricksExecutionTrigger, timeout: float = 20) -> dict[str, Any]:
    async def run() -> dict[str, Any]:
        async for event in trigger.run():
            return event.payload
        raise AssertionError("the trigger ended without an event")

    return await asyncio.wait_for(run(), timeout)


async def test_trigger_polls_to_success(databricks_emulator, hook):
    databricks_emulator.lifecycle = ["PENDING", "QUEUED", "RUNNING", "RUNNING", "TERMINATED:SUCCESS"]
    run_id = hook.submit_run(SUBMIT)
    event = await first_event(make_trigger(run_id))
    validate_trigger_event(event)
    assert event["run_id"] == run_id and event["errors"] == []
    assert RunState.from_json(event["run_state"]).is_successful
    assert databricks_emulator.run(run_id).reads == 6  # five state reads + the final a_get_run
    polls = databricks_emulator.server.requests_to("runs/get")
    assert {r.transport for r in polls} == {"async"}


async def test_trigger_reports_failed_tasks(databricks_emulator, hook):
    databricks_emulator.lifecycle = ["RUNNING", "TERMINATED:FAILED"]
    run_id = hook.submit_run(SUBMIT)
    event = await first_event(make_trigger(run_id))
    assert RunState.from_json(event["run_state"]).result_state == "FAILED"
    assert [e["task_key"] for e in event["errors"]] == ["extract", "load"]
    assert len(databricks_emulator.server.requests_to("runs/get-output", transport="async")) == 2


async def test_trigger_waits_while_a_test_holds_the_run(databricks_emulator, hook):
    databricks_emulator.lifecycle = ["RUNNING"]
    run_id = hook.submit_run(SUBMIT)
    task = asyncio.ensure_future(first_event(make_trigger(run_id)))
    while databricks_emulator.run(run_id).reads < 5:
        await asyncio.sleep(0.01)
    assert not task.done()
    databricks_emulator.set_state(run_id, "TERMINATED:CANCELED")
    event = await task
    assert RunState.from_json(event["run_state"]).result_state == "CANCELED"


async def test_async_only_fault_fails_the_trigger_not_the_hook(databricks_emulator, hook):
    databricks_emulator.lifecycle = ["RUNNING"]
    run_id = hook.submit_run(SUBMIT)
    fault = databricks_emulator.faults.add(
        path_contains="runs/get", status=503, times=None, transport="async"
    )
    assert hook.get_run(run_id)["run_id"] == run_id  # the sync path is untouched
    with pytest.raises(AirflowException, match="failed 2 times"):
        await first_event(make_trigger(run_id, attempts=2))
    assert fault.hits == 2  # the trigger hook's async retry loop ran to its limit


async def test_async_5xx_and_429_within_the_retries_are_absorbed(databricks_emulator, hook):
    databricks_emulator.lifecycle = ["RUNNING", "TERMINATED:SUCCESS"]
    run_id = hook.submit_run(SUBMIT)
    f500 = databricks_emulator.faults.add(path_contains="runs/get", status=500, times=2, transport="async")
    f429 = databricks_emulator.faults.add(path_contains="runs/get", status=429, times=2, transport="async")
    # Four failures in a row land on the first poll: five attempts absorb them.
    event = await first_event(make_trigger(run_id, attempts=5))
    assert RunState.from_json(event["run_state"]).is_successful
    assert (f500.hits, f429.hits) == (2, 2)


async def test_trigger_on_expired_run_raises_404(databricks_emulator, hook):
    run_id = hook.submit_run(SUBMIT)
    databricks_emulator.expire(run_id)
    with pytest.raises(AirflowException, match="404"):
        await first_event(make_trigger(run_id))


async def test_trigger_on_kill_cancels_over_the_sync_path(databricks_emulator, hook):
    databricks_emulator.lifecycle = ["RUNNING"]
    run_id = hook.submit_run(SUBMIT)
    await make_trigger(run_id).on_kill()
    assert databricks_emulator.run(run_id).state == "TERMINATED:CANCELED"
    (cancel,) = databricks_emulator.server.requests_to("runs/cancel")
    assert cancel.transport == "sync"


async def test_trigger_survives_serialization_round_trip(databricks_emulator, hook):
    """As the triggerer does: rebuild from classpath + kwargs, then run against the emulator."""
    run_id = hook.submit_run(SUBMIT)
    classpath, kwargs = make_trigger(run_id).serialize()
    assert classpath == "airflow.providers.databricks.triggers.databricks.DatabricksExecutionTrigger"
    rebuilt = DatabricksExecutionTrigger(**json.loads(json.dumps(kwargs)))
    event = await first_event(rebuilt)
    assert RunState.from_json(event["run_state"]).is_successful
