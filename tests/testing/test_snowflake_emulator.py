"""The Snowflake SQL API emulator, reached by the unmodified provider hook (requests) and trigger (aiohttp).

The hook hard-codes ``https://<account>.snowflakecomputing.com``: these tests also prove the TLS +
name-routing seam works in this process and in a child process, with no hook patched.
"""

from __future__ import annotations

import asyncio
import json
import os
import socket
import subprocess
import sys
import textwrap
import uuid
from typing import Any

import pytest

from airflow_durable.testing import contracts
from airflow_durable.testing.contracts import expect_violations

pytest.importorskip("airflow.providers.snowflake")

import requests  # noqa: E402
from airflow.providers.snowflake.hooks.sql_api import SnowflakeSqlApiHook  # noqa: E402
from airflow.providers.snowflake.triggers.snowflake_trigger import SnowflakeSqlApiTrigger  # noqa: E402

from airflow_durable.testing import _tls  # noqa: E402
from tests.testing.conftest import fast_retry_args  # noqa: E402


def hook(attempts: int = 3) -> SnowflakeSqlApiHook:
    return SnowflakeSqlApiHook("snowflake_default", api_retry_args=fast_retry_args(attempts))


def trigger(handles: list[str]) -> SnowflakeSqlApiTrigger:
    from datetime import timedelta

    return SnowflakeSqlApiTrigger(
        poll_interval=0,
        query_ids=handles,
        snowflake_conn_id="snowflake_default",
        token_life_time=timedelta(minutes=59),
        token_renewal_delta=timedelta(minutes=54),
    )


async def first_event(t: SnowflakeSqlApiTrigger, timeout: float = 20) -> dict[str, Any]:
    async def run() -> dict[str, Any]:
        async for event in t.run():
            return event.payload
        raise AssertionError("the trigger ended without an event")

    return await asyncio.wait_for(run(), timeout)


def post(emulator: Any, sql: str, *, request_id: str, retry: bool, count: int = 0) -> requests.Response:
    """A raw submission, for the requestId/retry semantics the hook itself cannot express."""
    params: dict[str, Any] = {"requestId": request_id, "async": "true"}
    if retry:
        params["retry"] = "true"
    return requests.post(
        f"{emulator.url}/api/v2/statements",
        params=params,
        json={"statement": sql, "parameters": {"MULTI_STATEMENT_COUNT": count}},
        headers={
            "Authorization": f"Bearer {emulator.token}",
            "X-Snowflake-Authorization-Token-Type": "PROGRAMMATIC_ACCESS_TOKEN",
        },
        timeout=10,
    )


# --------------------------------------------------------------------------- the sync path (requests)
def test_hook_submits_a_multi_statement_request_and_reads_each_handle(snowflake_emulator, durable_ledger):
    snowflake_emulator.lifecycle = ["RUNNING", "SUCCESS"]
    handles = hook().execute_query("insert into t select 1; select 2", statement_count=2)
    assert len(handles) == 2 and len(set(handles)) == 2
    [entry] = durable_ledger.submissions("snowflake")
    assert entry.external_id == handles and entry.token is None  # the hook never sends retry=true
    uuid.UUID(entry.payload["requestId"])
    assert entry.payload["parameters"]["MULTI_STATEMENT_COUNT"] == 2
    assert hook().get_sql_api_query_status(handles[0])["status"] == "running"
    assert hook().get_sql_api_query_status(handles[0])["status"] == "success"
    # A state is what the next read returns: handle 0 is done, handle 1 has not started its script.
    assert snowflake_emulator.request(handles).state == "RUNNING"
    assert hook().get_sql_api_query_status(handles[1])["status"] == "running"  # each handle its own script
    assert {r.transport for r in snowflake_emulator.server.requests_to("/statements")} == {"sync"}


def test_single_statement_and_result_rows(snowflake_emulator):
    snowflake_emulator.lifecycle = ["SUCCESS"]
    [handle] = hook().execute_query("select 42", statement_count=1)
    snowflake_emulator.statement(handle).result = (["ANSWER"], [["42"]])
    assert hook().get_result_from_successful_sql_api_query(handle) == [{"ANSWER": "42"}]


def test_failed_and_cancelled_statements_answer_422_with_the_sql_state(snowflake_emulator):
    handles = hook().execute_query("select 1; select 2", statement_count=0)
    snowflake_emulator.set_state(handles[0], "FAILED")
    failed = hook().get_sql_api_query_status(handles[0])
    assert failed["status"] == "error" and "SQL State: 42000" in failed["message"]
    hook().cancel_queries([handles[1]])
    cancelled = hook().get_sql_api_query_status(handles[1])
    assert cancelled["status"] == "error" and "canceled" in cancelled["message"]
    assert snowflake_emulator.statement(handles[1]).cancelled
    assert snowflake_emulator.request(handles).state == "FAILED"
    assert [e.operation for e in snowflake_emulator.ledger.entries] == ["statements", "statements/cancel"]


def test_statement_count_mismatch_is_refused(snowflake_emulator, durable_ledger):
    status, body = hook()._make_api_call_with_retries(
        "POST",
        f"{snowflake_emulator.url}/api/v2/statements",
        hook().get_headers(),
        {"requestId": str(uuid.uuid4()), "async": True},
        {"statement": "select 1; select 2", "parameters": {"MULTI_STATEMENT_COUNT": 3}},
    )
    assert status == 422 and body["code"] == "000008"
    assert durable_ledger.submissions() == []


def test_expired_handle_is_404(snowflake_emulator):
    [handle] = hook().execute_query("select 1", statement_count=1)
    snowflake_emulator.expire(handle)
    with pytest.raises(requests.HTTPError) as err:
        hook().get_sql_api_query_status(handle)
    assert err.value.response.status_code == 404


def test_wrong_token_is_401(snowflake_emulator, monkeypatch):
    connection = snowflake_emulator.connection()
    connection["password"] = "wrong"
    monkeypatch.setenv("AIRFLOW_CONN_SNOWFLAKE_BAD", json.dumps(connection))
    with pytest.raises(requests.HTTPError) as err:
        SnowflakeSqlApiHook("snowflake_bad").execute_query("select 1", statement_count=1)
    assert err.value.response.status_code == 401


def test_unknown_http_state_is_served_as_is(snowflake_emulator, monkeypatch):
    [handle] = hook().execute_query("select 1", statement_count=1)
    snowflake_emulator.set_state(handle, "HTTP_201")
    # The hook folds a status code it does not know into "error". The SQL API never answers 201: the
    # emulator records that it broke the contract on purpose (and serves it: record mode, not strict).
    monkeypatch.setenv(contracts.ENV, "record")
    with expect_violations() as found:
        assert hook().get_sql_api_query_status(handle)["status"] == "error"
    assert [(v.operation, v.direction) for v in found] == [("GetStatementStatus", "response")]
    with pytest.raises(ValueError, match="unknown Snowflake emulator state"):
        snowflake_emulator.set_state(handle, "HIBERNATING")


# --------------------------------------------------------------------------- requestId and retry=true
def test_a_retry_with_a_known_request_id_returns_the_first_execution(snowflake_emulator, durable_ledger):
    request_id = str(uuid.uuid4())
    first = post(snowflake_emulator, "select 1; select 2", request_id=request_id, retry=True).json()
    again = post(snowflake_emulator, "select 1; select 2", request_id=request_id, retry=True).json()
    assert again["statementHandles"] == first["statementHandles"]
    assert [e.created for e in durable_ledger.entries] == [True, False]
    assert [e.token for e in durable_ledger.entries] == [request_id, request_id]


def test_without_retry_true_the_same_request_id_executes_again(snowflake_emulator, durable_ledger):
    request_id = str(uuid.uuid4())
    first = post(snowflake_emulator, "select 1", request_id=request_id, retry=False).json()
    again = post(snowflake_emulator, "select 1", request_id=request_id, retry=False).json()
    assert first["statementHandle"] != again["statementHandle"]
    assert len(durable_ledger.submissions()) == 2


def test_an_expired_request_id_executes_anew(snowflake_emulator, durable_ledger):
    request_id = str(uuid.uuid4())
    first = post(snowflake_emulator, "select 1", request_id=request_id, retry=True).json()
    snowflake_emulator.expire(first["statementHandle"])
    again = post(snowflake_emulator, "select 1", request_id=request_id, retry=True).json()
    assert again["statementHandle"] != first["statementHandle"]
    assert len(durable_ledger.submissions()) == 2


def test_request_id_must_be_a_uuid(snowflake_emulator):
    assert post(snowflake_emulator, "select 1", request_id="afd-not-a-uuid", retry=True).status_code == 400


def test_a_lost_response_is_resent_by_the_hook_with_the_same_request_id(snowflake_emulator, durable_ledger):
    # The statement is created, the answer is lost; the hook's tenacity retry resends the same
    # params. Without retry=true (what the hook sends) that is a second execution.
    snowflake_emulator.faults.add(method="POST", path_contains="/api/v2/statements", drop=True, after=True)
    hook(attempts=2).execute_query("select 1", statement_count=1)
    entries = durable_ledger.entries
    assert len(entries) == 2 and entries[0].payload["requestId"] == entries[1].payload["requestId"]
    assert [e.created for e in entries] == [True, True]


# --------------------------------------------------------------------------- the async path (aiohttp)
async def test_trigger_polls_every_handle_to_success(snowflake_emulator):
    snowflake_emulator.lifecycle = ["QUEUED", "RUNNING", "SUCCESS"]
    handles = hook().execute_query("select 1; select 2", statement_count=2)
    event = await first_event(trigger(handles))
    assert event == {"status": "success", "statement_query_ids": handles}
    polls = snowflake_emulator.server.requests_to("/api/v2/statements/")
    assert len(polls) == 6 and {r.transport for r in polls} == {"async"}


async def test_trigger_reports_a_failed_handle(snowflake_emulator):
    handles = hook().execute_query("select 1; select 2", statement_count=2)
    snowflake_emulator.script(handles[1], ["RUNNING", "FAILED"])
    event = await first_event(trigger(handles))
    assert event["status"] == "error" and "000904" in event["message"]


async def test_trigger_turns_a_status_api_500_into_an_error_event(snowflake_emulator):
    handles = hook().execute_query("select 1", statement_count=1)
    snowflake_emulator.faults.add(method="GET", status=500, transport="async")
    event = await first_event(trigger(handles))
    assert event["status"] == "error" and "500" in event["message"]


def test_sync_503_is_retried_by_the_hook(snowflake_emulator):
    snowflake_emulator.lifecycle = ["SUCCESS"]
    [handle] = hook().execute_query("select 1", statement_count=1)
    fault = snowflake_emulator.faults.add(method="GET", status=503, times=2, transport="sync")
    assert hook(attempts=3).get_sql_api_query_status(handle)["status"] == "success"
    assert fault.hits == 2


# --------------------------------------------------------------------------- routing and other processes
def test_routing_leaves_other_names_alone_and_unroutes(snowflake_emulator):
    port = snowflake_emulator.port
    assert socket.getaddrinfo("x.snowflakecomputing.com", 443)[0][4] == ("127.0.0.1", port)
    assert socket.getaddrinfo("a.b.snowflakecomputing.com", 443)[0][4] == ("127.0.0.1", port)
    assert socket.getaddrinfo("localhost", 80)[0][4][1] == 80
    _tls.route("snowflakecomputing.com", 1)
    assert socket.getaddrinfo("x.snowflakecomputing.com", 443)[0][4] == ("127.0.0.1", 1)
    _tls.unroute("snowflakecomputing.com", 1)
    assert _tls.routes()["snowflakecomputing.com"] == ("127.0.0.1", port)


def test_a_child_process_reaches_the_emulator_through_its_environment(snowflake_emulator, durable_ledger):
    """What the demo's scheduler/triggerer processes get: environment variables only, no code of ours."""
    snowflake_emulator.lifecycle = ["RUNNING", "SUCCESS"]
    child = textwrap.dedent(
        """
        import asyncio, json
        from airflow.providers.snowflake.hooks.sql_api import SnowflakeSqlApiHook
        hook = SnowflakeSqlApiHook("snowflake_default")
        handles = hook.execute_query("select 1", statement_count=1)
        sync = hook.get_sql_api_query_status(handles[0])["status"]
        other = SnowflakeSqlApiHook("snowflake_default")
        status = asyncio.run(other.get_sql_api_query_status_async(handles[0]))
        print("CHILD " + json.dumps({"handles": handles, "sync": sync, "async": status["status"]}))
        """
    )
    # The fixture put the connection and routes into os.environ (monkeypatch); a child inherits them.
    assert _tls.ROUTES_ENV in os.environ
    done = subprocess.run(
        [sys.executable, "-c", child], capture_output=True, text=True, timeout=180, env=dict(os.environ)
    )
    line = [x for x in done.stdout.splitlines() if x.startswith("CHILD ")]
    assert done.returncode == 0 and line, done.stderr[-3000:]
    result = json.loads(line[0].removeprefix("CHILD "))
    assert result["sync"] == "running" and result["async"] == "success"
    assert durable_ledger.submissions()[0].external_id == result["handles"]
    transports = {r.transport for r in snowflake_emulator.server.requests_to("/api/v2/statements/")}
    assert transports == {"sync", "async"}


# --------------------------------------------------------------------------- QUERY_HISTORY (issue 34)
def _history(emulator: Any, sql: str, *, run_async: bool = False, pattern: str = "") -> requests.Response:
    params: dict[str, Any] = {"requestId": str(uuid.uuid4())}
    if run_async:
        params["async"] = "true"
    return requests.post(
        f"{emulator.url}/api/v2/statements",
        params=params,
        json={
            "statement": sql,
            "warehouse": "EMULATOR_WH",
            "database": "EMULATOR_DB",
            "bindings": {"1": {"type": "TEXT", "value": pattern}} if "?" in sql else {},
            "parameters": {"query_tag": "probe"},
        },
        headers={
            "Authorization": f"Bearer {emulator.token}",
            "X-Snowflake-Authorization-Token-Type": "PROGRAMMATIC_ACCESS_TOKEN",
        },
        timeout=10,
    )


def _rows(answer: dict[str, Any]) -> list[dict[str, Any]]:
    names = [c["name"] for c in answer["resultSetMetaData"]["rowType"]]
    return [dict(zip(names, row, strict=True)) for row in answer["data"]]


def test_query_history_lists_running_and_ended_statements_in_the_documented_shape(snowflake_emulator):
    from airflow_durable.testing.snowflake import check_history_rows, history_contract

    contract = history_contract()
    snowflake_emulator.lifecycle = ["RUNNING"]
    running = hook().execute_query("select 1", statement_count=1, query_tag="afd-ti-0123456789abcdef t")[0]
    failed, cancelled, done = (hook().execute_query(f"select {i}", statement_count=1)[0] for i in (2, 3, 4))
    snowflake_emulator.set_state(failed, "FAILED")
    snowflake_emulator.set_state(cancelled, "CANCELLED")
    snowflake_emulator.set_state(done, "SUCCESS")
    columns = ", ".join(contract["columns"])
    answer = _history(
        snowflake_emulator, f"SELECT {columns} FROM TABLE(INFORMATION_SCHEMA.QUERY_HISTORY_BY_USER())"
    )
    assert answer.status_code == 200, answer.text  # not async: the rows come with the answer
    rows = {r["QUERY_ID"]: r for r in _rows(answer.json())}
    assert check_history_rows(list(rows.values()), contract) == []
    assert set(next(iter(rows.values()))) == set(contract["columns"])
    status = {h: rows[h]["EXECUTION_STATUS"] for h in (running, failed, cancelled, done)}
    assert status == {
        running: "RUNNING",
        failed: "FAILED_WITH_ERROR",
        cancelled: "FAILED_WITH_ERROR",  # a cancelled query fails with error 604
        done: "SUCCESS",
    }
    assert rows[running]["END_TIME"] is None and rows[done]["END_TIME"] is not None
    assert rows[running]["QUERY_TAG"] == "afd-ti-0123456789abcdef t"
    # The statement reading the history lists itself, running, with its own tag.
    assert [r["EXECUTION_STATUS"] for r in rows.values() if r["QUERY_TAG"] == "probe"] == ["RUNNING"]


def test_query_history_filters_bounds_and_answers_async(snowflake_emulator):
    snowflake_emulator.lifecycle = ["RUNNING"]
    mine = hook().execute_query("select 1", statement_count=1, query_tag="afd-ti-0123456789abcdef t")[0]
    hook().execute_query("select 2", statement_count=1, query_tag="other")
    sql = (
        "SELECT QUERY_ID, COUNT(*) OVER () AS LISTED FROM TABLE(INFORMATION_SCHEMA.QUERY_HISTORY_BY_USER("
        "RESULT_LIMIT => {n})) QUALIFY CONTAINS(QUERY_TAG, ?)"
    )
    answer = _history(snowflake_emulator, sql.format(n=10), pattern="afd-ti-0123456789abcdef")
    assert _rows(answer.json()) == [{"QUERY_ID": mine, "LISTED": "3"}]  # 2 statements + the lookup
    # async=true: 202 with the handle, then the GET of the handle answers the rows.
    accepted = _history(
        snowflake_emulator, sql.format(n=10), run_async=True, pattern="afd-ti-0123456789abcdef"
    )
    assert accepted.status_code == 202
    got = hook().get_result_from_successful_sql_api_query(accepted.json()["statementHandle"])
    assert got == [{"QUERY_ID": mine, "LISTED": "4"}]
    # RESULT_LIMIT is documented as 1..10000: outside, the statement fails to compile.
    for bad in (0, 10001):
        refused = _history(snowflake_emulator, sql.format(n=bad), pattern="x")
        assert refused.status_code == 422 and "RESULT_LIMIT" in refused.json()["message"]
    # A window older than the 7 days is an error, not an empty listing.
    old = (
        "SELECT QUERY_ID FROM TABLE(INFORMATION_SCHEMA.QUERY_HISTORY_BY_USER("
        "END_TIME_RANGE_START => TO_TIMESTAMP_LTZ(1000, 3)))"
    )
    refused = _history(snowflake_emulator, old)
    assert refused.status_code == 422 and "7 days" in refused.json()["message"]
    # The lookups are recorded, never as submissions.
    assert len(snowflake_emulator.ledger.submissions()) == 2


def test_cancelling_a_multi_statement_requests_own_handle_cancels_its_statements(snowflake_emulator):
    """The lookup names a multi-statement request by its own handle while none of its statements has
    started; the SQL API's cancel of that handle ends the request."""
    snowflake_emulator.lifecycle = ["RUNNING"]
    handles = hook().execute_query("select 1; select 2", statement_count=2)
    parent = snowflake_emulator.request(handles).parent_handle
    assert parent is not None and parent not in handles
    hook().cancel_queries([parent])
    assert [snowflake_emulator.job(h).state for h in handles] == ["CANCELLED", "CANCELLED"]
