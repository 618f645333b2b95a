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
import uuid
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

from airflow_durable.testing._core import EmulatorError, FaultPlan, Ledger, Request, Response
from airflow_durable.testing._http import HttpEmulator, HttpJob, as_list, deprecated_alias

__all__ = ["DEFAULT_LIFECYCLE", "SnowflakeEmulator", "SnowflakeRequest", "SnowflakeStatement"]

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

    def _cancel(self, request: Request) -> Response:
        handle = request.path_params["handle"]
        self.cancel(self.live(handle), CANCEL_OPERATION)
        return Response(
            200, {"code": "000000", "message": "successfully canceled", "statementHandle": handle}
        )
