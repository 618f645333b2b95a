"""Section "dagtest": ``dag.test()`` wall time of a one-task DAG, ours / upstream, per operator and path.

Run by ``python -m bench`` through ``pytest.main`` (the emulator fixtures), in a throwaway, migrated
``AIRFLOW_HOME``. Per operator and path: one warm-up run of each DAG, then ``BENCH_DAGTEST_SAMPLES`` pairs
in alternating order (A B, B A, ...), each a new DAG run with its own logical date. The job succeeds after
a few status reads (the case's default lifecycle, no poll sleeps), so the time is Airflow's and the
operators' own: parsing nothing, running the task, the trigger inline on the deferrable path.

``BENCH_DAGTEST_PROFILE=<dir>`` also writes a cProfile of every timed run there
(``<case>-<path>-<side>-<sample>.prof``), to find where one side's time goes.
"""

from __future__ import annotations

import cProfile
import io
import os
import time
from contextlib import redirect_stderr, redirect_stdout
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from bench.dags.bench_dagtest import REGISTRY, make_dag
from bench.scenarios import PATHS, case, emit, emulator, factory  # noqa: F401  (fixtures)
from tests.conformance.systems import SystemCase

SAMPLES = int(os.environ.get("BENCH_DAGTEST_SAMPLES", "3"))
PROFILE_DIR = os.environ.get("BENCH_DAGTEST_PROFILE", "")
_dates = iter(datetime(2026, 1, 1, tzinfo=UTC) + timedelta(hours=h) for h in range(1, 1_000_000))


def _run(dag: Any, profile_to: str | None = None) -> tuple[float, str]:
    log = io.StringIO()
    profiler = cProfile.Profile() if profile_to else None
    t0 = time.perf_counter()
    with redirect_stdout(log), redirect_stderr(log):
        if profiler:
            profiler.enable()
        run = dag.test(logical_date=next(_dates))
        if profiler:
            profiler.disable()
    seconds = time.perf_counter() - t0
    if profiler and profile_to:
        profiler.dump_stats(profile_to)
    return seconds, str(getattr(run, "state", None))


@pytest.mark.parametrize("deferrable", PATHS)
def test_dagtest(case: SystemCase, emulator: Any, deferrable: bool) -> None:  # noqa: F811 (fixtures)
    path = "deferrable" if deferrable else "sync"
    REGISTRY.clear()
    dags: dict[str, tuple[str, Any]] = {}
    for side in ("upstream", "ours"):

        def build(dag: Any, side: str = side) -> Any:
            return factory(case, emulator, deferrable, side, dag=dag)()

        dag_id = f"bench__{case.id}__{path}__{side}"
        REGISTRY[dag_id] = build
        dags[side] = (dag_id, build)
    for side, (dag_id, build) in dags.items():  # warm-up: serialization, first task start
        seconds, state = _run(make_dag(dag_id, build))
        emit(
            {
                "section": "dagtest",
                "case": case.id,
                "path": path,
                "side": side,
                "warmup": True,
                "seconds": seconds,
                "state": state,
            }
        )
    for sample in range(SAMPLES):
        order = ("upstream", "ours") if sample % 2 == 0 else ("ours", "upstream")
        for side in order:
            profile_to = (
                os.path.join(PROFILE_DIR, f"{case.id}-{path}-{side}-{sample}.prof") if PROFILE_DIR else None
            )
            # A new DAG object per run, as a worker parses one per task run: an operator that fixes its
            # idempotency token in __init__ (upstream EMR Serverless) would otherwise get its finished
            # job of the previous run back instead of running a new one.
            dag_id, build = dags[side]
            seconds, state = _run(make_dag(dag_id, build), profile_to)
            emit(
                {
                    "section": "dagtest",
                    "case": case.id,
                    "path": path,
                    "side": side,
                    "warmup": False,
                    "sample": sample,
                    "seconds": seconds,
                    "state": state,
                }
            )
