"""Snowflake: ``DurableSnowflakeSqlApiOperator`` against the SQL API emulator, with a two-statement request.

The external id is the list of statement handles; the ledger's ``external_id`` and the ``query_ids``
XCom are that list. Vocabulary notes:

* the SQL API reports status as an HTTP code; the "unknown status" is a code it does not document
  (``HTTP_201``), which the hook itself would call "error";
* the status API cells inject HTTP 500, which the hook does not retry on either path (its retries
  cover 429/503/504 with a 1-60 s back-off the trigger's hook cannot be configured out of), so one
  500 is already "past the provider's retries";
* the trigger reports a failed status call as an *error event*, not by raising, so the failed
  deferred try's error is the provider's ``RuntimeError("error: 500, ...")``;
* ``{"status": "error", "message": ...}`` is the trigger's own failure event, so the "error-shape"
  malformed event is an unknown status instead.
"""

from __future__ import annotations

from typing import Any

from tests.conformance.systems import SystemCase

SQL = "insert into t select 1; select count(*) from t"


def _snowflake_sql_api(emulator: Any, deferrable: bool, **overrides: Any) -> Any:
    from tenacity import stop_after_attempt, wait_none

    from airflow_durable.operators.snowflake import DurableSnowflakeSqlApiOperator

    kwargs: dict[str, Any] = dict(
        task_id="job",
        sql=SQL,
        statement_count=2,
        deferrable=deferrable,
        poll_interval=0,
        snowflake_api_retry_args={"stop": stop_after_attempt(2), "wait": wait_none()},
    )
    kwargs.update(overrides)
    return DurableSnowflakeSqlApiOperator(**kwargs)


def _is_history_query(request: Any) -> bool:
    from airflow_durable.testing.snowflake import is_history_query

    return is_history_query(request)


CASES: list[SystemCase] = [
    SystemCase(
        id="snowflake_sql_api",
        emulator_fixture="snowflake_emulator",
        make=_snowflake_sql_api,
        running="RUNNING",
        succeeded="SUCCESS",
        failed="FAILED",
        cancelled="CANCELLED",
        unknown="HTTP_201",
        status_call=("GET", "/api/v2/statements/"),
        status_errors_to_give_up=1,
        xcoms_sync=frozenset({"query_ids"}),
        xcoms_deferrable=frozenset({"query_ids"}),
        external_id_key="airflow_durable.snowflake_sql_api",
        xcom_id=lambda xcoms: xcoms["query_ids"],
        submit_operations=frozenset({"statements"}),
        cancel_operation="statements/cancel",
        transient_status=500,
        trigger_error_text="error: 500",
        malformed_events={
            "missing-fields": {"status": "success"},
            "error-shape": {"status": "failed", "message": "boom"},
        },
        event_id_key="statement_query_ids",
        foreign_id=["01foreign-999999"],
        success_event=lambda handles: {"status": "success", "statement_query_ids": list(handles)},
        is_lookup=lambda request: _is_history_query(request),
        # The retry looks the token up in QUERY_HISTORY before resending it (the requestId's window is
        # not documented).
        window_closed_by="lookup",
    ),
]
