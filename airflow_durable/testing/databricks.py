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

__all__ = ["DEFAULT_LIFECYCLE", "DatabricksEmulator", "DatabricksJob", "DatabricksRun"]

SYSTEM = "databricks"
DEFAULT_LIFECYCLE: tuple[str, ...] = ("PENDING", "RUNNING", "TERMINATED:SUCCESS")
TERMINAL_LIFE_CYCLE_STATES = frozenset({"TERMINATED", "SKIPPED", "INTERNAL_ERROR"})
#: Databricks rejects longer idempotency tokens (Jobs API docs: "at most 64 characters").
MAX_TOKEN_LENGTH = 64

EnvironSetter = Callable[[str, str], Any] | MutableMapping[str, str]


def split_state(state: str) -> tuple[str, str]:
    """``"TERMINATED:SUCCESS"`` → ``("TERMINATED", "SUCCESS")``; ``"RUNNING"`` → ``("RUNNING", "")``."""
    life_cycle, _, result = state.partition(":")
    return life_cycle, result


def is_terminal(state: str) -> bool:
    return split_state(state)[0] in TERMINAL_LIFE_CYCLE_STATES


def _error(status: int, error_code: str, message: str) -> EmulatorError:
    return EmulatorError(status, {"error_code": error_code, "message": message})


def _error_body(status: int, message: str) -> dict[str, str]:
    # Databricks' own error shape, used for injected faults and unknown endpoints too.
    codes = {
        400: "INVALID_PARAMETER_VALUE",
        401: "UNAUTHENTICATED",
        403: "PERMISSION_DENIED",
        404: "ENDPOINT_NOT_FOUND",
        409: "RESOURCE_CONFLICT",
        429: "REQUEST_LIMIT_EXCEEDED",
        503: "TEMPORARILY_UNAVAILABLE",
    }
    return {"error_code": codes.get(status, "INTERNAL_ERROR"), "message": message}


def _now_ms() -> int:
    return int(time.time() * 1000)


@dataclass
class DatabricksJob:
    job_id: int
    name: str
    settings: dict[str, Any]
    created_time: int = field(default_factory=_now_ms)
    runs: int = 0  # how many runs it has had: the next run's ``number_in_job`` is runs + 1

    def to_json(self) -> dict[str, Any]:
        return {"job_id": self.job_id, "created_time": self.created_time, "settings": self.settings}


@dataclass
class DatabricksRun:
    """One run as the emulator holds it; ``emulator.run(run_id)`` hands it to tests."""

    run_id: int
    job_id: int
    operation: str  # "runs/submit" or "run-now"
    payload: dict[str, Any]
    token: str | None
    lifecycle: Lifecycle
    number_in_job: int
    run_name: str
    task_keys: list[str]
    task_run_ids: list[int]
    start_time: int = field(default_factory=_now_ms)
    #: True once a cancel (runs/cancel or cancel-all) asked for this run, even if it was already done.
    cancelled: bool = False
    expired: bool = False
    #: How many runs/get calls this run has answered.
    gets: int = 0
    state_message: str | None = None
    #: Repairs, oldest first: ``{"id", "payload", "start_time"}``.
    repairs: list[dict[str, Any]] = field(default_factory=list)
    #: Overrides the default ``runs/get-output`` answer when set.
    output: dict[str, Any] | None = None

    @property
    def state(self) -> str:
        """The current state string (reading it does not advance the script)."""
        return self.lifecycle.current

    @property
    def life_cycle_state(self) -> str:
        return split_state(self.state)[0]

    @property
    def result_state(self) -> str:
        return split_state(self.state)[1]

    @property
    def is_terminal(self) -> bool:
        return is_terminal(self.state)


class DatabricksEmulator(ScriptedEmulator):
    """The Databricks Jobs API 2.2 on a loopback port, with a ledger, scripted runs and faults.

    :param ledger: shared ledger (a fresh one if omitted); every mutating call is recorded.
    :param lifecycle: default state script for new runs (``DEFAULT_LIFECYCLE`` if omitted); also
        settable later through :attr:`lifecycle`.
    :param token: the bearer token the connection carries and the server requires.
    """

    DEFAULT_LIFECYCLE = DEFAULT_LIFECYCLE

    def __init__(
        self,
        ledger: Ledger | None = None,
        lifecycle: Sequence[str] | None = None,
        *,
        token: str = "dapi-emulator-token",
        faults: FaultPlan | None = None,
    ) -> None:
        self.ledger = ledger if ledger is not None else Ledger()
        self.faults = faults if faults is not None else FaultPlan()
        self.token = token
        self.lifecycle = lifecycle
        self._queued_lifecycles: list[list[str]] = []
        self.runs: dict[int, DatabricksRun] = {}
        self.jobs: dict[int, DatabricksJob] = {}
        self._tokens: dict[str, int] = {}
        self._task_runs: dict[int, tuple[int, str]] = {}  # task run id -> (parent run id, task_key)
        # Each runs/get mutates a run (its script advances) and handler threads run concurrently.
        self._lock = threading.RLock()
        # Distinct, recognisable id ranges make a confused id (job vs run vs task run) fail loudly.
        self._run_ids = itertools.count(1001)
        self._task_run_ids = itertools.count(500_001)
        self._repair_ids = itertools.count(9001)
        self._job_ids = itertools.count(900_001)
        self.server = LoopbackServer(name="databricks-emulator", faults=self.faults, error_body=_error_body)
        self._add_routes()

    # ------------------------------------------------------------------ connection
    def connection(self) -> dict[str, Any]:
        """The Airflow connection fields pointing at this emulator."""
        return {
            "conn_type": "databricks",
            "host": "127.0.0.1",
            "port": self.port,
            "schema": "http",  # the hook builds f"{schema or 'https'}://{host}:{port}/api/..."
            "password": self.token,
        }

    def connection_uri(self) -> str:
        """The JSON value for an ``AIRFLOW_CONN_<ID>`` environment variable."""
        return json.dumps(self.connection())

    def install_connection(
        self, environ_setter: EnvironSetter | None = None, conn_id: str = "databricks_default"
    ) -> str:
        """Install the connection as ``AIRFLOW_CONN_<CONN_ID>``; returns the variable's name.

        :param environ_setter: a ``(name, value)`` callable such as ``monkeypatch.setenv`` (undone at
            test teardown), or a mutable mapping such as ``os.environ`` (the default: permanent for
            this process and inherited by child processes, e.g. a scheduler started afterwards).
        """
        name = f"AIRFLOW_CONN_{conn_id.upper()}"
        value = self.connection_uri()
        target = os.environ if environ_setter is None else environ_setter
        if callable(target):
            target(name, value)
        else:
            target[name] = value
        return name

    # ------------------------------------------------------------------ test controls
    def add_job(
        self, job_id: int | None = None, name: str = "job", tasks: Sequence[str] | None = None
    ) -> DatabricksJob:
        """Define a job (for run-now, jobs/list). Re-adding an existing id replaces its settings."""
        with self._lock:
            job_id = int(job_id) if job_id is not None else next(self._job_ids)
            task_keys = list(tasks or [name])
            settings = {"name": name, "tasks": [{"task_key": key} for key in task_keys]}
            runs = self.jobs[job_id].runs if job_id in self.jobs else 0
            job = DatabricksJob(job_id=job_id, name=name, settings=settings, runs=runs)
            self.jobs[job_id] = job
            return job

    def run(self, run_id: int) -> DatabricksRun:
        with self._lock:
            try:
                return self.runs[int(run_id)]
            except KeyError:
                known = sorted(self.runs)
                raise KeyError(f"the Databricks emulator has no run {run_id!r}; runs: {known}") from None

    def script(self, run_id: int, states: Sequence[str]) -> None:
        """Replace a run's remaining state script (it starts from ``states[0]`` at the next read)."""
        self.run(run_id).lifecycle = Lifecycle(states)

    def set_state(self, run_id: int, state: str, message: str | None = None) -> None:
        """Force a run into ``state`` for good (ends its script)."""
        run = self.run(run_id)
        run.lifecycle.set_state(state)
        run.state_message = message

    def expire(self, run_id: int) -> None:
        """Forget a run: every later call about it answers 404, as when run history expired.

        Its idempotency token is forgotten with it, so a resubmission with that token creates a new run.
        """
        with self._lock:
            run = self.run(run_id)
            run.expired = True
            if run.token is not None and self._tokens.get(run.token) == run.run_id:
                del self._tokens[run.token]

    def latest_run(self) -> DatabricksRun:
        with self._lock:
            if not self.runs:
                raise KeyError("the Databricks emulator has no runs yet")
            return self.runs[max(self.runs)]

    # ------------------------------------------------------------------ routing
    def _add_routes(self) -> None:
        routes: list[tuple[str, str, Callable[[Request], Any]]] = [
            ("POST", "jobs/runs/submit", self._submit),
            ("POST", "jobs/run-now", self._run_now),
            ("GET", "jobs/runs/get", self._get),
            ("GET", "jobs/runs/get-output", self._get_output),
            ("POST", "jobs/runs/cancel", self._cancel),
            ("POST", "jobs/runs/cancel-all", self._cancel_all),
            ("POST", "jobs/runs/repair", self._repair),
            ("GET", "jobs/list", self._list_jobs),
            ("GET", "jobs/get", self._get_job),
            ("POST", "jobs/create", self._create_job),
            ("POST", "jobs/update", self._update_job),
        ]
        for method, endpoint, handler in routes:
            # Accept 2.1 and 2.0 paths too: older provider versions call them, the semantics match.
            for version in ("2.2", "2.1", "2.0"):
                self.server.route(method, f"/api/{version}/{endpoint}", self._authenticated(handler))

    def _authenticated(self, handler: Callable[[Request], Any]) -> Callable[[Request], Any]:
        def wrapper(request: Request) -> Any:
            if request.headers.get("Authorization") != f"Bearer {self.token}":
                raise _error(401, "UNAUTHENTICATED", "Invalid access token.")
            with self._lock:
                return handler(request)

        return wrapper

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

    def _live_run(self, run_id: int) -> DatabricksRun:
        run = self.runs.get(run_id)
        if run is None or run.expired:
            raise _error(404, "RESOURCE_DOES_NOT_EXIST", f"Run {run_id} does not exist.")
        return run

    def _job(self, job_id: int) -> DatabricksJob:
        job = self.jobs.get(job_id)
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

    def _create_run(
        self, operation: str, payload: dict[str, Any], job: DatabricksJob | None
    ) -> dict[str, Any]:
        token = self._check_token(payload)
        if token is not None and token in self._tokens:
            existing = self._tokens[token]
            self.ledger.record(
                SYSTEM, operation, external_id=existing, token=token, created=False, payload=payload
            )
            return {"run_id": existing, "number_in_job": self.runs[existing].number_in_job}

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
        run_id = next(self._run_ids)
        run = DatabricksRun(
            run_id=run_id,
            job_id=job.job_id,
            operation=operation,
            payload=json.loads(json.dumps(payload, default=str)),
            token=token,
            lifecycle=Lifecycle(
                self._queued_lifecycles.pop(0) if self._queued_lifecycles else self._lifecycle
            ),
            number_in_job=job.runs,
            run_name=str(payload.get("run_name") or job.name),
            task_keys=task_keys,
            task_run_ids=[next(self._task_run_ids) for _ in task_keys],
        )
        self.runs[run_id] = run
        for task_run_id, key in zip(run.task_run_ids, task_keys):
            self._task_runs[task_run_id] = (run_id, key)
        if token is not None:
            self._tokens[token] = run_id
        self.ledger.record(SYSTEM, operation, external_id=run_id, token=token, created=True, payload=payload)
        return {"run_id": run_id, "number_in_job": run.number_in_job}

    def _state_json(self, run: DatabricksRun, state: str) -> dict[str, Any]:
        life_cycle, result = split_state(state)
        message = run.state_message
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
            for task_run_id, key in zip(run.task_run_ids, run.task_keys)
        ]
        body: dict[str, Any] = {
            "job_id": run.job_id,
            "run_id": run.run_id,
            "number_in_job": run.number_in_job,
            "original_attempt_run_id": run.run_id,
            "run_name": run.run_name,
            "run_type": "JOB_RUN" if run.operation == "run-now" else "SUBMIT_RUN",
            "run_page_url": f"{self.url}/?o=0#job/{run.job_id}/run/{run.run_id}",
            "start_time": run.start_time,
            "creator_user_name": "emulator@example.com",
            "state": state_json,
            "tasks": tasks,
        }
        if run.token is not None:
            body["idempotency_token"] = run.token
        if include_history:
            history = [{"type": "ORIGINAL", "id": run.run_id, "start_time": run.start_time}]
            history += [{"type": "REPAIR", "id": r["id"], "start_time": r["start_time"]} for r in run.repairs]
            body["repair_history"] = history
        return body

    # ------------------------------------------------------------------ endpoints
    def _submit(self, request: Request) -> dict[str, Any]:
        return self._create_run("runs/submit", dict(request.json or {}), job=None)

    def _run_now(self, request: Request) -> dict[str, Any]:
        payload = dict(request.json or {})
        job = self._job(self._int_param(request, "job_id"))
        return self._create_run("run-now", payload, job=job)

    def _get(self, request: Request) -> dict[str, Any]:
        run = self._live_run(self._int_param(request, "run_id"))
        run.gets += 1
        state = run.lifecycle.read()
        include_history = str(request.params.get("include_history", "")).lower() in ("true", "1")
        return self._run_json(run, state, include_history)

    def _get_output(self, request: Request) -> dict[str, Any]:
        run_id = self._int_param(request, "run_id")
        task_key = None
        if run_id in self._task_runs:  # get-output is per task run; the hook asks for failed tasks'
            run_id, task_key = self._task_runs[run_id]
        run = self._live_run(run_id)
        if run.output is not None:
            return run.output
        out: dict[str, Any] = {"metadata": self._run_json(run, run.state, include_history=False)}
        if task_key is not None:
            out["metadata"]["task_key"] = task_key
        if run.result_state == "SUCCESS":
            out["notebook_output"] = {"result": "ok", "truncated": False}
        elif run.result_state:
            out["error"] = run.state_message or f"{task_key or run.run_name} failed"
            out["error_trace"] = "Traceback (emulated)"
        return out

    def _cancel_one(self, run: DatabricksRun) -> bool:
        run.cancelled = True
        if run.is_terminal:
            return False  # Databricks answers 200 and changes nothing
        run.lifecycle.set_state("TERMINATED:CANCELED")
        run.state_message = None
        return True

    def _cancel(self, request: Request) -> dict[str, Any]:
        payload = request.params
        run = self._live_run(self._int_param(request, "run_id"))
        changed = self._cancel_one(run)
        self.ledger.record(
            SYSTEM, "runs/cancel", external_id=run.run_id, payload={**payload, "changed": changed}
        )
        return {}

    def _cancel_all(self, request: Request) -> dict[str, Any]:
        payload = request.params
        if payload.get("all_queued_runs"):
            targets = [r for r in self.runs.values() if not r.expired and r.life_cycle_state == "QUEUED"]
        else:
            job = self._job(self._int_param(request, "job_id"))
            targets = [r for r in self.runs.values() if r.job_id == job.job_id and not r.expired]
        cancelled = [r.run_id for r in targets if self._cancel_one(r)]
        self.ledger.record(
            SYSTEM,
            "runs/cancel-all",
            external_id=payload.get("job_id"),
            payload={**payload, "cancelled_run_ids": cancelled},
        )
        return {}

    def _repair(self, request: Request) -> dict[str, Any]:
        payload = dict(request.json or {})
        run = self._live_run(self._int_param(request, "run_id"))
        if not run.is_terminal:
            raise _error(400, "INVALID_PARAMETER_VALUE", f"Run {run.run_id} is not in a terminal state.")
        latest = run.repairs[-1]["id"] if run.repairs else None
        given = payload.get("latest_repair_id")
        if latest is not None and (given is None or int(given) != latest):
            # Databricks refuses a repair that does not name the latest one (a lost update guard).
            raise _error(
                400,
                "INVALID_PARAMETER_VALUE",
                f"The latest repair ID of run {run.run_id} is {latest}; pass it as latest_repair_id.",
            )
        repair_id = next(self._repair_ids)
        run.repairs.append({"id": repair_id, "payload": payload, "start_time": _now_ms()})
        run.lifecycle = Lifecycle(self._lifecycle)
        run.state_message = None
        self.ledger.record(SYSTEM, "runs/repair", external_id=run.run_id, payload=payload)
        return {"repair_id": repair_id}

    def _list_jobs(self, request: Request) -> dict[str, Any]:
        params = request.params
        jobs = sorted(self.jobs.values(), key=lambda j: j.job_id)
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
        job = self.jobs.get(job_id)
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
