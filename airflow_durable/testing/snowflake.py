"""An offline emulator of the Snowflake SQL API v2, as the provider's ``SnowflakeSqlApiHook`` calls it.

The hook hard-codes ``https://<account>[.<region>].snowflakecomputing.com`` (no port, no scheme
choice), so the emulator serves HTTPS on an ephemeral loopback port with a throwaway CA, and routes
``*.snowflakecomputing.com`` to that port (`airflow_durable.testing._tls`). The unmodified hook
reaches it through its sync path (``requests``) and its trigger's async path (``aiohttp``), in this
process, and in child processes started with `SnowflakeEmulator.environ`::

    with SnowflakeEmulator(lifecycle=["RUNNING", "SUCCESS"]) as sf:
        sf.install_connection(monkeypatch.setenv)          # connection + CA trust env vars
        handles = SnowflakeSqlApiHook("snowflake_default").execute_query("select 1; select 2", 0)
        sf.set_state(handles[1], "FAILED")
        assert sf.ledger.submissions()[0].external_id == handles

What it implements:

* ``POST /api/v2/statements?requestId=<uuid>&async=true[&retry=true]`` — one statement, or several
  (``MULTI_STATEMENT_COUNT`` 0 or > 1 and ``;``-separated SQL) answered with ``statementHandles``. A
  ``requestId`` seen before *with* ``retry=true`` is not executed again: the answer names the handles
  of the first execution (ledger entry ``created=False``). Without ``retry=true`` every request
  executes (the SQL API only deduplicates a request that says it is a retry).
* ``GET /api/v2/statements/{handle}`` — ``202`` while the statement runs, ``200`` with a result set
  when it succeeded, ``422`` with ``code``/``sqlState`` when it failed or was cancelled, ``404`` for
  a handle it does not know (or `expire`-d).
* ``POST /api/v2/statements/{handle}/cancel``.

States (each ``GET`` of a handle returns its current state, then advances the handle's script; the
last state is sticky): ``PENDING``, ``QUEUED``, ``RUNNING`` (202), ``SUCCESS`` (200), ``FAILED``,
``CANCELLED`` (422), and ``HTTP_<code>`` (served as that status, to see how a client copes with an
answer it does not expect). Authentication: a Programmatic Access Token (the connection's password).

This module imports nothing from Airflow.
"""

from __future__ import annotations

import itertools
import json
import re
import time
import uuid
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

from airflow_durable.testing._core import EmulatorError, FaultPlan, Ledger, Request, Response
from airflow_durable.testing._http import HttpEmulator, HttpJob, as_list, deprecated_alias

__all__ = [
    "DEFAULT_LIFECYCLE",
    "HISTORY_OPERATION",
    "SnowflakeEmulator",
    "SnowflakeRequest",
    "SnowflakeStatement",
    "is_history_query",
]

SYSTEM = "snowflake"
DOMAIN = "snowflakecomputing.com"
SUBMIT_OPERATION = "statements"
CANCEL_OPERATION = "statements/cancel"
DEFAULT_LIFECYCLE: tuple[str, ...] = ("QUEUED", "RUNNING", "SUCCESS")
ACTIVE_STATES = frozenset({"PENDING", "QUEUED", "RUNNING"})
_HTTP_STATE = re.compile(r"\AHTTP_(\d{3})\Z")
_KNOWN_STATES = ACTIVE_STATES | {"SUCCESS", "FAILED", "CANCELLED"}
_IN_PROGRESS = (
    "Asynchronous execution in progress. Use provided query id to perform query monitoring and management."
)


def _validate_state(state: str) -> str:
    if state not in _KNOWN_STATES and not _HTTP_STATE.match(state):
        raise ValueError(
            f"unknown Snowflake emulator state {state!r}: use one of {sorted(_KNOWN_STATES)} or HTTP_<code>"
        )
    return state


def _error(status: int, code: str, message: str, **extra: Any) -> EmulatorError:
    return EmulatorError(status, {"code": code, "message": message, **extra})


def _status_url(handle: str) -> str:
    return f"/api/v2/statements/{handle}"


# ------------------------------------------------------------------ QUERY_HISTORY (the durable lookup)
#: The operation the ledger records a QUERY_HISTORY statement under (not a submission of a job).
HISTORY_OPERATION = "query_history"
#: INFORMATION_SCHEMA.QUERY_HISTORY*: the last 7 days; RESULT_LIMIT 1..10000 (default 100).
HISTORY_DAYS = 7
HISTORY_LIMIT_DEFAULT, HISTORY_LIMIT_MAX = 100, 10000
#: The documented EXECUTION_STATUS of each emulator state (a cancelled statement failed with error 604).
HISTORY_STATUS = {
    "PENDING": "QUEUED",
    "QUEUED": "QUEUED",
    "RUNNING": "RUNNING",
    "SUCCESS": "SUCCESS",
    "FAILED": "FAILED_WITH_ERROR",
    "CANCELLED": "FAILED_WITH_ERROR",
}
_HISTORY_FUNCTION = re.compile(
    r"\bTABLE\s*\(\s*(?:INFORMATION_SCHEMA\s*\.\s*)?(QUERY_HISTORY(?:_BY_USER)?)\s*\(", re.I
)
_SELECT = re.compile(r"\A\s*SELECT\s+(?P<select>.*?)\s+FROM\s+TABLE\s*\(", re.I | re.S)
_COLUMN = re.compile(r"\A[A-Z_]+\Z", re.I)
_ALIAS = re.compile(r"\A(?P<expr>.*?)\s+AS\s+(?P<alias>[A-Z_]+)\Z", re.I | re.S)
_DATE_PART_MS = re.compile(r"\ADATE_PART\s*\(\s*EPOCH_MILLISECOND\s*,\s*(?P<col>[A-Z_]+)\s*\)\Z", re.I)
_COUNT_ALL = re.compile(r"\ACOUNT\s*\(\s*\*\s*\)\s+OVER\s*\(\s*\)\Z", re.I)
_COUNT_IF_IN = re.compile(
    r"\ACOUNT_IF\s*\(\s*(?P<col>[A-Z_]+)\s+IN\s*\((?P<values>[^)]*)\)\s*\)\s+OVER\s*\(\s*\)\Z", re.I
)
_CONTAINS_BIND = re.compile(r"\ACONTAINS\s*\(\s*(?P<col>[A-Z_]+)\s*,\s*\?\s*\)\Z", re.I)
_FIRST_BY = re.compile(
    r"\AROW_NUMBER\s*\(\s*\)\s+OVER\s*\(\s*ORDER\s+BY\s+(?P<col>[A-Z_]+)\s*\)\s*=\s*1\Z", re.I
)
_TO_TIMESTAMP = re.compile(r"\ATO_TIMESTAMP_LTZ\s*\(\s*(?P<n>\d+)\s*(?:,\s*(?P<scale>[0-9])\s*)?\)\Z", re.I)
_TAIL = re.compile(
    r"\A\s*(?:WHERE\s+(?P<where>.*?))?\s*(?:QUALIFY\s+(?P<qualify>.*?))?\s*(?:ORDER\s+BY\s+(?P<order>[A-Z_]+)"
    r"(?:\s+(?P<dir>ASC|DESC))?)?\s*;?\s*\Z",
    re.I | re.S,
)


def history_contract() -> dict[str, Any]:
    """QUERY_HISTORY's documented arguments, columns and EXECUTION_STATUS values
    (``contracts/snowflake_query_history.json``, written from the function's docs page)."""
    from importlib import resources

    text = resources.files("airflow_durable.testing.contracts").joinpath("snowflake_query_history.json")
    return dict(json.loads(text.read_text()))


def check_history_rows(rows: Sequence[dict[str, Any]], contract: dict[str, Any]) -> list[str]:
    """What in ``rows`` the documented shape does not have: a column, or an EXECUTION_STATUS value."""
    problems = []
    for row in rows:
        extra = set(row) - set(contract["columns"])
        if extra:
            problems.append(f"{row.get('QUERY_ID')}: undocumented columns {sorted(extra)}")
        if row.get("EXECUTION_STATUS") not in contract["execution_status"]:
            problems.append(
                f"{row.get('QUERY_ID')}: undocumented EXECUTION_STATUS {row.get('EXECUTION_STATUS')!r}"
            )
    return problems


class _SqlError(Exception):
    """A statement the SQL API compiles and refuses (422), or one the emulator does not evaluate."""

    def __init__(self, message: str, code: str = "001003", sql_state: str = "42000") -> None:
        super().__init__(message)
        self.code, self.sql_state = code, sql_state


def is_history_query(request: Any) -> bool:
    """Whether a request is a ``POST /api/v2/statements`` that reads the QUERY_HISTORY table functions."""
    body = getattr(request, "json", None)
    statement = str(body.get("statement") or "") if isinstance(body, dict) else ""
    return getattr(request, "method", None) == "POST" and bool(_HISTORY_FUNCTION.search(statement))


def _split_top(text: str, sep: str = ",") -> list[str]:
    """``text`` split at ``sep`` outside parentheses and quotes (``sep``: "," or " OR ")."""
    parts, depth, quoted, start, i = [], 0, False, 0, 0
    while i < len(text):
        ch = text[i]
        if ch == "'":
            quoted = not quoted
        elif not quoted and ch == "(":
            depth += 1
        elif not quoted and ch == ")":
            depth -= 1
        elif not quoted and depth == 0 and text[i : i + len(sep)].upper() == sep:
            parts.append(text[start:i].strip())
            start = i = i + len(sep)
            continue
        i += 1
    parts.append(text[start:].strip())
    return [p for p in parts if p]


def _close(text: str, start: int) -> int:
    """The index just after the parenthesis that closes the one opened before ``start``."""
    depth = 1
    for i in range(start, len(text)):
        if text[i] == "(":
            depth += 1
        elif text[i] == ")":
            depth -= 1
            if depth == 0:
                return i + 1
    raise _SqlError("SQL compilation error: unbalanced parentheses")


def _sql_text(value: Any) -> str | None:
    """A value as the SQL API's JSON result sets carry every value: a string (or null)."""
    if value is None:
        return None
    if isinstance(value, float):
        return f"{value:.9f}"  # TIMESTAMP_LTZ: seconds since the epoch, with fractions
    return str(value)


@dataclass(kw_only=True, eq=False)
class SnowflakeStatement(HttpJob):
    """One statement; its ``id`` is the statement handle (``handle``)."""

    sql: str
    request_id: str
    #: The result set ``GET`` returns on success: ``(column names, rows)``.
    result: tuple[list[str], list[list[Any]]] = (["STATUS"], [["ok"]])

    @property
    def handle(self) -> str:
        return str(self.id)

    @property
    def created_on(self) -> int:
        """The API's ``createdOn``: ``created_at`` in epoch milliseconds."""
        return int(self.created_at * 1000)


@dataclass
class SnowflakeRequest:
    """One executed ``POST /api/v2/statements``: the logical job a task submits."""

    request_id: str
    handles: list[str]
    payload: dict[str, Any]
    statements: list[SnowflakeStatement]
    #: The multi-statement request's own handle (``None`` for a single statement).
    parent_handle: str | None = None
    #: The session it ran in (QUERY_HISTORY's SESSION_ID): each request runs in a session of its own.
    session_id: int = 0

    @property
    def state(self) -> str:
        """The request's state: ``FAILED``/``CANCELLED`` if any statement ended so, else ``RUNNING``
        while any runs, else ``SUCCESS`` (the state of all of them when they agree)."""
        states = [s.state for s in self.statements]
        if len(set(states)) == 1:
            return states[0]
        for bad in ("FAILED", "CANCELLED"):
            if bad in states:
                return bad
        for state in states:
            if state in ACTIVE_STATES or _HTTP_STATE.match(state):
                return "RUNNING" if state in ACTIVE_STATES else state
        return "SUCCESS"


class SnowflakeEmulator(HttpEmulator):
    """The Snowflake SQL API v2 on a loopback HTTPS port, with a ledger, scripted statements and faults.

    ``jobs`` holds the statements by handle; ``requests`` the executed requests, each the logical job
    of a task (``run(handles)`` finds one).

    Args:
        ledger: shared ledger (a fresh one if omitted); every mutating call is recorded. A submission's
            ``external_id`` is the list of statement handles, its ``token`` the ``requestId`` when the
            request asked for deduplication (``retry=true``), else ``None``.
        lifecycle: default state script of every new statement (``DEFAULT_LIFECYCLE`` if omitted).
        account: the connection's account; the hook then calls ``https://<account>.snowflakecomputing.com``.
        token: the Programmatic Access Token the connection carries and the server requires.
    """

    system = SYSTEM
    title = "Snowflake"
    JOB_NOUN = "statement"
    default_conn_id = "snowflake_default"
    DEFAULT_LIFECYCLE = DEFAULT_LIFECYCLE
    DEFAULT_TOKEN = "pat-emulator-token"
    TERMINAL_STATES = frozenset({"SUCCESS", "FAILED", "CANCELLED"})
    TLS_HOSTNAMES = (f"*.{DOMAIN}", DOMAIN)
    ROUTED_DOMAIN = DOMAIN
    ROUTES = (
        ("POST", "/api/v2/statements", "_submit"),
        ("GET", "/api/v2/statements/{handle}", "_get"),
        ("POST", "/api/v2/statements/{handle}/cancel", "_cancel"),
    )

    def __init__(
        self,
        ledger: Ledger | None = None,
        lifecycle: Sequence[str] | None = None,
        *,
        account: str = "emulator",
        token: str | None = None,
        faults: FaultPlan | None = None,
    ) -> None:
        super().__init__(ledger, lifecycle, faults=faults, token=token)
        self.account = account
        self.requests: list[SnowflakeRequest] = []
        self._by_request_id: dict[str, SnowflakeRequest] = {}
        self._parents: dict[str, SnowflakeRequest] = {}
        self._serial = itertools.count(1)
        #: The QUERY_HISTORY statements run (the durable lookup), by handle: not jobs, but listed like them.
        self.lookups: dict[str, SnowflakeStatement] = {}
        self._session_ids = itertools.count(7_000_000_001)
        #: Set by a test: every QUERY_HISTORY statement fails with this message, as for a role that may not
        #: read the history (SQL compilation error 002003).
        self.history_refusal: str | None = None
        self._history_contract = history_contract()

    @staticmethod
    def error_body(status: int, message: str) -> dict[str, str]:
        codes = {400: "391903", 401: "390303", 404: "000709", 429: "000610", 503: "000611"}
        return {"code": codes.get(status, "000000"), "message": message}

    def error(self, status: int, message: str) -> EmulatorError:
        return EmulatorError(status, self.error_body(status, message))

    def _contract(self) -> Any:
        from airflow_durable.testing.contracts._openapi import OpenApiContract

        return OpenApiContract(SYSTEM, "snowflake_sql_api_v2.json")

    def validate_state(self, state: str) -> str:
        return _validate_state(state)

    def is_terminal(self, state: str) -> bool:
        return state not in ACTIVE_STATES

    def authorized(self, request: Request) -> bool:
        return super().authorized(request) and request.headers.get(
            "X-Snowflake-Authorization-Token-Type"
        ) in ("PROGRAMMATIC_ACCESS_TOKEN", None)

    @property
    def url(self) -> str:
        """What the hook calls (resolved to the loopback port by the route)."""
        return f"https://{self.account}.{DOMAIN}"

    def connection(self) -> dict[str, Any]:
        """The Airflow connection fields the unmodified hook accepts for this emulator (PAT auth)."""
        return {
            "conn_type": "snowflake",
            "login": "emulator_user",
            "password": self.token,
            "schema": "PUBLIC",
            "extra": {
                "account": self.account,
                "warehouse": "EMULATOR_WH",
                "database": "EMULATOR_DB",
                "role": "EMULATOR_ROLE",
                "authenticator": "programmatic_access_token",
            },
        }

    # ------------------------------------------------------------------ test controls
    statement = deprecated_alias("job", "statement")
    statements = deprecated_alias("jobs", "statements")

    def request(self, handles: str | Iterable[str]) -> SnowflakeRequest:
        """The request that created ``handles`` (a handle or a list of them, e.g. a ``query_ids`` XCom)."""
        wanted = as_list(handles)
        with self._lock:
            for req in self.requests:
                if req.handles == wanted or (len(wanted) == 1 and wanted[0] in req.handles):
                    return req
        raise KeyError(f"the Snowflake emulator has no request with handles {wanted!r}")

    # The conformance suite's name for "the external job": here the request, not one statement.
    run = request  # type: ignore[assignment]

    def _targets(self, job_ids: Any) -> list[Any]:
        return [self.job(h) for h in as_list(job_ids)]

    def expire(self, job_ids: Any) -> None:
        """Forget statements: every later call about them answers 404, as after the result expired.

        Their request's ``requestId`` is forgotten with them, so a retry with it executes anew.
        """
        with self._lock:
            super().expire(job_ids)
            for statement in self._targets(job_ids):
                req = self._by_request_id.get(statement.request_id)
                if req is not None and statement in req.statements:
                    del self._by_request_id[statement.request_id]

    def forget_token(self, token: str) -> None:
        """The ``requestId``'s deduplication window has passed: a retry with it executes anew."""
        with self._lock:
            self._by_request_id.pop(token, None)

    # ------------------------------------------------------------------ endpoints
    def _new_handle(self) -> str:
        # Real handles look like "01b2c3d4-0000-1a2b-0000-00010203040f": a UUID-shaped string.
        return str(uuid.UUID(int=(0x01BE5EED << 96) | next(self._serial)))

    def _submit(self, request: Request) -> Response:
        query = request.query
        request_id = query.get("requestId") or str(uuid.uuid4())
        try:
            uuid.UUID(request_id)
        except ValueError:
            raise _error(400, "391903", f"requestId {request_id!r} is not a UUID") from None
        retry = str(query.get("retry", "")).lower() == "true"
        body = dict(request.json or {})
        payload = {"requestId": request_id, "retry": retry, "async": query.get("async"), **body}
        token = request_id if retry else None
        if is_history_query(request):
            return self._history(request_id, body, payload, str(query.get("async", "")).lower() == "true")

        existing = self._by_request_id.get(request_id) if retry else None
        if existing is not None and self.token_lapsed(existing.statements[0]):
            del self._by_request_id[request_id]
            existing = None
        if existing is not None:
            self.ledger.record(
                SYSTEM,
                SUBMIT_OPERATION,
                external_id=existing.handles,
                token=token,
                created=False,
                payload=payload,
            )
            return self._accepted(existing)

        sql = str(body.get("statement") or "")
        if not sql.strip():
            raise _error(400, "391903", "Statement is empty.")
        count = int((body.get("parameters") or {}).get("MULTI_STATEMENT_COUNT", 1) or 0)
        parts = [part.strip() for part in sql.split(";") if part.strip()]
        if count == 1 and len(parts) > 1 or count > 1 and count != len(parts):
            raise _error(
                422,
                "000008",
                f"Actual statement count {len(parts)} did not match the desired statement count "
                f"{count or 1}.",
                sqlState="0A000",
                # QueryFailureStatus requires the handle: the request was compiled, so it has one.
                statementHandle=self._new_handle(),
            )
        multi = count != 1 and len(parts) > 1
        script = self.next_lifecycle().remaining
        statements = [
            SnowflakeStatement(
                id=self._new_handle(),
                operation=SUBMIT_OPERATION,
                payload=json.loads(json.dumps(payload, default=str)),
                lifecycle=self.next_lifecycle(script),
                created_at=self.created_now(),
                sql=part,
                request_id=request_id,
            )
            for part in (parts if multi else [sql.strip()])
        ]
        for statement in statements:
            self.add(statement, record=False)
        req = SnowflakeRequest(
            request_id=request_id,
            handles=[s.handle for s in statements],
            payload=payload,
            statements=statements,
            parent_handle=self._new_handle() if multi else None,
        )
        self.requests.append(req)
        req.session_id = next(self._session_ids)
        if req.parent_handle is not None:
            self._parents[req.parent_handle] = req
        self._by_request_id[request_id] = req
        self.ledger.record(
            SYSTEM, SUBMIT_OPERATION, external_id=req.handles, token=token, created=True, payload=payload
        )
        return self._accepted(req)

    def _accepted(self, req: SnowflakeRequest) -> Response:
        handle = req.parent_handle or req.handles[0]
        body: dict[str, Any] = {
            "code": "333334",
            "message": _IN_PROGRESS,
            "statementHandle": handle,
            "createdOn": min(s.created_on for s in req.statements),
            "statementStatusUrl": _status_url(handle),
        }
        if req.parent_handle is not None:
            body["statementHandles"] = list(req.handles)
        return Response(202, body)

    def not_found(self, job_id: Any) -> EmulatorError:
        return _error(
            404, "000709", f"Statement {job_id} not found", sqlState="02000", statementHandle=job_id
        )

    def _get(self, request: Request) -> Response:
        handle = request.path_params["handle"]
        parent = self._parents.get(handle)
        if parent is not None:
            return self._get_parent(parent)
        if handle in self.lookups:
            lookup = self.lookups[handle]
            return self._answer(lookup, lookup.state)
        statement = self.live(handle)
        return self._answer(statement, self.read(statement))

    def _get_parent(self, req: SnowflakeRequest) -> Response:
        answers = [self._answer(s, s.state) for s in req.statements]
        for answer in answers:
            if answer.status != 200:
                return answer
        body = dict(answers[0].json)
        body.update({"statementHandle": req.parent_handle, "statementHandles": list(req.handles)})
        return Response(200, body)

    def _answer(self, statement: SnowflakeStatement, state: str) -> Response:
        handle = statement.handle
        if state in ACTIVE_STATES:
            return Response(
                202,
                {
                    "code": "333334",
                    "message": _IN_PROGRESS,
                    "statementHandle": handle,
                    "statementStatusUrl": _status_url(handle),
                },
            )
        if state == "SUCCESS":
            columns, rows = statement.result
            return Response(
                200,
                {
                    "code": "090001",
                    "sqlState": "00000",
                    "message": "Statement executed successfully.",
                    "statementHandle": handle,
                    "statementStatusUrl": _status_url(handle),
                    "createdOn": statement.created_on,
                    "resultSetMetaData": {
                        "numRows": len(rows),
                        "format": "jsonv2",
                        "rowType": [{"name": c, "type": "text", "nullable": True} for c in columns],
                        "partitionInfo": [{"rowCount": len(rows)}],
                    },
                    "data": rows,
                },
            )
        if state in ("FAILED", "CANCELLED"):
            failed = state == "FAILED"
            return Response(
                422,
                {
                    "code": "000904" if failed else "000604",
                    "sqlState": "42000" if failed else "57014",
                    "message": "SQL compilation error: error line 1 at position 7\ninvalid identifier 'X'"
                    if failed
                    else "SQL execution canceled",
                    "statementHandle": handle,
                },
            )
        code = int(_HTTP_STATE.match(state).group(1))  # type: ignore[union-attr]
        return Response(
            code, {"code": "000000", "message": f"emulated HTTP {code}", "statementHandle": handle}
        )

    # ------------------------------------------------------------------ QUERY_HISTORY
    def _history(
        self, request_id: str, body: dict[str, Any], payload: dict[str, Any], run_async: bool
    ) -> Response:
        """Run a statement that reads QUERY_HISTORY[_BY_USER] now, as Snowflake does: it lists itself
        (running,
        with its own QUERY_TAG) and every statement of the user in the window, then answers 200 with the
        rows (202 when the request said ``async=true``; the GET of its handle then answers them)."""
        sql = str(body.get("statement") or "")
        handle = self._new_handle()
        lookup = SnowflakeStatement(
            id=handle,
            operation=HISTORY_OPERATION,
            payload=json.loads(json.dumps(payload, default=str)),
            lifecycle=self.next_lifecycle(["RUNNING"]),
            created_at=self.created_now(),
            sql=sql,
            request_id=request_id,
        )
        self.lookups[handle] = lookup
        self.ledger.record(SYSTEM, HISTORY_OPERATION, external_id=handle, payload=payload)
        try:
            lookup.result = self._evaluate_history(sql, body)
        except _SqlError as err:
            lookup.lifecycle.set_state("FAILED")
            raise _error(422, err.code, str(err), sqlState=err.sql_state, statementHandle=handle) from None
        lookup.lifecycle.set_state("SUCCESS")
        if run_async:
            return Response(
                202,
                {
                    "code": "333334",
                    "message": _IN_PROGRESS,
                    "statementHandle": handle,
                    "statementStatusUrl": _status_url(handle),
                },
            )
        return self._answer(lookup, "SUCCESS")

    def _history_rows(self) -> list[dict[str, Any]]:
        """Every statement of the connection's user, as QUERY_HISTORY's documented columns (a subset)."""
        rows: list[dict[str, Any]] = []

        def row(
            statement: SnowflakeStatement, query_id: str, query_type: str, state: str, session: int
        ) -> None:
            status = HISTORY_STATUS.get(state, "RUNNING")  # HTTP_<code>: a status answer, not a query state
            ended = status not in ("RUNNING", "QUEUED")
            payload = statement.payload
            rows.append(
                {
                    "QUERY_ID": query_id,
                    "QUERY_TEXT": statement.sql,
                    "QUERY_TYPE": query_type,
                    "SESSION_ID": session,
                    "USER_NAME": "EMULATOR_USER",
                    "WAREHOUSE_NAME": payload.get("warehouse"),
                    "DATABASE_NAME": payload.get("database"),
                    "QUERY_TAG": str((payload.get("parameters") or {}).get("query_tag") or ""),
                    "EXECUTION_STATUS": status,
                    "START_TIME": statement.created_at,
                    # The emulator keeps no end time: an ended statement ended as it started.
                    "END_TIME": statement.created_at if ended else None,
                }
            )

        for req in self.requests:
            session = req.session_id
            listed = [s for s in req.statements if self.listed(s)]
            for statement in listed:
                row(
                    statement,
                    statement.handle,
                    statement.sql.split(None, 1)[0].upper(),
                    statement.state,
                    session,
                )
            if req.parent_handle is not None and listed:
                row(listed[0], req.parent_handle, "MULTI_STATEMENT", req.state, session)
        for statement in self.lookups.values():
            row(statement, statement.handle, "SELECT", statement.state, 0)
        # Every row is checked against the documented shape, as every answer is against its contract.
        problems = check_history_rows(rows, self._history_contract)
        if problems:
            raise EmulatorError(
                500, self.error_body(500, f"QUERY_HISTORY rows off the documented shape: {problems}")
            )
        return rows

    def _evaluate_history(self, sql: str, body: dict[str, Any]) -> tuple[list[str], list[list[Any]]]:
        if not body.get("warehouse"):
            raise _SqlError(
                "No active warehouse selected in the current session.  Select an active warehouse with the "
                "'use warehouse' command.",
                "000606",
                "57P03",
            )
        if not body.get("database"):
            raise _SqlError(
                "Cannot perform SELECT. This session does not have a current database. Call 'USE DATABASE', "
                "or use a qualified name.",
                "090105",
                "22000",
            )
        if self.history_refusal is not None:
            raise _SqlError(self.history_refusal, "002003", "02000")
        binds = iter(
            str(value.get("value")) if isinstance(value, dict) else str(value)
            for _, value in sorted((body.get("bindings") or {}).items(), key=lambda kv: int(kv[0]))
        )
        select, function = _SELECT.match(sql), _HISTORY_FUNCTION.search(sql)
        if select is None or function is None:
            raise _SqlError(f"the emulator evaluates SELECT ... FROM TABLE(QUERY_HISTORY...) only: {sql!r}")
        args_end = _close(sql, function.end())
        table_end = re.match(r"\s*\)", sql[args_end:])
        if table_end is None:
            raise _SqlError("SQL compilation error: TABLE( is not closed")
        start, end, limit, user = self._history_args(
            function.group(1).upper(), sql[function.end() : args_end - 1], binds
        )
        tail = _TAIL.match(sql[args_end + table_end.end() :])
        if tail is None:
            raise _SqlError(f"the emulator does not evaluate {sql[args_end + table_end.end() :]!r}")

        rows = [
            r
            for r in self._history_rows()
            if user in (None, r["USER_NAME"])
            and (
                r["END_TIME"] is None and end is None or r["END_TIME"] is not None and r["END_TIME"] >= start
            )
            and (end is None or r["END_TIME"] is not None and r["END_TIME"] <= end)
        ]
        # RESULT_LIMIT before any predicate: the statements still running, then the most recently ended.
        rows.sort(key=lambda r: (r["END_TIME"] is not None, -(r["END_TIME"] or r["START_TIME"])))
        rows = rows[:limit]
        if tail.group("where"):
            where = self._qualify_term(tail.group("where"), binds)
            rows = [r for r in rows if where(r, rows)]
        items = [self._select_item(item) for item in _split_top(select.group("select"))]
        values = [{name: fn(r, rows) for name, fn in items} for r in rows]
        if tail.group("qualify"):
            compiled = [self._qualify_term(t, binds) for t in _split_top(tail.group("qualify"), " OR ")]
            kept = [
                (r, v) for r, v in zip(rows, values, strict=True) if any(term(r, rows) for term in compiled)
            ]
        else:
            kept = list(zip(rows, values, strict=True))
        if tail.group("order"):
            col = tail.group("order").upper()
            kept.sort(
                key=lambda rv: (rv[0].get(col) is None, rv[0].get(col) or 0),
                reverse=bool(tail.group("dir") and tail.group("dir").upper() == "DESC"),
            )
        names = [name for name, _ in items]
        return names, [[_sql_text(v[name]) for name in names] for _, v in kept]

    def _history_args(
        self, function: str, args: str, binds: Any
    ) -> tuple[float, float | None, int, str | None]:
        now = time.time()
        start, end, limit, user = now - HISTORY_DAYS * 86400, None, HISTORY_LIMIT_DEFAULT, None
        allowed = set(self._history_contract["arguments"][function]) - {"INCLUDE_CLIENT_GENERATED_STATEMENT"}
        for part in _split_top(args):
            name, arrow, expr = part.partition("=>")
            name, expr = name.strip().upper(), expr.strip()
            if not arrow or name not in allowed:
                raise _SqlError(f"SQL compilation error: invalid argument {part!r} for {function}")
            value: Any = next(binds) if expr == "?" else expr
            if name == "RESULT_LIMIT":
                try:
                    limit = int(value)
                except ValueError:
                    raise _SqlError(f"invalid value [{value}] for parameter 'RESULT_LIMIT'") from None
                if not 1 <= limit <= HISTORY_LIMIT_MAX:
                    raise _SqlError(f"invalid value [{limit}] for parameter 'RESULT_LIMIT'", "002014")
            elif name == "USER_NAME":
                user = str(value).strip("'").strip('"').upper()
                user = None if user == "CURRENT_USER" else user
            else:
                stamp = _TO_TIMESTAMP.match(str(value))
                if stamp is None:
                    raise _SqlError(
                        f"the emulator reads {name} as TO_TIMESTAMP_LTZ(<n>[, <scale>]), got {value!r}"
                    )
                seconds = int(stamp.group("n")) / 10 ** int(stamp.group("scale") or 0)
                if seconds < now - HISTORY_DAYS * 86400:
                    # SILENT on the message: the function page says only that an error is returned.
                    raise _SqlError(
                        f"Invalid argument [{name}]: the time range must be within the last "
                        f"{HISTORY_DAYS} days",
                        "002014",
                    )
                if name == "END_TIME_RANGE_START":
                    start = seconds
                else:
                    end = seconds
        return start, end, limit, user

    def _select_item(self, item: str) -> tuple[str, Any]:
        aliased = _ALIAS.match(item)
        expr, name = (
            (aliased.group("expr").strip(), aliased.group("alias").upper()) if aliased else (item, item)
        )
        if _COLUMN.match(expr):
            col = expr.upper()
            return name.upper(), lambda r, rows: r.get(col)
        if m := _DATE_PART_MS.match(expr):
            col = m.group("col").upper()
            return name, lambda r, rows: None if r.get(col) is None else int(round(r[col] * 1000))
        if _COUNT_ALL.match(expr):
            return name, lambda r, rows: len(rows)
        if m := _COUNT_IF_IN.match(expr):
            col = m.group("col").upper()
            wanted = {v.strip().strip("'") for v in m.group("values").split(",")}
            return name, lambda r, rows: sum(1 for x in rows if x.get(col) in wanted)
        raise _SqlError(f"the emulator does not evaluate the select item {item!r}")

    def _qualify_term(self, term: str, binds: Any) -> Any:
        if m := _CONTAINS_BIND.match(term):
            col, needle = m.group("col").upper(), next(binds)
            return lambda r, rows: needle in str(r.get(col) or "")
        if m := _FIRST_BY.match(term):
            col = m.group("col").upper()
            return lambda r, rows: r is min(rows, key=lambda x: x.get(col) or 0)
        raise _SqlError(f"the emulator does not evaluate the predicate {term!r}")

    def _cancel(self, request: Request) -> Response:
        handle = request.path_params["handle"]
        parent = self._parents.get(handle)
        # A multi-statement request's own handle cancels the request: every statement of it.
        for statement in parent.statements if parent is not None else [self.live(handle)]:
            self.cancel(statement, CANCEL_OPERATION)
        return Response(
            200, {"code": "000000", "message": "successfully canceled", "statementHandle": handle}
        )
