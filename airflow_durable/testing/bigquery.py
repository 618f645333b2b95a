"""An offline emulator of the BigQuery REST API v2 jobs resource, as the google provider calls it.

It is a real HTTP server on 127.0.0.1, reached by the unmodified ``BigQueryHook`` (the
``google-cloud-bigquery`` client over ``requests``) on the operator's sync path *and* on the
``BigQueryInsertJobTrigger`` path: the trigger's ``BigQueryAsyncHook.get_job_status`` runs that same
sync client in a thread (``sync_to_async``), so its polls arrive over ``requests`` too. Only the
async hook's ``cancel_job`` (the trigger's ``on_kill``) uses ``gcloud-aio-bigquery`` over ``aiohttp``;
see `BigQueryEmulator.aio_environ`.

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
import time
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from airflow_durable.testing._core import EmulatorError, EnvironSetter, FaultPlan, Ledger, Request, Response
from airflow_durable.testing._http import HttpEmulator, HttpJob, deprecated_alias

__all__ = ["DEFAULT_LIFECYCLE", "BigQueryEmulator", "BigQueryJob"]

SYSTEM = "bigquery"
DEFAULT_LIFECYCLE: tuple[str, ...] = ("PENDING", "RUNNING", "DONE")
DEFAULT_PROJECT = "emulator-project"
DEFAULT_LOCATION = "US"
#: BigQuery job ids: letters, digits, underscores and dashes, at most 1024 characters.
MAX_JOB_ID_LENGTH = 1024
_JOB_ID_CHARS = frozenset("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_-")
_API = "/bigquery/v2"

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


def split_state(state: str) -> tuple[str, str]:
    """``"DONE:FAILED"`` → ``("DONE", "FAILED")``; ``"RUNNING"`` → ``("RUNNING", "")``."""
    head, _, result = state.partition(":")
    return head, result


@dataclass(kw_only=True, eq=False)
class BigQueryJob(HttpJob):
    """One job; its ``id`` is the job id (``job_id``), its ``payload`` the ``jobs.insert`` body."""

    project: str
    location: str
    configuration: dict[str, Any]

    @property
    def job_id(self) -> str:
        return str(self.id)

    @property
    def created(self) -> int:
        """The API's ``creationTime``: ``created_at`` in epoch milliseconds."""
        return int(self.created_at * 1000)

    error_message = deprecated_alias("message", "error_message")

    @property
    def done(self) -> bool:
        return split_state(self.state)[0] == "DONE"

    @property
    def labels(self) -> dict[str, str]:
        return dict(self.configuration.get("labels") or {})


class BigQueryEmulator(HttpEmulator):
    """The BigQuery jobs API on a loopback port, with a ledger, scripted jobs and faults.

    Args:
        ledger: shared ledger (a fresh one if omitted); every jobs.insert and jobs.cancel is recorded.
        lifecycle: default state script for new jobs (``DEFAULT_LIFECYCLE`` if omitted).
        project: the project the connection names (jobs in any project are accepted).
    """

    system = SYSTEM
    title = "BigQuery"
    default_conn_id = "google_cloud_default"
    DEFAULT_LIFECYCLE = DEFAULT_LIFECYCLE
    CANCELLED_STATE = "DONE:CANCELLED"
    # Anonymous credentials: the google client sends no token at all.
    TOKEN_FORMAT = None
    ROUTES = tuple(
        (method, _API + pattern, handler)
        for method, pattern, handler in (
            ("POST", "/projects/{project}/jobs", "_insert"),
            ("GET", "/projects/{project}/jobs/{job_id}", "_get"),
            ("POST", "/projects/{project}/jobs/{job_id}/cancel", "_cancel"),
            ("GET", "/projects/{project}/queries/{job_id}", "_query_results"),
            ("GET", "/projects/{project}/datasets/{dataset}/tables/{table}/data", "_tabledata"),
        )
    )

    def __init__(
        self,
        ledger: Ledger | None = None,
        lifecycle: Sequence[str] | None = None,
        *,
        project: str = DEFAULT_PROJECT,
        faults: FaultPlan | None = None,
    ) -> None:
        super().__init__(ledger, lifecycle, faults=faults)
        self.project = project
        self._auto_ids = itertools.count(1)

    @staticmethod
    def error_body(status: int, message: str) -> dict[str, Any]:
        # A reason outside google.cloud.bigquery.retry._RETRYABLE_REASONS: the client gives up at once.
        reason = "notFound" if status == 404 else "duplicate" if status == 409 else "emulatorFault"
        return _error_json(status, reason, message)

    def is_terminal(self, state: str) -> bool:
        return split_state(state)[0] == "DONE"

    def _contract(self) -> Any:
        from airflow_durable.testing.contracts._bigquery import BigQueryContract

        return BigQueryContract()

    def contract_error(self, status: int, message: str) -> Response:
        return Response(
            status,
            _error_json(status, "invalid", message) if status == 400 else self.error_body(status, message),
        )

    # ------------------------------------------------------------------ configuration
    def connection(self) -> dict[str, Any]:
        """The Airflow ``google_cloud_platform`` connection: anonymous credentials, our project."""
        return {
            "conn_type": "google_cloud_platform",
            "extra": {"is_anonymous": True, "project": self.project},
        }

    def environ(self, conn_id: str | None = None) -> dict[str, str]:
        """The connection, and ``BIGQUERY_EMULATOR_HOST``, which google-cloud-bigquery takes as its API
        endpoint (a full URL, scheme included)."""
        return {"BIGQUERY_EMULATOR_HOST": self.url, **super().environ(conn_id)}

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
        """Deprecated: `install_connection`."""
        import warnings

        warnings.warn(
            "BigQueryEmulator.install is deprecated, use .install_connection",
            DeprecationWarning,
            stacklevel=2,
        )
        self.install_connection(environ_setter, conn_id)

    # ------------------------------------------------------------------ helpers
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
                    "message": job.message or "Job execution was cancelled: User requested cancellation",
                }
            else:
                error = {
                    "reason": "invalidQuery",
                    "message": job.message or f"Job {job.id} failed (emulated)",
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
            "etag": f"etag-{job.id}-{job.reads}",
            "id": f"{job.project}:{job.location}.{job.id}",
            "selfLink": f"{self.url}{_API}/projects/{job.project}/jobs/{job.id}?location={job.location}",
            "user_email": "emulator@example.com",
            "jobReference": {"projectId": job.project, "jobId": job.id, "location": job.location},
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
        existing = self.jobs.get(job_id)
        if existing is not None and not existing.expired:
            # A caller-chosen job id is BigQuery's idempotency key: the second insert is refused.
            self.ledger.record(
                SYSTEM, "jobs.insert", external_id=job_id, token=job_id, created=False, payload=body
            )
            raise _error(409, "duplicate", f"Already Exists: Job {project}:{location}.{job_id}")
        job = self.add(
            BigQueryJob(
                id=job_id,
                operation="jobs.insert",
                payload=json.loads(json.dumps(body, default=str)),
                token=job_id,
                lifecycle=self.next_lifecycle(),
                created_at=self.created_now(),
                project=project,
                location=location,
                configuration=dict(body.get("configuration") or {}),
            )
        )
        # jobs.insert answers with the job as it is now, without advancing its script.
        return self._job_json(job, job.state)

    def _get(self, request: Request) -> Any:
        job = self._live_job(request)
        return self._job_json(job, self.read(job))

    def _cancel(self, request: Request) -> Any:
        job = self._live_job(request)
        self.cancel(job, "jobs.cancel")
        return {"kind": "bigquery#jobCancelResponse", "job": self._job_json(job, job.state)}

    def _query_results(self, request: Request) -> Any:
        job = self._live_job(request)
        reference = {"projectId": job.project, "jobId": job.id, "location": job.location}
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
