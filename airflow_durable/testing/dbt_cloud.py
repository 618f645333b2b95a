"""An offline emulator of the dbt Cloud Administrative API v2, as the provider's ``DbtCloudHook`` calls it.

The hook forces ``https://{conn.host}/`` on both of its paths, so the emulator serves TLS on
127.0.0.1 with a certificate from a throwaway :class:`~airflow_durable.testing.LoopbackCA`. The
connection's ``host`` is ``127.0.0.1:<port>``; ``requests`` (sync path) and ``aiohttp`` (the trigger)
trust the CA through ``REQUESTS_CA_BUNDLE`` / ``SSL_CERT_FILE``, which :meth:`install_connection` sets
together with ``AIRFLOW_CONN_<ID>`` — so a scheduler or triggerer started afterwards reaches it too::

    with DbtCloudEmulator(lifecycle=["QUEUED", "RUNNING", "SUCCESS"]) as dbt:
        dbt.add_job(job_id=42)
        dbt.install_connection(monkeypatch.setenv)       # or os.environ (inherited by subprocesses)
        run = DbtCloudHook().trigger_job_run(job_id=42, cause="nightly").json()["data"]
        dbt.set_state(run["id"], "ERROR")
        assert dbt.ledger.submissions()[0].external_id == run["id"]

States are the API's status names (``QUEUED`` 1, ``STARTING`` 2, ``RUNNING`` 3, ``SUCCESS`` 10,
``ERROR`` 20, ``CANCELLED`` 30) or a number as a string (``"42"``), served as is so a test can check
how a client copes with a status it does not know. Every ``GET runs/{id}/`` returns a run's current
status, then advances its script one step (the last state is sticky); listing runs does not advance.

The API has no idempotency key. The ledger's ``token`` of a run is the airflow-durable token its
``cause`` carries (``afd-…-g<n>``), or ``None``. ``POST jobs/{id}/rerun/`` takes no body: it retries
the job's latest run from the point of failure when that run errored (otherwise it starts a plain
run); the new run's cause names the run it retries and carries no token (an emulator assumption: the
real API's rerun cause is not documented).

This module imports nothing from Airflow.
"""

from __future__ import annotations

import datetime as dt
import itertools
import json
import os
import re
import threading
from collections.abc import Callable, MutableMapping, Sequence
from dataclasses import dataclass
from typing import Any

from airflow_durable.testing._core import (
    EmulatorError,
    FaultPlan,
    Ledger,
    Lifecycle,
    LoopbackServer,
    Request,
    ScriptedEmulator,
)
from airflow_durable.testing._tls import LoopbackCA

__all__ = ["DEFAULT_LIFECYCLE", "STATUS_CODES", "DbtCloudEmulator", "DbtCloudJob", "DbtCloudRun"]

SYSTEM = "dbt_cloud"
STATUS_CODES: dict[str, int] = {
    "QUEUED": 1,
    "STARTING": 2,
    "RUNNING": 3,
    "SUCCESS": 10,
    "ERROR": 20,
    "CANCELLED": 30,
}
_NAMES = {code: name for name, code in STATUS_CODES.items()}
TERMINAL = frozenset({"SUCCESS", "ERROR", "CANCELLED"})
DEFAULT_LIFECYCLE: tuple[str, ...] = ("QUEUED", "STARTING", "RUNNING", "SUCCESS")
#: dbt Cloud's limit on a run's ``cause`` (the provider truncates to it, ``DBT_CAUSE_MAX_LENGTH``).
MAX_CAUSE_LENGTH = 255
MAX_LIMIT = 100
TOKEN_PATTERN = re.compile(r"afd-[0-9a-f]{40}-g[0-9]+")

EnvironSetter = Callable[[str, str], Any] | MutableMapping[str, str]


def status_code(state: str) -> int:
    """The API's integer status for a state name (or a number given as a string)."""
    if state in STATUS_CODES:
        return STATUS_CODES[state]
    try:
        return int(state)
    except ValueError:
        raise ValueError(
            f"not a dbt Cloud run status: {state!r} (use {sorted(STATUS_CODES)} or a number)"
        ) from None


def _error(status: int, message: str) -> EmulatorError:
    return EmulatorError(status, _error_body(status, message))


def _error_body(status: int, message: str) -> dict[str, Any]:
    # dbt Cloud's envelope, used for injected faults and unknown endpoints too.
    return {
        "status": {"code": status, "is_success": False, "user_message": message, "developer_message": ""},
        "data": None,
    }


def _ok(data: Any, extra: dict[str, Any] | None = None) -> dict[str, Any]:
    body: dict[str, Any] = {
        "status": {"code": 200, "is_success": True, "user_message": "Success!", "developer_message": ""},
        "data": data,
    }
    if extra is not None:
        body["extra"] = extra
    return body


@dataclass
class DbtCloudJob:
    id: int
    name: str
    project_id: int
    environment_id: int

    def to_json(self, account_id: int) -> dict[str, Any]:
        return {
            "id": self.id,
            "account_id": account_id,
            "project_id": self.project_id,
            "environment_id": self.environment_id,
            "name": self.name,
            "state": 1,
        }


@dataclass
class DbtCloudRun:
    """One run as the emulator holds it; ``emulator.run(run_id)`` hands it to tests."""

    id: int
    job_id: int
    operation: str  # "jobs/run" or "jobs/rerun"
    cause: str
    payload: dict[str, Any]
    lifecycle: Lifecycle
    created_at: str
    trigger_id: int
    #: The run this one retries from the point of failure (``jobs/rerun`` only).
    rerun_of: int | None = None
    expired: bool = False
    #: True once a cancel asked for this run, even if it was already done.
    cancelled: bool = False
    #: How many ``GET runs/{id}/`` calls this run has answered.
    gets: int = 0
    status_message: str | None = None

    @property
    def state(self) -> str:
        """The current state (reading it does not advance the script)."""
        return self.lifecycle.current

    @property
    def is_terminal(self) -> bool:
        return self.state in TERMINAL

    @property
    def token(self) -> str | None:
        found = TOKEN_PATTERN.search(self.cause or "")
        return found.group(0) if found else None


class DbtCloudEmulator(ScriptedEmulator):
    """The dbt Cloud v2 API on a loopback HTTPS port, with a ledger, scripted runs and faults.

    :param ledger: shared ledger (a fresh one if omitted); every mutating call is recorded.
    :param lifecycle: default state script for new runs (``DEFAULT_LIFECYCLE`` if omitted).
    :param account_id: the account the connection's ``login`` names; other accounts answer 404.
    :param token: the API token the connection carries and the server requires.
    """

    DEFAULT_LIFECYCLE = DEFAULT_LIFECYCLE

    def __init__(
        self,
        ledger: Ledger | None = None,
        lifecycle: Sequence[str] | None = None,
        *,
        account_id: int = 70_001,
        token: str = "dbtc-emulator-token",
        faults: FaultPlan | None = None,
    ) -> None:
        self.ledger = ledger if ledger is not None else Ledger()
        self.faults = faults if faults is not None else FaultPlan()
        self.account_id = account_id
        self.token = token
        self.lifecycle = lifecycle
        self._queued_lifecycles: list[list[str]] = []
        self.jobs: dict[int, DbtCloudJob] = {}
        self.runs: dict[int, DbtCloudRun] = {}
        self._lock = threading.RLock()
        # Distinct id ranges make a confused id (job vs run vs trigger) fail loudly.
        self._run_ids = itertools.count(300_001)
        self._trigger_ids = itertools.count(800_001)
        self._clock = itertools.count(1)
        self.ca: LoopbackCA | None = None
        self.server: LoopbackServer | None = None

    # ------------------------------------------------------------------ lifecycle of the emulator
    def _validate_script(self, states: Sequence[str]) -> list[str]:
        states = super()._validate_script(states)
        for state in states:
            status_code(state)
        return states

    def start(self) -> DbtCloudEmulator:
        if self.server is None:
            self.ca = LoopbackCA()
            self.server = LoopbackServer(
                name="dbt-cloud-emulator",
                faults=self.faults,
                error_body=_error_body,
                ssl_context=self.ca.server_context(),
            )
            self._add_routes(self.server)
        self.server.start()
        return self

    def stop(self) -> None:
        if self.server is not None:
            self.server.stop()
        if self.ca is not None:
            self.ca.cleanup()

    def _server(self) -> LoopbackServer:
        if self.server is None:
            raise RuntimeError("the dbt Cloud emulator is not started")
        return self.server

    @property
    def port(self) -> int:
        return self._server().port

    @property
    def url(self) -> str:
        return self._server().url

    @property
    def host(self) -> str:
        """What goes into the connection's ``host`` (the hook calls ``https://{host}/api/...``)."""
        return f"127.0.0.1:{self.port}"

    # ------------------------------------------------------------------ connection
    def connection(self) -> dict[str, Any]:
        """The Airflow connection fields pointing at this emulator."""
        return {
            "conn_type": "dbt_cloud",
            "host": self.host,
            "login": str(self.account_id),
            "password": self.token,
        }

    def connection_uri(self) -> str:
        """The JSON value for an ``AIRFLOW_CONN_<ID>`` environment variable."""
        return json.dumps(self.connection())

    def client_env(self) -> dict[str, str]:
        """The variables that make ``requests`` and ``aiohttp`` trust the emulator's certificate."""
        if self.ca is None:
            raise RuntimeError("start the dbt Cloud emulator before asking for its client environment")
        return self.ca.client_env()

    def install_connection(
        self, environ_setter: EnvironSetter | None = None, conn_id: str = "dbt_cloud_default"
    ) -> str:
        """Install ``AIRFLOW_CONN_<CONN_ID>`` and the CA variables; returns the connection variable's name.

        :param environ_setter: a ``(name, value)`` callable such as ``monkeypatch.setenv`` (undone at
            test teardown), or a mutable mapping such as ``os.environ`` (the default: permanent for
            this process and inherited by child processes, e.g. a scheduler started afterwards).
        """
        name = f"AIRFLOW_CONN_{conn_id.upper()}"
        target = os.environ if environ_setter is None else environ_setter
        for key, value in {**self.client_env(), name: self.connection_uri()}.items():
            if callable(target):
                target(key, value)
            else:
                target[key] = value
        assert self.ca is not None
        self.ca.trust_in_process()
        return name

    # ------------------------------------------------------------------ test controls
    def add_job(
        self, job_id: int = 42, name: str = "nightly", project_id: int = 11, environment_id: int = 22
    ) -> DbtCloudJob:
        """Define a job; triggering an unknown job answers 404."""
        with self._lock:
            job = DbtCloudJob(int(job_id), name, project_id, environment_id)
            self.jobs[job.id] = job
            return job

    def add_run(
        self, job_id: int, cause: str, states: Sequence[str] | None = None, operation: str = "jobs/run"
    ) -> DbtCloudRun:
        """A run started by someone else (the dbt scheduler, a user, another DAG): not in the ledger."""
        with self._lock:
            return self._create_run(self._job(int(job_id)), operation, cause, {}, states, record=False)

    def run(self, run_id: int) -> DbtCloudRun:
        with self._lock:
            try:
                return self.runs[int(run_id)]
            except KeyError:
                raise KeyError(
                    f"the dbt Cloud emulator has no run {run_id!r}; runs: {sorted(self.runs)}"
                ) from None

    def script(self, run_id: int, states: Sequence[str]) -> None:
        """Replace a run's remaining state script."""
        for state in states:
            status_code(state)
        self.run(run_id).lifecycle = Lifecycle(states)

    def set_state(self, run_id: int, state: str, message: str | None = None) -> None:
        """Force a run into ``state`` for good (ends its script)."""
        status_code(state)
        run = self.run(run_id)
        run.lifecycle.set_state(state)
        run.status_message = message

    def expire(self, run_id: int) -> None:
        """Forget a run: every later call about it answers 404 and lists leave it out."""
        self.run(run_id).expired = True

    def latest_run(self) -> DbtCloudRun:
        with self._lock:
            if not self.runs:
                raise KeyError("the dbt Cloud emulator has no runs yet")
            return self.runs[max(self.runs)]

    # ------------------------------------------------------------------ routing
    def _add_routes(self, server: LoopbackServer) -> None:
        v2 = "/api/v2/accounts"
        routes: list[tuple[str, str, Callable[[Request], Any]]] = [
            # The hook's list_accounts()/test_connection() call the bare base URL.
            ("GET", "/", self._list_accounts),
            ("GET", f"{v2}", self._list_accounts),
            ("GET", f"{v2}/{{account}}", self._get_account),
            ("GET", f"{v2}/{{account}}/jobs", self._list_jobs),
            ("GET", f"{v2}/{{account}}/jobs/{{job}}", self._get_job),
            ("POST", f"{v2}/{{account}}/jobs/{{job}}/run", self._trigger),
            ("POST", f"{v2}/{{account}}/jobs/{{job}}/rerun", self._rerun),
            ("GET", f"{v2}/{{account}}/runs", self._list_runs),
            ("GET", f"{v2}/{{account}}/runs/{{run}}", self._get_run),
            ("POST", f"{v2}/{{account}}/runs/{{run}}/cancel", self._cancel),
        ]
        for method, pattern, handler in routes:
            server.route(method, pattern, self._authenticated(handler))

    def _authenticated(self, handler: Callable[[Request], Any]) -> Callable[[Request], Any]:
        def wrapper(request: Request) -> Any:
            if request.headers.get("Authorization") != f"Token {self.token}":
                raise _error(401, "Invalid token.")
            account = request.path_params.get("account")
            if account is not None and account != str(self.account_id):
                raise _error(404, f"Account {account} not found.")
            with self._lock:
                return handler(request)

        return wrapper

    # ------------------------------------------------------------------ helpers
    def _job(self, job_id: int) -> DbtCloudJob:
        job = self.jobs.get(job_id)
        if job is None:
            raise _error(404, f"Job {job_id} not found.")
        return job

    def _live_run(self, raw_id: str) -> DbtCloudRun:
        try:
            run = self.runs.get(int(raw_id))
        except ValueError:
            raise _error(400, f"Invalid run id {raw_id!r}.") from None
        if run is None or run.expired:
            raise _error(404, f"Run {raw_id} not found.")
        return run

    def _now(self) -> str:
        # Strictly increasing timestamps, so ``order_by=-created_at`` is a total order like the real one.
        base = dt.datetime(2026, 12, 2, tzinfo=dt.timezone.utc)
        return (base + dt.timedelta(milliseconds=next(self._clock))).isoformat()

    def _create_run(
        self,
        job: DbtCloudJob,
        operation: str,
        cause: str,
        payload: dict[str, Any],
        states: Sequence[str] | None = None,
        *,
        record: bool = True,
        rerun_of: int | None = None,
    ) -> DbtCloudRun:
        if states is None:
            states = self._queued_lifecycles.pop(0) if self._queued_lifecycles else self._lifecycle
        run = DbtCloudRun(
            id=next(self._run_ids),
            job_id=job.id,
            operation=operation,
            cause=cause,
            payload=json.loads(json.dumps(payload, default=str)),
            lifecycle=Lifecycle(list(states)),
            created_at=self._now(),
            trigger_id=next(self._trigger_ids),
            rerun_of=rerun_of,
        )
        self.runs[run.id] = run
        if record:
            self.ledger.record(
                SYSTEM, operation, external_id=run.id, token=run.token, created=True, payload=payload
            )
        return run

    def _run_json(self, run: DbtCloudRun, state: str, related: set[str]) -> dict[str, Any]:
        job = self.jobs[run.job_id]
        code = status_code(state)
        name = _NAMES.get(code, str(code))
        body: dict[str, Any] = {
            "id": run.id,
            "trigger_id": run.trigger_id,
            "account_id": self.account_id,
            "project_id": job.project_id,
            "environment_id": job.environment_id,
            "job_definition_id": job.id,
            "job_id": job.id,
            "status": code,
            "status_humanized": name.title(),
            "status_message": run.status_message,
            "in_progress": code in (1, 2, 3),
            "is_complete": code in (10, 20, 30),
            "is_success": code == 10,
            "is_error": code == 20,
            "is_cancelled": code == 30,
            "created_at": run.created_at,
            "href": f"{self.url}/deploy/{self.account_id}/projects/{job.project_id}/runs/{run.id}/",
            "trigger": None,
        }
        if "trigger" in related:
            body["trigger"] = {
                "id": run.trigger_id,
                "cause": run.cause,
                "job_definition_id": job.id,
                "steps_override": run.payload.get("steps_override"),
                "schema_override": run.payload.get("schema_override"),
                "created_at": run.created_at,
            }
        if "run_steps" in related:
            body["run_steps"] = []
        return body

    @staticmethod
    def _related(request: Request) -> set[str]:
        raw = request.params.get("include_related")
        if not raw:
            return set()
        if isinstance(raw, list):
            return {str(r) for r in raw}
        text = str(raw).strip()
        if text.startswith("["):
            try:
                return {str(r) for r in json.loads(text.replace("'", '"'))}
            except ValueError:
                raise _error(400, f"Invalid include_related {raw!r}.") from None
        return {part.strip() for part in text.split(",") if part.strip()}

    @staticmethod
    def _int_list(raw: Any, name: str) -> list[int]:
        text = str(raw).strip()
        try:
            values = json.loads(text) if text.startswith("[") else [int(p) for p in text.split(",")]
            return [int(v) for v in values]
        except (TypeError, ValueError):
            raise _error(400, f"Invalid {name} {raw!r}.") from None

    @staticmethod
    def _int(raw: Any, name: str, default: int) -> int:
        if raw is None or raw == "":
            return default
        try:
            return int(raw)
        except (TypeError, ValueError):
            raise _error(400, f"Invalid {name} {raw!r}.") from None

    # ------------------------------------------------------------------ endpoints
    def _list_accounts(self, request: Request) -> dict[str, Any]:
        return _ok([{"id": self.account_id, "name": "emulated account"}])

    def _get_account(self, request: Request) -> dict[str, Any]:
        return _ok({"id": self.account_id, "name": "emulated account"})

    def _list_jobs(self, request: Request) -> dict[str, Any]:
        jobs = [j.to_json(self.account_id) for j in sorted(self.jobs.values(), key=lambda j: j.id)]
        return _ok(
            jobs,
            {
                "filters": {"limit": MAX_LIMIT, "offset": 0},
                "pagination": {"count": len(jobs), "total_count": len(jobs)},
            },
        )

    def _get_job(self, request: Request) -> dict[str, Any]:
        return _ok(self._job(self._int(request.path_params["job"], "job id", 0)).to_json(self.account_id))

    def _trigger(self, request: Request) -> dict[str, Any]:
        job = self._job(self._int(request.path_params["job"], "job id", 0))
        payload = dict(request.json or {}) if isinstance(request.json, dict) else {}
        cause = payload.get("cause")
        if not isinstance(cause, str) or not cause:
            raise _error(400, "cause is required.")
        if len(cause) > MAX_CAUSE_LENGTH:
            raise _error(400, f"cause must be at most {MAX_CAUSE_LENGTH} characters.")
        run = self._create_run(job, "jobs/run", cause, payload)
        return _ok(self._run_json(run, run.state, set()))

    def _rerun(self, request: Request) -> dict[str, Any]:
        job = self._job(self._int(request.path_params["job"], "job id", 0))
        runs = [r for r in self.runs.values() if r.job_id == job.id and not r.expired]
        latest = max(runs, key=lambda r: r.created_at) if runs else None
        if latest is not None and latest.state == "ERROR":
            run = self._create_run(
                job,
                "jobs/rerun",
                f"Retry of run {latest.id} from the point of failure",
                {},
                rerun_of=latest.id,
            )
        else:
            run = self._create_run(job, "jobs/rerun", "Triggered via API", {})
        return _ok(self._run_json(run, run.state, set()))

    def _list_runs(self, request: Request) -> dict[str, Any]:
        params = request.params
        runs = [r for r in self.runs.values() if not r.expired]
        if params.get("job_definition_id") not in (None, ""):
            job_id = self._int(params["job_definition_id"], "job_definition_id", 0)
            runs = [r for r in runs if r.job_id == job_id]
        if params.get("status") not in (None, ""):
            wanted = {self._int(params["status"], "status", 0)}
            runs = [r for r in runs if status_code(r.state) in wanted]
        if params.get("status__in") not in (None, ""):
            wanted = set(self._int_list(params["status__in"], "status__in"))
            runs = [r for r in runs if status_code(r.state) in wanted]
        order_by = str(params.get("order_by") or "id")
        field_name = order_by.lstrip("-")
        if field_name not in ("id", "created_at", "finished_at", "updated_at"):
            raise _error(400, f"Invalid order_by {order_by!r}.")
        key = (lambda r: r.id) if field_name == "id" else (lambda r: (r.created_at, r.id))
        runs.sort(key=key, reverse=order_by.startswith("-"))
        limit = min(self._int(params.get("limit"), "limit", MAX_LIMIT), MAX_LIMIT)
        offset = self._int(params.get("offset"), "offset", 0)
        page = runs[offset : offset + limit]
        related = self._related(request)
        return _ok(
            [self._run_json(r, r.state, related) for r in page],
            {
                "filters": {"limit": limit, "offset": offset, "account_id": self.account_id},
                "order_by": order_by,
                "pagination": {"count": len(page), "total_count": len(runs)},
            },
        )

    def _get_run(self, request: Request) -> dict[str, Any]:
        run = self._live_run(request.path_params["run"])
        run.gets += 1
        state = run.lifecycle.read()
        return _ok(self._run_json(run, state, self._related(request)))

    def _cancel(self, request: Request) -> dict[str, Any]:
        run = self._live_run(request.path_params["run"])
        run.cancelled = True
        changed = not run.is_terminal
        if changed:
            run.lifecycle.set_state("CANCELLED")
        self.ledger.record(SYSTEM, "runs/cancel", external_id=run.id, payload={"changed": changed})
        return _ok(self._run_json(run, run.state, set()))
