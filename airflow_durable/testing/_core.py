"""System-independent emulator machinery: ledger, scripted lifecycle, fault plan, loopback HTTP server.

Every service emulator (Databricks, and later Snowflake, BigQuery, dbt Cloud, ...) is built from these
pieces. Nothing here knows about any particular service, and nothing here imports Airflow: the server
speaks plain HTTP on 127.0.0.1, so the unmodified provider hooks reach it through their real
``requests`` and ``aiohttp`` code, from this process or from a scheduler / triggerer in another one.
"""

from __future__ import annotations

import json
import os
import re
import socket
import ssl
import sys
import threading
import time
import warnings
from collections.abc import Callable, Iterator, Mapping, MutableMapping, Sequence
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, ClassVar, Literal, Self
from urllib.parse import parse_qsl, urlsplit

__all__ = [
    "ScriptedEmulator",
    "EmulatorError",
    "EnvironSetter",
    "Fault",
    "FaultPlan",
    "Ledger",
    "LedgerEntry",
    "Lifecycle",
    "LoopbackServer",
    "Request",
    "Response",
    "Transport",
    "classify_transport",
    "set_environ",
]

Transport = Literal["sync", "async"]
#: Where an emulator installs its environment: ``monkeypatch.setenv``-like, or a mapping (``os.environ``).
EnvironSetter = Callable[[str, str], Any] | MutableMapping[str, str]
#: Header a non-hook client may send to state its transport explicitly (it wins over the heuristic).
TRANSPORT_HEADER = "X-Emulator-Transport"


def set_environ(target: EnvironSetter | None, values: Mapping[str, str]) -> None:
    """Set ``values`` through a ``(name, value)`` callable or a mapping (default ``os.environ``)."""
    setter = os.environ if target is None else target
    for name, value in values.items():
        if callable(setter):
            setter(name, value)
        else:
            setter[name] = value


# --------------------------------------------------------------------------- ledger
@dataclass(frozen=True)
class LedgerEntry:
    """One mutating call that reached an emulated service (faulted-before calls never do)."""

    system: str
    operation: str
    external_id: Any
    token: str | None
    #: True only when the call created a new external job; an idempotent replay or a cancel is False.
    created: bool
    payload: dict[str, Any]
    at: float


class Ledger:
    """Thread-safe record of every mutating call, shared by all emulators of a test."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._entries: list[LedgerEntry] = []

    def record(
        self,
        system: str,
        operation: str,
        *,
        external_id: Any = None,
        token: str | None = None,
        created: bool = False,
        payload: Mapping[str, Any] | None = None,
    ) -> LedgerEntry:
        # Deep-copy through JSON so a later mutation by the caller cannot rewrite history.
        entry = LedgerEntry(
            system=system,
            operation=operation,
            external_id=external_id,
            token=token,
            created=created,
            payload=json.loads(json.dumps(dict(payload or {}), default=str)),
            at=time.time(),
        )
        with self._lock:
            self._entries.append(entry)
        return entry

    @property
    def entries(self) -> list[LedgerEntry]:
        """A snapshot, in call order."""
        with self._lock:
            return list(self._entries)

    def select(
        self, system: str | None = None, operation: str | None = None, created: bool | None = None
    ) -> list[LedgerEntry]:
        return [
            e
            for e in self.entries
            if (system is None or e.system == system)
            and (operation is None or e.operation == operation)
            and (created is None or e.created == created)
        ]

    def submissions(self, system: str | None = None, operation: str | None = None) -> list[LedgerEntry]:
        """Calls that created a new external job (idempotent replays excluded)."""
        return self.select(system, operation, created=True)

    def count(
        self, system: str | None = None, operation: str | None = None, created: bool | None = None
    ) -> int:
        return len(self.select(system, operation, created))

    def clear(self) -> None:
        with self._lock:
            self._entries.clear()

    def __len__(self) -> int:
        with self._lock:
            return len(self._entries)

    def __iter__(self) -> Iterator[LedgerEntry]:
        return iter(self.entries)


# --------------------------------------------------------------------------- lifecycle
class Lifecycle:
    """A scripted sequence of states: each `read` returns the current one, then steps on.

    The last state is sticky, so ``Lifecycle(["RUNNING"])`` holds a job running until a test calls
    `set_state`, which forces a state and ends the script.
    """

    def __init__(self, states: Sequence[str]) -> None:
        if isinstance(states, str) or not states:
            raise ValueError(f"a lifecycle needs a non-empty list of states, got {states!r}")
        self._lock = threading.Lock()
        self._states = list(states)
        self._index = 0
        self.reads = 0

    @property
    def current(self) -> str:
        """The state the next read returns (does not advance)."""
        with self._lock:
            return self._states[self._index]

    @property
    def remaining(self) -> list[str]:
        with self._lock:
            return self._states[self._index :]

    def read(self) -> str:
        with self._lock:
            state = self._states[self._index]
            self._index = min(self._index + 1, len(self._states) - 1)
            self.reads += 1
            return state

    def set_state(self, state: str) -> None:
        with self._lock:
            self._states = [state]
            self._index = 0

    def __repr__(self) -> str:
        return f"Lifecycle(current={self.current!r}, remaining={self.remaining!r})"


# --------------------------------------------------------------------------- requests and responses
@dataclass
class Request:
    """An HTTP request as a handler sees it."""

    method: str
    path: str
    query: dict[str, str]
    json: Any
    headers: Mapping[str, str]
    transport: Transport
    body: bytes = b""
    #: Named groups captured from the route pattern.
    path_params: dict[str, str] = field(default_factory=dict)

    @property
    def params(self) -> dict[str, Any]:
        """Query string merged with a JSON-object body (clients put GET arguments in either)."""
        merged: dict[str, Any] = dict(self.query)
        if isinstance(self.json, dict):
            merged.update(self.json)
        return merged


@dataclass
class Response:
    status: int = 200
    json: Any = field(default_factory=dict)
    headers: dict[str, str] = field(default_factory=dict)
    #: Bytes to send as they are instead of ``json`` (a proxying emulator relays another server's body);
    #: its ``Content-Type`` comes from ``headers`` (default ``application/json``).
    raw: bytes | None = None


class EmulatorError(Exception):
    """Raised by a handler to answer with an error status and a service-shaped JSON body."""

    def __init__(self, status: int, body: Any) -> None:
        super().__init__(f"{status}: {body}")
        self.status = status
        self.body = body


def classify_transport(method: str, headers: Mapping[str, str], body: bytes) -> Transport:
    """Tell ``requests`` (the hooks' sync path) from ``aiohttp`` (the triggers' async path).

    The provider hooks send the same User-Agent on both paths, so it cannot tell them apart. What
    differs is the client library itself: ``requests`` always sends ``Connection: keep-alive`` (from
    ``requests.utils.default_headers``), while ``aiohttp`` on HTTP/1.1 sends no ``Connection`` header
    at all. A GET carrying a body is also ``aiohttp``: the hooks' async path sends GET arguments as
    a JSON body, the sync path as a query string. An explicit ``X-Emulator-Transport`` header wins.
    """
    explicit = headers.get(TRANSPORT_HEADER, "").strip().lower()
    if explicit in ("sync", "async"):
        return explicit  # type: ignore[return-value]
    if method == "GET" and body:
        return "async"
    if "connection" in {k.lower() for k in headers}:
        return "sync"
    return "async"


# --------------------------------------------------------------------------- faults
_DEFAULT_STATUS = object()


@dataclass(eq=False)
class Fault:
    """One injected failure; see `FaultPlan.add`."""

    method: str | None
    path_contains: str | None
    status: int | None
    times: int | None
    latency: float
    body: Any
    transport: Transport | None
    predicate: Callable[[Request], bool] | None
    drop: bool
    after: bool
    hits: int = 0
    _plan: FaultPlan | None = field(default=None, repr=False)

    @property
    def exhausted(self) -> bool:
        return self.times is not None and self.hits >= self.times

    def matches(self, request: Request) -> bool:
        return (
            not self.exhausted
            and (self.method is None or self.method.upper() == request.method)
            and (self.path_contains is None or self.path_contains in request.path)
            and (self.transport is None or self.transport == request.transport)
            and (self.predicate is None or bool(self.predicate(request)))
        )

    def remove(self) -> None:
        if self._plan is not None:
            self._plan.remove(self)


class FaultPlan:
    """An ordered list of faults; the first one that matches a request (and has hits left) applies."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._faults: list[Fault] = []

    def add(
        self,
        method: str | None = None,
        path_contains: str | None = None,
        status: Any = _DEFAULT_STATUS,
        times: int | None = 1,
        latency: float = 0.0,
        body: Any = None,
        transport: Transport | None = None,
        predicate: Callable[[Request], bool] | None = None,
        *,
        drop: bool = False,
        after: bool = False,
    ) -> Fault:
        """Inject a fault into matching requests.

        Args:
            status: HTTP status to answer with (default 500). With ``latency`` and no ``status``
                (or ``status=None``) the request is only delayed, then answered normally.
            times: how many matching requests it hits; ``None`` = forever.
            body: the error body; ``None`` = the service's own error shape for ``status``.
            transport: ``"sync"`` / ``"async"`` to hit only one client library (see
                `classify_transport`).
            predicate: extra ``Request -> bool`` filter.
            drop: close the connection without any answer (a connection error to the client).
            after: let the service handle the call first (its effect and ledger entry happen),
                then replace the answer: models "the job was created but the response was lost".
                With ``latency``, the delay comes after the service handled the call.
        """
        if transport not in (None, "sync", "async"):
            raise ValueError(f"transport must be None, 'sync' or 'async', not {transport!r}")
        if status is _DEFAULT_STATUS:
            status = None if latency and not drop else 500
        if times is not None and times < 1:
            raise ValueError("times must be >= 1 or None (forever)")
        fault = Fault(
            method=method,
            path_contains=path_contains,
            status=status,
            times=times,
            latency=latency,
            body=body,
            transport=transport,
            predicate=predicate,
            drop=drop,
            after=after,
            _plan=self,
        )
        with self._lock:
            self._faults.append(fault)
        return fault

    def take(self, request: Request) -> Fault | None:
        """The first matching fault, counted as hit (called once per request by the server)."""
        with self._lock:
            for fault in self._faults:
                if fault.matches(request):
                    fault.hits += 1
                    return fault
        return None

    def remove(self, fault: Fault) -> None:
        with self._lock:
            if fault in self._faults:
                self._faults.remove(fault)

    def clear(self) -> None:
        with self._lock:
            self._faults.clear()

    @property
    def faults(self) -> list[Fault]:
        with self._lock:
            return list(self._faults)

    def __len__(self) -> int:
        return len(self.faults)


# --------------------------------------------------------------------------- loopback server
Handler = Callable[[Request], "Response | dict[str, Any] | tuple[int, Any] | None"]
ErrorBody = Callable[[int, str], Any]


def _default_error_body(status: int, message: str) -> dict[str, Any]:
    return {"error": message, "status": status}


@dataclass(frozen=True)
class RequestLogEntry:
    method: str
    path: str
    transport: Transport
    status: int | None
    fault: Fault | None


@dataclass(frozen=True)
class _Route:
    method: str
    regex: re.Pattern[str]
    handler: Handler


def _compile(pattern: str) -> re.Pattern[str]:
    # "/api/{version}/jobs" -> named groups; a literal path matches exactly (no trailing-slash games).
    parts = re.split(r"(\{[a-zA-Z_][a-zA-Z0-9_]*\})", pattern)
    regex = "".join(f"(?P<{p[1:-1]}>[^/]+)" if p.startswith("{") else re.escape(p) for p in parts)
    return re.compile(f"^{regex}/?$")


def deprecated_alias(new: str, old: str) -> property:
    """A read-only attribute ``old`` that warns and returns ``new`` (kept for one release)."""

    def getter(self: Any) -> Any:
        warnings.warn(
            f"{type(self).__name__}.{old} is deprecated, use .{new}", DeprecationWarning, stacklevel=2
        )
        return getattr(self, new)

    return property(getter, doc=f"Deprecated alias of ``{new}``.")


class ScriptedEmulator:
    """What every emulator shares: a `LoopbackServer` and the state scripts of its jobs.

    A subclass sets `DEFAULT_LIFECYCLE` and `system`, calls `_init_jobs` and creates ``self.server``
    in its ``__init__``, and overrides `_validate_script` when its states need more than
    `Lifecycle`'s checks. Its jobs have ``created_at`` (epoch seconds).
    """

    #: The script a new job follows when the test set none.
    DEFAULT_LIFECYCLE: ClassVar[tuple[str, ...]] = ()
    #: Ledger system name.
    system: ClassVar[str] = ""
    #: What error messages call it: "the <title> emulator" (``system`` if empty).
    title: ClassVar[str] = ""
    #: What the service calls one of its jobs ("run", "statement"), for error messages.
    JOB_NOUN: ClassVar[str] = "job"
    server: Any
    _lifecycle: list[str]

    def _init_jobs(
        self, ledger: Ledger | None, lifecycle: Sequence[str] | None, faults: FaultPlan | None
    ) -> None:
        """The state every emulator keeps: ledger, faults, lifecycles and ``jobs``, by id."""
        self.ledger = ledger if ledger is not None else Ledger()
        self.faults = faults if faults is not None else FaultPlan()
        # Status reads advance scripts and handler threads run concurrently.
        self._lock = threading.RLock()
        self._queued_lifecycles: list[list[str]] = []
        self.lifecycle = lifecycle
        self.jobs: dict[Any, Any] = {}

    def key(self, job_id: Any) -> Any:
        """The ``jobs`` key of an id as tests and requests spell it (default: the string)."""
        return str(job_id)

    def job(self, job_id: Any) -> Any:
        """The job ``job_id``; ``KeyError`` naming the known ones otherwise."""
        with self._lock:
            try:
                return self.jobs[self.key(job_id)]
            except (KeyError, ValueError):
                noun, known = self.JOB_NOUN, sorted(self.jobs, key=str)
                raise KeyError(
                    f"the {self.title or self.system} emulator has no {noun} {job_id!r}; {noun}s: {known}"
                ) from None

    #: The conformance suite's name for `job`.
    run = job

    def latest_job(self) -> Any:
        """The job created last."""
        with self._lock:
            if not self.jobs:
                raise KeyError(f"the {self.title or self.system} emulator has no {self.JOB_NOUN}s yet")
            return max(self.jobs.values(), key=lambda j: j.created_at)

    latest_run = deprecated_alias("latest_job", "latest_run")

    def _validate_script(self, states: Sequence[str]) -> list[str]:
        states = list(states)
        Lifecycle(states)  # validate now, not at the next submit
        return states

    # ------------------------------------------------------------------ the service's contract
    def _contract(self) -> Any:
        """The service's published contract (`airflow_durable.testing.contracts.Contract`); ``None``: none."""
        return None

    def contract_error(self, status: int, message: str) -> Response:
        """The service's answer to a request its contract rejects (400), or to a broken answer (500)."""
        return Response(status, self.server.error_body(status, message))

    def _install_contract(self) -> None:
        """Check every request this emulator serves, and its answer, against `_contract`."""
        contract = self._contract()
        if contract is None:
            return
        from airflow_durable.testing.contracts import ContractGuard
        from airflow_durable.testing.contracts.routes import declared

        self.server.contract = ContractGuard(contract, self.contract_error, declared(contract.system))

    @property
    def contract_violations(self) -> list[Any]:
        """Every `airflow_durable.testing.contracts.Violation` this emulator met, oldest first."""
        guard = self.server.contract
        return [] if guard is None else list(guard.violations)

    @property
    def lifecycle(self) -> list[str]:
        """The default state script a new job starts with."""
        return list(self._lifecycle)

    @lifecycle.setter
    def lifecycle(self, states: Sequence[str] | None) -> None:
        self._lifecycle = self._validate_script(self.DEFAULT_LIFECYCLE if states is None else states)

    def queue_lifecycles(self, *scripts: Sequence[str]) -> None:
        """Give the next new jobs these scripts, in order; later jobs get `lifecycle`.

        For scenarios across tries that a test cannot step into, e.g. "the first job fails, the
        retry's job succeeds" under ``dag.test()``.
        """
        validated = [self._validate_script(states) for states in scripts]
        with self._lock:
            self._queued_lifecycles.extend(validated)

    def start(self) -> Self:
        self.server.start()
        return self

    def stop(self) -> None:
        self.server.stop()

    def __enter__(self) -> Self:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    @property
    def port(self) -> int:
        return self.server.port

    @property
    def url(self) -> str:
        return self.server.url


class LoopbackServer:
    """A threaded HTTP server on 127.0.0.1 (ephemeral port) that routes JSON requests to handlers.

    Faults from ``faults`` apply before (or, with ``after=True``, instead of the answer of) the
    handler. Handler bugs answer 500 and are kept in `errors` so a test can surface them.
    """

    def __init__(
        self,
        *,
        name: str = "emulator",
        faults: FaultPlan | None = None,
        error_body: ErrorBody = _default_error_body,
        host: str = "127.0.0.1",
        port: int = 0,
        ssl_context: ssl.SSLContext | None = None,
    ) -> None:
        self.name = name
        #: Serve HTTPS for clients that hard-code ``https://`` with this server-side context, e.g.
        #: ``LoopbackCA().server_context()`` (`airflow_durable.testing._tls`).
        self.ssl_context = ssl_context
        self.faults = faults if faults is not None else FaultPlan()
        self.error_body = error_body
        self._bind = (host, port)
        self._routes: list[_Route] = []
        self._httpd: ThreadingHTTPServer | None = None
        self._thread: threading.Thread | None = None
        self._connections: set[socket.socket] = set()
        self._conn_lock = threading.Lock()
        self._log_lock = threading.Lock()
        self.log: list[RequestLogEntry] = []
        self.errors: list[BaseException] = []
        #: The service's published contract, checked on every request handled and every answer
        #: (an `airflow_durable.testing.contracts.ContractGuard`; ``None``: no checks).
        self.contract: Any = None

    # -- routing
    def route(self, method: str, pattern: str, handler: Handler) -> None:
        self._routes.append(_Route(method.upper(), _compile(pattern), handler))

    def _find(self, method: str, path: str) -> tuple[Handler, dict[str, str]] | None:
        for route in self._routes:
            if route.method == method and (m := route.regex.match(path)):
                return route.handler, m.groupdict()
        return None

    # -- lifecycle
    @property
    def running(self) -> bool:
        return self._httpd is not None

    @property
    def port(self) -> int:
        if self._httpd is None:
            raise RuntimeError(f"{self.name} is not started")
        return int(self._httpd.server_address[1])

    @property
    def url(self) -> str:
        scheme = "https" if self.ssl_context is not None else "http"
        return f"{scheme}://127.0.0.1:{self.port}"

    def start(self) -> LoopbackServer:
        if self._httpd is not None:
            return self
        server = self

        class _Handler(_RequestHandler):
            owner = server

        httpd = _TrackingHTTPServer(self._bind, _Handler)
        httpd.owner = self
        self._httpd = httpd
        self._thread = threading.Thread(
            target=httpd.serve_forever, kwargs={"poll_interval": 0.05}, name=f"{self.name}-http", daemon=True
        )
        self._thread.start()
        return self

    def stop(self) -> None:
        httpd, self._httpd = self._httpd, None
        if httpd is None:
            return
        httpd.shutdown()
        # Keep-alive connections (aiohttp pools them) would otherwise keep handler threads alive.
        with self._conn_lock:
            for conn in list(self._connections):
                try:
                    conn.shutdown(socket.SHUT_RDWR)
                except OSError:
                    pass
        httpd.server_close()
        if self._thread is not None:
            self._thread.join(timeout=5)
            self._thread = None

    def __enter__(self) -> LoopbackServer:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    # -- dispatch (called on handler threads)
    def requests_to(
        self, path_contains: str = "", transport: Transport | None = None
    ) -> list[RequestLogEntry]:
        """Requests that reached the server (faulted ones included), for assertions."""
        with self._log_lock:
            return [
                r
                for r in self.log
                if path_contains in r.path and (transport is None or r.transport == transport)
            ]

    def _log(self, request: Request, status: int | None, fault: Fault | None) -> None:
        with self._log_lock:
            self.log.append(RequestLogEntry(request.method, request.path, request.transport, status, fault))

    def dispatch(self, request: Request) -> Response | None:
        """The answer to ``request``; ``None`` means drop the connection without answering."""
        fault = self.faults.take(request)
        if fault is not None and fault.latency and not fault.after:
            time.sleep(fault.latency)
        if fault is not None and not fault.after and (fault.drop or fault.status is not None):
            response = None if fault.drop else self._fault_response(fault)
            self._log(request, None if response is None else response.status, fault)
            return response
        guard = self.contract
        early = guard.before(request) if guard is not None else None
        response = early if early is not None else self._handle(request)
        if guard is not None and early is None:
            response = guard.after(request, response)
        if fault is not None and fault.after and fault.latency:
            time.sleep(fault.latency)  # the call took effect; its answer is late
        if fault is not None and fault.after and (fault.drop or fault.status is not None):
            response = None if fault.drop else self._fault_response(fault)
        self._log(request, None if response is None else response.status, fault)
        return response

    def _fault_response(self, fault: Fault) -> Response:
        assert fault.status is not None
        body = fault.body if fault.body is not None else self.error_body(fault.status, "injected fault")
        return Response(fault.status, body)

    def _handle(self, request: Request) -> Response:
        found = self._find(request.method, request.path)
        if found is None:
            return Response(404, self.error_body(404, f"No API found for '{request.method} {request.path}'"))
        handler, request.path_params = found
        try:
            result = handler(request)
        except EmulatorError as e:
            return Response(e.status, e.body)
        except Exception as e:  # a bug in the emulator, not a scripted failure: keep it visible
            self.errors.append(e)
            return Response(500, self.error_body(500, f"emulator error: {type(e).__name__}: {e}"))
        if isinstance(result, Response):
            return result
        if isinstance(result, tuple):
            return Response(result[0], result[1])
        return Response(200, {} if result is None else result)


class _TrackingHTTPServer(ThreadingHTTPServer):
    daemon_threads = True
    allow_reuse_address = True
    owner: LoopbackServer

    def process_request(self, request: Any, client_address: Any) -> None:
        with self.owner._conn_lock:
            self.owner._connections.add(request)
        super().process_request(request, client_address)

    def shutdown_request(self, request: Any) -> None:
        with self.owner._conn_lock:
            self.owner._connections.discard(request)
        super().shutdown_request(request)

    def finish_request(self, request: Any, client_address: Any) -> None:
        # Headers and body go out in separate writes: without TCP_NODELAY, Nagle plus the client's
        # delayed ACK adds ~40 ms to every answer.
        try:
            request.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        except OSError:
            pass
        context = self.owner.ssl_context
        if context is None:
            super().finish_request(request, client_address)
            return
        # The TLS handshake runs here, on the connection's own thread, so a client that stalls or dies
        # mid-handshake never blocks the accept loop.
        try:
            tls = context.wrap_socket(request, server_side=True)
        except (ssl.SSLError, OSError):
            return
        with self.owner._conn_lock:
            self.owner._connections.discard(request)
            self.owner._connections.add(tls)
        try:
            super().finish_request(tls, client_address)
        finally:
            with self.owner._conn_lock:
                self.owner._connections.discard(tls)
            try:
                tls.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass
            tls.close()

    def handle_error(self, request: Any, client_address: Any) -> None:
        # A client killed mid-request (crash tests SIGKILL workers) is expected, not a server bug.
        if isinstance(sys.exc_info()[1], (BrokenPipeError, ConnectionResetError, ssl.SSLError)):
            return
        super().handle_error(request, client_address)


class _RequestHandler(BaseHTTPRequestHandler):
    # HTTP/1.1 so aiohttp can keep its connections alive, as against the real service.
    protocol_version = "HTTP/1.1"
    # Longer than aiohttp's 15 s client keep-alive, so the server never closes a pooled connection
    # first (which the client would see as a non-retryable ServerDisconnectedError).
    timeout = 60
    owner: LoopbackServer

    def log_message(self, format: str, *args: Any) -> None:  # quiet: tests read the request log
        pass

    def _serve(self) -> None:
        split = urlsplit(self.path)
        length = int(self.headers.get("Content-Length") or 0)
        body = self.rfile.read(length) if length else b""
        headers = {k: v for k, v in self.headers.items()}
        try:
            payload = json.loads(body) if body else None
        except ValueError:
            payload = None
        request = Request(
            method=self.command,
            path=split.path,
            query=dict(parse_qsl(split.query, keep_blank_values=True)),
            json=payload,
            headers=_CaseInsensitive(headers),
            transport=classify_transport(self.command, _CaseInsensitive(headers), body),
            body=body,
        )
        response = self.owner.dispatch(request)
        if response is None:
            self.close_connection = True
            try:
                self.connection.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass
            return
        data = response.raw if response.raw is not None else json.dumps(response.json).encode()
        headers = {
            k: v for k, v in response.headers.items() if k.lower() not in ("content-type", "content-length")
        }
        content_type = next(
            (v for k, v in response.headers.items() if k.lower() == "content-type"), "application/json"
        )
        self.send_response(response.status)
        self.send_header("Content-Type", content_type)
        self.send_header("Content-Length", str(len(data)))
        for key, value in headers.items():
            self.send_header(key, value)
        self.end_headers()
        self.wfile.write(data)

    do_GET = do_POST = do_PATCH = do_PUT = do_DELETE = _serve


class _CaseInsensitive(dict):
    """Header lookup that ignores case (both clients lower-case some names, e.g. ``user-agent``)."""

    def __init__(self, items: Mapping[str, str]) -> None:
        super().__init__(items)
        self._lower = {k.lower(): v for k, v in items.items()}

    def get(self, key: str, default: Any = None) -> Any:
        return self._lower.get(key.lower(), default)

    def __getitem__(self, key: str) -> str:
        return self._lower[key.lower()]

    def __contains__(self, key: object) -> bool:
        return isinstance(key, str) and key.lower() in self._lower
