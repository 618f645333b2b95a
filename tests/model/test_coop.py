"""The model's cooperative scheduler (`tests.model.coop`) on its own: an interrupt of an actor parked at a
request comes out of its read of the answer, whatever the actor's thread was doing when it came."""

from __future__ import annotations

import http.client
import threading
import time
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import pytest

from tests.model.coop import Actor, Coop, interruptible_reads


class Alarm(Exception):
    pass


@pytest.fixture
def gated_server() -> Iterator[tuple[Coop, int]]:
    """A server whose every request parks the calling actor, and answers 403 when the park is refused."""
    coop = Coop()

    class Handler(BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            park = coop.park("http", f"GET {self.path}")
            self.send_response(403 if park.refused else 200)
            self.send_header("Content-Length", "0")
            self.end_headers()

        def log_message(self, *args: Any) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        with interruptible_reads():
            yield coop, server.server_address[1]
    finally:
        server.shutdown()
        server.server_close()
        thread.join(timeout=10)


def test_an_interrupted_request_raises_out_of_the_read_even_before_the_client_reads(
    gated_server: tuple[Coop, int],
) -> None:
    coop, port = gated_server
    seen: list[str] = []

    def body() -> None:
        conn = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
        conn.request("GET", "/status")
        try:
            # The server parked this actor as soon as it had the request; the client still runs Python
            # code before it reads. The interrupt must not land here.
            until = time.monotonic() + 0.5
            while time.monotonic() < until:
                pass
            seen.append("before the read")
            conn.getresponse()
            seen.append("answered")
        except Alarm:
            seen.append("alarm")
            # on_kill's first call, a gate: the interrupt must find the actor parked here, not hang.
            coop.park("store_get", "record")
            seen.append("on_kill went on")
        finally:
            conn.close()

    actor = coop.spawn(Actor("p1", body, "try"))
    assert actor.parked is not None and actor.parked.kind == "http"

    coop.interrupt(actor, Alarm())

    assert seen == ["before the read", "alarm"]
    assert actor.parked is not None and actor.parked.kind == "store_get"
    coop.step(actor)
    assert actor.done and actor.error is None
    assert seen[-1] == "on_kill went on"


def test_reads_of_threads_with_no_interrupt_pending_are_untouched(gated_server: tuple[Coop, int]) -> None:
    coop, port = gated_server
    statuses: list[int] = []

    def body() -> None:
        conn = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
        try:
            for _ in range(2):
                conn.request("GET", "/status")
                statuses.append(conn.getresponse().status)
        finally:
            conn.close()

    actor = coop.spawn(Actor("p1", body, "try"))
    coop.step(actor)
    coop.step(actor)
    assert actor.done and actor.error is None
    assert statuses == [200, 200]
