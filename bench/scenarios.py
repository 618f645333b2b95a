"""In-process scenarios, durable vs upstream, against the emulators (sections "calls", "duplicates", "slots").

Run by ``python -m bench`` through ``pytest.main`` (so the emulators' pytest fixtures set them up exactly as
the conformance suite does); each test appends JSON lines to ``$BENCH_OUT``. The operators are built by the
conformance cases (``tests/conformance/cases``); the upstream operator is the provider class the durable one
subclasses, built by the same case with the same arguments. Tries run through ``tests/harness.py`` (Airflow's
part only: one state store shared by the tries, the trigger rebuilt from its serialization and run for real).

What is counted, never assumed:

* state-store ``get``/``set`` calls: ``MemoryStateStore.calls`` (the task's ``task_state_store``);
* API calls: every request that reached the emulator (its request log), split into status calls (the
  case's status endpoints), submissions (ledger entries of the case's submit operations) and the rest;
* jobs created and cancelled: the emulator's ledger.

"Before waiting" ends where the try hands the job to the wait: ``TaskDeferred`` on the deferrable path; on
the sync path the end of the ``resumable_job.resume_decision`` span (an OpenTelemetry span processor
snapshots the counters there), since the provider's poll loop starts right after the decision.

How a worker is killed (Airflow's side of the boundary, identical for both operators):

* ``kill-mid-wait`` (sync): ``SIGKILL`` while polling. The emulator, on the first status read after the
  submission, raises ``WorkerCrash`` asynchronously in the worker thread (``PyThreadState_SetAsyncExc``), so
  the try dies on its next bytecode, whatever code it is in.
* ``kill-before-defer`` (deferrable): the worker dies after submitting, before the trigger takes over
  (``defer`` raises ``WorkerCrash``).
* ``trigger-error`` (deferrable): the trigger's status calls fail past the provider's retries while the
  job runs; Airflow fails the try.
* ``kill-after-success``: the try's last method returned (job succeeded, XComs pushed) and the worker dies
  before Airflow records success.
"""

from __future__ import annotations

import asyncio
import ctypes
import json
import os
import sys
import threading
import time
from collections.abc import Callable
from typing import Any
from unittest import mock

import pytest

from tests.conformance import conftest as conformance
from tests.conformance.systems import SYSTEMS, SystemCase
from tests.harness import MemoryStateStore, TaskRunner, TryOutcome, WorkerCrash, _first_event, _rebuild

OUT = os.environ.get("BENCH_OUT", "")
SELECTED = [c for c in os.environ.get("BENCH_CASES", "").split(",") if c]
#: Emulated job lengths (minutes) for the worker-slot section, and the virtual poll interval (seconds).
SLOT_MINUTES = [int(m) for m in os.environ.get("BENCH_SLOT_MINUTES", "1,10,60").split(",") if m]
POLL_SECONDS = 30
SLOT_SAMPLES = int(os.environ.get("BENCH_SLOT_SAMPLES", "3"))

CASES = [c for c in SYSTEMS if not SELECTED or c.id in SELECTED]
PATHS = [pytest.param(False, id="sync"), pytest.param(True, id="deferrable")]


emulator = conformance.emulator  # the conformance suite's fixture: the case's emulator, its lifecycle set


@pytest.fixture(params=[conformance.case_param(c) for c in CASES])
def case(request: pytest.FixtureRequest) -> SystemCase:
    return request.param


def emit(record: dict[str, Any]) -> None:
    # The machine is shared: every figure carries the 1-minute load average it was measured under.
    record.setdefault("load", round(os.getloadavg()[0], 2))
    if OUT:
        with open(OUT, "a") as f:
            f.write(json.dumps(record, default=str) + "\n")


# --------------------------------------------------------------------------- building both operators
def provider_class(durable_cls: type) -> type:
    """The provider operator a durable operator subclasses (the first ``airflow.providers`` base)."""
    for base in durable_cls.__mro__[1:]:
        if base.__module__.startswith("airflow.providers."):
            return base
    raise RuntimeError(f"{durable_cls.__name__} subclasses no provider operator")


def factory(
    case: SystemCase, emulator: Any, deferrable: bool, side: str, **overrides: Any
) -> Callable[[], Any]:
    """A fresh operator per call: ours, or the provider's built by the same case with the same arguments."""
    if side == "ours":
        return lambda: case.make(emulator, deferrable, **overrides)
    durable_cls = type(case.make(emulator, deferrable))  # only to learn the class (no DAG, no overrides)
    module = sys.modules[durable_cls.__module__]
    upstream = provider_class(durable_cls)

    def make() -> Any:
        # The case imports the durable class from its module at call time: hand it the provider class.
        with mock.patch.object(module, durable_cls.__name__, upstream):
            return case.make(emulator, deferrable, **overrides)

    return make


# --------------------------------------------------------------------------- counting
class Counters:
    """Snapshots of everything a try can touch; differences between two snapshots are what it did."""

    def __init__(self, case: SystemCase, emulator: Any, store: MemoryStateStore) -> None:
        self.case, self.emulator, self.store = case, emulator, store
        calls = {case.status_call}
        if case.status_call_sync:
            calls.add(case.status_call_sync)
        self.status_calls = calls

    def snap(self) -> dict[str, Any]:
        return {
            "store": len(self.store.calls),
            "log": len(self.emulator.server.log),
            "ledger": len(self.emulator.ledger.entries),
            "t": time.perf_counter(),
        }

    def between(self, a: dict[str, Any], b: dict[str, Any]) -> dict[str, Any]:
        store = self.store.calls[a["store"] : b["store"]]
        log = self.emulator.server.log[a["log"] : b["log"]]
        ledger = self.emulator.ledger.entries[a["ledger"] : b["ledger"]]
        status = [r for r in log if any(r.method == m and p in r.path for m, p in self.status_calls)]
        submits = [e for e in ledger if e.operation in self.case.submit_operations]
        return {
            "store_get": sum(1 for c in store if c.op == "get"),
            "store_set": sum(1 for c in store if c.op == "set"),
            "store_bytes": sum(len(json.dumps(c.value)) for c in store if c.op == "set"),
            "api": len(log),
            "status": len(status),
            "submit": len(submits),
            "other": len(log) - len(status) - len(submits),
            "created": [str(e.external_id) for e in ledger if e.created],
            "cancelled": [str(e.external_id) for e in ledger if e.operation == self.case.cancel_operation],
            "seconds": b["t"] - a["t"],
            "calls": [f"{r.method} {r.path}" for r in log],
            "store_ops": [_describe(c) for c in store],
        }


def _describe(call: Any) -> str:
    """``get <key>`` / ``set <key> <state>``: the record's ``state`` says what a write was for."""
    if call.op == "set" and isinstance(call.value, dict):
        return f"set {call.key} {call.value.get('state', '?')}"
    return f"{call.op} {call.key}"


_DECISION_HOOK: list[Callable[[], None]] = []


def _install_span_hook() -> None:
    """Call ``_DECISION_HOOK`` when a ``resumable_job.resume_decision`` span ends (ours or the SDK
    mixin's)."""
    from opentelemetry import trace
    from opentelemetry.sdk.trace import SpanProcessor, TracerProvider

    class Hook(SpanProcessor):
        def on_end(self, span: Any) -> None:
            if span.name == "resumable_job.resume_decision":
                for hook in list(_DECISION_HOOK):
                    hook()

    provider = trace.get_tracer_provider()
    if not isinstance(provider, TracerProvider):
        provider = TracerProvider()
        trace.set_tracer_provider(provider)
    provider.add_span_processor(Hook())


_install_span_hook()


class ObservedRunner(TaskRunner):
    """The harness's runner, with a snapshot at every boundary of every try."""

    def __init__(self, make: Callable[[], Any], case: SystemCase, emulator: Any) -> None:
        store = MemoryStateStore()
        super().__init__(make, store=store)
        self.counters = Counters(case, emulator, store)
        self.tries: list[dict[str, Any]] = []
        self._marks: dict[str, dict[str, Any]] = {}

    def _mark(self, name: str) -> None:
        self._marks.setdefault(name, self.counters.snap())

    def _run_trigger(self, trigger: Any) -> Any:
        self._mark("deferred")
        t0 = self.counters.snap()
        try:
            if self.trigger_interrupts:
                return super()._run_trigger(trigger)
            # The harness gives a trigger 30 s; a long emulated job on a busy machine needs more.
            return asyncio.run(_first_event(_rebuild(trigger), timeout=900))
        finally:
            t1 = self.counters.snap()
            self._trigger_spans.append((t0, t1))

    def run_try(self) -> TryOutcome:
        self._marks = {}
        self._trigger_spans: list[tuple[dict[str, Any], dict[str, Any]]] = []
        _DECISION_HOOK.append(lambda: self._mark("decided"))
        start = self.counters.snap()
        try:
            outcome = super().run_try()
        finally:
            _DECISION_HOOK.clear()
        end = self.counters.snap()
        c = self.counters
        total = c.between(start, end)
        trigger = {"api": 0, "status": 0, "seconds": 0.0, "store_get": 0, "store_set": 0}
        for t0, t1 in self._trigger_spans:
            part = c.between(t0, t1)
            for key in trigger:
                trigger[key] += part[key]
        worker = {k: total[k] - trigger[k] for k in trigger}
        boundary = self._marks.get("deferred") or self._marks.get("decided")
        before = c.between(start, boundary) if boundary is not None else None
        self.tries.append(
            {
                "try": outcome.try_number,
                "state": outcome.state,
                "error": None
                if outcome.error is None
                else f"{type(outcome.error).__name__}: {outcome.error}",
                "deferrals": outcome.deferrals,
                "total": total,
                "trigger": trigger,
                "worker": worker,
                "before_wait": before,
                "before_wait_boundary": "defer"
                if "deferred" in self._marks
                else ("decision span" if "decided" in self._marks else None),
            }
        )
        return outcome


# --------------------------------------------------------------------------- killing a worker
def _raise_in_thread(thread_id: int, exc: type[BaseException]) -> None:
    done = ctypes.pythonapi.PyThreadState_SetAsyncExc(ctypes.c_ulong(thread_id), ctypes.py_object(exc))
    if done != 1:  # pragma: no cover - the worker thread is gone
        raise RuntimeError(f"could not interrupt thread {thread_id}: {done}")


class KillMidWait:
    """SIGKILL the sync worker on the first status read after its submission (it is then polling)."""

    def __init__(self, case: SystemCase, emulator: Any) -> None:
        self.case, self.emulator = case, emulator
        self.armed = False
        self.fired = 0
        self.worker = threading.get_ident()
        method, path = case.status_call_sync or case.status_call
        self.fault = emulator.faults.add(
            method=method, path_contains=path, transport="sync", predicate=self._see, times=None
        )

    def _see(self, request: Any) -> bool:
        if self.armed and self.case.submissions(self.emulator):
            self.armed = False
            self.fired += 1
            _raise_in_thread(self.worker, WorkerCrash)
        return False  # never a fault: the read is answered normally, the worker dies on receiving it

    def remove(self) -> None:
        self.fault.remove()


def _crash_on_defer(op: Any) -> Any:
    def defer(*_: Any, **__: Any) -> None:
        raise WorkerCrash("killed after submitting, before deferring")

    object.__setattr__(op, "defer", defer)
    return op


def _crash_after_success(op: Any) -> Any:
    for name in ("execute", "execute_complete"):
        real = getattr(op, name)

        def wrapped(*args: Any, __real: Any = real, **kwargs: Any) -> Any:
            __real(*args, **kwargs)
            raise WorkerCrash("killed after the job succeeded, before Airflow recorded success")

        object.__setattr__(op, name, wrapped)
    return op


# --------------------------------------------------------------------------- scenarios
#: name → (paths it applies to, virtual start minute of each try after the first)
SCENARIOS: dict[str, tuple[tuple[bool, ...], float]] = {
    "happy": ((False, True), 0.0),
    "kill-mid-wait": ((False,), 5.0),
    "kill-before-defer": ((True,), 5.0),
    "trigger-error": ((True,), 5.0),
    "kill-after-success": ((False, True), 15.0),
}


def run_scenario(
    case: SystemCase, emulator: Any, deferrable: bool, side: str, scenario: str
) -> dict[str, Any]:
    emulator.faults.clear()
    emulator.lifecycle = case.lifecycle(active_reads=8)
    make = factory(case, emulator, deferrable, side)
    killer: KillMidWait | None = None
    tries_seen = [0]
    runner: ObservedRunner

    def make_try() -> Any:
        op = make()
        first = runner.ti.try_number == 1
        if first and scenario == "kill-before-defer":
            _crash_on_defer(op)
        if first and scenario == "kill-after-success":
            _crash_after_success(op)
        tries_seen[0] = runner.ti.try_number
        return op

    runner = ObservedRunner(make_try, case, emulator)
    if scenario == "kill-mid-wait":
        killer = KillMidWait(case, emulator)
        killer.armed = True
    if scenario == "trigger-error":
        case.add_trigger_fault(emulator, status=case.transient_status, times=case.status_errors_to_give_up)
    try:
        if scenario == "happy":
            runner.run_try()
        else:
            runner.run_try()
            if killer is not None:
                killer.armed = False
            runner.run_try()  # the retry
    finally:
        if killer is not None:
            killer.remove()
        emulator.faults.clear()
    return {
        "case": case.id,
        "path": "deferrable" if deferrable else "sync",
        "side": side,
        "scenario": scenario,
        "retry_minute": SCENARIOS[scenario][1],
        "killed": None if killer is None else killer.fired,
        "tries": runner.tries,
    }


SCENARIO_PARAMS = [
    pytest.param(name, deferrable, id=f"{name}-{'deferrable' if deferrable else 'sync'}")
    for name, (paths, _) in SCENARIOS.items()
    for deferrable in paths
]


@pytest.mark.parametrize(("scenario", "deferrable"), SCENARIO_PARAMS)
def test_calls(case: SystemCase, emulator: Any, scenario: str, deferrable: bool) -> None:
    """Sections "calls" and "duplicates": one scenario, upstream then ours, on the same emulator."""
    for side in ("upstream", "ours"):
        record = run_scenario(case, emulator, deferrable, side, scenario)
        record["section"] = "calls"
        emit(record)
        assert record["tries"], record


#: Provider arguments that cap how many status reads a wait makes, per case: raised for the long jobs.
POLL_CAPS = {
    "emr_add_steps": "waiter_max_attempts",
    "emr_serverless_start_job": "waiter_max_attempts",
    "emr_container": "max_polling_attempts",
}


@pytest.mark.parametrize("minutes", SLOT_MINUTES)
def test_slots(case: SystemCase, emulator: Any, minutes: int) -> None:
    """Section "slots": one successful try of a job of ``minutes`` emulated minutes (a status read every
    ``POLL_SECONDS``), deferrable durable vs sync durable vs upstream deferrable, interleaved."""
    reads = max(1, minutes * 60 // POLL_SECONDS)
    variants = [("ours", True), ("ours", False), ("upstream", True)]
    for sample in range(SLOT_SAMPLES):
        order = variants if sample % 2 == 0 else list(reversed(variants))
        for side, deferrable in order:
            emulator.faults.clear()
            emulator.lifecycle = case.lifecycle(active_reads=reads)
            overrides = {POLL_CAPS[case.id]: reads + 40} if case.id in POLL_CAPS else {}
            runner = ObservedRunner(factory(case, emulator, deferrable, side, **overrides), case, emulator)
            outcome = runner.run_try()
            t = runner.tries[0]
            emit(
                {
                    "section": "slots",
                    "case": case.id,
                    "side": side,
                    "path": "deferrable" if deferrable else "sync",
                    "minutes": minutes,
                    "sample": sample,
                    "state": outcome.state,
                    "error": t["error"],
                    "deferrals": outcome.deferrals,
                    "worker_seconds": t["worker"]["seconds"],
                    "worker_status": t["worker"]["status"],
                    "trigger_status": t["trigger"]["status"],
                    "trigger_seconds": t["trigger"]["seconds"],
                }
            )
