"""An offline emulator of the dbt Cloud Administrative API v2, as the provider's ``DbtCloudHook`` calls it.

The hook forces ``https://{conn.host}/`` on both of its paths, so the emulator serves TLS on
127.0.0.1 with a certificate from a throwaway `LoopbackCA`. The
connection's ``host`` is ``127.0.0.1:<port>``; ``requests`` (sync path) and ``aiohttp`` (the trigger)
trust the CA through ``REQUESTS_CA_BUNDLE`` / ``SSL_CERT_FILE``, which `install_connection` sets
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
import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from airflow_durable.testing._core import EmulatorError, FaultPlan, Ledger, Request
from airflow_durable.testing._http import HttpEmulator, HttpJob, deprecated_alias

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
_V2 = "/api/v2/accounts"


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


def _error_body(status: int, message: str) -> dict[str, Any]:
    # dbt Cloud's envelope, used for injected faults and unknown endpoints too.
    return {
        "status": {"code": status, "is_success": False, "user_message": message, "developer_message": ""},
        "data": None,
    }


def _error(status: int, message: str) -> EmulatorError:
    return EmulatorError(status, _error_body(status, message))


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
    """A job definition: what a run is a run of (not an external job the ledger counts)."""

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


@dataclass(kw_only=True, eq=False)
class DbtCloudRun(HttpJob):
    """One run; its ``job_id`` is the dbt Cloud job it is a run of."""

    job_id: int
    cause: str
    trigger_id: int
    #: The run this one retries from the point of failure (``jobs/rerun`` only).
    rerun_of: int | None = None

    status_message = deprecated_alias("message", "status_message")

    @property
    def created_at_iso(self) -> str:
        """The API's ``created_at``: ``created_at`` as an ISO timestamp ."""
        return dt.datetime.fromtimestamp(self.created_at, dt.UTC).isoformat(timespec="microseconds")

    @property
    def is_terminal(self) -> bool:
        return self.state in TERMINAL


class DbtCloudEmulator(HttpEmulator):
    """The dbt Cloud v2 API on a loopback HTTPS port, with a ledger, scripted runs and faults.

    ``jobs`` holds the runs (the external jobs, as in every emulator); the dbt Cloud jobs they are
    runs of are in ``job_definitions`` (`add_job`).

    Args:
        ledger: shared ledger (a fresh one if omitted); every mutating call is recorded.
        lifecycle: default state script for new runs (``DEFAULT_LIFECYCLE`` if omitted).
        account_id: the account the connection's ``login`` names; other accounts answer 404.
        token: the API token the connection carries and the server requires.
    """

    system = SYSTEM
    title = "dbt Cloud"
    JOB_NOUN = "run"
    default_conn_id = "dbt_cloud_default"
    DEFAULT_LIFECYCLE = DEFAULT_LIFECYCLE
    DEFAULT_TOKEN = "dbtc-emulator-token"
    TERMINAL_STATES = TERMINAL
    TOKEN_FORMAT = "Token {token}"
    TLS_HOSTNAMES = ("127.0.0.1", "localhost")
    ROUTES = (
        # The hook's list_accounts()/test_connection() call the bare base URL.
        ("GET", "/", "_list_accounts"),
        ("GET", _V2, "_list_accounts"),
        ("GET", f"{_V2}/{{account}}", "_get_account"),
        ("GET", f"{_V2}/{{account}}/jobs", "_list_jobs"),
        ("GET", f"{_V2}/{{account}}/jobs/{{job}}", "_get_job"),
        ("POST", f"{_V2}/{{account}}/jobs/{{job}}/run", "_trigger"),
        ("POST", f"{_V2}/{{account}}/jobs/{{job}}/rerun", "_rerun"),
        ("GET", f"{_V2}/{{account}}/runs", "_list_runs"),
        ("GET", f"{_V2}/{{account}}/runs/{{run}}", "_get_run"),
        ("POST", f"{_V2}/{{account}}/runs/{{run}}/cancel", "_cancel"),
    )

    def __init__(
        self,
        ledger: Ledger | None = None,
        lifecycle: Sequence[str] | None = None,
        *,
        account_id: int = 70_001,
        token: str | None = None,
        faults: FaultPlan | None = None,
    ) -> None:
        super().__init__(ledger, lifecycle, faults=faults, token=token)
        self.account_id = account_id
        self.job_definitions: dict[int, DbtCloudJob] = {}
        # Distinct id ranges make a confused id (job vs run vs trigger) fail loudly.
        self._run_ids = itertools.count(300_001)
        self._trigger_ids = itertools.count(800_001)

    @staticmethod
    def error_body(status: int, message: str) -> dict[str, Any]:
        return _error_body(status, message)

    def _contract(self) -> Any:
        from airflow_durable.testing.contracts._openapi import OpenApiContract

        return OpenApiContract(SYSTEM, "dbt_cloud_api_v2.json")

    def validate_state(self, state: str) -> str:
        status_code(state)
        return state

    def key(self, job_id: Any) -> int:
        return int(job_id)

    def not_found(self, job_id: Any) -> EmulatorError:
        return _error(404, f"Run {job_id} not found.")

    def _guarded(self, handler: Any) -> Any:
        guarded = super()._guarded(handler)

        def wrapper(request: Request) -> Any:
            if not self.authorized(request):
                raise _error(401, "Invalid token.")
            account = request.path_params.get("account")
            if account is not None and account != str(self.account_id):
                raise _error(404, f"Account {account} not found.")
            return guarded(request)

        return wrapper

    runs = deprecated_alias("jobs", "runs")

    @property
    def host(self) -> str:
        """What goes into the connection's ``host`` (the hook calls ``https://{host}/api/...``)."""
        return f"127.0.0.1:{self.port}"

    def connection(self) -> dict[str, Any]:
        return {
            "conn_type": "dbt_cloud",
            "host": self.host,
            "login": str(self.account_id),
            "password": self.token,
        }

    def client_env(self) -> dict[str, str]:
        """Deprecated: the CA variables are part of `environ`."""
        import warnings

        warnings.warn(
            "DbtCloudEmulator.client_env is deprecated, use .environ", DeprecationWarning, stacklevel=2
        )
        assert self.ca is not None
        return self.ca.client_env()

    # ------------------------------------------------------------------ test controls
    def add_job(
        self, job_id: int = 42, name: str = "nightly", project_id: int = 11, environment_id: int = 22
    ) -> DbtCloudJob:
        """Define a job; triggering an unknown job answers 404."""
        with self._lock:
            job = DbtCloudJob(int(job_id), name, project_id, environment_id)
            self.job_definitions[job.id] = job
            return job

    def add_run(
        self, job_id: int, cause: str, states: Sequence[str] | None = None, operation: str = "jobs/run"
    ) -> DbtCloudRun:
        """A run started by someone else (the dbt scheduler, a user, another DAG): not in the ledger."""
        with self._lock:
            return self._create_run(self._job(int(job_id)), operation, cause, {}, states, record=False)

    # ------------------------------------------------------------------ helpers
    def _job(self, job_id: int) -> DbtCloudJob:
        job = self.job_definitions.get(job_id)
        if job is None:
            raise _error(404, f"Job {job_id} not found.")
        return job

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
        token = TOKEN_PATTERN.search(cause or "")
        run = DbtCloudRun(
            id=next(self._run_ids),
            job_id=job.id,
            operation=operation,
            cause=cause,
            payload=json.loads(json.dumps(payload, default=str)),
            # The API has no idempotency key: the token is the one the cause carries, for the ledger.
            token=token.group(0) if token else None,
            lifecycle=self.next_lifecycle(states),
            created_at=self.created_now(),
            trigger_id=next(self._trigger_ids),
            rerun_of=rerun_of,
        )
        self.jobs[run.id] = run  # not in the token index: the service never deduplicates
        if record:
            self.ledger.record(
                SYSTEM, operation, external_id=run.id, token=run.token, created=True, payload=payload
            )
        return run

    def _run_json(self, run: DbtCloudRun, state: str, related: set[str]) -> dict[str, Any]:
        job = self.job_definitions[run.job_id]
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
            "status_message": run.message,
            "in_progress": code in (1, 2, 3),
            "is_complete": code in (10, 20, 30),
            "is_success": code == 10,
            "is_error": code == 20,
            "is_cancelled": code == 30,
            "created_at": run.created_at_iso,
            # RunResponse requires updated_at (openapi-v2.yaml); the emulator has no later update to tell.
            "updated_at": run.created_at_iso,
            "href": f"{self.url}/deploy/{self.account_id}/projects/{job.project_id}/runs/{run.id}/",
            "trigger": None,
        }
        if "trigger" in related:
            # RunTrigger (openapi-v2.yaml) has no id or created_at of its own: the run carries trigger_id.
            body["trigger"] = {
                "cause": run.cause,
                "job_definition_id": job.id,
                "steps_override": run.payload.get("steps_override"),
                "schema_override": run.payload.get("schema_override"),
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
        jobs = [j.to_json(self.account_id) for j in sorted(self.job_definitions.values(), key=lambda j: j.id)]
        return _ok(
            jobs,
            {
                "filters": {"limit": MAX_LIMIT, "offset": 0},
                "order_by": "id",  # Extra requires it (openapi-v2.yaml)
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
        runs = [r for r in self.jobs.values() if r.job_id == job.id and not r.expired]
        latest = max(runs, key=lambda r: (r.created_at, r.id)) if runs else None
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
        runs = [r for r in self.jobs.values() if not r.expired]
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
        # The API's created_at has millisecond resolution: runs created in the same one tie, then by id.
        key = (lambda r: r.id) if field_name == "id" else (lambda r: (r.created_at_iso, r.id))
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
        run = self.live(request.path_params["run"])
        return _ok(self._run_json(run, self.read(run), self._related(request)))

    def _cancel(self, request: Request) -> dict[str, Any]:
        run = self.live(request.path_params["run"])
        self.cancel(run, "runs/cancel")
        return _ok(self._run_json(run, run.state, set()))
