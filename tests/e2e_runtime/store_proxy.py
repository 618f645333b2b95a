"""A loopback proxy in front of the api-server's execution API that fails or delays task-state-store calls.

In Airflow 3.3 a task reaches its task-state store only through the api-server
(``/execution/store/ti/{task_instance_id}/{key}``: the task process asks its supervisor, which calls
the execution API). Every component's ``[core] execution_api_server_url`` points at this proxy, which
passes every request through unchanged, except the store calls of a task instance that a rule names:

* ``fail``: from the ``nth`` matching call (``method``) on, every store call of that try is answered
  ``503`` for ``window`` seconds — the api-server (or its state route) is down at that moment. The
  Task SDK retries a 5xx for ~31 s by default, so a window longer than that is an outage the task sees.
* ``delay``: every store call of that try is answered ``seconds`` later (a slow store).

A rule is set per DAG id and try number before the DAG run starts; the proxy maps the task instance id
of a request to its DAG id and try through ``resolve`` (the tier reads the metadata DB). The proxy runs
as threads of the test process: no Airflow kill reaches it.
"""

from __future__ import annotations

import http.client
import re
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

__all__ = ["StoreFault", "StoreProxy"]

_STORE_PATH = re.compile(r"^/execution/store/ti/(?P<ti>[0-9a-fA-F-]{32,36})(?:/|$)")
#: Hop-by-hop headers (RFC 9110 §7.6.1) that a proxy does not forward.
_HOP = {"connection", "keep-alive", "transfer-encoding", "te", "trailer", "upgrade", "proxy-connection"}
#: Headers ``send_response`` writes itself.
_OWN = {"content-length", "date", "server"}


@dataclass
class StoreFault:
    """What happens to the store calls of one try of one DAG's task."""

    mode: str  # "fail" or "delay"
    #: ``fail``: the method of the call that starts the outage (``GET``: a read, ``PUT``: a write).
    method: str = "GET"
    #: ``fail``: the outage starts at the ``nth`` call of ``method`` (1: the first).
    nth: int = 1
    #: ``fail``: how long the outage lasts.
    window: float = 60.0
    #: ``delay``: seconds added to every store call.
    seconds: float = 0.0
    try_number: int = 1
    # -- what happened (read by the tier)
    calls: int = 0
    matched: int = 0
    failed: int = 0
    started_at: float | None = None

    def decide(self, method: str) -> tuple[int | None, float]:
        """``(status to answer instead of forwarding, or None; seconds to wait first)`` for one call."""
        self.calls += 1
        if self.mode == "delay":
            return None, self.seconds
        if self.started_at is None and method == self.method:
            self.matched += 1
            if self.matched >= self.nth:
                self.started_at = time.monotonic()
        if self.started_at is not None and time.monotonic() - self.started_at < self.window:
            self.failed += 1
            return 503, 0.0
        return None, 0.0


class StoreProxy:
    """Forward ``127.0.0.1:<port>`` to the api-server at ``127.0.0.1:<target_port>``, with store faults."""

    def __init__(self, target_port: int, resolve: Callable[[str], tuple[str, int] | None]) -> None:
        self.target_port = target_port
        self._resolve = resolve
        self._resolved: dict[str, tuple[str, int]] = {}
        self._lock = threading.Lock()
        self.faults: dict[str, StoreFault] = {}
        proxy = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def _handle(self) -> None:
                proxy._forward(self)

            do_GET = do_PUT = do_POST = do_PATCH = do_DELETE = do_HEAD = _handle  # noqa: N815

            def log_message(self, *args: Any) -> None:
                pass

        self._server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._server.daemon_threads = True
        self.port = self._server.server_address[1]
        self._thread = threading.Thread(target=self._server.serve_forever, name="store-proxy", daemon=True)

    @property
    def url(self) -> str:
        """The ``[core] execution_api_server_url`` that goes through this proxy."""
        return f"http://127.0.0.1:{self.port}/execution/"

    def start(self) -> StoreProxy:
        self._thread.start()
        return self

    def stop(self) -> None:
        self._server.shutdown()
        self._server.server_close()
        self._thread.join(timeout=10)

    def set_fault(self, dag_id: str, fault: StoreFault) -> None:
        with self._lock:
            self.faults[dag_id] = fault

    def _fault_for(self, path: str) -> StoreFault | None:
        match = _STORE_PATH.match(path)
        if not match or not self.faults:
            return None
        ti_id = match.group("ti").replace("-", "").lower()
        with self._lock:
            known = self._resolved.get(ti_id)
        if known is None:
            known = self._resolve(ti_id)
            if known is None:
                return None
            with self._lock:
                self._resolved[ti_id] = known
        dag_id, try_number = known
        with self._lock:
            fault = self.faults.get(dag_id)
        return fault if fault is not None and fault.try_number == try_number else None

    def _forward(self, handler: BaseHTTPRequestHandler) -> None:
        body = self._read_body(handler)
        fault = self._fault_for(handler.path)
        if fault is not None:
            with self._lock:
                status, wait = fault.decide(handler.command)
            if wait:
                time.sleep(wait)
            if status is not None:
                payload = b'{"detail": "task-state store unavailable (runtime tier store fault)"}'
                handler.send_response(status)
                handler.send_header("Content-Type", "application/json")
                handler.send_header("Content-Length", str(len(payload)))
                handler.end_headers()
                handler.wfile.write(payload)
                return
        headers = {k: v for k, v in handler.headers.items() if k.lower() not in _HOP and k.lower() != "host"}
        headers["Host"] = f"127.0.0.1:{self.target_port}"
        conn = http.client.HTTPConnection("127.0.0.1", self.target_port, timeout=300)
        try:
            try:
                conn.request(handler.command, handler.path, body=body, headers=headers)
                resp = conn.getresponse()
                payload = resp.read()
            except OSError:
                # The api-server is down (e.g. restarting): as the client would see it, a 502.
                handler.send_response(502)
                handler.send_header("Content-Length", "0")
                handler.end_headers()
                return
            handler.send_response(resp.status, resp.reason)
            for name, value in resp.getheaders():
                if name.lower() not in _HOP and name.lower() not in _OWN:
                    handler.send_header(name, value)
            handler.send_header("Content-Length", str(len(payload)))
            handler.end_headers()
            if handler.command != "HEAD":
                handler.wfile.write(payload)
        finally:
            conn.close()

    @staticmethod
    def _read_body(handler: BaseHTTPRequestHandler) -> bytes | None:
        if handler.headers.get("Transfer-Encoding", "").lower() == "chunked":
            chunks = []
            while True:
                size = int(handler.rfile.readline().split(b";")[0].strip() or b"0", 16)
                if size == 0:
                    handler.rfile.readline()
                    break
                chunks.append(handler.rfile.read(size))
                handler.rfile.readline()
            return b"".join(chunks)
        length = int(handler.headers.get("Content-Length") or 0)
        return handler.rfile.read(length) if length else None
