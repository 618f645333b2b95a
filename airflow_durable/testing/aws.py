"""The base of the AWS emulators: a recording, fault-injecting loopback front in front of moto.

The provider hooks reach AWS through botocore (sync) and their triggers through aiobotocore (async).
Both honour the Airflow AWS connection's ``endpoint_url`` extra, so an emulator only has to be an HTTP
server on 127.0.0.1 that speaks the AWS wire protocols. It is built from two pieces:

* one shared moto server (`MotoServer`, ``moto.server.ThreadedMotoServer`` on a free loopback
  port) per process, started on first use and reset whenever an emulator starts, so tests sharing it
  stay isolated;
* per emulator, an `AwsEmulator` front: a `LoopbackServer`
  that names each call (``service`` + ``Operation``, from the ``X-Amz-Target`` header or the botocore
  model's request URIs), applies the `FaultPlan`, records mutating
  calls in the `Ledger`, drives each job through its scripted
  `Lifecycle` (moto's own state machines finish jobs instantly, too
  fast for crash tests), and forwards everything else to moto unchanged.

Subclasses (one per AWS service, e.g. `BatchEmulator`) say which
operations submit, read status and cancel, how a job's state is pushed into moto's backend, and may
serve operations moto lacks themselves (``local_operations``) and page list operations moto answers whole
(``paged_operations``: the page size and token the service takes, an opaque token per page).

Faults match ``path_contains`` against the call's *logical path* ``/<service>/<Operation>``
(e.g. ``"/batch/DescribeJobs"``), because AWS JSON-protocol calls all ``POST /``; ``transport`` tells
botocore (``"sync"``) from aiobotocore (``"async"``) by their User-Agent. A fault's default body is the
AWS error shape for its status: 400 → ``ThrottlingException`` (AWS throttles with 400), 404 →
``ResourceNotFoundException``, 5xx → ``InternalServerException`` / ``ServiceUnavailableException``.

The emulated services run in this process; Airflow may run anywhere that can reach 127.0.0.1 (a
scheduler or triggerer subprocess reads the connection from ``AIRFLOW_CONN_AWS_DEFAULT``). This module
imports nothing from Airflow.
"""

from __future__ import annotations

import atexit
import dataclasses
import datetime as dt
import http.client
import json
import os
import re
import secrets
import shutil
import threading
import time
import uuid
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, ClassVar

from airflow_durable.testing._core import (
    EmulatorError,
    EnvironSetter,
    FaultPlan,
    Ledger,
    Lifecycle,
    LoopbackServer,
    Request,
    Response,
    ScriptedEmulator,
    set_environ,
)

__all__ = ["AwsCall", "AwsEmulator", "AwsJob", "ListPaging", "MotoServer", "aws_error"]

#: moto's default account; every emulated resource lives there.
ACCOUNT_ID = "123456789012"
DEFAULT_REGION = "us-east-1"

# Signing name (credential scope) → botocore service model name, where they differ.
_MODEL_NAMES = {"elasticmapreduce": "emr"}
_CREDENTIAL_SERVICE = re.compile(r"Credential=[^/]+/[^/]+/[^/]+/([^/]+)/aws4_request")

_ERROR_CODES = {
    400: "ThrottlingException",
    403: "AccessDeniedException",
    404: "ResourceNotFoundException",
    429: "ThrottlingException",
    500: "InternalServerException",
    502: "BadGatewayException",
    503: "ServiceUnavailableException",
}


def aws_error(status: int, code: str, message: str) -> EmulatorError:
    """An AWS-shaped error answer; botocore reads the code from ``__type`` and the header."""
    return EmulatorError(status, {"__type": code, "message": message, "Message": message})


def _error_body(status: int, message: str, codes: Mapping[int, str] = _ERROR_CODES) -> dict[str, str]:
    code = codes.get(status, "InternalServerException" if status >= 500 else "ValidationException")
    return {"__type": code, "message": message, "Message": message}


def _service_model(service: str) -> Any:
    """botocore's model of a service by its signing name (``None``: botocore has none)."""
    try:
        import botocore.session

        return botocore.session.get_session().get_service_model(_MODEL_NAMES.get(service, service))
    except Exception:
        return None


def model_violations(
    model: Any, operation: str, params: Mapping[str, Any], query: Mapping[str, str]
) -> list[str]:
    """What AWS refuses in a call's input, by the operation's model: an integer outside its ``min``/``max``,
    a string outside its ``enum``; each in AWS's words (``Value '500' at 'maxResults' failed to satisfy
    constraint: ...``). Lengths and patterns are not checked. Query-string members are read from
    ``query`` (one value per name), every other member from ``params``."""
    try:
        shape = model.operation_model(operation).input_shape
    except Exception:
        return []
    if shape is None:
        return []
    found: list[str] = []
    for name, member in shape.members.items():
        where = member.serialization.get("location")
        if where == "header":
            continue
        wire = member.serialization.get("name", name)
        value = query.get(wire) if where == "querystring" else params.get(wire, params.get(name))
        if value is not None:
            _violations(member, value, name[:1].lower() + name[1:], found)
    return found


def _violations(shape: Any, value: Any, path: str, found: list[str]) -> None:
    kind = shape.type_name
    if kind in ("integer", "long"):
        try:
            number = int(value)
        except (TypeError, ValueError):
            return  # botocore and the protocol parser refuse a non-number before a bound matters
        low, high = shape.metadata.get("min"), shape.metadata.get("max")
        if low is not None and number < low:
            found.append(
                f"Value '{number}' at '{path}' failed to satisfy constraint: Member must have value "
                f"greater than or equal to {low}"
            )
        if high is not None and number > high:
            found.append(
                f"Value '{number}' at '{path}' failed to satisfy constraint: Member must have value "
                f"less than or equal to {high}"
            )
    elif kind == "string" and shape.enum and isinstance(value, str) and value not in shape.enum:
        found.append(
            f"Value '{value}' at '{path}' failed to satisfy constraint: Member must satisfy enum value "
            f"set: [{', '.join(shape.enum)}]"
        )
    elif kind == "structure" and isinstance(value, Mapping):
        for name, member in shape.members.items():
            if value.get(name) is not None:
                _violations(member, value[name], f"{path}.{name[:1].lower() + name[1:]}", found)
    elif kind == "list":
        # A query-string list arrives as one value (`Request.query` keeps one per name).
        items = value if isinstance(value, list) else [value]
        for index, item in enumerate(items, 1):
            _violations(shape.member, item, f"{path}.{index}.member", found)
    elif kind == "map" and isinstance(value, Mapping):
        for key, item in value.items():
            _violations(shape.value, item, f"{path}.{key}", found)


# --------------------------------------------------------------------------- the shared moto server
class MotoServer:
    """A moto server on a free 127.0.0.1 port, in a thread of this process.

    Use `shared` for the process-wide instance (starting one takes about a second); its state is
    reset by every `AwsEmulator.start`. The backends live in this process, which is what lets an
    emulator set job states in them directly.
    """

    _shared: ClassVar[MotoServer | None] = None
    _shared_lock: ClassVar[threading.Lock] = threading.Lock()

    def __init__(self) -> None:
        self._server: Any = None
        self._lock = threading.Lock()

    @classmethod
    def shared(cls) -> MotoServer:
        with cls._shared_lock:
            if cls._shared is None:
                cls._shared = cls()
            return cls._shared.start()

    def start(self) -> MotoServer:
        with self._lock:
            if self._server is None:
                import logging

                try:
                    from moto.server import ThreadedMotoServer
                except ImportError as err:  # the testing extra brings moto[server]
                    raise ImportError(
                        f"the AWS emulators serve through moto's server ({err}): "
                        'pip install "airflow-durable[testing]"'
                    ) from err

                # werkzeug logs every request to stderr; the emulators keep their own request log.
                logging.getLogger("werkzeug").setLevel(logging.ERROR)

                server = ThreadedMotoServer(ip_address="127.0.0.1", port=0, verbose=False)
                server.start()
                self._server = server
        return self

    def stop(self) -> None:
        with self._lock:
            server, self._server = self._server, None
        if server is not None:
            server.stop()

    @property
    def port(self) -> int:
        if self._server is None:
            raise RuntimeError("the moto server is not started")
        return int(self._server.get_host_and_port()[1])

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def reset(self) -> None:
        """Forget every resource in every moto backend (``/moto-api/reset``)."""
        self.request("POST", "/moto-api/reset", b"", {})

    def request(
        self, method: str, path: str, body: bytes, headers: Mapping[str, str]
    ) -> tuple[int, dict[str, str], bytes]:
        conn = http.client.HTTPConnection("127.0.0.1", self.port, timeout=60)
        try:
            conn.request(method, path, body=body, headers=dict(headers))
            answer = conn.getresponse()
            return answer.status, {k: v for k, v in answer.getheaders()}, answer.read()
        finally:
            conn.close()


_data_lock = threading.Lock()
_data_path: str | None = None


def _trimmed_botocore_data() -> str:
    global _data_path
    with _data_lock:
        if _data_path is None:
            import tempfile

            import botocore

            with open(os.path.join(os.path.dirname(botocore.__file__), "data", "endpoints.json")) as f:
                endpoints = json.load(f)
            for partition in endpoints["partitions"]:
                partition["services"] = {}
            path = tempfile.mkdtemp(prefix="airflow-durable-botocore-")
            atexit.register(shutil.rmtree, path, ignore_errors=True)
            with open(os.path.join(path, "endpoints.json"), "w") as f:
                json.dump(endpoints, f)
            _data_path = path
        return _data_path


# --------------------------------------------------------------------------- calls and jobs
@dataclass
class AwsCall:
    """One AWS API call as an emulator sees it."""

    service: str  # the signing name from the credential scope, e.g. "batch", "redshift-data"
    operation: str  # e.g. "SubmitJob"
    params: dict[str, Any]  # the JSON body (REST-JSON path parameters merged in)
    request: Request
    #: What a local operation hands to `AwsEmulator.on_created` about the job it made.
    extra: dict[str, Any] = field(default_factory=dict)

    @property
    def transport(self) -> str:
        return self.request.transport


@dataclass
class AwsJob:
    """One job (statement, Batch job, step, job run...) the emulator tracks; ``emulator.job(id)``."""

    job_id: str
    operation: str
    payload: dict[str, Any]
    token: str | None
    lifecycle: Lifecycle
    created_at: float = field(default_factory=time.time)
    cancelled: bool = False
    expired: bool = False
    #: How many status reads this job has answered.
    reads: int = 0
    #: The state the service reports right now: the one the last status read returned (or forced).
    reported: str = ""
    #: Service-specific details a subclass keeps (sub-statements, results, ...).
    extra: dict[str, Any] = field(default_factory=dict)

    @property
    def state(self) -> str:
        """The current state (reading it does not advance the script)."""
        return self.lifecycle.current

    @property
    def id(self) -> str:
        """``job_id``, under the name every emulator's jobs share."""
        return self.job_id


class _AwsFront(LoopbackServer):
    """The loopback server of one emulator: every request goes to the emulator, whatever its path."""

    def __init__(self, emulator: AwsEmulator, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.emulator = emulator

    def dispatch(self, request: Request) -> Response | None:
        # Name the call before the faults see it, so they can match on the operation and transport.
        self.emulator._annotate(request)
        return super().dispatch(request)

    def _handle(self, request: Request) -> Response:
        try:
            return self.emulator._serve(request)
        except EmulatorError as e:
            return Response(e.status, e.body)
        except Exception as e:  # an emulator bug, not a scripted failure: keep it visible
            self.errors.append(e)
            return Response(500, _error_body(500, f"emulator error: {type(e).__name__}: {e}"))


@dataclass(frozen=True)
class ListPaging:
    """How a service pages a list operation that moto answers whole (see `AwsEmulator.paged_operations`).

    ``size_param`` and ``token_param`` are the wire names of the request's page size and token (in the JSON
    body or the query string); the answer's token is ``token_param`` too, as in every AWS API that pages
    this way.
    """

    #: The answer's list member.
    member: str
    #: The member that identifies an entry (a job id): a page never repeats an entry already served.
    id_member: str
    size_param: str = "maxResults"
    token_param: str = "nextToken"
    #: Entries a page holds when the request names no size.
    default_size: int = 100
    #: The largest size a request may name.
    max_size: int = 1000
    #: The error code (HTTP 400) the service answers a bad size or token with.
    error_code: str = "ValidationException"


@dataclass(frozen=True)
class _PageToken:
    operation: str
    query: str  # the request without its page parameters: a token answers only the listing that gave it
    served: frozenset[str]


# --------------------------------------------------------------------------- the base emulator
class AwsEmulator(ScriptedEmulator):
    """Base class of the AWS service emulators; see the module docstring.

    Args:
        ledger: shared ledger (a fresh one if omitted).
        lifecycle: default state script for new jobs (the subclass's ``DEFAULT_LIFECYCLE`` if omitted).
        faults: the fault plan (a fresh one if omitted).
        moto: the moto server to forward to (the process-wide `MotoServer.shared` if omitted).
        region: the region the connection names and the resources live in.

    Subclasses set the class attributes and override the hooks below as their service needs.
    """

    #: Ledger system name.
    system: ClassVar[str] = "aws"
    #: The signing name of the service this emulator models; other services pass through to moto.
    service: ClassVar[str] = ""
    DEFAULT_LIFECYCLE: ClassVar[tuple[str, ...]] = ("RUNNING", "SUCCEEDED")
    submit_operations: ClassVar[frozenset[str]] = frozenset()
    status_operations: ClassVar[frozenset[str]] = frozenset()
    cancel_operations: ClassVar[frozenset[str]] = frozenset()
    #: The request parameter the service itself honours as an idempotency token (``None``: none).
    native_token_param: ClassVar[str | None] = None
    #: The error code of a token replayed with another request.
    token_mismatch_code: ClassVar[str] = "IdempotentParameterMismatchException"
    #: Whether the service itself is moto's (then `start` resets moto and calls
    #: `configure_moto`); an emulator that answers its service itself starts moto only when it
    #: first forwards a call of another service.
    uses_moto: ClassVar[bool] = True
    #: Error codes of injected faults by HTTP status, where the service differs from the AWS default.
    ERROR_CODES: ClassVar[Mapping[int, str]] = {}
    #: List operations answered through moto whose answers follow ``list_lag_reads`` / ``list_lag_seconds``:
    #: ``operation -> (the answer's list member, the entry's id member)``.
    list_operations: ClassVar[Mapping[str, tuple[str, str]]] = {}
    #: List operations moto answers in one page that the emulator pages as the service does (after the list
    #: lag); moto never sees their page parameters.
    paged_operations: ClassVar[Mapping[str, ListPaging]] = {}

    def __init__(
        self,
        ledger: Ledger | None = None,
        lifecycle: Sequence[str] | None = None,
        *,
        faults: FaultPlan | None = None,
        moto: MotoServer | None = None,
        region: str = DEFAULT_REGION,
    ) -> None:
        self._init_jobs(ledger, lifecycle, faults)
        self.region = region
        self.account_id = ACCOUNT_ID
        self._moto = moto
        self._tokens: dict[str, tuple[str, bytes, dict[str, str]]] = {}
        self._page_tokens: dict[str, _PageToken] = {}
        self._models: dict[str, Any] = {}
        #: Seconds a native token deduplicates after its job was created (``None``: while the service
        #: holds the job). A test sets it, or calls `forget_token`, to model a lapsed token.
        self.token_window: float | None = None
        self._routes_cache: dict[str, list[tuple[str, re.Pattern[str], str]]] = {}
        codes = {**_ERROR_CODES, **self.ERROR_CODES}
        self.server = _AwsFront(
            self,
            name=f"{self.system}-emulator",
            faults=self.faults,
            error_body=lambda status, message: _error_body(status, message, codes),
        )
        self._install_contract()

    def _contract(self) -> Any:
        from airflow_durable.testing.contracts._aws import AwsContract

        return AwsContract(self.system, self.service)

    def contract_error(self, status: int, message: str) -> Response:
        code = "ValidationException" if status == 400 else "InternalServerException"
        return Response(status, {"__type": code, "message": message, "Message": message})

    # ------------------------------------------------------------------ start / stop
    @property
    def moto(self) -> MotoServer:
        if self._moto is None:
            self._moto = MotoServer.shared()
        return self._moto

    def start(self) -> AwsEmulator:
        if self.uses_moto:
            self.moto.start()
            self.moto.reset()
            self._page_tokens.clear()  # they page listings of the state moto just forgot
            self.configure_moto()
        self.server.start()
        return self

    # ------------------------------------------------------------------ connection
    def connection(self) -> dict[str, Any]:
        """The Airflow AWS connection fields pointing every service at this emulator."""
        return {
            "conn_type": "aws",
            "login": "testing",  # fake credentials: moto accepts any, nothing real is ever reached
            "password": "testing",
            "extra": {"endpoint_url": self.url, "region_name": self.region},
        }

    def connection_uri(self) -> str:
        """The JSON value for an ``AIRFLOW_CONN_<ID>`` environment variable."""
        return json.dumps(self.connection())

    def install_connection(
        self, environ_setter: EnvironSetter | None = None, conn_id: str = "aws_default"
    ) -> str:
        """Install the connection as ``AIRFLOW_CONN_<CONN_ID>``; returns the variable's name.

        Args:
            environ_setter: a ``(name, value)`` callable such as ``monkeypatch.setenv``, or a mutable
                mapping (default ``os.environ``: inherited by subprocesses started afterwards).
        """
        name = f"AIRFLOW_CONN_{conn_id.upper()}"
        set_environ(environ_setter, {name: self.connection_uri()})
        return name

    def install_fast_botocore(self, environ_setter: EnvironSetter | None = None) -> str:
        """Point ``AWS_DATA_PATH`` at a trimmed copy of botocore's ``endpoints.json``; returns the path.

        Every provider hook opens a new botocore session, which parses the 1.2 MB endpoints file again
        (about 0.3 s a client). With ``endpoint_url`` set no service endpoint from it is ever used, so a
        copy keeping only the partitions (read from the installed botocore) behaves the same, 4x faster.
        """
        path = _trimmed_botocore_data()
        value = os.pathsep.join(p for p in (path, os.environ.get("AWS_DATA_PATH", "")) if p)
        set_environ(environ_setter, {"AWS_DATA_PATH": value})
        return path

    def client(self, service: str | None = None, max_attempts: int | None = None) -> Any:
        """A boto3 client of ``service`` (default: this emulator's) pointed at the emulator, for set-up.

        Args:
            max_attempts: botocore's total attempts per call (its default retries when omitted).
        """
        import boto3
        from botocore.config import Config

        config = Config(retries={"total_max_attempts": max_attempts}) if max_attempts else None
        return boto3.client(
            _MODEL_NAMES.get(service or self.service, service or self.service),
            endpoint_url=self.url,
            region_name=self.region,
            aws_access_key_id="testing",
            aws_secret_access_key="testing",
            config=config,
        )

    # ------------------------------------------------------------------ lifecycles

    # ------------------------------------------------------------------ test controls
    def script(self, job_id: str, states: Sequence[str]) -> None:
        """Replace a job's remaining state script."""
        job = self.job(job_id)
        with self._lock:
            job.lifecycle = Lifecycle(states)
            self._report(job, job.lifecycle.current)

    def set_state(self, job_id: str, state: str) -> None:
        """Force a job into ``state`` for good (ends its script)."""
        job = self.job(job_id)
        with self._lock:
            job.lifecycle.set_state(state)
            self._report(job, state)

    def _report(self, job: AwsJob, state: str) -> None:
        job.reported = state
        self.apply_state(job, state)

    def expire(self, job_id: str) -> None:
        """Forget a job as the service does once its history expires; its token is forgotten with it."""
        job = self.job(job_id)
        with self._lock:
            job.expired = True
            if job.token is not None and self._tokens.get(job.token, (None,))[0] == job.job_id:
                del self._tokens[job.token]
            self.forget(job)

    def backdate(self, job_id: str, seconds: float) -> None:
        """Report a job as created ``seconds`` earlier than it was, as a job another run started long ago."""
        job = self.job(job_id)
        with self._lock:
            job.created_at -= seconds
            self.shift_created(job, dt.timedelta(seconds=seconds))

    # ------------------------------------------------------------------ hooks for subclasses
    def configure_moto(self) -> None:
        """Prepare moto after its reset (e.g. choose a Docker-less backend, create fixtures)."""

    @property
    def local_operations(self) -> Mapping[str, Callable[[AwsCall], Any]]:
        """Operations of `service` this emulator answers itself instead of moto."""
        return {}

    def submission_token(self, call: AwsCall) -> str | None:
        """The token a submission carries, for the ledger (native or in a tag)."""
        if self.native_token_param is None:
            return None
        token = call.params.get(self.native_token_param)
        return None if token is None else str(token)

    def submitted_id(self, call: AwsCall, answer: Any) -> str:
        """The id of the job a successful submission created."""
        raise NotImplementedError

    def status_ids(self, call: AwsCall) -> list[str]:
        """The job ids a status read asks about."""
        raise NotImplementedError

    def cancel_ids(self, call: AwsCall) -> list[str]:
        """The job ids a cancel call targets."""
        raise NotImplementedError

    def apply_state(self, job: AwsJob, state: str) -> None:
        """Make the service report ``state`` for ``job`` (e.g. set it in moto's backend)."""

    def forget(self, job: AwsJob) -> None:
        """Make the service forget ``job`` (e.g. delete it from moto's backend)."""

    def shift_created(self, job: AwsJob, by: dt.timedelta) -> None:
        """Move the creation time the service reports for ``job`` back by ``by`` (see `backdate`)."""

    def rewrite_status(self, call: AwsCall, response: Response) -> Response:
        """Adjust a status read's answer (e.g. a state moto cannot hold); the default changes nothing."""
        return response

    def cancelled_state(self, job: AwsJob) -> str | None:
        """The state a cancel moves an active job to (``None``: leave it to moto)."""
        return None

    def is_listing(self, call: AwsCall) -> bool:
        """Whether a list call lists (rather than reads jobs by id, e.g. ``ListSteps(StepIds)``)."""
        return True

    def job_listed_as(self, entry_id: str) -> AwsJob | None:
        """The job a list entry shows (default: the job of that id)."""
        return self.jobs.get(entry_id)

    def _lag_list(self, call: AwsCall, response: Response) -> Response:
        """Leave out the jobs a lagging list does not show yet (see `ScriptedEmulator.listed`)."""
        member, id_member = self.list_operations[call.operation]
        body = self._answer_json(response)
        if not isinstance(body, dict) or not isinstance(body.get(member), list):
            return response
        verdicts: dict[int, bool] = {}
        kept = []
        for entry in body[member]:
            job = self.job_listed_as(str(entry.get(id_member)))
            if job is not None and id(job) not in verdicts:
                verdicts[id(job)] = self.listed(job)
            if job is None or verdicts[id(job)]:
                kept.append(entry)
        body[member] = kept
        return Response(response.status, headers=dict(response.headers), raw=json.dumps(body).encode())

    def _page_request(self, call: AwsCall, paging: ListPaging) -> tuple[int, _PageToken, Request]:
        """The page a list call asks for (its size, what earlier pages served) and the request moto gets:
        the same without the page parameters, so that moto answers the whole list."""
        request = call.request
        page_params = (paging.size_param, paging.token_param)
        body = dict(request.json) if isinstance(request.json, dict) else None
        query = dict(request.query)

        def param(name: str) -> Any:
            return body[name] if body is not None and body.get(name) is not None else query.get(name)

        def fail(message: str) -> EmulatorError:
            return aws_error(400, paging.error_code, message)

        size: Any = param(paging.size_param)
        if size is None:
            size = paging.default_size
        else:
            try:
                size = int(size)
            except (TypeError, ValueError):
                raise fail(f"{paging.size_param} must be an integer, got {size!r}") from None
            if not 1 <= size <= paging.max_size:
                raise fail(f"{paging.size_param} must be between 1 and {paging.max_size}, got {size}")
        rest = {k: v for k, v in call.params.items() if k not in page_params}
        rest_query = {k: v for k, v in query.items() if k not in page_params}
        key = json.dumps([rest, rest_query], sort_keys=True, default=str)
        token_text = param(paging.token_param)
        if token_text is None:
            token = _PageToken(call.operation, key, frozenset())
        else:
            found = self._page_tokens.get(str(token_text))
            if found is None or found.operation != call.operation:
                raise fail(f"{paging.token_param} {str(token_text)[:64]!r} is not a token this service gave")
            if found.query != key:
                raise fail(f"{paging.token_param} belongs to another {call.operation} request")
            token = found
        if body is not None:
            for name in page_params:
                body.pop(name, None)
        for name in page_params:
            query.pop(name, None)
        forwarded = dataclasses.replace(
            request,
            json=body if body is not None else request.json,
            body=json.dumps(body).encode() if body is not None else request.body,
            query=query,
        )
        return size, token, forwarded

    def _page(self, response: Response, paging: ListPaging, size: int, token: _PageToken) -> Response:
        """One page of the whole list: the first ``size`` entries no earlier page served, in the service's
        order; a new token while more remain. Remembering what was served, rather than an offset, keeps a
        job that leaves the list between pages from moving another one off the next page unseen."""
        body = self._answer_json(response)
        if not isinstance(body, dict) or not isinstance(body.get(paging.member), list):
            return response

        def entry_id(entry: Any) -> str:
            if isinstance(entry, dict) and entry.get(paging.id_member) is not None:
                return str(entry[paging.id_member])
            return json.dumps(entry, sort_keys=True, default=str)

        unserved = [entry for entry in body[paging.member] if entry_id(entry) not in token.served]
        page = unserved[:size]
        body[paging.member] = page
        body.pop(paging.token_param, None)
        if len(unserved) > size:
            text = secrets.token_urlsafe(24)
            served = token.served | {entry_id(entry) for entry in page}
            self._page_tokens[text] = _PageToken(token.operation, token.query, served)
            body[paging.token_param] = text
        return Response(response.status, headers=dict(response.headers), raw=json.dumps(body).encode())

    def is_terminal(self, state: str) -> bool:
        return False

    def not_found(self, call: AwsCall, job_id: str) -> Response | None:
        """The service's answer about an expired job (``None``: forward, the backend forgot it)."""
        return None

    # ------------------------------------------------------------------ dispatch
    def _annotate(self, request: Request) -> None:
        explicit = request.headers.get("X-Emulator-Transport", "").strip().lower()
        if explicit in ("sync", "async"):
            request.transport = explicit  # type: ignore[assignment]
        else:
            agent = request.headers.get("User-Agent", "")
            request.transport = "async" if agent.lower().startswith("aiobotocore") else "sync"
        match = _CREDENTIAL_SERVICE.search(request.headers.get("Authorization", ""))
        service = match.group(1) if match else ""
        operation, uri_params = self._operation(service, request)
        request.path_params = {
            "service": service,
            "operation": operation,
            "http_path": request.path,
            **uri_params,
        }
        # Faults and the request log see the logical path: JSON-protocol calls all POST "/".
        request.path = f"/{service}/{operation}"

    def _operation(self, service: str, request: Request) -> tuple[str, dict[str, str]]:
        target = request.headers.get("X-Amz-Target")
        if target:
            return target.rsplit(".", 1)[-1], {}
        for method, regex, name in self._rest_routes(service):
            if method == request.method and (m := regex.match(request.path)):
                return name, m.groupdict()
        return "Unknown", {}

    def _rest_routes(self, service: str) -> list[tuple[str, re.Pattern[str], str]]:
        if service not in self._routes_cache:
            routes: list[tuple[str, re.Pattern[str], str]] = []
            model = _service_model(service)
            if model is not None:
                for name in model.operation_names:
                    http = model.operation_model(name).http
                    uri = http.get("requestUri", "/").split("?", 1)[0]
                    parts = re.split(r"(\{[A-Za-z0-9_]+\+?\})", uri)
                    regex = "".join(
                        (f"(?P<{p[1:-2]}>.+)" if p.endswith("+}") else f"(?P<{p[1:-1]}>[^/]+)")
                        if p.startswith("{")
                        else re.escape(p)
                        for p in parts
                    )
                    routes.append((http.get("method", "POST"), re.compile(f"^{regex}/?$"), name))
                # Literal URIs first, so "/jobs/list" never loses to "/jobs/{id}".
                routes.sort(key=lambda r: r[1].pattern.count("(?P<"))
            self._routes_cache[service] = routes
        return self._routes_cache[service]

    def _serve(self, request: Request) -> Response:
        service = request.path_params.get("service", "")
        operation = request.path_params.get("operation", "Unknown")
        if service != self.service:
            return self._forward(request)
        params = dict(request.json) if isinstance(request.json, dict) else {}
        params.update(
            {k: v for k, v in request.path_params.items() if k not in ("service", "operation", "http_path")}
        )
        call = AwsCall(service=service, operation=operation, params=params, request=request)
        self._refuse_what_the_model_refuses(call)
        with self._lock:
            if operation in self.status_operations:
                for job_id in self.status_ids(call):
                    job = self.jobs.get(job_id)
                    if job is None:
                        continue
                    if job.expired:
                        answer = self.not_found(call, job_id)
                        if answer is not None:
                            return answer
                        continue
                    job.reads += 1
                    self._report(job, job.lifecycle.read())
            if operation in self.submit_operations:
                replay = self._replay(call)
                if replay is not None:
                    return replay
            paging = self.paged_operations.get(operation)
            if paging is not None:
                page_size, page_token, request = self._page_request(call, paging)
            local = self.local_operations.get(operation)
            if local is not None:
                result = local(call)
                response = (
                    result
                    if isinstance(result, Response)
                    else Response(200, result if result is not None else {})
                )
            else:
                response = self._forward(request)
            if response.status >= 300:
                return response
            if operation in self.list_operations and self.is_listing(call):
                response = self._lag_list(call, response)
            if paging is not None:
                response = self._page(response, paging, page_size, page_token)
            if operation in self.status_operations:
                response = self.rewrite_status(call, response)
            if operation in self.submit_operations:
                self._record_submission(call, response)
            elif operation in self.cancel_operations:
                self._record_cancel(call)
            return response

    def _refuse_what_the_model_refuses(self, call: AwsCall) -> None:
        """Answer ``ValidationException`` where AWS does and moto does not: botocore checks no ``max`` and
        no ``enum`` on the client, so an out-of-range page size or an unknown status reaches the service."""
        if call.service not in self._models:
            self._models[call.service] = _service_model(call.service)
        model = self._models[call.service]
        if model is None:
            return
        found = model_violations(model, call.operation, call.params, call.request.query)
        if found:
            count = f"{len(found)} validation error{'s' if len(found) > 1 else ''} detected: "
            raise aws_error(400, "ValidationException", count + "; ".join(found))

    def _forward(self, request: Request) -> Response:
        headers = {k: v for k, v in request.headers.items() if k.lower() not in ("host", "content-length")}
        path = request.path_params.get("http_path", request.path)
        if request.query:
            from urllib.parse import urlencode

            path = f"{path}?{urlencode(request.query)}"
        status, answer_headers, body = self.moto.request(request.method, path, request.body, headers)
        keep = {
            k: v
            for k, v in answer_headers.items()
            if k.lower() in ("content-type", "x-amzn-requestid", "x-amzn-errortype", "x-amz-request-id")
        }
        return Response(status, headers=keep, raw=body)

    @staticmethod
    def _answer_json(response: Response) -> Any:
        if response.raw is None:
            return response.json
        try:
            return json.loads(response.raw or b"{}")
        except ValueError:
            return {}

    def forget_token(self, token: str) -> None:
        """The token's deduplication window has passed: a resubmission with it creates a new job."""
        with self._lock:
            self._tokens.pop(token, None)

    def _replay(self, call: AwsCall) -> Response | None:
        if self.native_token_param is None:
            return None
        token = call.params.get(self.native_token_param)
        if token is None or str(token) not in self._tokens:
            return None
        job_id, raw, headers = self._tokens[str(token)]
        job = self.jobs.get(job_id)
        if (
            self.token_window is not None
            and job is not None
            and time.time() - job.created_at > self.token_window
        ):
            del self._tokens[str(token)]
            return None
        if job is not None and json.loads(json.dumps(call.params, default=str)) != job.payload:
            # AWS's rule for an idempotency token: the same request again gets the first answer, another
            # request with the same token is refused (the services' models name no error; EC2 and the
            # JSON APIs that do call it IdempotentParameterMismatch).
            raise aws_error(
                400,
                self.token_mismatch_code,
                f"{self.native_token_param} {token!r} was already used with different parameters "
                f"(job {job_id})",
            )
        self.ledger.record(
            self.system,
            call.operation,
            external_id=job_id,
            token=str(token),
            created=False,
            payload=call.params,
        )
        return Response(200, headers=dict(headers), raw=raw)

    def _record_submission(self, call: AwsCall, response: Response) -> None:
        job_id = str(self.submitted_id(call, self._answer_json(response)))
        token = self.submission_token(call)
        states = self._queued_lifecycles.pop(0) if self._queued_lifecycles else self._lifecycle
        job = AwsJob(
            job_id=job_id,
            operation=call.operation,
            payload=json.loads(json.dumps(call.params, default=str)),
            token=token,
            lifecycle=Lifecycle(states),
        )
        self.jobs[job_id] = job
        self.on_created(job, call)
        self._report(job, job.lifecycle.current)
        if self.native_token_param is not None and call.params.get(self.native_token_param) is not None:
            raw = response.raw if response.raw is not None else json.dumps(response.json).encode()
            self._tokens[str(call.params[self.native_token_param])] = (job_id, raw, dict(response.headers))
        self.ledger.record(
            self.system, call.operation, external_id=job_id, token=token, created=True, payload=call.params
        )

    def on_created(self, job: AwsJob, call: AwsCall) -> None:
        """Called once a submission created ``job`` (before its first state is applied)."""

    def strictly_later(self, at: dt.datetime) -> dt.datetime:
        """``at``, or 1 ms after the creation time this emulator handed out last if that is not earlier.

        Subclasses pass every new job's creation time through it (submissions are serialized by the
        emulator's lock), so that creation times as AWS reports them (millisecond resolution) order jobs
        exactly as they were submitted, and lookups that keep the earliest job agree with the ledger.
        """
        last: dt.datetime | None = getattr(self, "_last_created", None)
        if last is not None and at < last + dt.timedelta(milliseconds=1):
            at = last + dt.timedelta(milliseconds=1)
        self._last_created = at
        return at

    def _record_cancel(self, call: AwsCall) -> None:
        for job_id in self.cancel_ids(call):
            job = self.jobs.get(job_id)
            changed = False
            if job is not None:
                job.cancelled = True
                target = self.cancelled_state(job)
                if target is not None and not self.is_terminal(job.reported):
                    job.lifecycle.set_state(target)
                    self._report(job, target)
                    changed = True
            self.ledger.record(
                self.system, call.operation, external_id=job_id, payload={**call.params, "changed": changed}
            )


def new_id() -> str:
    """A fresh lower-case uuid4, the id format of most AWS job APIs."""
    return str(uuid.uuid4())
