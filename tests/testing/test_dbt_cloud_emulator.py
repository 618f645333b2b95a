"""The unmodified ``DbtCloudHook`` (requests) and ``DbtCloudRunJobTrigger`` (aiohttp) against the emulator,
over HTTPS on loopback with the emulator's throwaway CA — in this process and in a child process."""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
import time
from typing import Any

import pytest

pytest.importorskip("airflow.providers.dbt.cloud")

from airflow.providers.common.compat.sdk import AirflowException  # noqa: E402
from airflow.providers.dbt.cloud.hooks.dbt import DbtCloudHook, DbtCloudJobRunStatus  # noqa: E402
from airflow.providers.dbt.cloud.triggers.dbt import DbtCloudRunJobTrigger  # noqa: E402

from airflow_durable.testing.dbt_cloud import DbtCloudEmulator, status_code  # noqa: E402

TOKEN = "afd-" + "ab" * 20 + "-g1"


@pytest.fixture
def dbt(dbt_cloud_emulator: DbtCloudEmulator) -> DbtCloudEmulator:
    dbt_cloud_emulator.add_job(job_id=42)
    return dbt_cloud_emulator


@pytest.fixture
def hook(dbt: DbtCloudEmulator) -> DbtCloudHook:
    return DbtCloudHook()


def trigger(run_id: int, **kwargs: Any) -> DbtCloudRunJobTrigger:
    args: dict[str, Any] = dict(
        conn_id="dbt_cloud_default",
        run_id=run_id,
        end_time=time.time() + 30,
        poll_interval=0,
        account_id=None,
    )
    args.update(kwargs)
    return DbtCloudRunJobTrigger(**args)


async def first_event(t: DbtCloudRunJobTrigger, timeout: float = 20) -> dict[str, Any]:
    async def run() -> dict[str, Any]:
        async for event in t.run():
            return event.payload
        raise AssertionError("the trigger ended without an event")

    return await asyncio.wait_for(run(), timeout)


def test_the_connection_points_the_hooks_https_url_at_loopback(dbt, durable_ledger):
    assert dbt.ledger is durable_ledger
    assert json.loads(os.environ["AIRFLOW_CONN_DBT_CLOUD_DEFAULT"]) == dbt.connection()
    conn = dbt.connection()
    assert conn["host"] == f"127.0.0.1:{dbt.port}" and dbt.url.startswith("https://127.0.0.1:")
    env = dbt.environ()
    # requests gets the CA alone (it re-reads the file per request); aiohttp the default roots plus it.
    assert os.environ["REQUESTS_CA_BUNDLE"] == env["REQUESTS_CA_BUNDLE"] == str(dbt.ca.ca_file)
    assert os.environ["SSL_CERT_FILE"] == env["SSL_CERT_FILE"] == str(dbt.ca.bundle_file)


def test_trigger_get_and_the_ledger(dbt, hook):
    dbt.lifecycle = ["QUEUED", "RUNNING", "SUCCESS"]
    data = hook.trigger_job_run(job_id=42, cause=f"nightly [{TOKEN}]", steps_override=["dbt run"]).json()[
        "data"
    ]
    run = dbt.run(data["id"])
    assert data["job_definition_id"] == 42 and data["href"].endswith(f"/runs/{run.id}/")
    assert [hook.get_job_run_status(run.id) for _ in range(4)] == [1, 3, 10, 10]  # the last state sticks
    (entry,) = dbt.ledger.submissions()
    assert (entry.operation, entry.external_id, entry.token) == ("jobs/run", run.id, TOKEN)
    assert entry.payload["steps_override"] == ["dbt run"]
    assert {r.transport for r in dbt.server.log} == {"sync"}


def test_list_runs_filters_orders_pages_and_includes_the_trigger(dbt, hook):
    other = dbt.add_job(job_id=7)
    done = dbt.add_run(42, "old", ["SUCCESS"])
    active = dbt.add_run(42, f"ours [{TOKEN}]", ["RUNNING"])
    dbt.add_run(other.id, "elsewhere", ["RUNNING"])
    runs = hook.get_job_runs(
        payload={
            "job_definition_id": 42,
            "status__in": str(list(DbtCloudJobRunStatus.NON_TERMINAL_STATUSES.value)),
            "order_by": "-created_at",
        }
    ).json()["data"]
    assert [r["id"] for r in runs] == [active.id] and runs[0]["trigger"] is None
    newest = hook.get_job_runs(
        payload={
            "job_definition_id": 42,
            "order_by": "-created_at",
            "limit": 1,
            "include_related": ["trigger"],
        }
    ).json()
    assert [r["id"] for r in newest["data"]] == [active.id]
    assert newest["data"][0]["trigger"]["cause"] == f"ours [{TOKEN}]"
    assert newest["extra"]["pagination"] == {"count": 1, "total_count": 2}
    ascending = hook.get_job_runs(payload={"order_by": "id", "offset": 1}).json()["data"]
    assert [r["id"] for r in ascending] == [active.id, active.id + 1] and done.id < active.id
    for n in range(120):
        dbt.add_run(42, f"#{n}", ["SUCCESS"])
    pages = hook.list_job_runs(job_definition_id=42)  # the hook's own pagination
    assert len(pages) == 2 and sum(len(p.json()["data"]) for p in pages) == 122
    assert dbt.ledger.entries == []  # runs started by others are not submissions of the test


def test_cancel_rerun_and_errors(dbt, hook):
    dbt.lifecycle = ["RUNNING"]
    run_id = hook.trigger_job_run(job_id=42, cause="a").json()["data"]["id"]
    hook.cancel_job_run(run_id)
    assert dbt.run(run_id).state == "CANCELLED" and dbt.ledger.entries[-1].operation == "runs/cancel"
    # rerun after a non-error run starts a plain run; after an ERROR it retries that run
    plain = hook.retry_failed_job_run(42).json()["data"]["id"]
    dbt.set_state(plain, "ERROR")
    retry = hook.retry_failed_job_run(42).json()["data"]["id"]
    assert dbt.run(retry).rerun_of == plain and dbt.run(plain).rerun_of is None
    assert dbt.run(retry).token is None  # a rerun takes no cause
    # the hook's retry_from_failure path reads the newest run, then picks /rerun/
    dbt.set_state(retry, "ERROR")
    again = hook.trigger_job_run(job_id=42, cause="b", retry_from_failure=True).json()["data"]["id"]
    assert dbt.run(again).rerun_of == retry
    with pytest.raises(AirflowException, match="^404"):
        hook.get_job_run(run_id=999)
    dbt.expire(run_id)
    with pytest.raises(AirflowException, match="^404"):
        hook.get_job_run(run_id=run_id)
    with pytest.raises(AirflowException, match="^404"):
        hook.trigger_job_run(job_id=5, cause="no such job")
    with pytest.raises(AirflowException, match="^404"):
        hook.get_job_run(run_id=retry, account_id=1)  # another account


def test_the_token_is_required(dbt, monkeypatch):
    monkeypatch.setenv("AIRFLOW_CONN_DBT_WRONG", json.dumps({**dbt.connection(), "password": "nope"}))
    with pytest.raises(AirflowException, match="^401"):
        DbtCloudHook("dbt_wrong").get_job_runs()


def test_unknown_statuses_are_served_as_numbers(dbt, hook):
    assert status_code("42") == 42
    with pytest.raises(ValueError):
        dbt.lifecycle = ["HIBERNATING"]
    run_id = hook.trigger_job_run(job_id=42, cause="a").json()["data"]["id"]
    dbt.set_state(run_id, "42")
    assert hook.get_job_run(run_id=run_id).json()["data"]["status"] == 42


async def test_the_trigger_polls_over_aiohttp_to_success(dbt, hook):
    dbt.lifecycle = ["QUEUED", "STARTING", "RUNNING", "SUCCESS"]
    run_id = hook.trigger_job_run(job_id=42, cause="a").json()["data"]["id"]
    event = await first_event(trigger(run_id))
    assert event == {
        "status": "success",
        "message": f"Job run {run_id} has completed successfully.",
        "run_id": run_id,
    }
    assert {r.transport for r in dbt.server.requests_to(f"/runs/{run_id}")} == {"async"}
    assert dbt.run(run_id).reads == 4


async def test_async_faults_hit_only_the_trigger(dbt, hook):
    dbt.lifecycle = ["RUNNING", "ERROR"]
    run_id = hook.trigger_job_run(job_id=42, cause="a").json()["data"]["id"]
    fault = dbt.faults.add(method="GET", path_contains=f"/runs/{run_id}", status=503, transport="async")
    assert hook.get_job_run_status(run_id) == 3  # the sync read passes
    event = await first_event(trigger(run_id))
    assert event["status"] == "error" and "503" in event["message"] and fault.hits == 1
    assert (await first_event(trigger(run_id)))["message"] == f"Job run {run_id} has failed."


def test_a_child_process_reaches_it_on_both_transports(dbt, hook):
    """What a scheduler / triggerer started afterwards sees: only the environment, no shared code.

    The child uses the hook's two client libraries directly (importing Airflow would cost seconds);
    that both trust the CA from the inherited variables is what the hook relies on.
    """
    dbt.lifecycle = ["RUNNING"]
    run_id = hook.trigger_job_run(job_id=42, cause="a").json()["data"]["id"]
    url = f"{dbt.url}/api/v2/accounts/{dbt.account_id}/runs/{run_id}/"
    probe = f"""
import asyncio, json, aiohttp, requests
headers = {{"Authorization": "Token {dbt.token}"}}
sync = requests.get("{url}", headers=headers).json()["data"]["status"]
async def main():
    async with aiohttp.ClientSession(headers=headers) as session:
        async with session.get("{url}") as response:
            return (await response.json())["data"]["status"]
print("PROBE " + json.dumps([sync, asyncio.run(main())]))
"""
    done = subprocess.run(
        [sys.executable, "-c", probe], env=dict(os.environ), capture_output=True, text=True, timeout=120
    )
    lines = [line for line in done.stdout.splitlines() if line.startswith("PROBE ")]
    assert lines, done.stderr[-3000:]
    assert json.loads(lines[-1].removeprefix("PROBE ")) == [3, 3]
    assert {r.transport for r in dbt.server.requests_to(f"/runs/{run_id}")} == {"sync", "async"}
