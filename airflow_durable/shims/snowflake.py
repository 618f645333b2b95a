"""Snowflake provider internals we rely on, in one place (imported only by ``operators.snowflake``).

The provider's ``SnowflakeSqlApiHook.execute_query`` makes a fresh ``uuid4()`` ``requestId`` per call
and never sends ``retry=true``, and exposes no parameter for either. Every HTTP call of the hook goes
through ``_make_api_call_with_retries(method, url, headers, params, json)`` (provider 6.x; tested:
6.20.0), so `IdempotentSqlApiHook` supplies our ``requestId`` and ``retry=true`` there, for the
submission only, and only while the operator asks for it: the body, the handle parsing, the lineage
and the hook's own retries stay the provider's. With no request id set it is the provider's hook.
"""

from __future__ import annotations

import datetime as dt
import time
import uuid
from dataclasses import dataclass
from typing import Any

import requests
from airflow.providers.snowflake.hooks.sql_api import SnowflakeSqlApiHook

_STATEMENTS_PATH = "/api/v2/statements"


class IdempotentSqlApiHook(SnowflakeSqlApiHook):
    """``SnowflakeSqlApiHook`` whose statement submission can carry a caller-chosen ``requestId``.

    While `durable_request_id` is set, ``POST /api/v2/statements`` is sent with that
    ``requestId`` and ``retry=true``, so that the SQL API answers a resubmission (after a crash before
    the handles were stored) with the statements it already started instead of running them again.
    The hook's own tenacity retries resend the same parameters, so they are deduplicated too.
    """

    durable_request_id: str | None = None

    def _make_api_call_with_retries(
        self,
        method: str,
        url: str,
        headers: dict[str, Any],
        params: dict[str, Any] | None = None,
        json: dict[str, Any] | None = None,
    ) -> Any:
        if (
            self.durable_request_id is not None
            and method.upper() == "POST"
            and url.endswith(_STATEMENTS_PATH)
        ):
            params = {**(params or {}), "requestId": self.durable_request_id, "retry": True}
        return super()._make_api_call_with_retries(method, url, headers, params, json)


def sql_api_hook(operator: Any, hook_class: Any = SnowflakeSqlApiHook) -> IdempotentSqlApiHook:
    """The hook exactly as ``SnowflakeSqlApiOperator._hook`` builds it, as `IdempotentSqlApiHook`.

    ``hook_class`` is what the provider operator module's ``SnowflakeSqlApiHook`` name holds when the hook
    is built (a test may have patched it there): a subclass of the hook gets the idempotent submission
    mixed in; anything else (a mock standing in for the whole hook) is used as it is.
    """
    cls: Any = IdempotentSqlApiHook
    if hook_class is not SnowflakeSqlApiHook:
        if isinstance(hook_class, type) and issubclass(hook_class, SnowflakeSqlApiHook):
            cls = type(f"Idempotent{hook_class.__name__}", (IdempotentSqlApiHook, hook_class), {})
        else:
            cls = hook_class
    return cls(
        snowflake_conn_id=operator.snowflake_conn_id,
        token_life_time=operator.token_life_time,
        token_renewal_delta=operator.token_renewal_delta,
        deferrable=operator.deferrable,
        api_retry_args=operator.snowflake_api_retry_args,
        **operator.hook_params,
    )


def statement_status(hook: SnowflakeSqlApiHook, handle: str) -> tuple[int, dict[str, Any]]:
    """``GET /api/v2/statements/{handle}`` as the hook sends it: ``(HTTP status, body)``.

    The hook's ``get_sql_api_query_status`` folds every status code it does not know into "error";
    the decision step needs the code itself, so that an answer nobody expected stops the engine
    from resubmitting instead of passing for a failed statement. HTTP errors (404 included) raise
    ``requests.HTTPError`` as in the hook.
    """
    headers, params, url = hook.get_request_url_header_params(handle)
    status, body = hook._make_api_call_with_retries("GET", url, headers, params)
    return int(status), body if isinstance(body, dict) else {}


def process_response(hook: SnowflakeSqlApiHook, status: int, body: dict[str, Any]) -> dict[str, Any]:
    """The hook's own reading of a status answer (``{"status": "running"|"success"|"error", ...}``)."""
    return hook._process_response(status, body)


# ------------------------------------------------------------------ the statement lookup (QUERY_HISTORY)
#: How far back ``INFORMATION_SCHEMA.QUERY_HISTORY_BY_USER`` lists: the last 7 days (an older
#: ``END_TIME_RANGE_START`` is an error). A running statement is always inside them: its
#: ``STATEMENT_TIMEOUT_IN_SECONDS`` is at most 604800.
HISTORY_REACH = dt.timedelta(days=7)
#: The window starts this much inside the 7 days, so that a clock ahead of Snowflake's is not refused.
_HISTORY_MARGIN = dt.timedelta(minutes=5)
#: ``RESULT_LIMIT``'s documented bounds (default 100). The limit applies before any predicate: the
#: function returns the statements still running, then those that ended most recently.
HISTORY_LIMIT_MAX = 10000
#: The lookup's own QUERY_TAG: no identity or token, so no lookup finds another.
LOOKUP_TAG = "airflow-durable lookup"
#: EXECUTION_STATUS values of a statement that has not ended (QUERY_HISTORY's documented values).
UNENDED_STATUSES = ("RUNNING", "QUEUED", "BLOCKED", "RESUMING_WAREHOUSE")
#: How long the lookup may run before the SQL API answers (it waits up to 45 s itself, then 202).
_LOOKUP_TIMEOUT = 120

_HISTORY_SQL = (
    "SELECT QUERY_ID, QUERY_TAG, EXECUTION_STATUS, QUERY_TYPE, SESSION_ID, "
    "DATE_PART(EPOCH_MILLISECOND, START_TIME) AS START_MS, "
    "COUNT(*) OVER () AS LISTED, "
    "COUNT_IF(EXECUTION_STATUS IN ({unended})) OVER () AS UNENDED "
    "FROM TABLE(INFORMATION_SCHEMA.QUERY_HISTORY_BY_USER("
    "END_TIME_RANGE_START => TO_TIMESTAMP_LTZ({start_ms}, 3), RESULT_LIMIT => {limit})) "
    # The oldest listed row comes too, so that a listing with no match still tells how much it listed.
    "QUALIFY CONTAINS(QUERY_TAG, ?) OR ROW_NUMBER() OVER (ORDER BY START_TIME) = 1 "
    "ORDER BY START_TIME"
)


class HistoryError(Exception):
    """The history lookup could not answer: the message says what is missing (7 days, the limit, a grant)."""


@dataclass(frozen=True)
class HistoryRow:
    """One statement QUERY_HISTORY_BY_USER listed whose QUERY_TAG contains the pattern."""

    query_id: str
    query_tag: str
    status: str  # EXECUTION_STATUS, upper case
    query_type: str
    session_id: str
    started_at: dt.datetime | None


@dataclass(frozen=True)
class HistoryListing:
    rows: list[HistoryRow]
    #: How many statements the table function returned before the tag filter (at most ``limit``).
    listed: int
    #: How many of them had not ended.
    unended: int
    limit: int
    since: dt.datetime

    @property
    def cut(self) -> bool:
        """The function returned ``RESULT_LIMIT`` rows: statements that ended earlier are not listed."""
        return self.listed >= self.limit

    @property
    def unended_cut(self) -> bool:
        """Cut inside the running statements (they come first): a running statement may be missing."""
        return self.cut and self.unended >= self.listed


def history_sql(since: dt.datetime, limit: int) -> str:
    """The lookup statement (one bind: the QUERY_TAG pattern, twice); ``ValueError`` on bounds Snowflake
    refuses: ``RESULT_LIMIT`` outside 1..10000."""
    if not 1 <= int(limit) <= HISTORY_LIMIT_MAX:
        raise ValueError(f"RESULT_LIMIT must be 1..{HISTORY_LIMIT_MAX}, got {limit}")
    unended = ", ".join(f"'{s}'" for s in UNENDED_STATUSES)
    start_ms = int(since.timestamp() * 1000)
    return _HISTORY_SQL.format(unended=unended, start_ms=start_ms, limit=int(limit))


def history_window(since: dt.datetime | None, now: dt.datetime | None = None) -> dt.datetime:
    """The window's start: ``since``, or the whole 7 days; `HistoryError` when ``since`` is older than the
    7 days (the function refuses it, and what it would have listed is gone)."""
    now = now or dt.datetime.now(dt.UTC)
    earliest = now - HISTORY_REACH + _HISTORY_MARGIN
    if since is None:
        return earliest
    if since.tzinfo is None:
        since = since.replace(tzinfo=dt.UTC)
    if since < earliest:
        raise HistoryError(
            f"statements since {since.isoformat()} were asked for, but "
            "INFORMATION_SCHEMA.QUERY_HISTORY_BY_USER "
            f"lists only the last 7 days (from {earliest.isoformat()}): older statements cannot be found"
        )
    return since


def query_history(
    hook: SnowflakeSqlApiHook, pattern: str, since: dt.datetime | None = None, limit: int = HISTORY_LIMIT_MAX
) -> HistoryListing:
    """The statements of the connection's user whose QUERY_TAG contains ``pattern``, started in the window.

    One statement through the SQL API (``POST /api/v2/statements`` with the hook's headers, connection and
    retries; no ``async``, so the SQL API answers with the rows when it finishes within 45 s, else 202 and
    the handle is polled). It runs on the connection's warehouse (which it may resume). Its own QUERY_TAG is
    `LOOKUP_TAG`. A refusal (no warehouse, a role that may not read the history) raises `HistoryError`
    naming what is missing.
    """
    start = history_window(since)
    conn = hook._get_conn_params()
    url = f"{hook.account_identifier}.snowflakecomputing.com{_STATEMENTS_PATH}"
    body: dict[str, Any] = {
        "statement": history_sql(start, limit),
        "resultSetMetaData": {"format": "json"},
        "database": hook.database or conn["database"],
        "schema": hook.schema or conn["schema"],
        "warehouse": hook.warehouse or conn["warehouse"],
        "role": hook.role or conn["role"],
        "bindings": {str(i): {"type": "TEXT", "value": pattern} for i in (1, 2)},
        "parameters": {"query_tag": LOOKUP_TAG},
        "timeout": _LOOKUP_TIMEOUT,
    }
    try:
        status, answer = hook._make_api_call_with_retries(
            "POST", url, hook.get_headers(), {"requestId": str(uuid.uuid4())}, body
        )
    except requests.exceptions.HTTPError as err:
        raise _refused(err) from err
    if status == 202:
        handle = str(answer.get("statementHandle"))
        deadline = time.monotonic() + _LOOKUP_TIMEOUT
        while status == 202:
            if time.monotonic() > deadline:
                raise HistoryError(f"the QUERY_HISTORY lookup {handle} did not finish in {_LOOKUP_TIMEOUT} s")
            time.sleep(1)
            status, answer = statement_status(hook, handle)
    if status == 422:
        raise HistoryError(_what_is_missing(str(answer.get("message") or ""), answer))
    if status != 200:
        raise HistoryError(f"the QUERY_HISTORY lookup was answered HTTP {status}: {answer}")
    if len((answer.get("resultSetMetaData") or {}).get("partitionInfo") or []) > 1:
        records = hook.get_result_from_successful_sql_api_query(str(answer["statementHandle"]))
    else:
        names = [c["name"] for c in (answer.get("resultSetMetaData") or {}).get("rowType", [])]
        records = [dict(zip(names, row, strict=True)) for row in answer.get("data") or []]
    return _listing(records, pattern, limit, start)


def _listing(records: list[dict[str, Any]], pattern: str, limit: int, since: dt.datetime) -> HistoryListing:
    rows: list[HistoryRow] = []
    listed = unended = 0
    for record in records:
        listed = max(listed, int(record.get("LISTED") or 0))
        unended = max(unended, int(record.get("UNENDED") or 0))
        tag = str(record.get("QUERY_TAG") or "")
        if pattern not in tag:  # the oldest listed row, sent only for the counts
            continue
        started = record.get("START_MS")
        rows.append(
            HistoryRow(
                query_id=str(record["QUERY_ID"]),
                query_tag=tag,
                status=str(record.get("EXECUTION_STATUS") or "").upper(),
                query_type=str(record.get("QUERY_TYPE") or ""),
                session_id=str(record.get("SESSION_ID") or ""),
                started_at=dt.datetime.fromtimestamp(float(started) / 1000, dt.UTC)
                if started not in (None, "")
                else None,
            )
        )
    return HistoryListing(rows, listed, unended, limit, since)


def _what_is_missing(message: str, answer: dict[str, Any]) -> str:
    code = answer.get("code")
    text = f"the QUERY_HISTORY lookup failed (code {code}): {message}"
    lowered = message.lower()
    if "warehouse" in lowered:
        return (
            f"{text}. It runs on the connection's warehouse: name one (connection extra `warehouse`) "
            "the role "
            "may use (USAGE on the warehouse)"
        )
    if "not authorized" in lowered or "insufficient privileges" in lowered or "does not exist" in lowered:
        return (
            f"{text}. The connection's role must be able to run INFORMATION_SCHEMA.QUERY_HISTORY_BY_USER for "
            "its own user: USAGE on a database for the INFORMATION_SCHEMA (connection extra `database`) "
            "and on "
            "the warehouse"
        )
    return text


def _refused(err: requests.exceptions.HTTPError) -> HistoryError:
    response = err.response
    code = response.status_code if response is not None else None
    if code in (401, 403):
        return HistoryError(
            f"the SQL API refused the QUERY_HISTORY lookup (HTTP {code}): the connection's user or role "
            "may not "
            "run statements through the SQL API, or its token was refused"
        )
    return HistoryError(f"the QUERY_HISTORY lookup failed: {err}")
