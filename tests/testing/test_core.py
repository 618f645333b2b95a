"""The system-independent emulator machinery, driven through real ``requests`` and ``aiohttp`` clients."""

from __future__ import annotations

import threading
import time

import aiohttp
import pytest
import requests

from airflow_durable.testing import EmulatorError, FaultPlan, Ledger, Lifecycle, LoopbackServer, Request


# --------------------------------------------------------------------------- ledger
def test_ledger_records_and_filters():
    ledger = Ledger()
    ledger.record("a", "submit", external_id=1, token="t1", created=True, payload={"x": 1})
    ledger.record("a", "submit", external_id=1, token="t1", created=False)  # an idempotent replay
    ledger.record("a", "cancel", external_id=1)
    ledger.record("b", "submit", external_id="j", created=True)

    assert [e.external_id for e in ledger.submissions()] == [1, "j"]
    assert [e.external_id for e in ledger.submissions(system="a")] == [1]
    assert ledger.submissions(operation="cancel") == []
    assert ledger.count(system="a") == 3
    assert ledger.count(system="a", operation="submit", created=False) == 1
    assert len(ledger) == 4


def test_ledger_payload_is_a_snapshot():
    ledger = Ledger()
    payload = {"nested": {"k": 1}}
    ledger.record("a", "submit", payload=payload)
    payload["nested"]["k"] = 2
    assert ledger.entries[0].payload == {"nested": {"k": 1}}


def test_ledger_is_thread_safe():
    ledger = Ledger()

    def write() -> None:
        for i in range(200):
            ledger.record("a", "submit", external_id=i, created=True)

    threads = [threading.Thread(target=write) for _ in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert ledger.count() == 1600


# --------------------------------------------------------------------------- lifecycle
def test_lifecycle_advances_one_step_per_read_and_the_last_state_sticks():
    life = Lifecycle(["PENDING", "RUNNING", "DONE"])
    assert [life.read() for _ in range(5)] == ["PENDING", "RUNNING", "DONE", "DONE", "DONE"]
    assert life.reads == 5


def test_lifecycle_current_does_not_advance():
    life = Lifecycle(["A", "B"])
    assert life.current == "A" and life.current == "A"
    assert life.read() == "A" and life.current == "B"


def test_set_state_forces_and_ends_the_script():
    life = Lifecycle(["RUNNING"])
    assert [life.read() for _ in range(3)] == ["RUNNING"] * 3  # held as long as a test likes
    life.set_state("DONE")
    assert [life.read() for _ in range(3)] == ["DONE"] * 3


@pytest.mark.parametrize("bad", [[], "RUNNING"])
def test_lifecycle_rejects_empty_or_bare_string(bad):
    with pytest.raises(ValueError):
        Lifecycle(bad)


# --------------------------------------------------------------------------- server
@pytest.fixture
def server():
    srv = LoopbackServer(name="test")
    state = {"n": 0}

    def echo(request: Request):
        return {"params": request.params, "transport": request.transport, "path_params": request.path_params}

    def count(request: Request):
        state["n"] += 1
        return 201, {"n": state["n"]}

    def fail(request: Request):
        raise EmulatorError(409, {"error": "conflict"})

    def bug(request: Request):
        raise ZeroDivisionError("oops")

    srv.route("GET", "/echo", echo)
    srv.route("POST", "/echo", echo)
    srv.route("GET", "/items/{item_id}", echo)
    srv.route("POST", "/count", count)
    srv.route("POST", "/fail", fail)
    srv.route("GET", "/bug", bug)
    srv.state = state  # type: ignore[attr-defined]
    with srv:
        yield srv


def test_server_binds_loopback_on_an_ephemeral_port(server):
    assert server.url == f"http://127.0.0.1:{server.port}" and server.port > 0


def test_routes_query_json_and_path_params(server):
    assert requests.get(f"{server.url}/echo", params={"a": "1"}).json()["params"] == {"a": "1"}
    assert requests.post(f"{server.url}/echo", json={"b": 2}).json()["params"] == {"b": 2}
    assert requests.get(f"{server.url}/items/42").json()["path_params"] == {"item_id": "42"}
    resp = requests.post(f"{server.url}/count", json={})
    assert resp.status_code == 201 and resp.json() == {"n": 1}
    assert resp.headers["Content-Type"] == "application/json"


def test_unknown_route_and_handler_errors(server):
    assert requests.get(f"{server.url}/nope").status_code == 404
    assert requests.post(f"{server.url}/echo/extra", json={}).status_code == 404
    resp = requests.post(f"{server.url}/fail", json={})
    assert resp.status_code == 409 and resp.json() == {"error": "conflict"}
    resp = requests.get(f"{server.url}/bug")
    assert resp.status_code == 500 and "ZeroDivisionError" in resp.text
    assert len(server.errors) == 1  # a bug stays visible to the test


async def test_transport_tells_requests_from_aiohttp(server):
    assert requests.get(f"{server.url}/echo", params={"a": 1}).json()["transport"] == "sync"
    assert requests.post(f"{server.url}/echo", json={"a": 1}).json()["transport"] == "sync"
    async with aiohttp.ClientSession() as session:
        # The same User-Agent on both, as the provider hooks send: the library still shows.
        headers = {"user-agent": "same-agent"}
        async with session.get(f"{server.url}/echo", json={"a": 1}, headers=headers) as resp:
            body = await resp.json()
            assert body["transport"] == "async" and body["params"] == {"a": 1}  # GET body accepted
        async with session.post(f"{server.url}/echo", json={"a": 1}, headers=headers) as resp:
            assert (await resp.json())["transport"] == "async"
        async with session.get(f"{server.url}/echo", params={"a": "1"}) as resp:  # no body either
            assert (await resp.json())["transport"] == "async"
    assert [r.transport for r in server.requests_to("/echo")] == ["sync", "sync", "async", "async", "async"]


def test_explicit_transport_header_wins(server):
    resp = requests.get(f"{server.url}/echo", headers={"X-Emulator-Transport": "async"})
    assert resp.json()["transport"] == "async"


def test_stop_is_idempotent_and_frees_the_port():
    srv = LoopbackServer().start()
    port = srv.port
    srv.stop()
    srv.stop()
    assert not srv.running
    with pytest.raises(requests.ConnectionError):
        requests.get(f"http://127.0.0.1:{port}/", timeout=2)


async def test_stop_with_pooled_aiohttp_connections_does_not_hang():
    srv = LoopbackServer()
    srv.route("GET", "/x", lambda r: {})
    srv.start()
    async with aiohttp.ClientSession() as session:
        async with session.get(f"{srv.url}/x") as resp:
            await resp.json()
        started = time.monotonic()
        srv.stop()
        assert time.monotonic() - started < 3


# --------------------------------------------------------------------------- faults
def test_fault_n_times_then_normal(server):
    fault = server.faults.add(path_contains="/count", status=503, times=2)
    codes = [requests.post(f"{server.url}/count", json={}).status_code for _ in range(3)]
    assert codes == [503, 503, 201]
    assert fault.hits == 2 and fault.exhausted
    assert server.state["n"] == 1  # faulted calls never reached the handler


def test_fault_forever_and_remove(server):
    fault = server.faults.add(method="GET", path_contains="/echo", status=500, times=None)
    assert [requests.get(f"{server.url}/echo").status_code for _ in range(3)] == [500] * 3
    assert requests.post(f"{server.url}/echo", json={}).status_code == 200  # method filter
    fault.remove()
    assert requests.get(f"{server.url}/echo").status_code == 200
    assert fault.hits == 3


def test_faults_match_in_order(server):
    first = server.faults.add(path_contains="/count", status=429, times=1)
    second = server.faults.add(path_contains="/count", status=500, times=1)
    codes = [requests.post(f"{server.url}/count", json={}).status_code for _ in range(3)]
    assert codes == [429, 500, 201]
    assert (first.hits, second.hits) == (1, 1)


def test_fault_custom_body_and_predicate(server):
    server.faults.add(
        path_contains="/echo", status=400, body={"why": "pred"}, predicate=lambda r: r.params.get("k") == "x"
    )
    assert requests.get(f"{server.url}/echo", params={"k": "y"}).status_code == 200
    resp = requests.get(f"{server.url}/echo", params={"k": "x"})
    assert resp.status_code == 400 and resp.json() == {"why": "pred"}


def test_latency_without_status_delays_a_normal_answer(server):
    fault = server.faults.add(path_contains="/count", latency=0.3)
    started = time.monotonic()
    resp = requests.post(f"{server.url}/count", json={})
    assert time.monotonic() - started >= 0.3
    assert resp.status_code == 201 and fault.hits == 1


def test_latency_beyond_the_client_timeout(server):
    server.faults.add(path_contains="/echo", latency=1.0)
    with pytest.raises(requests.Timeout):
        requests.get(f"{server.url}/echo", timeout=0.2)


def test_drop_closes_the_connection(server):
    server.faults.add(path_contains="/echo", drop=True)
    with pytest.raises(requests.ConnectionError):
        requests.get(f"{server.url}/echo")
    assert requests.get(f"{server.url}/echo").status_code == 200


def test_after_fault_lets_the_call_take_effect_and_loses_the_answer(server):
    server.faults.add(path_contains="/count", status=500, after=True)
    assert requests.post(f"{server.url}/count", json={}).status_code == 500
    assert server.state["n"] == 1  # the effect happened


def test_after_latency_delays_the_answer_of_a_call_that_took_effect(server):
    """``after=True`` with only a latency: the effect happens at once, the answer comes late (a client
    killed meanwhile never learns what it started)."""
    server.faults.add(path_contains="/count", latency=1.0, after=True)
    with pytest.raises(requests.Timeout):
        requests.post(f"{server.url}/count", json={}, timeout=0.3)
    assert server.state["n"] == 1  # counted before the answer was due
    started = time.monotonic()
    assert requests.post(f"{server.url}/count", json={}).status_code == 201
    assert time.monotonic() - started < 0.9  # held once only


async def test_transport_filtered_fault_only_hits_aiohttp(server):
    fault = server.faults.add(path_contains="/echo", status=503, times=None, transport="async")
    assert requests.get(f"{server.url}/echo").status_code == 200
    async with aiohttp.ClientSession() as session:
        async with session.get(f"{server.url}/echo", json={}) as resp:
            assert resp.status == 503
    assert fault.hits == 1


def test_fault_plan_validates():
    plan = FaultPlan()
    with pytest.raises(ValueError):
        plan.add(transport="grpc")  # type: ignore[arg-type]
    with pytest.raises(ValueError):
        plan.add(times=0)
    assert plan.add().status == 500
    assert plan.add(latency=1.0).status is None
    assert plan.add(latency=1.0, status=502).status == 502
    assert len(plan) == 3
    plan.clear()
    assert len(plan) == 0
