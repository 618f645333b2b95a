"""Issue 34: Snowflake statements found without their record, by one QUERY_HISTORY_BY_USER statement sent
through the SQL API (the real hook, against the emulator), and the lookup's limits: 7 days of history,
RESULT_LIMIT, a role or session that cannot read the history, and the lookup never finding itself."""

from __future__ import annotations

import datetime as dt
from typing import Any

import pytest

pytest.importorskip("airflow.providers.snowflake")

from airflow_durable.engine import DurableLookupError  # noqa: E402
from airflow_durable.identity_tags import task_identity  # noqa: E402
from airflow_durable.testing.snowflake import HISTORY_OPERATION  # noqa: E402
from tests.conformance.systems import SYSTEMS  # noqa: E402
from tests.harness import DURABLE, TaskRunner, record_state  # noqa: E402

make = next(case for case in SYSTEMS if case.id == "snowflake_sql_api").make
pytestmark = pytest.mark.skipif(not DURABLE, reason="Airflow < 3.3: no identity carried")


def _running_job(emulator: Any) -> tuple[TaskRunner, list[str], str]:
    """A try submits a two-statement request and dies with it running."""
    emulator.lifecycle = ["QUEUED", "RUNNING"]
    runner = TaskRunner(lambda: make(emulator, False))
    runner.store.crash_when(record_state("submitted"), before=False)
    assert runner.run_try().state == "crashed"
    ti = runner.ti
    handles = emulator.requests[-1].handles
    return runner, handles, task_identity(ti.dag_id, ti.run_id, ti.task_id, ti.map_index)


def _lookups(emulator: Any) -> list[Any]:
    return [e for e in emulator.ledger.entries if e.operation == HISTORY_OPERATION]


def test_a_running_request_is_found_whole_with_its_token_and_the_lookup_never_finds_itself(
    snowflake_emulator,
):
    runner, handles, identity = _running_job(snowflake_emulator)
    op = make(snowflake_emulator, False)
    for _ in range(2):  # the second lookup sees the first in the history: its tag carries no identity
        (found,) = op.durable_find(identity)
        assert found.id == handles and found.status == "running"
        assert found.token == runner.store.data["airflow_durable.snowflake_sql_api"]["token"]
    assert len(_lookups(snowflake_emulator)) == 2
    assert snowflake_emulator.ledger.submissions() and len(snowflake_emulator.ledger.submissions()) == 1
    sent = _lookups(snowflake_emulator)[0].payload
    assert "QUERY_HISTORY_BY_USER" in sent["statement"] and "RESULT_LIMIT => 10000" in sent["statement"]
    assert identity not in str(sent["parameters"]), "the lookup's own QUERY_TAG carries no identity"
    assert "async" not in sent or sent["async"] is None


def test_a_window_older_than_seven_days_is_an_error_not_nothing(snowflake_emulator):
    _, _, identity = _running_job(snowflake_emulator)
    op = make(snowflake_emulator, False)
    since = dt.datetime.now(dt.UTC) - dt.timedelta(days=8)
    with pytest.raises(DurableLookupError, match="only the last 7 days"):
        op.durable_find(identity, since=since)
    # And the emulator refuses such a window as Snowflake does, should a client send one.
    from airflow_durable.shims import snowflake as compat

    with pytest.raises(compat.HistoryError, match="within the last 7 days"):
        sql = compat.history_sql(since, 100)
        status, answer = op._hook._make_api_call_with_retries(
            "POST",
            f"{op._hook.account_identifier}.snowflakecomputing.com/api/v2/statements",
            op._hook.get_headers(),
            {},
            {
                "statement": sql,
                "warehouse": "W",
                "database": "D",
                "bindings": {"1": {"type": "TEXT", "value": "x"}},
            },
        )
        assert status == 422
        raise compat.HistoryError(answer["message"])


def test_result_limit_reached_by_running_statements_is_an_error_and_otherwise_said(
    snowflake_emulator, caplog, capsys
):
    _, handles, identity = _running_job(snowflake_emulator)
    op = make(snowflake_emulator, False)
    op.durable_lookup_limit = 2  # the lookup itself and one statement: running statements past the limit
    with pytest.raises(DurableLookupError, match="RESULT_LIMIT=2 statements that are all still running"):
        op.durable_find(identity)
    for handle in handles:
        snowflake_emulator.set_state(handle, "SUCCESS")
    op.durable_lookup_limit = 3  # the running lookup, then the most recently ended: cut, and said
    op.durable_find(identity)
    assert "stopped at RESULT_LIMIT=3" in caplog.text + capsys.readouterr().out  # structlog: stdout


@pytest.mark.parametrize(
    ("setup", "message"),
    [
        (
            lambda em: setattr(
                em, "history_refusal", "SQL compilation error: Object does not exist or not authorized."
            ),
            "must be able to run INFORMATION_SCHEMA.QUERY_HISTORY_BY_USER",
        ),
        (lambda em: None, "name one \\(connection extra `warehouse`\\)"),
    ],
    ids=["role-not-authorized", "no-warehouse"],
)
def test_a_role_or_session_that_cannot_read_the_history_is_a_clear_error(snowflake_emulator, setup, message):
    _, _, identity = _running_job(snowflake_emulator)
    setup(snowflake_emulator)
    op = make(snowflake_emulator, False)
    if "warehouse" in message:
        params = op._hook._get_conn_params
        op._hook._get_conn_params = lambda: {**params(), "warehouse": ""}  # a connection without one
    with pytest.raises(DurableLookupError, match=message):
        op.durable_find(identity)


def test_the_first_try_runs_no_lookup(snowflake_emulator):
    runner = TaskRunner(lambda: make(snowflake_emulator, False))
    assert runner.run().state == "success"
    assert _lookups(snowflake_emulator) == []


def test_the_window_starts_when_the_dag_run_began_and_a_statement_still_running_is_listed_anyway(
    snowflake_emulator,
):
    """END_TIME_RANGE_START bounds end times: a task's lookup starts its window when its DAG run began (fewer
    statements against RESULT_LIMIT), and a statement that started earlier but still runs is listed."""
    runner, handles, identity = _running_job(snowflake_emulator)
    snowflake_emulator.backdate(handles, 3600)  # started an hour before the DAG run below
    began = dt.datetime.now(dt.UTC) - dt.timedelta(minutes=5)
    runner.dag_run.start_date = began
    context = {"dag_run": runner.dag_run}
    (found,) = make(snowflake_emulator, False).durable_find(identity, context)
    assert found.id == handles and found.status == "running"
    sent = _lookups(snowflake_emulator)[-1].payload["statement"]
    assert f"TO_TIMESTAMP_LTZ({int(began.timestamp() * 1000)}, 3)" in sent
    # Ended before the window: not listed (the engine only needs what still runs).
    for handle in handles:
        snowflake_emulator.set_state(handle, "SUCCESS")
    assert make(snowflake_emulator, False).durable_find(identity, context) == []
    # A DAG run older than the 7 days: the window is the 7 days (the ended request is in it), not an error.
    runner.dag_run.start_date = began - dt.timedelta(days=30)
    (ended,) = make(snowflake_emulator, False).durable_find(identity, context)
    assert ended.id == handles and ended.status == "success"
