"""The one core of the HTTP emulators (Databricks, Snowflake, BigQuery, dbt Cloud).

What every one of them does alike lives here, once: the job records and their scripted lifecycles,
the idempotency-token index, authentication by the connection's token, the fault plan and the ledger,
HTTPS with a loopback CA for clients that force ``https://``, and installing the Airflow connection.
A system module only declares what is its own: its routes (``ROUTES``), its status vocabulary
(``DEFAULT_LIFECYCLE``, ``TERMINAL_STATES``, ``CANCELLED_STATE``, `validate_state`), where the token
travels (``TOKEN_HEADER``/``TOKEN_FORMAT``, or `authorized`), its error shape (`error_body`) and the
JSON its endpoints answer with.

The same names in every emulator (the AWS ones included): ``jobs`` (every job the service holds, by
id), `HttpEmulator.job`/``run``, `HttpEmulator.latest_job`, `HttpEmulator.set_state`,
`HttpEmulator.script`, `HttpEmulator.expire`, `HttpEmulator.install_connection`,
`HttpEmulator.environ`; a job's ``created_at`` is epoch seconds and ``reads`` counts its status reads.

This module imports nothing from Airflow.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any, ClassVar, Self

from airflow_durable.testing import _tls
from airflow_durable.testing._core import (
    EmulatorError,
    EnvironSetter,
    FaultPlan,
    Ledger,
    Lifecycle,
    LoopbackServer,
    Request,
    ScriptedEmulator,
    deprecated_alias,
    set_environ,
)

__all__ = ["HttpEmulator", "HttpJob", "deprecated_alias"]

#: A route: HTTP method, path pattern (``{name}`` captures a segment) and the handler method's name.
Route = tuple[str, str, str]


@dataclass(kw_only=True, eq=False)
class HttpJob:
    """One external job as an HTTP emulator holds it; ``emulator.job(id)`` hands it to tests."""

    id: Any
    lifecycle: Lifecycle
    #: The call that created it (``"runs/submit"``, ``"jobs.insert"``...).
    operation: str = ""
    #: The submission's JSON body, as sent.
    payload: dict[str, Any] = field(default_factory=dict)
    token: str | None = None
    #: When the service created it, epoch seconds (strictly increasing within one emulator).
    created_at: float = field(default_factory=time.time)
    #: True once a cancel asked for it, even if it was already done.
    cancelled: bool = False
    expired: bool = False
    #: How many status reads it has answered.
    reads: int = 0
    #: The message the service reports with its state (``None``: the emulator's default).
    message: str | None = None

    @property
    def state(self) -> str:
        """The current state (reading it does not advance the script)."""
        return self.lifecycle.current

    gets = deprecated_alias("reads", "gets")


class HttpEmulator(ScriptedEmulator):
    """Base of the HTTP emulators: a loopback server whose routes a subclass declares.

    Args:
        ledger: shared ledger (a fresh one if omitted); every mutating call is recorded.
        lifecycle: default state script of a new job (``DEFAULT_LIFECYCLE`` if omitted); also settable
            later through ``lifecycle``.
        faults: the fault plan (a fresh one if omitted).
        token: the token the connection carries and the server requires (``DEFAULT_TOKEN`` if omitted).
    """

    #: The connection id `install_connection` writes by default.
    default_conn_id: ClassVar[str] = ""
    ROUTES: ClassVar[Sequence[Route]] = ()
    #: States after which a job never changes by itself.
    TERMINAL_STATES: ClassVar[frozenset[str]] = frozenset()
    #: The state a cancel moves a running job to.
    CANCELLED_STATE: ClassVar[str] = "CANCELLED"
    #: Where the token travels and how (``None``: the service takes no token).
    TOKEN_HEADER: ClassVar[str] = "Authorization"
    TOKEN_FORMAT: ClassVar[str | None] = "Bearer {token}"
    DEFAULT_TOKEN: ClassVar[str] = "emulator-token"
    #: Serve HTTPS with a loopback CA valid for these names (``None``: plain HTTP).
    TLS_HOSTNAMES: ClassVar[Sequence[str] | None] = None
    #: Resolve this domain (and its subdomains) to the server, in this process and its children.
    ROUTED_DOMAIN: ClassVar[str | None] = None

    def __init__(
        self,
        ledger: Ledger | None = None,
        lifecycle: Sequence[str] | None = None,
        *,
        faults: FaultPlan | None = None,
        token: str | None = None,
    ) -> None:
        self._init_jobs(ledger, lifecycle, faults)
        self.token = token if token is not None else self.DEFAULT_TOKEN
        self._tokens: dict[str, Any] = {}
        #: Seconds an idempotency token deduplicates after its job was created (``None``: while the service
        #: holds the job, the catalogue's documented default). A test sets it to model a lapsed token.
        self.token_window: float | None = None
        self._last_created = 0.0
        self.ca = _tls.LoopbackCA(self.TLS_HOSTNAMES) if self.TLS_HOSTNAMES else None
        self.server = LoopbackServer(
            name=f"{self.system}-emulator",
            faults=self.faults,
            error_body=self.error_body,
            ssl_context=None if self.ca is None else self.ca.server_context(),
        )
        for method, pattern, handler in self.ROUTES:
            self.server.route(method, pattern, self._guarded(getattr(self, handler)))
        self._init_service()
        self._install_contract()

    def _init_service(self) -> None:
        """Set up what the service keeps besides its jobs (called at the end of ``__init__``)."""

    # ------------------------------------------------------------------ what a system declares
    @staticmethod
    def error_body(status: int, message: str) -> Any:
        """The service's error JSON, for injected faults and unknown endpoints."""
        return {"error": message, "status": status}

    def error(self, status: int, message: str) -> EmulatorError:
        """A service-shaped error answer a handler raises."""
        return EmulatorError(status, self.error_body(status, message))

    def validate_state(self, state: str) -> str:
        """``state`` if the service can report it, else ``ValueError`` (default: any string)."""
        return state

    def is_terminal(self, state: str) -> bool:
        return state in self.TERMINAL_STATES

    def authorized(self, request: Request) -> bool:
        if self.TOKEN_FORMAT is None:
            return True
        return request.headers.get(self.TOKEN_HEADER) == self.TOKEN_FORMAT.format(token=self.token)

    def connection(self) -> dict[str, Any]:
        """The Airflow connection fields pointing at this emulator."""
        raise NotImplementedError

    def _guarded(self, handler: Callable[[Request], Any]) -> Callable[[Request], Any]:
        def wrapper(request: Request) -> Any:
            if not self.authorized(request):
                raise self.error(401, "Invalid access token.")
            with self._lock:
                return handler(request)

        return wrapper

    # ------------------------------------------------------------------ start / stop
    def _validate_script(self, states: Sequence[str]) -> list[str]:
        return super()._validate_script([self.validate_state(s) for s in states])

    def start(self) -> Self:
        if not self.server.running:
            self.server.start()
            if self.ROUTED_DOMAIN is not None:
                _tls.route(self.ROUTED_DOMAIN, self.server.port)
            if self.ca is not None:
                self.ca.trust_in_process()
        return self

    def stop(self) -> None:
        if self.server.running:
            port = self.server.port
            self.server.stop()
            if self.ROUTED_DOMAIN is not None:
                _tls.unroute(self.ROUTED_DOMAIN, port)

    # ------------------------------------------------------------------ connection and environment
    def connection_uri(self) -> str:
        """The JSON value for an ``AIRFLOW_CONN_<ID>`` environment variable."""
        return json.dumps(self.connection())

    def environ(self, conn_id: str | None = None) -> dict[str, str]:
        """Every variable a process (this one or a child) needs to reach the emulator.

        The connection ``AIRFLOW_CONN_<CONN_ID>``, plus CA trust for HTTPS and name routing
        (a ``sitecustomize`` on ``PYTHONPATH``) where the service needs them.
        """
        env: dict[str, str] = {}
        if self.ROUTED_DOMAIN is not None and self.ca is not None:
            env.update(_tls.environ({self.ROUTED_DOMAIN: self.port}, self.ca))
        elif self.ca is not None:
            env.update(self.ca.client_env())
        env[f"AIRFLOW_CONN_{(conn_id or self.default_conn_id).upper()}"] = self.connection_uri()
        return env

    def install_connection(
        self, environ_setter: EnvironSetter | None = None, conn_id: str | None = None
    ) -> str:
        """Install `environ`; returns the connection variable's name.

        Args:
            environ_setter: a ``(name, value)`` callable such as ``monkeypatch.setenv`` (undone at test
                teardown), or a mutable mapping such as ``os.environ`` (the default: permanent for this
                process and inherited by child processes, e.g. a scheduler started afterwards).
            conn_id: the connection id (``default_conn_id`` if omitted).
        """
        values = self.environ(conn_id)
        set_environ(environ_setter, values)
        if self.ca is not None:
            self.ca.trust_in_process()
        return f"AIRFLOW_CONN_{(conn_id or self.default_conn_id).upper()}"

    certificates = deprecated_alias("ca", "certificates")

    # ------------------------------------------------------------------ test controls
    def _targets(self, job_ids: Any) -> list[Any]:
        return [self.job(job_ids)]

    def script(self, job_ids: Any, states: Sequence[str]) -> None:
        """Replace a job's remaining state script (it starts from ``states[0]`` at the next read)."""
        checked = [self.validate_state(s) for s in states]
        for job in self._targets(job_ids):
            job.lifecycle = Lifecycle(checked)

    def set_state(self, job_ids: Any, state: str, message: str | None = None) -> None:
        """Force a job into ``state`` for good (ends its script)."""
        self.validate_state(state)
        for job in self._targets(job_ids):
            job.lifecycle.set_state(state)
            job.message = message

    def expire(self, job_ids: Any) -> None:
        """Forget a job: every later call about it answers 404, as when its history expired.

        Its idempotency token is forgotten with it, so a resubmission with that token creates a new job.
        """
        with self._lock:
            for job in self._targets(job_ids):
                job.expired = True
                if job.token is not None and self._tokens.get(job.token) == job.id:
                    del self._tokens[job.token]

    def backdate(self, job_ids: Any, seconds: float) -> None:
        """Report a job as created ``seconds`` earlier than it was, as a job another run started long ago."""
        with self._lock:
            for job in self._targets(job_ids):
                job.created_at -= seconds

    # ------------------------------------------------------------------ for the handlers
    def next_lifecycle(self, states: Sequence[str] | None = None) -> Lifecycle:
        """The script of a new job: ``states``, else the next queued one, else ``lifecycle``."""
        if states is None:
            states = self._queued_lifecycles.pop(0) if self._queued_lifecycles else self._lifecycle
        return Lifecycle(list(states))

    def created_now(self) -> float:
        """Now, or 1 ms after the last job's creation if that is not earlier (a total order)."""
        self._last_created = max(time.time(), self._last_created + 0.001)
        return self._last_created

    def add(self, job: Any, *, record: bool = True) -> Any:
        """Hold a new job, index its token, and record its creation in the ledger."""
        self.jobs[job.id] = job
        if job.token is not None:
            self._tokens[job.token] = job.id
        if record:
            self.ledger.record(
                self.system,
                job.operation,
                external_id=job.id,
                token=job.token,
                created=True,
                payload=job.payload,
            )
        return job

    def forget_token(self, token: str) -> None:
        """The token's deduplication window has passed: a resubmission with it creates a new job."""
        with self._lock:
            self._tokens.pop(token, None)

    def token_lapsed(self, job: Any) -> bool:
        """Whether ``token_window`` has passed since ``job`` was created."""
        return self.token_window is not None and time.time() - job.created_at > self.token_window

    def replay(self, token: str | None, operation: str, payload: dict[str, Any]) -> Any:
        """The live job ``token`` created before (recorded as a replay), or ``None``."""
        if token is None or token not in self._tokens:
            return None
        job = self.jobs[self._tokens[token]]
        if self.token_lapsed(job):
            del self._tokens[token]
            return None
        self.ledger.record(
            self.system, operation, external_id=job.id, token=token, created=False, payload=payload
        )
        return job

    def live(self, job_id: Any) -> Any:
        """The job a request names, or the service's 404."""
        try:
            job = self.jobs.get(self.key(job_id))
        except ValueError:
            raise self.error(400, f"Invalid id {job_id!r}.") from None
        if job is None or job.expired:
            raise self.not_found(job_id)
        return job

    def not_found(self, job_id: Any) -> EmulatorError:
        return self.error(404, f"{job_id} does not exist.")

    def read(self, job: Any) -> str:
        """A status read: the job's current state, then its script steps on."""
        job.reads += 1
        return job.lifecycle.read()

    def cancel(self, job: Any, operation: str, payload: dict[str, Any] | None = None) -> bool:
        """Cancel ``job`` as the service does (a finished job stays as it is); recorded in the ledger."""
        job.cancelled = True
        changed = not self.is_terminal(job.state)
        if changed:
            job.lifecycle.set_state(self.CANCELLED_STATE)
            job.message = None
        self.ledger.record(
            self.system, operation, external_id=job.id, payload={**(payload or {}), "changed": changed}
        )
        return changed


def as_list(ids: Any) -> list[Any]:
    """One id or an iterable of them, as a list (a string is one id)."""
    return [ids] if isinstance(ids, (str, int)) or not isinstance(ids, Iterable) else list(ids)
