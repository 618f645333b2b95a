"""A loopback stand-in for the few Airflow REST API endpoints ``jobs``/``orphans`` call, answered from
plain data: task instances (filtered by DAG, operator and state as the API filters them), their task
state stores, single task instances, DAG runs (404 once deleted) and DAGs. `AirflowStub.forbid` makes the
API user one whose DAGs are granted one by one (FAB's per-DAG permissions) and who may not read a DAG. The
real API is exercised by the runtime tests; this one lets the orphan rules run against the emulators in
milliseconds."""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import parse_qs, unquote, urlsplit

TiKey = tuple[str, str, str, int]


class AirflowStub(ThreadingHTTPServer):
    def __init__(self) -> None:
        super().__init__(("127.0.0.1", 0), _Handler)
        self.tis: dict[TiKey, dict[str, Any]] = {}
        self.records: dict[TiKey, dict[str, Any]] = {}
        self.requests: list[str] = []
        #: Every DAG a task instance was added to (a DAG outlives its runs).
        self.dags: set[str] = set()
        #: DAGs the API user may not read; once one is, DAGs are granted one by one (see `forbid`).
        self.forbidden: set[str] = set()

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.server_address[1]}"

    def add_ti(
        self,
        dag_id: str,
        run_id: str,
        task_id: str,
        state: str | None,
        map_index: int = -1,
        operator: str = "DurableDatabricksSubmitRunOperator",
        record: tuple[str, Any] | None = None,
    ) -> TiKey:
        key = (dag_id, run_id, task_id, map_index)
        self.dags.add(dag_id)
        self.tis[key] = {
            "dag_id": dag_id,
            "dag_run_id": run_id,
            "task_id": task_id,
            "map_index": map_index,
            "state": state,
            "try_number": 1,
            "max_tries": 0,
            "operator": operator,
        }
        if record is not None:
            self.records[key] = {record[0]: record[1]}
        return key

    def forbid(self, dag_id: str) -> None:
        """The API user may not read ``dag_id``, as with FAB's per-DAG permissions: a request naming it, or
        naming any DAG id not granted (a DAG that does not exist included), answers 403, and listings across
        DAGs (``~``) leave its task instances out."""
        self.forbidden.add(dag_id)

    def readable(self, dag_id: str) -> bool:
        if not self.forbidden:
            return True  # a user who may read every DAG (and ask for any id: 404 if there is none)
        return dag_id in self.dags and dag_id not in self.forbidden

    def delete_run(self, dag_id: str, run_id: str) -> None:
        """What deleting a DAG run does: its task instances and their task state go with it."""
        for key in [k for k in self.tis if k[:2] == (dag_id, run_id)]:
            self.tis.pop(key)
            self.records.pop(key, None)


class _Handler(BaseHTTPRequestHandler):
    server: AirflowStub

    def log_message(self, format: str, *args: Any) -> None:
        pass

    def do_GET(self) -> None:
        url = urlsplit(self.path)
        query = parse_qs(url.query)
        parts = [unquote(p) for p in url.path.strip("/").split("/")]
        stub = self.server
        stub.requests.append(self.path)
        body: Any = None
        if len(parts) >= 4 and parts[:3] == ["api", "v2", "dags"] and parts[3] != "~":
            if not stub.readable(parts[3]):
                self.send_error(403, "Forbidden")
                return
            if len(parts) == 4 and parts[3] in stub.dags:
                body = {"dag_id": parts[3]}
        # api/v2/dags/{dag}/dagRuns/{run}[/taskInstances[/{task}[/{map}|/state-store]]]
        if len(parts) >= 5 and parts[:3] == ["api", "v2", "dags"] and parts[4] == "dagRuns":
            dag, run = parts[3], parts[5] if len(parts) > 5 else None
            if len(parts) == 6:
                if any(k[:2] == (dag, run) for k in stub.tis):
                    body = {"dag_id": dag, "dag_run_id": run, "state": "running"}
            elif len(parts) == 7 and parts[6] == "taskInstances":
                states = [None if s in ("none", "no_status") else s for s in query.get("state", [])]
                operators = query.get("operator", [])
                items = [
                    ti
                    for k, ti in stub.tis.items()
                    if (dag == "~" or k[0] == dag)
                    and stub.readable(k[0])
                    and (run == "~" or k[1] == run)
                    and (not states or ti["state"] in states)
                    and (not operators or ti["operator"] in operators)
                ]
                offset, limit = int(query.get("offset", ["0"])[0]), int(query.get("limit", ["100"])[0])
                body = {"task_instances": items[offset : offset + limit], "total_entries": len(items)}
            elif len(parts) >= 8 and parts[6] == "taskInstances":
                task = parts[7]
                if len(parts) == 9 and parts[8] == "state-store":
                    map_index = int(query.get("map_index", ["-1"])[0])
                    store = stub.records.get((dag, str(run), task, map_index), {})
                    entries = [{"key": k, "value": v} for k, v in store.items()]
                    body = {"task_state_store": entries, "total_entries": len(entries)}
                else:
                    map_index = int(parts[8]) if len(parts) == 9 else -1
                    body = stub.tis.get((dag, str(run), task, map_index))
        if body is None:
            self.send_error(404)
            return
        data = json.dumps(body).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)


def serve() -> Iterator[AirflowStub]:
    stub = AirflowStub()
    thread = threading.Thread(target=stub.serve_forever, daemon=True)
    thread.start()
    try:
        yield stub
    finally:
        stub.shutdown()
        stub.server_close()
        thread.join(10)
