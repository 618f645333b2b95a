"""A small client of Airflow's public REST API (``/api/v2``): the only way ``jobs`` reads a deployment.

Authentication is what any API client does: a bearer token given as is, or ``POST /auth/token`` with a
username and password (the simple auth manager's and FAB's endpoint), or nothing (a deployment whose
API admits every request, e.g. ``simple_auth_manager_all_admins``).
"""

from __future__ import annotations

import os
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import Any
from urllib.parse import quote

import httpx

__all__ = ["ENV_PASSWORD", "ENV_TOKEN", "ENV_URL", "ENV_USERNAME", "AirflowApi", "ApiError", "NotFound"]

ENV_URL = "AIRFLOW_DURABLE_API_URL"
ENV_TOKEN = "AIRFLOW_DURABLE_API_TOKEN"
ENV_USERNAME = "AIRFLOW_DURABLE_API_USERNAME"
ENV_PASSWORD = "AIRFLOW_DURABLE_API_PASSWORD"

#: Task instances per page (the API's default maximum is 100).
PAGE = 100
#: A DAG id no DAG can have (":" is not allowed in one), asked for by `AirflowApi.reads_every_dag`.
NO_SUCH_DAG = "airflow-durable:no-such-dag"


class ApiError(RuntimeError):
    """The API answered with an error, or could not be reached; the message says which call and why."""

    def __init__(self, message: str, status: int | None = None) -> None:
        super().__init__(message)
        self.status = status


class NotFound(ApiError):
    """404 from the API."""


def _q(value: str) -> str:
    return quote(value, safe="")


@dataclass
class AirflowApi:
    """Blocking client; one instance per command (or per page request in the UI plugin)."""

    url: str
    token: str | None = None
    timeout: float = 30.0

    def __post_init__(self) -> None:
        self.url = self.url.rstrip("/")
        self._client = httpx.Client(base_url=self.url, timeout=self.timeout, follow_redirects=False)

    # ------------------------------------------------------------------ construction
    @classmethod
    def connect(
        cls,
        url: str | None = None,
        token: str | None = None,
        username: str | None = None,
        password: str | None = None,
        timeout: float = 30.0,
    ) -> AirflowApi:
        """From arguments, else ``AIRFLOW_DURABLE_API_*`` environment variables; logs in when asked."""
        url = url or os.environ.get(ENV_URL)
        if not url:
            raise ApiError(f"no Airflow API URL: pass --url or set {ENV_URL} (e.g. http://localhost:8080)")
        token = token or os.environ.get(ENV_TOKEN)
        username = username or os.environ.get(ENV_USERNAME)
        password = password or os.environ.get(ENV_PASSWORD)
        api = cls(url, token=token, timeout=timeout)
        if not token and (username or password):
            if not (username and password):
                raise ApiError("--username and --password go together")
            api.login(username, password)
        return api

    def login(self, username: str, password: str) -> None:
        try:
            resp = self._client.post("/auth/token", json={"username": username, "password": password})
        except httpx.HTTPError as err:
            raise ApiError(f"POST {self.url}/auth/token: {err}") from None
        if resp.status_code not in (200, 201):
            raise ApiError(
                f"POST {self.url}/auth/token answered {resp.status_code}: {resp.text[:200]}", resp.status_code
            )
        self.token = resp.json()["access_token"]

    def close(self) -> None:
        self._client.close()

    def __enter__(self) -> AirflowApi:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # ------------------------------------------------------------------ transport
    def request(self, method: str, path: str, **kwargs: Any) -> Any:
        headers = {"Authorization": f"Bearer {self.token}"} if self.token else {}
        try:
            resp = self._client.request(method, path, headers=headers, **kwargs)
        except httpx.HTTPError as err:
            raise ApiError(f"{method} {self.url}{path}: {err}") from None
        if resp.status_code == 404:
            raise NotFound(f"{method} {path}: 404 {resp.text[:200]}", 404)
        if resp.status_code >= 400:
            hint = " (pass --token or --username/--password)" if resp.status_code in (401, 403) else ""
            raise ApiError(
                f"{method} {self.url}{path} answered {resp.status_code}{hint}: {resp.text[:300]}",
                resp.status_code,
            )
        if resp.status_code == 204 or not resp.content:
            return None
        return resp.json()

    # ------------------------------------------------------------------ reads
    def task_instances(
        self, dag_id: str | None = None, operators: Sequence[str] = (), states: Sequence[str] = ()
    ) -> Iterator[dict[str, Any]]:
        """Every task instance of ``dag_id`` (every DAG if ``None``) whose operator is in ``operators``."""
        path = f"/api/v2/dags/{_q(dag_id) if dag_id else '~'}/dagRuns/~/taskInstances"
        offset = 0
        while True:
            params: list[tuple[str, str | int]] = [("limit", PAGE), ("offset", offset), ("order_by", "id")]
            params += [("operator", name) for name in operators]
            params += [("state", s) for s in states]
            page = self.request("GET", path, params=params)
            items = page.get("task_instances") or []
            yield from items
            offset += len(items)
            if not items or offset >= int(page.get("total_entries") or 0):
                return

    def task_instance(self, dag_id: str, run_id: str, task_id: str, map_index: int) -> dict[str, Any]:
        base = f"/api/v2/dags/{_q(dag_id)}/dagRuns/{_q(run_id)}/taskInstances/{_q(task_id)}"
        if map_index >= 0:
            return self.request("GET", f"{base}/{map_index}")
        return self.request("GET", base)

    def state_store(self, dag_id: str, run_id: str, task_id: str, map_index: int) -> list[dict[str, Any]]:
        path = f"/api/v2/dags/{_q(dag_id)}/dagRuns/{_q(run_id)}/taskInstances/{_q(task_id)}/state-store"
        out: list[dict[str, Any]] = []
        while True:
            page = self.request(
                "GET", path, params={"map_index": map_index, "limit": PAGE, "offset": len(out)}
            )
            items = page.get("task_state_store") or []
            out += items
            if not items or len(out) >= int(page.get("total_entries") or 0):
                return out

    def reads_every_dag(self) -> bool:
        """Whether this user may read every DAG, as far as the API lets a client tell.

        The API never names a DAG its user may not read: its lists leave them out. It authorizes a request
        for one DAG before it looks the DAG up, so asking for a DAG no DAG can be tells the two kinds of
        grant apart: 404 (no such DAG) for a user the auth manager lets read any DAG, 403 for one whose
        DAGs are granted one by one (FAB's per-DAG permissions), who may lack some."""
        try:
            self.request("GET", f"/api/v2/dags/{_q(NO_SUCH_DAG)}")
        except NotFound:
            return True
        except ApiError as err:
            if err.status == 403:
                return False
            raise
        return True

    def dag_run(self, dag_id: str, run_id: str) -> dict[str, Any]:
        return self.request("GET", f"/api/v2/dags/{_q(dag_id)}/dagRuns/{_q(run_id)}")

    def task(self, dag_id: str, task_id: str) -> dict[str, Any]:
        return self.request("GET", f"/api/v2/dags/{_q(dag_id)}/tasks/{_q(task_id)}")
