"""Redshift Data specifics the conformance suite does not cover: batch SQL, results, sessions and the
ClientToken shim on both provider shapes."""

from __future__ import annotations

import types
from typing import Any

import pytest

pytest.importorskip("airflow.providers.amazon")

from airflow_durable.engine import DurableToken  # noqa: E402
from tests.aws_support import NO_BOTOCORE_RETRIES  # noqa: E402
from tests.harness import DURABLE, TaskRunner, record_state  # noqa: E402

PATHS = [pytest.param(False, id="sync"), pytest.param(True, id="deferrable")]
TOKEN = DurableToken("afd-0123456789abcdef0123456789abcdef01234567-g1", 1)


def _redshift(**overrides: Any) -> Any:
    from airflow_durable.operators.redshift import DurableRedshiftDataOperator

    kwargs: dict[str, Any] = dict(
        task_id="job",
        sql="select 1",
        database="dev",
        cluster_identifier="analytics",
        poll_interval=0.01,
        botocore_config=NO_BOTOCORE_RETRIES,
    )
    kwargs.update(overrides)
    return DurableRedshiftDataOperator(**kwargs)


@pytest.mark.parametrize("deferrable", PATHS)
def test_batch_sql_returns_sub_statement_results_on_every_path(redshift_data_emulator, deferrable):
    redshift_data_emulator.lifecycle = ["SUBMITTED", "STARTED", "STARTED", "FINISHED"]
    runner = TaskRunner(
        lambda: _redshift(sql=["select 1", "select 2"], return_sql_result=True, deferrable=deferrable)
    )
    if DURABLE:
        runner.store.crash_when(record_state("submitted"), before=False)  # the retry reconnects
    outcome = runner.run()
    assert outcome.state == "success", outcome.error
    (entry,) = redshift_data_emulator.ledger.submissions()
    assert entry.operation == "BatchExecuteStatement"
    assert [r["Records"] for r in outcome.result] == [[[{"longValue": 42}]]] * 2


@pytest.mark.skipif(not DURABLE, reason="the token exists only on a durable runtime")
def test_a_crash_window_retry_finds_the_statement_before_resending_its_token(redshift_data_emulator):
    # ClientToken's window is not documented (it may lapse while the statement runs): the retry looks the
    # token up by the task instance's identity and reconnects, sending nothing.
    redshift_data_emulator.lifecycle = ["FINISHED"]
    runner = TaskRunner(lambda: _redshift())
    runner.store.crash_when(record_state("submitted"), before=True)
    assert runner.run().state == "success"
    calls = redshift_data_emulator.ledger.entries
    submits = [e for e in calls if e.operation == "ExecuteStatement"]
    assert [e.created for e in submits] == [True]
    assert submits[0].token == runner.store.data["airflow_durable.redshift_data"]["token"]
    assert len(submits[0].token) <= 64
    assert redshift_data_emulator.server.requests_to("/redshift-data/ListStatements")


@pytest.mark.skipif(not DURABLE, reason="the token exists only on a durable runtime")
def test_without_list_permission_a_resubmission_gets_the_same_statement(redshift_data_emulator):
    # A connection refused ListStatements resends the token, as before the lookup: the key deduplicates.
    redshift_data_emulator.lifecycle = ["FINISHED"]
    redshift_data_emulator.faults.add(path_contains="/redshift-data/ListStatements", status=403, times=None)
    runner = TaskRunner(lambda: _redshift())
    runner.store.crash_when(record_state("submitted"), before=True)
    assert runner.run().state == "success"
    submits = [e for e in redshift_data_emulator.ledger.entries if e.operation == "ExecuteStatement"]
    assert [e.created for e in submits] == [True, False]
    assert submits[0].token == submits[1].token == runner.store.data["airflow_durable.redshift_data"]["token"]


def test_client_token_shim_passes_a_native_argument_when_the_hook_has_one():
    from airflow_durable.shims import aws as compat

    seen: dict[str, Any] = {}

    class FutureHook:
        def execute_query(self, sql: str, client_token: str | None = None, **kwargs: Any) -> str:
            seen.update(sql=sql, client_token=client_token)
            return "ok"

    assert compat.execute_query(FutureHook(), "tok", sql="select 1") == "ok"
    assert seen == {"sql": "select 1", "client_token": "tok"}


def test_client_token_shim_without_submit_job_submits_like_the_older_provider(redshift_data_emulator):
    from airflow.providers.amazon.aws.hooks.redshift_data import RedshiftDataHook

    from airflow_durable.shims import aws as compat

    pushed: dict[str, Any] = {}
    operator = types.SimpleNamespace(
        hook=RedshiftDataHook(aws_conn_id="aws_default"),
        database="dev",
        sql="select 1",
        cluster_identifier=None,
        workgroup_name="wg-1",
        db_user=None,
        parameters=None,
        secret_arn=None,
        statement_name="nightly",
        with_event=False,
        poll_interval=1,
        session_id=None,
        session_keep_alive_seconds=30,
    )
    ti = types.SimpleNamespace(xcom_push=lambda key, value: pushed.update({key: value}))
    statement_id = compat.submit_statement(operator, {"ti": ti}, TOKEN.text)
    (entry,) = redshift_data_emulator.ledger.submissions()
    assert entry.external_id == statement_id == operator.statement_id and entry.token == TOKEN.text
    assert pushed["session_id"]
    # The handler is gone afterwards: a later call gets botocore's random token again.
    operator.hook.conn.execute_statement(Sql="x", Database="d", WorkgroupName="wg-1")
    assert redshift_data_emulator.ledger.entries[-1].token != TOKEN.text


@pytest.mark.skipif(not DURABLE, reason="reconnects exist only on a durable runtime")
@pytest.mark.parametrize("deferrable", PATHS)
def test_session_id_xcom_is_pushed_again_by_a_reconnecting_retry(redshift_data_emulator, deferrable):
    redshift_data_emulator.lifecycle = ["STARTED", "STARTED", "FINISHED"]
    runner = TaskRunner(lambda: _redshift(session_keep_alive_seconds=60, deferrable=deferrable))
    runner.store.crash_when(record_state("submitted"), before=False)
    outcome = runner.run()
    assert [o.state for o in runner.outcomes] == ["crashed", "success"]
    statement = redshift_data_emulator.latest_job()
    assert outcome.xcoms["session_id"] == statement.extra["session_id"]
