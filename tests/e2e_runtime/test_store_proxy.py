"""The runtime tier's store-fault proxy (``store_proxy.py``) against a loopback stand-in for the
api-server: it passes every call through unchanged, and fails or delays exactly the store calls of the
try a rule names. Fast (no deployment): runs in ``make test``."""

from __future__ import annotations

import json
import threading
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import pytest

from tests.e2e_runtime.store_proxy import StoreFault, StoreProxy

TRY1 = "0190a1b2-c3d4-7e5f-8a9b-0c1d2e3f4a5b"
TRY2 = "0190a1b2-c3d4-7e5f-8a9b-0c1d2e3f4a5c"
KEY = "airflow_durable.job"


class _Target(BaseHTTPRequestHandler):
    """The api-server's stand-in: answers every call with what it received."""

    seen: list[tuple[str, str, bytes]] = []

    def _echo(self) -> None:
        body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
        _Target.seen.append((self.command, self.path, body))
        payload = json.dumps({"method": self.command, "path": self.path, "body": body.decode()}).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("X-Target", "yes")
        self.send_header("Content-Length", str(len(payload)))
        self.end_headers()
        self.wfile.write(payload)

    do_GET = do_PUT = do_POST = do_PATCH = do_DELETE = _echo  # noqa: N815

    def log_message(self, *args: Any) -> None:
        pass


@pytest.fixture
def proxy() -> Iterator[StoreProxy]:
    _Target.seen = []
    target = ThreadingHTTPServer(("127.0.0.1", 0), _Target)
    thread = threading.Thread(target=target.serve_forever, daemon=True)
    thread.start()
    tries = {TRY1.replace("-", ""): ("dag_a", 1), TRY2.replace("-", ""): ("dag_a", 2)}
    p = StoreProxy(target.server_address[1], tries.get).start()
    try:
        yield p
    finally:
        p.stop()
        target.shutdown()
        target.server_close()
        thread.join(timeout=5)


def _call(
    p: StoreProxy, method: str, path: str, body: bytes | None = None
) -> tuple[int, Any, dict[str, str]]:
    request = urllib.request.Request(f"http://127.0.0.1:{p.port}{path}", data=body, method=method)
    try:
        with urllib.request.urlopen(request, timeout=10) as resp:
            return resp.status, json.loads(resp.read()), dict(resp.headers)
    except urllib.error.HTTPError as err:
        return err.code, json.loads(err.read() or b"null"), dict(err.headers)


def _store(ti: str) -> str:
    return f"/execution/store/ti/{ti}/{KEY}"


def test_passes_everything_through_without_a_rule(proxy: StoreProxy) -> None:
    status, answer, headers = _call(proxy, "PUT", _store(TRY1), b'{"value": 1}')
    assert (status, answer["method"], answer["body"]) == (200, "PUT", '{"value": 1}')
    assert headers["X-Target"] == "yes"
    status, answer, _ = _call(proxy, "PATCH", "/execution/task-instances/x/heartbeat", b"{}")
    assert (status, answer["path"]) == (200, "/execution/task-instances/x/heartbeat")
    assert proxy.url == f"http://127.0.0.1:{proxy.port}/execution/"


def test_fail_from_the_nth_write_for_the_window_of_that_try_only(proxy: StoreProxy) -> None:
    fault = StoreFault(mode="fail", method="PUT", nth=2, window=1.0)
    proxy.set_fault("dag_a", fault)
    assert _call(proxy, "GET", _store(TRY1))[0] == 200  # a read does not count toward nth=2 writes
    assert _call(proxy, "PUT", _store(TRY1), b"{}")[0] == 200  # the intent write goes through
    assert _call(proxy, "PUT", _store(TRY1), b"{}")[0] == 503  # the id write: the outage starts
    assert _call(proxy, "GET", _store(TRY1))[0] == 503  # every store call of that try, meanwhile
    assert _call(proxy, "GET", _store(TRY2))[0] == 200  # another try is not affected
    assert _call(proxy, "PATCH", "/execution/task-instances/x/heartbeat", b"{}")[0] == 200
    time.sleep(1.1)
    assert _call(proxy, "PUT", _store(TRY1), b"{}")[0] == 200  # the outage is over
    assert (fault.failed, fault.matched) == (2, 2)
    # What failed never reached the api-server.
    assert [(m, p) for m, p, _ in _Target.seen if p.startswith("/execution/store/")].count(
        ("PUT", _store(TRY1))
    ) == 2


def test_delay_slows_every_store_call_of_that_try(proxy: StoreProxy) -> None:
    proxy.set_fault("dag_a", StoreFault(mode="delay", seconds=0.5))
    started = time.monotonic()
    assert _call(proxy, "GET", _store(TRY1))[0] == 200
    assert time.monotonic() - started >= 0.5
    started = time.monotonic()
    assert _call(proxy, "GET", _store(TRY2))[0] == 200
    assert time.monotonic() - started < 0.5


def test_unknown_task_instance_is_passed_through(proxy: StoreProxy) -> None:
    proxy.set_fault("dag_a", StoreFault(mode="fail", method="GET", nth=1, window=10))
    other = "0190a1b2-c3d4-7e5f-8a9b-0c1d2e3f4aff"
    assert _call(proxy, "GET", _store(other))[0] == 200
    assert _call(proxy, "GET", _store(TRY1))[0] == 503
