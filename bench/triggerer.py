"""Section "triggerer": many deferred tasks on one triggerer process, and the reconnect storm.

Not a real ``airflow triggerer`` (left for later: see docs/benchmarks.md): one child process plays the
triggerer, running the triggers the operators themselves defer to, all concurrently in one asyncio loop
like the triggerer's runner does, against the Databricks emulator that runs in this (the parent) process.

Per size N and side (ours / upstream): N tasks ``execute()`` in the parent (each submits a run and raises
``TaskDeferred``; the state-store rows and bytes each writes are counted), then the child rebuilds the N
triggers from their serialization and runs them for ``SECONDS`` while every run stays RUNNING, polling every
``POLL`` seconds; it reports its CPU seconds and peak RSS. The reconnect storm: N tasks whose try died after
deferring are all retried at once (here one after another in one process, so the time is the sum of the
retries' own work); API calls counted from the emulator's log, time until every task is deferred again.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from typing import Any

SECONDS = 20.0
POLL = 2.0

_CHILD = r"""
import asyncio, importlib, json, resource, sys, time
specs = json.loads(sys.stdin.read())
def rebuild(spec):
    module, _, name = spec[0].rpartition(".")
    return getattr(importlib.import_module(module), name)(**spec[1])
async def poll(trigger, until):
    gen = trigger.run().__aiter__()
    while time.monotonic() < until:
        try:
            await asyncio.wait_for(gen.__anext__(), timeout=max(0.01, until - time.monotonic()))
            return "event"
        except asyncio.TimeoutError:
            return "waiting"
    return "waiting"
triggers = [rebuild(s) for s in specs["triggers"]]  # imports are not the triggers' running cost
async def main():
    until = time.monotonic() + specs["seconds"]
    return await asyncio.gather(*(poll(t, until) for t in triggers), return_exceptions=True)
cpu0 = time.process_time()
results = asyncio.run(main())
print(json.dumps({
    "cpu_s": time.process_time() - cpu0,
    "rss_mib": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024,
    "waiting": sum(1 for r in results if r == "waiting"),
    "errors": [repr(r) for r in results if isinstance(r, BaseException)][:3],
}))
"""


def _deferred(make: Any, store: Any) -> Any:
    from airflow.sdk.exceptions import TaskDeferred

    from tests.harness import FakeTaskInstance

    ti = FakeTaskInstance("bench", "scale", "job", 3)
    ti.try_number = 1
    op = make()
    try:
        op.execute(
            {"ti": ti, "task_instance": ti, "run_id": ti.run_id, "task": op, "task_state_store": store}
        )
    except TaskDeferred as deferred:
        return deferred.trigger
    raise RuntimeError("the operator did not defer")


def run(settings: dict[str, Any], env: dict[str, str]) -> list[dict[str, Any]]:
    os.environ.update({k: v for k, v in env.items() if k.startswith("AIRFLOW")})
    from airflow.providers.databricks.operators.databricks import DatabricksSubmitRunOperator

    from airflow_durable.operators.databricks import DurableDatabricksSubmitRunOperator
    from airflow_durable.testing import DatabricksEmulator
    from tests.harness import MemoryStateStore

    sizes = [int(n) for n in str(settings["triggerer_sizes"]).split(",") if n]
    storm = int(settings["storm"])
    rows: list[dict[str, Any]] = []
    storms: list[dict[str, Any]] = []
    emulator = DatabricksEmulator(lifecycle=["RUNNING"])
    emulator.start()
    try:
        child_env = dict(env)
        emulator.install_connection(child_env.__setitem__, conn_id="databricks_default")
        emulator.install_connection(os.environ.__setitem__, conn_id="databricks_default")
        job = {
            "new_cluster": {"spark_version": "15.4.x-scala2.12", "num_workers": 1},
            "notebook_task": {"notebook_path": "/Shared/etl"},
        }
        classes = {"upstream": DatabricksSubmitRunOperator, "ours": DurableDatabricksSubmitRunOperator}
        for n in sizes:
            for side in ("upstream", "ours"):
                cls = classes[side]
                stores = [MemoryStateStore() for _ in range(n)]
                triggers = [
                    _deferred(
                        lambda cls=cls: cls(
                            task_id="job", json=job, deferrable=True, polling_period_seconds=POLL
                        ),
                        store,
                    )
                    for store in stores
                ]
                writes = [c for s in stores for c in s.calls if c.op == "set"]
                specs = {"triggers": [list(t.serialize()) for t in triggers], "seconds": SECONDS}
                log0 = len(emulator.server.log)
                proc = subprocess.run(
                    [sys.executable, "-c", _CHILD],
                    input=json.dumps(specs, default=str),
                    env=child_env,
                    capture_output=True,
                    text=True,
                    timeout=SECONDS * 10 + 120,
                    check=False,
                )
                if proc.returncode != 0:
                    raise RuntimeError(f"trigger child failed: {proc.stderr[-2000:]}")
                child = json.loads(proc.stdout.strip().splitlines()[-1])
                rows.append(
                    {
                        "tasks": n,
                        "side": side,
                        "trigger": type(triggers[0]).__name__,
                        "cpu_s": child["cpu_s"],
                        "rss_mib": child["rss_mib"],
                        "waiting": child["waiting"],
                        "errors": child["errors"],
                        "polls": len(emulator.server.log) - log0,
                        "rows_per_task": len(
                            {(id(s), c.key) for s in stores for c in s.calls if c.op == "set"}
                        )
                        / n,
                        "writes_per_task": len(writes) / n,
                        "bytes_per_task": sum(len(json.dumps(c.value)) for c in writes) / n,
                    }
                )
        # The reconnect storm: `storm` tasks deferred, every try dies, all are retried.
        for side in ("upstream", "ours"):
            cls = classes[side]
            stores = [MemoryStateStore() for _ in range(storm)]
            for store in stores:
                _deferred(lambda cls=cls: cls(task_id="job", json=job, deferrable=True), store)
            log0, ledger0 = len(emulator.server.log), len(emulator.ledger.submissions())
            before = [len(store.calls) for store in stores]
            t0 = time.perf_counter()
            for store in stores:
                _deferred(lambda cls=cls: cls(task_id="job", json=job, deferrable=True), store)
            seconds = time.perf_counter() - t0
            storms.append(
                {
                    "side": side,
                    "tasks": storm,
                    "api_calls": len(emulator.server.log) - log0,
                    "submissions": len(emulator.ledger.submissions()) - ledger0,
                    "seconds": seconds,
                    "store_gets_per_task": sum(
                        1 for s, b in zip(stores, before, strict=True) for c in s.calls[b:] if c.op == "get"
                    )
                    / storm,
                    "store_sets_per_task": sum(
                        1 for s, b in zip(stores, before, strict=True) for c in s.calls[b:] if c.op == "set"
                    )
                    / storm,
                }
            )
    finally:
        emulator.stop()
    return [
        {
            "section": "triggerer",
            "ran": True,
            "mode": "in-process stand-in (one child process runs the triggers)",
            "seconds": SECONDS,
            "poll": POLL,
            "rows": rows,
            "storm": storms,
        }
    ]
