"""The AWS emulators, driven by the unmodified provider hooks (botocore) and triggers (aiobotocore)."""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
import textwrap
from typing import Any

import pytest

from airflow_durable.testing.contracts import expect_violations

pytest.importorskip("airflow.providers.amazon")
pytest.importorskip("aiobotocore")

from botocore.exceptions import ClientError  # noqa: E402

from airflow_durable.testing.aws import AwsEmulator, MotoServer  # noqa: E402
from airflow_durable.testing.batch import TOKEN_TAG  # noqa: E402


def _redshift_hook() -> Any:
    from airflow.providers.amazon.aws.hooks.redshift_data import RedshiftDataHook

    return RedshiftDataHook(aws_conn_id="aws_default")


def _batch_hook() -> Any:
    from airflow.providers.amazon.aws.hooks.batch_client import BatchClientHook

    return BatchClientHook(aws_conn_id="aws_default")


async def _collect(trigger: Any) -> list[Any]:
    return [event async for event in trigger.run()]


# --------------------------------------------------------------------------- the front
def test_calls_are_named_by_service_and_operation_and_transport(redshift_data_emulator):
    hook = _redshift_hook()
    out = hook.execute_query(
        sql="select 1", database="dev", cluster_identifier="c", wait_for_completion=False
    )
    asyncio.run(hook.is_still_running(out.statement_id))
    log = redshift_data_emulator.server.log
    assert [(r.path, r.transport) for r in log] == [
        ("/redshift-data/ExecuteStatement", "sync"),
        ("/redshift-data/DescribeStatement", "async"),
    ]


def test_the_connection_points_both_clients_at_the_emulator_and_carries_no_real_credentials(
    redshift_data_emulator,
):
    conn = json.loads(os.environ["AIRFLOW_CONN_AWS_DEFAULT"])
    assert conn["extra"]["endpoint_url"] == redshift_data_emulator.url
    assert conn["login"] == "testing" and conn["extra"]["region_name"] == "us-east-1"


def test_a_separate_process_reaches_the_emulator_through_the_connection(batch_emulator):
    code = textwrap.dedent(
        """
        import json, os, boto3
        conn = json.loads(os.environ["AIRFLOW_CONN_AWS_DEFAULT"])
        client = boto3.client("batch", endpoint_url=conn["extra"]["endpoint_url"],
                              region_name=conn["extra"]["region_name"],
                              aws_access_key_id=conn["login"], aws_secret_access_key=conn["password"])
        print(client.submit_job(jobName="child", jobQueue="emulator-queue",
                                jobDefinition="emulator-job-def")["jobId"])
        """
    )
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True, env=os.environ
    )
    job_id = out.stdout.strip()
    assert [e.external_id for e in batch_emulator.ledger.submissions("batch")] == [job_id]


def test_the_moto_server_is_shared_and_reset_between_emulators(durable_ledger):
    from airflow_durable.testing import BatchEmulator

    with BatchEmulator(ledger=durable_ledger) as first:
        job_id = first.submit("one")
        assert first.moto is MotoServer.shared()
    with BatchEmulator(ledger=durable_ledger) as second:
        assert second.client().describe_jobs(jobs=[job_id])["jobs"] == []  # reset: nothing leaks


def test_unmodelled_services_pass_through_to_moto(batch_emulator):
    logs = batch_emulator.client("logs")
    logs.create_log_group(logGroupName="/aws/batch/job")
    assert [g["logGroupName"] for g in logs.describe_log_groups()["logGroups"]] == ["/aws/batch/job"]
    assert len(batch_emulator.ledger) == 0


def test_an_emulator_bug_answers_500_and_is_kept(redshift_data_emulator):
    class Broken(AwsEmulator):
        service = "redshift-data"
        uses_moto = False
        local_operations = {"DescribeStatement": lambda call: 1 / 0}  # type: ignore[assignment]

    with Broken() as broken:
        client = broken.client("redshift-data", max_attempts=1)
        with pytest.raises(ClientError):
            client.describe_statement(Id="00000000-0000-4000-8000-000000000000")
        assert isinstance(broken.server.errors[0], ZeroDivisionError)


# --------------------------------------------------------------------------- Redshift Data
def test_redshift_statement_follows_its_lifecycle_on_both_transports(redshift_data_emulator):
    redshift_data_emulator.lifecycle = ["SUBMITTED", "PICKED", "STARTED", "FINISHED"]
    hook = _redshift_hook()
    statement_id = hook.execute_query(
        sql="select 1", database="dev", cluster_identifier="c", wait_for_completion=False
    ).statement_id
    assert hook.conn.describe_statement(Id=statement_id)["Status"] == "SUBMITTED"
    assert asyncio.run(hook.is_still_running(statement_id)) is True  # PICKED
    assert hook.conn.describe_statement(Id=statement_id)["Status"] == "STARTED"
    assert asyncio.run(hook.check_query_is_finished_async(statement_id)) is True
    assert redshift_data_emulator.job(statement_id).reads == 4


def test_redshift_client_token_returns_the_statement_already_created(redshift_data_emulator):
    client = redshift_data_emulator.client()
    first = client.execute_statement(Sql="select 1", ClusterIdentifier="c", Database="d", ClientToken="afd-1")
    again = client.execute_statement(Sql="select 1", ClusterIdentifier="c", Database="d", ClientToken="afd-1")
    other = client.execute_statement(Sql="select 1", ClusterIdentifier="c", Database="d", ClientToken="afd-2")
    assert first["Id"] == again["Id"] != other["Id"]
    ledger = redshift_data_emulator.ledger
    assert [(e.token, e.created) for e in ledger] == [("afd-1", True), ("afd-1", False), ("afd-2", True)]
    # botocore does not check the model's maximum; the service (and so the emulator) rejects it.
    with expect_violations() as found, pytest.raises(ClientError, match="ClientToken"):
        client.execute_statement(Sql="x", ClusterIdentifier="c", Database="d", ClientToken="t" * 65)
    assert [(v.operation, v.direction) for v in found] == [("ExecuteStatement", "request")]


def test_redshift_batch_sub_statements_and_results(redshift_data_emulator):
    redshift_data_emulator.lifecycle = ["FINISHED"]
    hook = _redshift_hook()
    out = hook.execute_query(
        sql=["select 1", "select 2"],
        database="dev",
        workgroup_name="wg-1",
        session_keep_alive_seconds=60,
        wait_for_completion=False,
    )
    assert out.session_id
    described = hook.conn.describe_statement(Id=out.statement_id)
    subs = [s["Id"] for s in described["SubStatements"]]
    assert subs == [f"{out.statement_id}:1", f"{out.statement_id}:2"]
    assert hook.conn.get_statement_result(Id=subs[1])["Records"] == [[{"longValue": 42}]]
    with pytest.raises(ClientError, match="sub-statement"):
        hook.conn.get_statement_result(Id=out.statement_id)


def test_redshift_trigger_reports_failure_cancel_and_expiry(redshift_data_emulator):
    from airflow.providers.amazon.aws.triggers.redshift_data import RedshiftDataTrigger

    redshift_data_emulator.lifecycle = ["STARTED", "FAILED"]
    hook = _redshift_hook()
    statement_id = hook.execute_query(
        sql="x", database="d", cluster_identifier="c", wait_for_completion=False
    )
    trigger = RedshiftDataTrigger(
        statement_id=statement_id.statement_id, task_id="t", poll_interval=0, aws_conn_id="aws_default"
    )
    (event,) = asyncio.run(_collect(trigger))
    assert event.payload["status"] == "error" and event.payload["type"] == "FAILED"

    redshift_data_emulator.lifecycle = ["STARTED"]
    running = redshift_data_emulator.client().execute_statement(Sql="x", ClusterIdentifier="c", Database="d")
    assert redshift_data_emulator.client().cancel_statement(Id=running["Id"])["Status"] is True
    assert redshift_data_emulator.job(running["Id"]).state == "ABORTED"
    assert redshift_data_emulator.ledger.entries[-1].operation == "CancelStatement"
    assert redshift_data_emulator.client().cancel_statement(Id=running["Id"])["Status"] is False

    redshift_data_emulator.expire(running["Id"])
    with pytest.raises(ClientError) as err:
        hook.conn.describe_statement(Id=running["Id"])
    assert err.value.response["Error"]["Code"] == "ResourceNotFoundException"


def test_redshift_throttling_past_botocore_retries_reaches_the_trigger(redshift_data_emulator):
    from airflow.providers.amazon.aws.triggers.redshift_data import RedshiftDataTrigger

    redshift_data_emulator.lifecycle = ["STARTED", "FINISHED"]
    statement = redshift_data_emulator.client().execute_statement(
        Sql="x", ClusterIdentifier="c", Database="d"
    )
    fault = redshift_data_emulator.faults.add(
        path_contains="DescribeStatement", status=500, times=None, transport="async"
    )
    trigger = RedshiftDataTrigger(
        statement_id=statement["Id"],
        task_id="t",
        poll_interval=0,
        botocore_config={"retries": {"max_attempts": 1}},
    )
    (event,) = asyncio.run(_collect(trigger))
    assert event.payload["status"] == "error" and "InternalServerException" in event.payload["message"]
    assert fault.hits >= 2  # botocore retried 5xx before giving up
    fault.remove()


def test_redshift_list_statements_by_name_prefix(redshift_data_emulator):
    client = redshift_data_emulator.client()
    client.execute_statement(Sql="a", ClusterIdentifier="c", Database="d", StatementName="afd-x-g1")
    client.execute_statement(Sql="b", ClusterIdentifier="c", Database="d", StatementName="other")
    listed = client.list_statements(StatementName="afd-x")["Statements"]
    assert [s["StatementName"] for s in listed] == ["afd-x-g1"]


# --------------------------------------------------------------------------- Batch
def test_batch_job_follows_its_lifecycle_through_hook_and_trigger(batch_emulator):
    from airflow.providers.amazon.aws.triggers.batch import BatchJobTrigger

    batch_emulator.lifecycle = ["RUNNABLE", "RUNNING", "RUNNING", "SUCCEEDED"]
    job_id = batch_emulator.submit("etl", tags={TOKEN_TAG: "afd-abc-g1"})
    hook = _batch_hook()
    assert hook.get_job_description(job_id)["status"] == "RUNNABLE"
    trigger = BatchJobTrigger(
        job_id=job_id, waiter_delay=0, waiter_max_attempts=10, aws_conn_id="aws_default"
    )
    (event,) = asyncio.run(_collect(trigger))
    assert event.payload == {"status": "success", "job_id": job_id}
    assert hook.check_job_success(job_id) is True
    (entry,) = batch_emulator.ledger.submissions("batch")
    assert entry.token == "afd-abc-g1" and entry.external_id == job_id


def test_batch_lookup_by_name_and_tag(batch_emulator):
    first = batch_emulator.submit("etl", tags={TOKEN_TAG: "afd-1"})
    second = batch_emulator.submit("etl", tags={TOKEN_TAG: "afd-2"})
    client = batch_emulator.client()
    listed = client.list_jobs(
        jobQueue=batch_emulator.job_queue, filters=[{"name": "JOB_NAME", "values": ["etl"]}]
    )
    ids = [j["jobId"] for j in listed["jobSummaryList"]]
    assert set(ids) == {first, second}
    tags = {j["jobId"]: j["tags"] for j in client.describe_jobs(jobs=ids)["jobs"]}
    assert tags[second] == {TOKEN_TAG: "afd-2"}


def test_batch_terminate_fails_the_job_and_expiry_forgets_it(batch_emulator):
    batch_emulator.lifecycle = ["RUNNING"]
    job_id = batch_emulator.submit("etl")
    hook = _batch_hook()
    hook.terminate_job(job_id, reason="test")
    assert batch_emulator.job(job_id).state == "FAILED"
    described = hook.get_job_description(job_id)
    assert described["status"] == "FAILED" and described["statusReason"] == "Terminated by the test"
    assert [e.operation for e in batch_emulator.ledger] == ["SubmitJob", "TerminateJob"]
    batch_emulator.expire(job_id)
    assert batch_emulator.client().describe_jobs(jobs=[job_id])["jobs"] == []
    listed = batch_emulator.client().list_jobs(
        jobQueue=batch_emulator.job_queue, filters=[{"name": "JOB_NAME", "values": ["etl"]}]
    )
    assert listed["jobSummaryList"] == []


def test_batch_throttling_uses_the_batch_error_code(batch_emulator):
    job_id = batch_emulator.submit("etl")
    batch_emulator.faults.add(path_contains="/batch/DescribeJobs", status=429, times=None, transport="sync")
    client = batch_emulator.client(max_attempts=2)
    with pytest.raises(ClientError) as err:
        client.describe_jobs(jobs=[job_id])
    assert err.value.response["Error"]["Code"] == "TooManyRequestsException"


def test_batch_array_job_children_follow_the_parent(batch_emulator):
    batch_emulator.lifecycle = ["RUNNING", "SUCCEEDED"]
    job_id = batch_emulator.submit("arr", arrayProperties={"size": 2})
    client = batch_emulator.client()
    assert client.describe_jobs(jobs=[job_id])["jobs"][0]["status"] == "RUNNING"
    children = client.list_jobs(arrayJobId=job_id)["jobSummaryList"]
    assert len(children) == 2 and {c["status"] for c in children} == {"RUNNING"}


def test_batch_serves_a_status_moto_cannot_hold(batch_emulator):
    job_id = batch_emulator.submit("etl")
    batch_emulator.set_state(job_id, "HIBERNATING")
    assert batch_emulator.client().describe_jobs(jobs=[job_id])["jobs"][0]["status"] == "HIBERNATING"


def _queued(batch_emulator: Any, count: int) -> list[str]:
    """``count`` RUNNING jobs on the emulator's queue, in submission order."""
    batch_emulator.lifecycle = ["RUNNING"]
    return [batch_emulator.submit(f"job-{i}") for i in range(count)]


def test_batch_list_jobs_pages_by_max_results_and_next_token(batch_emulator):
    """ListJobs answers ``maxResults`` entries and a ``nextToken`` while more remain, the rest on the
    next page in the same order, and no ``nextToken`` on the last page (moto answers one page)."""
    ids = _queued(batch_emulator, 5)
    client = batch_emulator.client()
    query = {"jobQueue": batch_emulator.job_queue, "jobStatus": "RUNNING"}
    first = client.list_jobs(**query, maxResults=2)
    assert [j["jobId"] for j in first["jobSummaryList"]] == ids[:2] and first["nextToken"]
    second = client.list_jobs(**query, maxResults=2, nextToken=first["nextToken"])
    assert [j["jobId"] for j in second["jobSummaryList"]] == ids[2:4] and second["nextToken"]
    last = client.list_jobs(**query, maxResults=2, nextToken=second["nextToken"])
    assert [j["jobId"] for j in last["jobSummaryList"]] == ids[4:]
    assert "nextToken" not in last
    # A token stays good (a client retries a page with it) and the page size may change between pages.
    again = client.list_jobs(**query, maxResults=10, nextToken=first["nextToken"])
    assert [j["jobId"] for j in again["jobSummaryList"]] == ids[2:] and "nextToken" not in again
    # botocore's own paginator walks the same pages.
    pages = list(client.get_paginator("list_jobs").paginate(**query, PaginationConfig={"PageSize": 2}))
    assert [len(p["jobSummaryList"]) for p in pages] == [2, 2, 1]
    assert [j["jobId"] for p in pages for j in p["jobSummaryList"]] == ids
    assert batch_emulator.contract_violations == []


def test_batch_list_jobs_pages_skip_and_repeat_no_job_when_the_list_changes(batch_emulator):
    """A job leaving the listed status between pages moves no other job off the next page, and a job
    already served is not served again."""
    ids = _queued(batch_emulator, 4)
    client = batch_emulator.client()
    query = {"jobQueue": batch_emulator.job_queue, "jobStatus": "RUNNING", "maxResults": 2}
    first = client.list_jobs(**query)
    assert [j["jobId"] for j in first["jobSummaryList"]] == ids[:2]
    batch_emulator.set_state(ids[0], "SUCCEEDED")
    rest = client.list_jobs(**query, nextToken=first["nextToken"])
    assert [j["jobId"] for j in rest["jobSummaryList"]] == ids[2:] and "nextToken" not in rest


def test_batch_list_jobs_default_page_is_100(batch_emulator):
    """Without ``maxResults`` Batch answers at most 100 jobs a page (the API reference)."""
    ids = _queued(batch_emulator, 101)
    client = batch_emulator.client()
    first = client.list_jobs(jobQueue=batch_emulator.job_queue, jobStatus="RUNNING")
    assert [j["jobId"] for j in first["jobSummaryList"]] == ids[:100] and first["nextToken"]
    rest = client.list_jobs(
        jobQueue=batch_emulator.job_queue, jobStatus="RUNNING", nextToken=first["nextToken"]
    )
    assert [j["jobId"] for j in rest["jobSummaryList"]] == ids[100:] and "nextToken" not in rest


@pytest.mark.parametrize(
    "page",
    [
        {"nextToken": "not-a-token-the-service-gave"},
        {"maxResults": 0},
        {"maxResults": 1001},
    ],
    ids=["unknown-token", "size-0", "size-1001"],
)
def test_batch_list_jobs_rejects_a_bad_page_request(batch_emulator, page):
    _queued(batch_emulator, 1)
    client = batch_emulator.client(max_attempts=1)
    with pytest.raises(ClientError) as err:
        client.list_jobs(jobQueue=batch_emulator.job_queue, jobStatus="RUNNING", **page)
    assert err.value.response["Error"]["Code"] == "ClientException"
    assert err.value.response["ResponseMetadata"]["HTTPStatusCode"] == 400


def test_batch_list_jobs_token_belongs_to_its_listing(batch_emulator):
    """A token answers only the listing that gave it: another status's listing rejects it."""
    _queued(batch_emulator, 3)
    client = batch_emulator.client(max_attempts=1)
    first = client.list_jobs(jobQueue=batch_emulator.job_queue, jobStatus="RUNNING", maxResults=1)
    with pytest.raises(ClientError) as err:
        client.list_jobs(
            jobQueue=batch_emulator.job_queue, jobStatus="RUNNABLE", nextToken=first["nextToken"]
        )
    assert err.value.response["Error"]["Code"] == "ClientException"


# --------------------------------------------------------------------------- the model's bounds and enums
def _unchecked_client(emulator: AwsEmulator) -> Any:
    """A client that sends what it is given: botocore's own check would stop a value below a minimum
    before it reaches the wire (it checks no maximum and no enum at all)."""
    import boto3
    from botocore.config import Config

    return boto3.client(
        {"elasticmapreduce": "emr"}.get(emulator.service, emulator.service),
        endpoint_url=emulator.url,
        region_name=emulator.region,
        aws_access_key_id="testing",
        aws_secret_access_key="testing",
        config=Config(parameter_validation=False, retries={"total_max_attempts": 1}),
    )


@pytest.fixture(params=["contracts-on", "contracts-off"])
def contracts(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> str:
    """The emulator refuses on its own, whether or not the contract checks (which refuse some of the same
    requests first, in their own words) are on: a user's tests may run with them off."""
    if request.param == "contracts-off":
        from airflow_durable.testing.contracts import ENV

        monkeypatch.setenv(ENV, "off")
    return request.param


def _refused(contracts: str, says: str, call: Any, **params: Any) -> None:
    """``call(**params)`` answered 400 ``ValidationException``; in AWS's words (``says``) when the emulator
    itself answered (the contract checks off)."""
    with expect_violations(), pytest.raises(ClientError) as err:
        call(**params)
    error = err.value.response
    assert error["ResponseMetadata"]["HTTPStatusCode"] == 400
    assert error["Error"]["Code"] == "ValidationException"
    if contracts == "contracts-off":
        assert says in error["Error"]["Message"]


@pytest.mark.parametrize(
    ("params", "says"),
    [
        (
            {"MaxResults": 500},
            "Value '500' at 'maxResults' failed to satisfy constraint: Member must have value less than or "
            "equal to 100",
        ),
        (
            {"MaxResults": -1},
            "Value '-1' at 'maxResults' failed to satisfy constraint: Member must have value greater than or "
            "equal to 0",
        ),
        (
            {"Status": "BOGUS"},
            "Value 'BOGUS' at 'status' failed to satisfy constraint: Member must satisfy enum value set: "
            "[SUBMITTED, PICKED, STARTED, FINISHED, ABORTED, FAILED, ALL]",
        ),
    ],
    ids=["max-results-500", "max-results-below-min", "unknown-status"],
)
def test_redshift_list_statements_refuses_what_the_model_bounds(
    redshift_data_emulator, contracts, params, says
):
    client = _unchecked_client(redshift_data_emulator)
    assert "Statements" in client.list_statements(MaxResults=100, Status="ALL")  # the model's bounds: served
    _refused(contracts, says, client.list_statements, **params)


def test_emr_serverless_list_job_runs_refuses_a_page_and_a_state_outside_the_model(
    emr_serverless_emulator, contracts
):
    client = _unchecked_client(emr_serverless_emulator)
    app = emr_serverless_emulator.application_id
    assert client.list_job_runs(applicationId=app, maxResults=50, states=["RUNNING"])["jobRuns"] == []
    # Query-string members, unlike Redshift Data's JSON body.
    _refused(
        contracts, "Value '500' at 'maxResults'", client.list_job_runs, applicationId=app, maxResults=500
    )
    _refused(
        contracts,
        "Value 'BOGUS' at 'states.1.member'",
        client.list_job_runs,
        applicationId=app,
        states=["BOGUS"],
    )


# --------------------------------------------------------------------------- a token replayed
def test_redshift_client_token_replayed_with_another_request_is_refused(redshift_data_emulator):
    client = redshift_data_emulator.client(max_attempts=1)
    sent = {"Sql": "select 1", "ClusterIdentifier": "c", "Database": "d", "ClientToken": "afd-1"}
    first = client.execute_statement(**sent)
    with pytest.raises(ClientError) as err:
        client.execute_statement(**{**sent, "Sql": "select 2"})
    assert err.value.response["Error"]["Code"] == "IdempotentParameterMismatchException"
    assert err.value.response["ResponseMetadata"]["HTTPStatusCode"] == 400
    assert client.execute_statement(**sent)["Id"] == first["Id"]  # the same request still gets its answer
    ledger = redshift_data_emulator.ledger
    assert [(e.token, e.created) for e in ledger] == [("afd-1", True), ("afd-1", False)]


def test_emr_serverless_client_token_replayed_with_another_request_is_refused(emr_serverless_emulator):
    client = emr_serverless_emulator.client(max_attempts=1)
    sent = {
        "applicationId": emr_serverless_emulator.application_id,
        "clientToken": "afd-1",
        "executionRoleArn": "arn:aws:iam::123456789012:role/emr-job",
        "jobDriver": {"sparkSubmit": {"entryPoint": "s3://jobs/etl.py"}},
        "name": "etl",
    }
    first = client.start_job_run(**sent)
    with pytest.raises(ClientError) as err:
        client.start_job_run(**{**sent, "name": "another"})
    assert err.value.response["Error"]["Code"] == "IdempotentParameterMismatchException"
    assert client.start_job_run(**sent)["jobRunId"] == first["jobRunId"]
