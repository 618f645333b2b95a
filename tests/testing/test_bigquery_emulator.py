"""The BigQuery emulator, driven by the unmodified provider hooks and trigger, and by a bare client."""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
import textwrap

import pytest

from airflow_durable.testing import BigQueryEmulator, Ledger

QUERY = {"query": {"query": "SELECT 1", "useLegacySql": False}}


@pytest.fixture
def hook(bigquery_emulator):
    from airflow.providers.google.cloud.hooks.bigquery import BigQueryHook

    return BigQueryHook(use_legacy_sql=False)


def test_fixture_installs_the_endpoint_and_an_anonymous_connection(bigquery_emulator, durable_ledger):
    assert isinstance(bigquery_emulator, BigQueryEmulator)
    assert bigquery_emulator.ledger is durable_ledger
    assert os.environ["BIGQUERY_EMULATOR_HOST"] == bigquery_emulator.url
    conn = json.loads(os.environ["AIRFLOW_CONN_GOOGLE_CLOUD_DEFAULT"])
    assert conn["extra"] == {"is_anonymous": True, "project": "emulator-project"}


def test_insert_with_caller_job_id_then_duplicate_is_409(hook, bigquery_emulator, durable_ledger):
    from google.api_core.exceptions import Conflict

    job = hook.insert_job(configuration=QUERY, job_id="my_job-1", nowait=True)
    assert job.job_id == "my_job-1" and job.state == "PENDING"
    with pytest.raises(Conflict, match="Already Exists: Job emulator-project:US.my_job-1"):
        hook.insert_job(configuration=QUERY, job_id="my_job-1", nowait=True)
    entries = durable_ledger.select(operation="jobs.insert")
    assert [(e.external_id, e.token, e.created) for e in entries] == [
        ("my_job-1", "my_job-1", True),
        ("my_job-1", "my_job-1", False),
    ]
    assert bigquery_emulator.job("my_job-1").configuration["query"]["query"] == "SELECT 1"


def test_get_job_steps_the_scripted_lifecycle_and_reports_errors(hook, bigquery_emulator):
    bigquery_emulator.lifecycle = ["PENDING", "RUNNING", "DONE:FAILED"]
    hook.insert_job(configuration=QUERY, job_id="j", nowait=True)
    states = [hook.get_job(job_id="j").state for _ in range(4)]
    assert states == ["PENDING", "RUNNING", "DONE", "DONE"]
    job = hook.get_job(job_id="j")
    assert job.error_result["reason"] == "invalidQuery"
    assert bigquery_emulator.job("j").reads == 5


def test_sync_wait_runs_the_clients_own_result_loop(hook, bigquery_emulator):
    bigquery_emulator.lifecycle = ["PENDING", "RUNNING", "RUNNING", "DONE"]
    job = hook.insert_job(configuration=QUERY, job_id="wait_me", nowait=True)
    rows = job.result()
    assert job.state == "DONE" and list(rows) == []
    assert bigquery_emulator.server.requests_to("/queries/wait_me")


def test_cancel_and_expire(hook, bigquery_emulator, durable_ledger):
    from google.api_core.exceptions import NotFound

    bigquery_emulator.lifecycle = ["RUNNING"]
    hook.insert_job(configuration=QUERY, job_id="c", nowait=True)
    hook.cancel_job(job_id="c")
    job = hook.get_job(job_id="c")
    assert job.state == "DONE" and job.error_result["reason"] == "stopped"
    assert durable_ledger.select(operation="jobs.cancel")[0].payload == {"changed": True}
    bigquery_emulator.expire("c")
    with pytest.raises(NotFound):
        hook.get_job(job_id="c")
    hook.insert_job(configuration=QUERY, job_id="c", nowait=True)  # an expired id may be inserted again
    assert len(durable_ledger.submissions()) == 2


def test_invalid_job_id_is_refused(hook, bigquery_emulator):
    from google.api_core.exceptions import BadRequest

    with pytest.raises(BadRequest, match="Invalid job ID"):
        hook.insert_job(configuration=QUERY, job_id="not.valid", nowait=True)
    assert bigquery_emulator.ledger.submissions() == []


def test_injected_fault_fails_once_without_client_retries(hook, bigquery_emulator):
    from google.api_core.exceptions import ServiceUnavailable

    hook.insert_job(configuration=QUERY, job_id="f", nowait=True)
    fault = bigquery_emulator.faults.add(method="GET", path_contains="/jobs/f", status=503, times=1)
    with pytest.raises(ServiceUnavailable, match="injected fault"):
        hook.get_job(job_id="f")
    assert fault.hits == 1
    assert hook.get_job(job_id="f").state == "PENDING"


def test_retryable_fault_is_retried_by_the_client(hook, bigquery_emulator):
    """A backendError body makes the google client retry, as against BigQuery."""
    body = {"error": {"code": 503, "message": "x", "errors": [{"reason": "backendError", "message": "x"}]}}
    hook.insert_job(configuration=QUERY, job_id="r", nowait=True)
    fault = bigquery_emulator.faults.add(
        method="GET", path_contains="/jobs/r", status=503, times=1, body=body
    )
    assert hook.get_job(job_id="r").state == "PENDING"
    assert fault.hits == 1


def test_lost_insert_response_makes_the_clients_retry_meet_409(hook, bigquery_emulator, durable_ledger):
    """The job is created, the answer is lost: the google client retries jobs.insert and gets 409."""
    from google.api_core.exceptions import Conflict

    body = {"error": {"code": 503, "message": "x", "errors": [{"reason": "backendError", "message": "x"}]}}
    bigquery_emulator.faults.add(
        method="POST", path_contains="/jobs", status=503, times=1, body=body, after=True
    )
    with pytest.raises(Conflict):
        hook.insert_job(configuration=QUERY, job_id="lost", nowait=True)
    assert [e.created for e in durable_ledger.select(operation="jobs.insert")] == [True, False]


def test_the_provider_trigger_polls_the_emulator(bigquery_emulator):
    from airflow.providers.google.cloud.hooks.bigquery import BigQueryHook
    from airflow.providers.google.cloud.triggers.bigquery import BigQueryInsertJobTrigger

    bigquery_emulator.lifecycle = ["PENDING", "RUNNING", "DONE"]
    BigQueryHook().insert_job(configuration=QUERY, job_id="t", nowait=True)
    trigger = BigQueryInsertJobTrigger(
        conn_id="google_cloud_default",
        job_id="t",
        project_id="emulator-project",
        location=None,
        poll_interval=0.01,
    )

    async def first_event():
        async for event in trigger.run():
            return event.payload

    assert asyncio.run(first_event()) == {"job_id": "t", "status": "success", "message": "Job completed"}
    # BigQueryAsyncHook.get_job_status runs the sync client in a thread: the polls are requests calls.
    polls = bigquery_emulator.server.requests_to("/jobs/t")
    assert len(polls) == 3 and {p.transport for p in polls} == {"sync"}


def test_the_trigger_turns_an_api_error_into_an_error_event(bigquery_emulator):
    from airflow.providers.google.cloud.hooks.bigquery import BigQueryHook
    from airflow.providers.google.cloud.triggers.bigquery import BigQueryInsertJobTrigger

    BigQueryHook().insert_job(configuration=QUERY, job_id="e", nowait=True)
    bigquery_emulator.faults.add(method="GET", path_contains="/jobs/e", status=503, times=1)
    trigger = BigQueryInsertJobTrigger(
        conn_id="google_cloud_default",
        job_id="e",
        project_id="emulator-project",
        location=None,
        poll_interval=0.01,
    )

    async def first_event():
        async for event in trigger.run():
            return event.payload

    event = asyncio.run(first_event())
    assert event["status"] == "error" and "injected fault" in event["message"] and "job_id" not in event


def test_the_triggers_cancel_goes_through_gcloud_aio(bigquery_emulator, monkeypatch, durable_ledger):
    """``on_kill`` uses gcloud-aio-bigquery over aiohttp, which wants host:port in the same variable."""
    from airflow.providers.google.cloud.hooks.bigquery import BigQueryHook
    from airflow.providers.google.cloud.triggers.bigquery import BigQueryInsertJobTrigger

    bigquery_emulator.lifecycle = ["RUNNING"]
    BigQueryHook().insert_job(configuration=QUERY, job_id="k", nowait=True)
    trigger = BigQueryInsertJobTrigger(
        conn_id="google_cloud_default", job_id="k", project_id="emulator-project", location="US"
    )
    for name, value in bigquery_emulator.aio_environ().items():
        monkeypatch.setenv(name, value)
    asyncio.run(trigger.on_kill())
    assert bigquery_emulator.job("k").state == "DONE:CANCELLED"
    assert bigquery_emulator.server.requests_to("/jobs/k/cancel")[0].transport == "async"


def test_a_separate_process_reaches_it_through_the_environment_alone():
    """What a scheduler / triggerer started by a test sees: only environment variables, no patching."""
    with BigQueryEmulator(ledger=Ledger()) as emulator:
        code = textwrap.dedent(
            """
            from google.auth.credentials import AnonymousCredentials
            from google.cloud import bigquery
            client = bigquery.Client(project="emulator-project", credentials=AnonymousCredentials())
            job = client.query("SELECT 1", job_id="from_child")
            print(job.job_id, client.get_job("from_child").state)
            """
        )
        env = {**os.environ, **emulator.environ()}
        out = subprocess.run(
            [sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=120
        )
        assert out.returncode == 0, out.stderr[-2000:]
        assert out.stdout.split() == ["from_child", "PENDING"]
        assert [e.external_id for e in emulator.ledger.submissions()] == ["from_child"]


def test_job_ids_must_be_bigquery_job_ids_and_errors_stay_visible(bigquery_emulator):
    with pytest.raises(KeyError, match="no job 'missing'"):
        bigquery_emulator.job("missing")
    with pytest.raises(ValueError):
        bigquery_emulator.lifecycle = []
