"""An offline emulator of the BigQuery REST API v2 jobs resource, as the google provider calls it.

It is a real HTTP server on 127.0.0.1, reached by the unmodified ``BigQueryHook`` (the
``google-cloud-bigquery`` client over ``requests``) on the operator's sync path *and* on the
``BigQueryInsertJobTrigger`` path: the trigger's ``BigQueryAsyncHook.get_job_status`` runs that same
sync client in a thread (``sync_to_async``), so its polls arrive over ``requests`` too. Only the
async hook's ``cancel_job`` (the trigger's ``on_kill``) uses ``gcloud-aio-bigquery`` over ``aiohttp``;
see :meth:`BigQueryEmulator.aio_environ`.

How the clients find it, without patching anything (works for subprocesses too)::

    with BigQueryEmulator(lifecycle=["PENDING", "RUNNING", "DONE"]) as bq:
        bq.install(monkeypatch.setenv)   # BIGQUERY_EMULATOR_HOST + AIRFLOW_CONN_GOOGLE_CLOUD_DEFAULT
        job = BigQueryHook().insert_job(configuration={"query": {"query": "SELECT 1"}}, job_id="j1",
                                        nowait=True)
        bq.set_state("j1", "DONE:FAILED")
        assert bq.ledger.submissions()[0].token == "j1"

* ``BIGQUERY_EMULATOR_HOST=http://127.0.0.1:<port>`` — the google client takes it as its API endpoint.
* the ``google_cloud_default`` connection with extras ``is_anonymous`` (anonymous credentials: no
  token exchange at all) and ``project``.

States are ``"PENDING"``, ``"RUNNING"``, ``"DONE"`` (succeeded), ``"DONE:FAILED"`` (an
``errorResult``), ``"DONE:CANCELLED"`` (``errorResult.reason == "stopped"``, what BigQuery reports
for a cancelled job). Any other string is served as the job's ``status.state`` as it is. Every
``jobs.get`` returns the job's current state, then advances its script one step; the last state
is sticky.

``jobs.insert`` honours the caller's ``jobReference.jobId``: an id that already exists answers
``409 Already Exists`` (and is recorded in the ledger with ``created=False``), as BigQuery does.
The ledger's ``token`` of an insert is its job id: a caller-chosen job id is BigQuery's
idempotency key.

Injected faults answer with BigQuery's error shape and, by default, a reason the google client does
not retry (``"emulatorFault"``), so one fault is one failed call. Pass a ``body`` with
``"reason": "backendError"`` to exercise the client's own retries instead.

This module imports nothing from Airflow.
"""

from __future__ import annotations

import itertools
import json
import os
import threading
import time
from collections.abc import Callable, MutableMapping, Sequence
from dataclasses import dataclass, field
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

__all__ = ["DEFAULT_LIFECYCLE", "BigQueryEmulator", "BigQueryJob"]

SYSTEM = "bigquery"
DEFAULT_LIFECYCLE: tuple[str, ...] = ("PENDING", "RUNNING", "DONE")
DEFAULT_PROJECT = "emulator-project"
DEFAULT_LOCATION = "US"
#: BigQuery job ids: letters, digits, underscores and dashes, at most 1024 characters.
MAX_JOB_ID_LENGTH = 1024
_JOB_ID_CHARS = frozenset("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_-")
_API = "/bigquery/v2"

EnvironSetter = Callable[[str, str], Any] | MutableMapping[str, str]

_STATUS_NAMES = {
    400: "INVALID_ARGUMENT",
    401: "UNAUTHENTICATED",
    403: "PERMISSION_DENIED",
    404: "NOT_FOUND",
    409: "ALREADY_EXISTS",
    429: "RESOURCE_EXHAUSTED",
    500: "INTERNAL",
    503: "UNAVAILABLE",
}


def _error(status: int, reason: str, message: str) -> EmulatorError:
    return EmulatorError(status, _error_json(status, reason, message))


def _error_json(status: int, reason: str, message: str) -> dict[str, Any]:
    return {
        "error": {
            "code": status,
            "message": message,
            "errors": [{"message": message, "domain": "global", "reason": reason}],
            "status": _STATUS_NAMES.get(status, "UNKNOWN"),
        }
    }


def _fault_body(status: int, message: str) -> dict[str, Any]:
    # A reason outside google.cloud.bigquery.retry._RETRYABLE_REASONS: the client gives up at once.
    reason = "notFound" if status == 404 else "duplicate" if status == 409 else "emulatorFault"
    return _error_json(status, reason, message)


def _now_ms() -> int:
    return int(time.time() * 1000)


def split_state(state: str) -> tuple[str, str]:
    """``"DONE:FAILED"`` → ``("DONE", "FAILED")``; ``"RUNNING"`` → ``("RUNNING", "")``."""
    head, _, result = state.partition(":")
    return head, result


@dataclass
class BigQueryJob:
    """One job as the emulator holds it; ``emulator.job(job_id)`` hands it to tests."""

    job_id: str
    project: str
    location: str
    configuration: dict[str, Any]
    lifecycle: Lifecycle
    created: int = field(default_factory=_now_ms)
    #: True once jobs.cancel asked for this job, even if it was already done.
    cancelled: bool = False
    expired: bool = False
    #: How many jobs.get calls this job has answered.
    gets: int = 0
    error_message: str | None = None

    @property
    def state(self) -> str:
        """The current state string (reading it does not advance the script)."""
        return self.lifecycle.current

    @property
    def done(self) -> bool:
        return split_state(self.state)[0] == "DONE"

    @property
    def labels(self) -> dict[str, str]:
        return dict(self.configuration.get("labels") or {})


class BigQueryEmulator(ScriptedEmulator):
    """The BigQuery jobs API on a loopback port, with a ledger, scripted jobs and faults.

    :param ledger: shared ledger (a fresh one if omitted); every jobs.insert and jobs.cancel is recorded.
    :param lifecycle: default state script for new jobs (``DEFAULT_LIFECYCLE`` if omitted); also
        settable later through :attr:`lifecycle`.
    :param project: the project the connection names (jobs in any project are accepted).
    """

    DEFAULT_LIFECYCLE = DEFAULT_LIFECYCLE

    def __init__(
        self,
        ledger: Ledger | None = None,
        lifecycle: Sequence[str] | None = None,
        *,
        project: str = DEFAULT_PROJECT,
        faults: FaultPlan | None = None,
    ) -> None:
        self.ledger = ledger if ledger is not None else Ledger()
        self.faults = faults if faults is not None else FaultPlan()
        self.project = project
        self.lifecycle = lifecycle
        self._queued_lifecycles: list[list[str]] = []
        self.jobs: dict[str, BigQueryJob] = {}
        self._lock = threading.RLock()
        self._auto_ids = itertools.count(1)
        self.server = LoopbackServer(name="bigquery-emulator", faults=self.faults, error_body=_fault_body)
        self._add_routes()

    # ------------------------------------------------------------------ lifecycle of the emulator

    # ------------------------------------------------------------------ configuration
    def connection(self) -> dict[str, Any]:
        """The Airflow ``google_cloud_platform`` connection: anonymous credentials, our project."""
        return {
            "conn_type": "google_cloud_platform",
            "extra": {"is_anonymous": True, "project": self.project},
        }

    def environ(self, conn_id: str = "google_cloud_default") -> dict[str, str]:
        """Environment variables that point the provider's hooks and trigger here."""
        return {
            # google-cloud-bigquery takes this as its API endpoint (a full URL, scheme included).
            "BIGQUERY_EMULATOR_HOST": self.url,
            f"AIRFLOW_CONN_{conn_id.upper()}": json.dumps(self.connection()),
        }

    def aio_environ(self) -> dict[str, str]:
        """The variable ``gcloud-aio-bigquery`` (the async hook's ``cancel_job``) reads instead.

        gcloud-aio builds ``http://{BIGQUERY_EMULATOR_HOST}/bigquery/v2`` (host:port, no scheme) while
        google-cloud-bigquery wants a full URL in the *same* variable, so one value cannot serve both.
        The failure model never needs the trigger's cancel; a test of it sets this around the call.
        """
        return {"BIGQUERY_EMULATOR_HOST": f"127.0.0.1:{self.port}"}

    def install(
        self, environ_setter: EnvironSetter | None = None, conn_id: str = "google_cloud_default"
    ) -> None:
        """Install :meth:`environ`.

        :param environ_setter: a ``(name, value)`` callable such as ``monkeypatch.setenv`` (undone at
            test teardown), or a mutable mapping such as ``os.environ`` (the default: permanent for
            this process and inherited by child processes, e.g. a scheduler started afterwards).
        """
        target = os.environ if environ_setter is None else environ_setter
        for name, value in self.environ(conn_id).items():
            if callable(target):
                target(name, value)
            else:
                target[name] = value

    # ------------------------------------------------------------------ test controls
    def job(self, job_id: str) -> BigQueryJob:
        with self._lock:
            try:
                return self.jobs[str(job_id)]
            except KeyError:
                raise KeyError(
                    f"the BigQuery emulator has no job {job_id!r}; jobs: {sorted(self.jobs)}"
                ) from None

    #: Conformance-suite spelling (``emulator.run(id).state``), shared with the Databricks emulator.
    run = job

    def script(self, job_id: str, states: Sequence[str]) -> None:
        """Replace a job's remaining state script (it starts from ``states[0]`` at the next read)."""
        self.job(job_id).lifecycle = Lifecycle(states)

    def set_state(self, job_id: str, state: str, message: str | None = None) -> None:
        """Force a job into ``state`` for good (ends its script)."""
        job = self.job(job_id)
        job.lifecycle.set_state(state)
        job.error_message = message

    def expire(self, job_id: str) -> None:
        """Forget a job: every later call about it answers 404, and its id may be inserted again."""
        with self._lock:
            self.job(job_id).expired = True

    def latest_job(self) -> BigQueryJob:
        with self._lock:
            if not self.jobs:
                raise KeyError("the BigQuery emulator has no jobs yet")
            return max(self.jobs.values(), key=lambda j: j.created)

    # ------------------------------------------------------------------ routing
    def _add_routes(self) -> None:
        routes: list[tuple[str, str, Callable[[Request], Any]]] = [
            ("POST", "/projects/{project}/jobs", self._insert),
            ("GET", "/projects/{project}/jobs/{job_id}", self._get),
            ("POST", "/projects/{project}/jobs/{job_id}/cancel", self._cancel),
            ("GET", "/projects/{project}/queries/{job_id}", self._query_results),
            ("GET", "/projects/{project}/datasets/{dataset}/tables/{table}/data", self._tabledata),
        ]
        for method, pattern, handler in routes:
            self.server.route(method, _API + pattern, self._locked(handler))

    def _locked(self, handler: Callable[[Request], Any]) -> Callable[[Request], Any]:
        def wrapper(request: Request) -> Any:
            with self._lock:
                return handler(request)

        return wrapper

    def _live_job(self, request: Request) -> BigQueryJob:
        job_id = request.path_params["job_id"]
        job = self.jobs.get(job_id)
        if job is None or job.expired:
            location = request.query.get("location") or DEFAULT_LOCATION
            raise _error(
                404, "notFound", f"Not found: Job {request.path_params['project']}:{location}.{job_id}"
            )
        return job

    def _job_json(self, job: BigQueryJob, state: str) -> dict[str, Any]:
        head, result = split_state(state)
        status: dict[str, Any] = {"state": head}
        if head == "DONE" and result:
            if result == "CANCELLED":
                error = {
                    "reason": "stopped",
                    "message": job.error_message
                    or "Job execution was cancelled: User requested cancellation",
                }
            else:
                error = {
                    "reason": "invalidQuery",
                    "message": job.error_message or f"Job {job.job_id} failed (emulated)",
                }
            status["errorResult"] = error
            status["errors"] = [error]
        statistics: dict[str, Any] = {"creationTime": str(job.created)}
        if head in ("RUNNING", "DONE"):
            statistics["startTime"] = str(job.created + 1)
        if head == "DONE":
            statistics["endTime"] = str(job.created + 2)
        config = dict(job.configuration)
        config.setdefault(
            "jobType",
            next((k.upper() for k in ("query", "load", "copy", "extract") if k in config), "UNKNOWN"),
        )
        return {
            "kind": "bigquery#job",
            "etag": f"etag-{job.job_id}-{job.gets}",
            "id": f"{job.project}:{job.location}.{job.job_id}",
            "selfLink": f"{self.url}{_API}/projects/{job.project}/jobs/{job.job_id}?location={job.location}",
            "user_email": "emulator@example.com",
            "jobReference": {"projectId": job.project, "jobId": job.job_id, "location": job.location},
            "configuration": config,
            "status": status,
            "statistics": statistics,
        }

    # ------------------------------------------------------------------ endpoints
    def _insert(self, request: Request) -> Any:
        body = dict(request.json or {})
        project = request.path_params["project"]
        reference = dict(body.get("jobReference") or {})
        job_id = str(reference.get("jobId") or f"emulator_job_{next(self._auto_ids)}")
        location = str(reference.get("location") or DEFAULT_LOCATION)
        if len(job_id) > MAX_JOB_ID_LENGTH or not set(job_id) <= _JOB_ID_CHARS:
            raise _error(
                400,
                "invalid",
                f'Invalid job ID "{job_id}". Job IDs must be alphanumeric (plus underscores and dashes) '
                "and must be at most 1024 characters long.",
            )
        configuration = dict(body.get("configuration") or {})
        existing = self.jobs.get(job_id)
        if existing is not None and not existing.expired:
            self.ledger.record(
                SYSTEM, "jobs.insert", external_id=job_id, token=job_id, created=False, payload=body
            )
            raise _error(409, "duplicate", f"Already Exists: Job {project}:{location}.{job_id}")
        script = self._queued_lifecycles.pop(0) if self._queued_lifecycles else self._lifecycle
        job = BigQueryJob(
            job_id=job_id,
            project=project,
            location=location,
            configuration=configuration,
            lifecycle=Lifecycle(script),
        )
        self.jobs[job_id] = job
        self.ledger.record(
            SYSTEM, "jobs.insert", external_id=job_id, token=job_id, created=True, payload=body
        )
        # jobs.insert answers with the job as it is now, without advancing its script.
        return self._job_json(job, job.state)

    def _get(self, request: Request) -> Any:
        job = self._live_job(request)
        job.gets += 1
        return self._job_json(job, job.lifecycle.read())

    def _cancel(self, request: Request) -> Any:
        job = self._live_job(request)
        job.cancelled = True
        changed = not job.done
        if changed:
            job.lifecycle.set_state("DONE:CANCELLED")
            job.error_message = None
        self.ledger.record(SYSTEM, "jobs.cancel", external_id=job.job_id, payload={"changed": changed})
        return {"kind": "bigquery#jobCancelResponse", "job": self._job_json(job, job.state)}

    def _query_results(self, request: Request) -> Any:
        job = self._live_job(request)
        reference = {"projectId": job.project, "jobId": job.job_id, "location": job.location}
        if not job.done:
            # The real call long-polls up to timeoutMs; a short pause keeps the client's loop from spinning.
            time.sleep(0.02)
            return {
                "kind": "bigquery#getQueryResultsResponse",
                "jobReference": reference,
                "jobComplete": False,
            }
        return {
            "kind": "bigquery#getQueryResultsResponse",
            "jobReference": reference,
            "jobComplete": True,
            "schema": {"fields": []},
            "totalRows": "0",
            "rows": [],
            "cacheHit": False,
        }

    def _tabledata(self, request: Request) -> Any:
        return {"kind": "bigquery#tableDataList", "totalRows": "0", "rows": []}
