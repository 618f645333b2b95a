"""An offline emulator of the Databricks Jobs API 2.2, as the provider's ``DatabricksHook`` calls it.

It is a real HTTP server on 127.0.0.1, so the unmodified hook reaches it through its sync path
(``requests``) and its trigger's async path (``aiohttp``), in this process or another one::

    with DatabricksEmulator(lifecycle=["PENDING", "RUNNING", "TERMINATED:SUCCESS"]) as dbx:
        dbx.install_connection(monkeypatch.setenv)        # or os.environ, or any mapping
        run_id = DatabricksHook().submit_run({"run_name": "x", "idempotency_token": "t1"})
        dbx.set_state(run_id, "TERMINATED:FAILED")
        assert dbx.ledger.submissions()[0].external_id == run_id

States are ``"LIFE_CYCLE"`` or ``"LIFE_CYCLE:RESULT"`` strings (``"TERMINATED:CANCELED"``,
``"INTERNAL_ERROR:FAILED"``, ``"SKIPPED"``...). Every ``runs/get`` of a run returns its current state
and then advances its script one step; the last state is sticky. Unknown life-cycle states are
served as they are, so a test can check how a client copes with a state it has never heard of.

This module imports nothing from Airflow.
"""

from __future__ import annotations

import base64
import itertools
import json
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from airflow_durable.testing._core import EmulatorError, Lifecycle, Request
from airflow_durable.testing._http import HttpEmulator, HttpJob, deprecated_alias

__all__ = ["DEFAULT_LIFECYCLE", "DatabricksEmulator", "DatabricksJob", "DatabricksRun"]

SYSTEM = "databricks"
DEFAULT_LIFECYCLE: tuple[str, ...] = ("PENDING", "RUNNING", "TERMINATED:SUCCESS")
TERMINAL_LIFE_CYCLE_STATES = frozenset({"TERMINATED", "SKIPPED", "INTERNAL_ERROR"})
#: Databricks rejects longer idempotency tokens (Jobs API docs: "at most 64 characters").
MAX_TOKEN_LENGTH = 64
#: runs/list: "limit ... must be greater than 0 and less than 25" (JobsAPI.list_runs); 0 means the maximum.
MAX_LIST_LIMIT = 25
DEFAULT_LIST_LIMIT = 20
_ERROR_CODES = {
    400: "INVALID_PARAMETER_VALUE",
    401: "UNAUTHENTICATED",
    403: "PERMISSION_DENIED",
    404: "ENDPOINT_NOT_FOUND",
    409: "RESOURCE_CONFLICT",
    429: "REQUEST_LIMIT_EXCEEDED",
    503: "TEMPORARILY_UNAVAILABLE",
}
_ENDPOINTS = (
    ("POST", "jobs/runs/submit", "_submit"),
    ("POST", "jobs/run-now", "_run_now"),
    ("GET", "jobs/runs/get", "_get"),
    ("GET", "jobs/runs/list", "_list_runs"),
    ("GET", "jobs/runs/get-output", "_get_output"),
    ("POST", "jobs/runs/cancel", "_cancel"),
    ("POST", "jobs/runs/cancel-all", "_cancel_all"),
    ("POST", "jobs/runs/repair", "_repair"),
    ("GET", "jobs/list", "_list_jobs"),
    ("GET", "jobs/get", "_get_job"),
    ("POST", "jobs/create", "_create_job"),
    ("POST", "jobs/update", "_update_job"),
)


_RUN_TYPES = ("JOB_RUN", "WORKFLOW_RUN", "SUBMIT_RUN")


def _list_order(run: DatabricksRun) -> tuple[int, int]:
    """runs/list's order, newest first when reversed: start time, then run id."""
    return (run.start_time, run.run_id)


def _page_token(direction: str, run: DatabricksRun) -> str:
    text = f"{direction}:{run.start_time}:{run.run_id}"
    return base64.urlsafe_b64encode(text.encode()).decode().rstrip("=")


def _read_page_token(token: str) -> tuple[str, tuple[int, int]]:
    try:
        text = base64.urlsafe_b64decode(token + "=" * (-len(token) % 4)).decode()
        direction, start, run_id = text.split(":")
        if direction not in ("next", "prev"):
            raise ValueError(direction)
        return direction, (int(start), int(run_id))
    except ValueError:  # binascii.Error and UnicodeDecodeError are ValueErrors
        raise _error(400, "INVALID_PARAMETER_VALUE", f"Invalid page_token: {token!r}") from None


def split_state(state: str) -> tuple[str, str]:
    """``"TERMINATED:SUCCESS"`` → ``("TERMINATED", "SUCCESS")``; ``"RUNNING"`` → ``("RUNNING", "")``."""
    life_cycle, _, result = state.partition(":")
    return life_cycle, result


def is_terminal(state: str) -> bool:
    return split_state(state)[0] in TERMINAL_LIFE_CYCLE_STATES


def _error(status: int, error_code: str, message: str) -> EmulatorError:
    return EmulatorError(status, {"error_code": error_code, "message": message})


def _ms(seconds: float) -> int:
    return int(seconds * 1000)


@dataclass
class DatabricksJob:
    """A job definition (for ``run-now`` and ``jobs/list``): not an external job the ledger counts."""

    job_id: int
    name: str
    settings: dict[str, Any]
    created_time: int = field(default_factory=lambda: _ms(time.time()))
    runs: int = 0  # how many runs it has had: the next run's ``number_in_job`` is runs + 1

    def to_json(self) -> dict[str, Any]:
        return {"job_id": self.job_id, "created_time": self.created_time, "settings": self.settings}


@dataclass(kw_only=True, eq=False)
class DatabricksRun(HttpJob):
    """One run; its ``id`` is the ``run_id``, its ``job_id`` the Databricks job it belongs to."""

    job_id: int
    number_in_job: int
    run_name: str
    task_keys: list[str]
    task_run_ids: list[int]
    #: Repairs, oldest first: ``{"id", "payload", "start_time"}``.
    repairs: list[dict[str, Any]] = field(default_factory=list)
    #: Overrides the default ``runs/get-output`` answer when set.
    output: dict[str, Any] | None = None
    #: Deleted with `DatabricksEmulator.delete` (its token then answers an error, unlike an expired run).
    deleted: bool = False

    @property
    def run_id(self) -> int:
        return int(self.id)

    @property
    def start_time(self) -> int:
        """The API's ``start_time``: ``created_at`` in epoch milliseconds."""
        return _ms(self.created_at)

    state_message = deprecated_alias("message", "state_message")

    @property
    def life_cycle_state(self) -> str:
        return split_state(self.state)[0]

    @property
    def result_state(self) -> str:
        return split_state(self.state)[1]

    @property
    def is_terminal(self) -> bool:
        return is_terminal(self.state)


class DatabricksEmulator(HttpEmulator):
    """The Databricks Jobs API 2.2 on a loopback port, with a ledger, scripted runs and faults.

    ``jobs`` holds the runs (the external jobs, as in every emulator); the job definitions that
    ``run-now`` starts are in ``job_definitions``.

    Args:
        ledger: shared ledger (a fresh one if omitted); every mutating call is recorded.
        lifecycle: default state script for new runs (``DEFAULT_LIFECYCLE`` if omitted).
        token: the bearer token the connection carries and the server requires.
    """

    system = SYSTEM
    title = "Databricks"
    JOB_NOUN = "run"
    default_conn_id = "databricks_default"
    DEFAULT_LIFECYCLE = DEFAULT_LIFECYCLE
    DEFAULT_TOKEN = "dapi-emulator-token"
    CANCELLED_STATE = "TERMINATED:CANCELED"
    # Accept 2.1 and 2.0 paths too: older provider versions call them, the semantics match.
    ROUTES = tuple(
        (method, f"/api/{version}/{endpoint}", handler)
        for method, endpoint, handler in _ENDPOINTS
        for version in ("2.2", "2.1", "2.0")
    )

    def _init_service(self) -> None:
        self.job_definitions: dict[int, DatabricksJob] = {}
        self._task_runs: dict[int, tuple[int, str]] = {}  # task run id -> (parent run id, task_key)
        # Distinct, recognisable id ranges make a confused id (job vs run vs task run) fail loudly.
        self._run_ids = itertools.count(1001)
        self._task_run_ids = itertools.count(500_001)
        self._repair_ids = itertools.count(9001)
        self._job_ids = itertools.count(900_001)

    @staticmethod
    def error_body(status: int, message: str) -> dict[str, str]:
        return {"error_code": _ERROR_CODES.get(status, "INTERNAL_ERROR"), "message": message}

    def _contract(self) -> Any:
        from airflow_durable.testing.contracts._databricks import DatabricksContract

        return DatabricksContract()

    def error(self, status: int, message: str) -> EmulatorError:
        return _error(status, "UNAUTHENTICATED" if status == 401 else "INVALID_PARAMETER_VALUE", message)

    def not_found(self, job_id: Any) -> EmulatorError:
        return _error(404, "RESOURCE_DOES_NOT_EXIST", f"Run {job_id} does not exist.")

    def is_terminal(self, state: str) -> bool:
        return is_terminal(state)

    def key(self, job_id: Any) -> int:
        return int(job_id)

    runs = deprecated_alias("jobs", "runs")

    def connection(self) -> dict[str, Any]:
        return {
            "conn_type": "databricks",
            "host": "127.0.0.1",
            "port": self.port,
            "schema": "http",  # the hook builds f"{schema or 'https'}://{host}:{port}/api/..."
            "password": self.token,
        }

    # ------------------------------------------------------------------ test controls
    def add_job(
        self, job_id: int | None = None, name: str = "job", tasks: Sequence[str] | None = None
    ) -> DatabricksJob:
        """Define a job (for run-now, jobs/list). Re-adding an existing id replaces its settings."""
        with self._lock:
            job_id = int(job_id) if job_id is not None else next(self._job_ids)
            task_keys = list(tasks or [name])
            settings = {"name": name, "tasks": [{"task_key": key} for key in task_keys]}
            old = self.job_definitions.get(job_id)
            job = DatabricksJob(job_id=job_id, name=name, settings=settings, runs=old.runs if old else 0)
            self.job_definitions[job_id] = job
            return job

    # ------------------------------------------------------------------ helpers
    @staticmethod
    def _int_param(request: Request, name: str) -> int:
        value = request.params.get(name)
        if value is None or value == "":
            raise _error(400, "INVALID_PARAMETER_VALUE", f"Missing required field: {name}")
        try:
            return int(value)
        except (TypeError, ValueError):
            raise _error(400, "INVALID_PARAMETER_VALUE", f"Invalid value for {name}: {value!r}") from None

    def _job(self, job_id: int) -> DatabricksJob:
        job = self.job_definitions.get(job_id)
        if job is None:
            # What Databricks answers for run-now with an unknown job.
            raise _error(400, "INVALID_PARAMETER_VALUE", f"Job {job_id} does not exist.")
        return job

    def _check_token(self, payload: dict[str, Any]) -> str | None:
        token = payload.get("idempotency_token")
        if token is None:
            return None
        token = str(token)
        if len(token) > MAX_TOKEN_LENGTH:
            raise _error(
                400,
                "INVALID_PARAMETER_VALUE",
                f"Idempotency token must be at most {MAX_TOKEN_LENGTH} characters, got {len(token)}.",
            )
        return token

    def delete(self, run_ids: Any) -> None:
        """Delete runs (``runs/delete``): every later call about them answers 404, and a resubmission with
        a deleted run's idempotency token answers an error, as the Jobs API documents ("If a run with the
        provided token is deleted, an error is returned"; the error's code is not documented)."""
        with self._lock:
            for run in self._targets(run_ids):
                run.expired = True
                run.deleted = True

    def _create_run(
        self, operation: str, payload: dict[str, Any], job: DatabricksJob | None
    ) -> dict[str, Any]:
        token = self._check_token(payload)
        known = self.jobs.get(self._tokens[token]) if token is not None and token in self._tokens else None
        if known is not None and getattr(known, "deleted", False):
            raise _error(
                400,
                "INVALID_PARAMETER_VALUE",
                f"Run {known.id} with idempotency token {token!r} was deleted.",
            )
        existing = self.replay(token, operation, payload)
        if existing is not None:
            return {"run_id": existing.id, "number_in_job": existing.number_in_job}
        if job is None:
            # A one-time run still gets a job id in runs/get; operators push it as the ``job_id`` XCom.
            job = DatabricksJob(
                job_id=next(self._job_ids), name=str(payload.get("run_name") or "Untitled"), settings={}
            )
            task_keys = [t.get("task_key", f"task_{i}") for i, t in enumerate(payload.get("tasks") or [])]
        else:
            task_keys = [t["task_key"] for t in job.settings.get("tasks", [])]
        task_keys = task_keys or [str(payload.get("run_name") or job.name or "main")]
        job.runs += 1
        run = DatabricksRun(
            id=next(self._run_ids),
            job_id=job.job_id,
            operation=operation,
            payload=json.loads(json.dumps(payload, default=str)),
            token=token,
            lifecycle=self.next_lifecycle(),
            created_at=self.created_now(),
            number_in_job=job.runs,
            run_name=str(payload.get("run_name") or job.name),
            task_keys=task_keys,
            task_run_ids=[next(self._task_run_ids) for _ in task_keys],
        )
        for task_run_id, key in zip(run.task_run_ids, task_keys, strict=True):
            self._task_runs[task_run_id] = (run.id, key)
        self.add(run)
        return {"run_id": run.id, "number_in_job": run.number_in_job}

    def _state_json(self, run: DatabricksRun, state: str) -> dict[str, Any]:
        life_cycle, result = split_state(state)
        message = run.message
        if message is None:
            message = {
                "FAILED": "Task failed with error.",
                "CANCELED": "Run cancelled.",
                "TIMEDOUT": "Run timed out.",
            }.get(result, "")
        out: dict[str, Any] = {"life_cycle_state": life_cycle, "state_message": message}
        if result:
            out["result_state"] = result
        return out

    def _run_json(self, run: DatabricksRun, state: str, include_history: bool) -> dict[str, Any]:
        state_json = self._state_json(run, state)
        tasks = [
            {
                "run_id": task_run_id,
                "task_key": key,
                "state": state_json,
                "attempt_number": 0,
                "start_time": run.start_time,
            }
            for task_run_id, key in zip(run.task_run_ids, run.task_keys, strict=True)
        ]
        body: dict[str, Any] = {
            "job_id": run.job_id,
            "run_id": run.id,
            "number_in_job": run.number_in_job,
            "original_attempt_run_id": run.id,
            "run_name": run.run_name,
            "run_type": "JOB_RUN" if run.operation == "run-now" else "SUBMIT_RUN",
            "run_page_url": f"{self.url}/?o=0#job/{run.job_id}/run/{run.id}",
            "start_time": run.start_time,
            "creator_user_name": "emulator@example.com",
            "state": state_json,
            "tasks": tasks,
        }
        # No idempotency_token: a Run (runs/get) does not report the token it was submitted with.
        if include_history:
            history = [{"type": "ORIGINAL", "id": run.id, "start_time": run.start_time}]
            history += [{"type": "REPAIR", "id": r["id"], "start_time": r["start_time"]} for r in run.repairs]
            body["repair_history"] = history
        return body

    # ------------------------------------------------------------------ endpoints
    def _submit(self, request: Request) -> dict[str, Any]:
        answer = self._create_run("runs/submit", dict(request.json or {}), job=None)
        # A one-time run answers its run id only (SubmitRunResponse); run-now adds number_in_job.
        return {"run_id": answer["run_id"]}

    def _run_now(self, request: Request) -> dict[str, Any]:
        payload = dict(request.json or {})
        job = self._job(self._int_param(request, "job_id"))
        return self._create_run("run-now", payload, job=job)

    def _get(self, request: Request) -> dict[str, Any]:
        run = self.live(self._int_param(request, "run_id"))
        state = self.read(run)
        include_history = str(request.params.get("include_history", "")).lower() in ("true", "1")
        return self._run_json(run, state, include_history)

    @staticmethod
    def _flag(request: Request, name: str) -> bool:
        return str(request.params.get(name, "")).lower() in ("true", "1")

    def _list_runs(self, request: Request) -> dict[str, Any]:
        """``runs/list``: newest first by start time, filtered as JobsAPI.list_runs documents; listing does
        not advance a run's script.

        Pages of ``limit`` runs (1 to 25; 0 means 25; default 20). ``next_page_token`` / ``prev_page_token``
        are opaque cursors (past the page's last run / before its first): a run started between two calls
        does not shift the next page. The deprecated ``offset`` counts from the newest run, so it does.
        A bad limit, offset, token or time answers 400 INVALID_PARAMETER_VALUE.
        """
        params = request.params
        active_only, completed_only = (
            self._flag(request, "active_only"),
            self._flag(request, "completed_only"),
        )
        if active_only and completed_only:
            raise _error(
                400, "INVALID_PARAMETER_VALUE", "active_only and completed_only cannot both be true."
            )
        limit = self._optional_int(request, "limit", DEFAULT_LIST_LIMIT)
        if limit == 0:
            limit = MAX_LIST_LIMIT
        if not 0 < limit <= MAX_LIST_LIMIT:
            raise _error(400, "INVALID_PARAMETER_VALUE", f"limit must be between 1 and {MAX_LIST_LIMIT}.")
        job_id = self._optional_int(request, "job_id", None)
        run_type = params.get("run_type")
        if run_type not in (None, "", *_RUN_TYPES):
            raise _error(400, "INVALID_PARAMETER_VALUE", f"run_type must be one of {list(_RUN_TYPES)}.")
        start_from = self._optional_int(request, "start_time_from", None)
        start_to = self._optional_int(request, "start_time_to", None)
        runs = []
        for run in sorted(self.jobs.values(), key=_list_order, reverse=True):
            if job_id is not None and run.job_id != job_id:
                continue
            if run_type and ("JOB_RUN" if run.operation == "run-now" else "SUBMIT_RUN") != run_type:
                continue
            if (active_only and run.is_terminal) or (completed_only and not run.is_terminal):
                continue
            if start_from is not None and run.start_time < start_from:
                continue
            if start_to is not None and run.start_time > start_to:
                continue
            if self.listed(run):
                runs.append(run)
        token = params.get("page_token")
        if token not in (None, ""):
            direction, cursor = _read_page_token(str(token))
            if direction == "next":
                first = next((i for i, run in enumerate(runs) if _list_order(run) < cursor), len(runs))
            else:
                newer = sum(1 for run in runs if _list_order(run) > cursor)
                first = max(newer - limit, 0)
                limit = newer - first
        else:
            first = self._optional_int(request, "offset", 0)
            if first < 0:
                raise _error(400, "INVALID_PARAMETER_VALUE", "offset must be at least 0.")
        page = runs[first : first + limit]
        expand = self._flag(request, "expand_tasks")
        body: dict[str, Any] = {"has_more": first + len(page) < len(runs)}
        if page:
            listed = []
            for run in page:
                run_json = self._run_json(run, run.state, include_history=False)
                if not expand:
                    del run_json["tasks"]
                listed.append(run_json)
            body["runs"] = listed
            if body["has_more"]:
                body["next_page_token"] = _page_token("next", page[-1])
            if first > 0:
                body["prev_page_token"] = _page_token("prev", page[0])
        return body

    @staticmethod
    def _optional_int(request: Request, name: str, default: Any) -> Any:
        value = request.params.get(name)
        if value is None or value == "":
            return default
        try:
            return int(value)
        except (TypeError, ValueError):
            raise _error(400, "INVALID_PARAMETER_VALUE", f"Invalid value for {name}: {value!r}") from None

    def _get_output(self, request: Request) -> dict[str, Any]:
        run_id = self._int_param(request, "run_id")
        task_key = None
        if run_id in self._task_runs:  # get-output is per task run; the hook asks for failed tasks'
            run_id, task_key = self._task_runs[run_id]
        run = self.live(run_id)
        if run.output is not None:
            return run.output
        # metadata is a Run (RunOutput.metadata), which has no task_key field.
        out: dict[str, Any] = {"metadata": self._run_json(run, run.state, include_history=False)}
        if run.result_state == "SUCCESS":
            out["notebook_output"] = {"result": "ok", "truncated": False}
        elif run.result_state:
            out["error"] = run.message or f"{task_key or run.run_name} failed"
            out["error_trace"] = "Traceback (emulated)"
        return out

    def _cancel(self, request: Request) -> dict[str, Any]:
        self.cancel(self.live(self._int_param(request, "run_id")), "runs/cancel", request.params)
        return {}

    def _cancel_all(self, request: Request) -> dict[str, Any]:
        payload = request.params
        if payload.get("all_queued_runs"):
            targets = [r for r in self.jobs.values() if not r.expired and r.life_cycle_state == "QUEUED"]
        else:
            job = self._job(self._int_param(request, "job_id"))
            targets = [r for r in self.jobs.values() if r.job_id == job.job_id and not r.expired]
        cancelled = []
        for run in targets:
            run.cancelled = True
            if not run.is_terminal:  # Databricks answers 200 and leaves a finished run as it is
                run.lifecycle.set_state(self.CANCELLED_STATE)
                run.message = None
                cancelled.append(run.id)
        self.ledger.record(
            SYSTEM,
            "runs/cancel-all",
            external_id=payload.get("job_id"),
            payload={**payload, "cancelled_run_ids": cancelled},
        )
        return {}

    def _repair(self, request: Request) -> dict[str, Any]:
        payload = dict(request.json or {})
        run = self.live(self._int_param(request, "run_id"))
        if not run.is_terminal:
            raise _error(400, "INVALID_PARAMETER_VALUE", f"Run {run.id} is not in a terminal state.")
        latest = run.repairs[-1]["id"] if run.repairs else None
        given = payload.get("latest_repair_id")
        if latest is not None and (given is None or int(given) != latest):
            # Databricks refuses a repair that does not name the latest one (a lost update guard).
            raise _error(
                400,
                "INVALID_PARAMETER_VALUE",
                f"The latest repair ID of run {run.id} is {latest}; pass it as latest_repair_id.",
            )
        repair_id = next(self._repair_ids)
        run.repairs.append({"id": repair_id, "payload": payload, "start_time": _ms(time.time())})
        run.lifecycle = Lifecycle(self._lifecycle)
        run.message = None
        self.ledger.record(SYSTEM, "runs/repair", external_id=run.id, payload=payload)
        return {"repair_id": repair_id}

    def _list_jobs(self, request: Request) -> dict[str, Any]:
        params = request.params
        jobs = sorted(self.job_definitions.values(), key=lambda j: j.job_id)
        if params.get("name"):
            jobs = [j for j in jobs if j.name == params["name"]]
        limit = int(params.get("limit") or 20)
        offset = int(params.get("page_token") or 0)
        page = jobs[offset : offset + limit]
        body: dict[str, Any] = {"jobs": [j.to_json() for j in page]}
        if offset + limit < len(jobs):
            body["next_page_token"] = str(offset + limit)
        return body

    def _get_job(self, request: Request) -> dict[str, Any]:
        job_id = self._int_param(request, "job_id")
        job = self.job_definitions.get(job_id)
        if job is None:
            raise _error(404, "RESOURCE_DOES_NOT_EXIST", f"Job {job_id} does not exist.")
        return job.to_json()

    def _create_job(self, request: Request) -> dict[str, Any]:
        settings = dict(request.json or {})
        job = self.add_job(name=str(settings.get("name") or "Untitled"))
        job.settings = {**settings, "name": job.name}
        self.ledger.record(SYSTEM, "jobs/create", external_id=job.job_id, payload=settings)
        return {"job_id": job.job_id}

    def _update_job(self, request: Request) -> dict[str, Any]:
        payload = dict(request.json or {})
        job = self._job(self._int_param(request, "job_id"))
        job.settings = {**job.settings, **(payload.get("new_settings") or {})}
        job.name = str(job.settings.get("name") or job.name)
        self.ledger.record(SYSTEM, "jobs/update", external_id=job.job_id, payload=payload)
        return {}
