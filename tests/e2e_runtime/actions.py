"""What a user does to a running deployment, through Airflow's public REST API (``/api/v2``).

The deployment runs ``SimpleAuthManager`` with ``simple_auth_manager_all_admins``: every request is an
admin's, no token needed. Each helper raises :class:`ApiError` (status and body) on anything but a 2xx,
so a test never mistakes a refused action for one that happened.
"""

from __future__ import annotations

import contextlib
import glob
import json
import os
import shutil
import sys
import threading
import time
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Iterator
from typing import Any

from airflow_durable.demo.deployment import Deployment
from airflow_durable.testing.databricks import DatabricksEmulator

__all__ = [
    "ApiError",
    "api",
    "clear_task",
    "delete_dag_run",
    "discard_task_state",
    "mark_task",
    "trigger_dag_run",
]

#: One user action at a time: scenarios run in threads against one SQLite metadata DB, and a burst
#: of concurrent writes through the API only measures SQLite's locking.
_ONE_AT_A_TIME = threading.Lock()
#: Tries of one action that the api-server answers "Database error" (SQLite busy, rolled back).
DB_ERROR_ATTEMPTS = 8

#: ``[database] sql_alchemy_connect_args`` of the logical-job deployments (an import path to this dict).
#: Under load the scheduler loop dies on SQLite's "database is locked" after the default 5 s busy wait,
#: so every component waits up to 30 s, except the api-server: one of its requests can hold the write
#: lock while a dependency of the same request writes through another connection, and there a longer
#: wait only stalls every other request for longer (the request fails either way and is resent).
SQLITE_CONNECT_ARGS: dict[str, Any] = {"timeout": 5 if "api-server" in sys.argv[1:2] else 30}


class ApiError(RuntimeError):
    def __init__(self, method: str, path: str, status: int, body: str) -> None:
        super().__init__(f"{method} {path} answered {status}: {body[:2000]}")
        self.status = status
        self.body = body


def api(
    dep: Deployment, method: str, path: str, body: Any = None, params: dict[str, Any] | None = None
) -> Any:
    """One call to ``/api/v2/<path>``; returns the decoded JSON answer (``None`` for 204)."""
    url = f"http://127.0.0.1:{dep.api_port}/api/v2/{path.lstrip('/')}"
    if params:
        url += "?" + urllib.parse.urlencode(params, doseq=True)
    request = urllib.request.Request(
        url,
        data=None if body is None else json.dumps(body).encode(),
        headers={"Content-Type": "application/json", "Accept": "application/json"},
        method=method,
    )
    for attempt in range(1, DB_ERROR_ATTEMPTS + 1):
        with _ONE_AT_A_TIME:
            try:
                with urllib.request.urlopen(request, timeout=60) as resp:
                    raw = resp.read()
                return json.loads(raw) if raw else None
            except urllib.error.HTTPError as err:
                failure = ApiError(method, path, err.code, err.read().decode(errors="replace"))
            finally:
                time.sleep(0.2)  # let the scheduler take its turn at the write lock
        # SQLite "database is locked" in the api-server: the request rolled back, so it can be resent.
        if failure.status != 500 or "Database error" not in failure.body or attempt == DB_ERROR_ATTEMPTS:
            raise failure
    raise AssertionError("unreachable")


def _quote(value: str) -> str:
    return urllib.parse.quote(value, safe="")


def trigger_dag_run(dep: Deployment, dag_id: str, run_id: str) -> Any:
    """``POST /dags/{dag_id}/dagRuns``: a manual run with this ``run_id`` (no logical date)."""
    return api(dep, "POST", f"dags/{_quote(dag_id)}/dagRuns", {"dag_run_id": run_id, "logical_date": None})


def delete_dag_run(dep: Deployment, dag_id: str, run_id: str) -> None:
    """``DELETE /dags/{dag_id}/dagRuns/{run_id}``: the run, its task instances and (FK cascade) its
    ``task_state_store`` rows."""
    api(dep, "DELETE", f"dags/{_quote(dag_id)}/dagRuns/{_quote(run_id)}")


def clear_task(
    dep: Deployment,
    dag_id: str,
    run_id: str,
    task_id: str,
    *,
    run_on_latest_version: bool | None = None,
    keep_task_state: bool | None = None,
) -> list[dict[str, Any]]:
    """``POST /dags/{dag_id}/clearTaskInstances`` for one task of one run, whatever its state (the UI's
    "Clear" on a task instance). Returns the cleared task instances; raises if none was cleared.

    ``keep_task_state`` (Airflow 3.4's field; a deployment patched to have it, see ``airflow34/``): sent as
    is, and when false the task's ``task_state_store`` rows are deleted right after the clear, in the same
    step, as 3.4's endpoint does in the same request. An Airflow without the field refuses the body (422).
    """
    body: dict[str, Any] = {
        "dry_run": False,
        "dag_run_id": run_id,
        "task_ids": [task_id],
        "only_failed": False,
        "reset_dag_runs": True,
    }
    if run_on_latest_version is not None:
        body["run_on_latest_version"] = run_on_latest_version
    if keep_task_state is not None:
        body["keep_task_state"] = keep_task_state
    answer = api(dep, "POST", f"dags/{_quote(dag_id)}/clearTaskInstances", body)
    cleared = list((answer or {}).get("task_instances") or [])
    if not cleared:
        raise ApiError("POST", f"dags/{dag_id}/clearTaskInstances", 200, f"cleared nothing: {answer}")
    if keep_task_state is False:
        discard_task_state(dep, dag_id, run_id, task_id)
    return cleared


def discard_task_state(dep: Deployment, dag_id: str, run_id: str, task_id: str) -> int:
    """Delete one task's ``task_state_store`` rows (every map index), as Airflow 3.4's default clear does;
    returns how many went."""
    return dep.write(
        "DELETE FROM task_state_store WHERE dag_id = ? AND run_id = ? AND task_id = ?",
        (dag_id, run_id, task_id),
    )


def mark_task(dep: Deployment, dag_id: str, run_id: str, task_id: str, state: str) -> list[dict[str, Any]]:
    """``PATCH /dags/{dag_id}/dagRuns/{run_id}/taskInstances/{task_id}``: mark success / failed / skipped."""
    answer = api(
        dep,
        "PATCH",
        f"dags/{_quote(dag_id)}/dagRuns/{_quote(run_id)}/taskInstances/{_quote(task_id)}",
        {"new_state": state},
    )
    return list((answer or {}).get("task_instances") or [])


def named_for(run_name: Any, dag_id: str) -> bool:
    """Whether a Databricks run name is the one a test DAG's task gives: its DAG id, before the identity
    marker ``[afd-ti-…]`` a durable submit may append."""
    return str(run_name or "").partition(" [afd-ti-")[0] == dag_id


@contextlib.contextmanager
def installed_databricks_emulator() -> Iterator[DatabricksEmulator]:
    """A Databricks emulator whose runs stay RUNNING (the test ends them), its connection in this process's
    environment before the components start (they inherit it), and the environment restored after."""
    previous = os.environ.get("AIRFLOW_CONN_DATABRICKS_DEFAULT")
    dbx = DatabricksEmulator(lifecycle=["PENDING", "RUNNING"]).start()  # RUNNING is sticky
    name = dbx.install_connection()
    try:
        yield dbx
    finally:
        dbx.stop()
        if previous is None:
            os.environ.pop(name, None)
        else:
            os.environ[name] = previous


def chosen_database(variable: str) -> str:
    """The database a real-deployment module runs on: ``variable`` if set, else PostgreSQL where its
    binaries are installed, else SQLite."""
    chosen = os.environ.get(variable, "")
    if chosen:
        if chosen not in ("sqlite", "postgres"):
            raise ValueError(f"{variable} must be 'sqlite' or 'postgres', not {chosen!r}")
        return chosen
    return "postgres" if glob.glob("/usr/lib/postgresql/*/bin/initdb") or shutil.which("initdb") else "sqlite"
