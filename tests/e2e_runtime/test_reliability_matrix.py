"""The reliability matrix on PostgreSQL + CeleryExecutor + two triggerers: every system, faults that
kill real Airflow processes, upstream and durable side by side in the same deployment.

One deployment serves the module's Celery phases. The phases whose faults strike one cell each
(``pertask``, ``user``, ``store``: a kill of that cell's task, a user's action on it, its own store calls
failing) run side by side, all their cells in flight together; a phase whose fault strikes the whole
deployment (``celerykill``, ``trigkill``, ``schedrestart``) runs alone, its cells at once. The scheduler's
own stops (``schedstop``, ``failover``) need the LocalExecutor, whose workers live in the scheduler: they
run last, on a second deployment (PostgreSQL, LocalExecutor) that replaces the first against the same
emulators, and their results are recorded under its own configuration. Which
systems run is chosen by ``AFD_RT_GROUP`` (see :func:`selected_systems`): ``all`` (``make
reliability``), ``<i>/<n>`` (group i of n), or unset: one group of :data:`CI_GROUPS`, picked by the
commit hash, so that every push runs a share and consecutive pushes cover the matrix. Which phases run
is chosen the same way by ``AFD_RT_PHASES`` (see :func:`selected_phases`).

Each durable cell must keep the promise under its fault (``Fault.jobs``/``final``/``log``): one job on
the service (two after a user's clear: a new logical job), the task ``success`` with the provider's
XComs (``failed`` when a user marked it so or its ``execution_timeout`` ran out), no job left running
untracked, and a clear task error where the state store failed — and must not do worse than the
committed results (``docs/reliability.json``). The upstream cells are measured, not judged. With
``AFD_RT_RESULTS=<path>`` every cell's outcome is merged into that JSON file (``make reliability``
renders docs/reliability.md).
"""

from __future__ import annotations

import os
import platform
import subprocess
import threading
import time
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import airflow
import pytest

if int(airflow.__version__.split(".")[0]) < 3:
    pytest.skip("the runtime tier drives Airflow 3.x components", allow_module_level=True)

from airflow_durable import shims  # noqa: E402
from tests.e2e_runtime.conftest import SUMMARIES  # noqa: E402
from tests.e2e_runtime.matrix import (  # noqa: E402
    CELERY_DEPLOYMENT,
    LOCAL_DEPLOYMENT,
    PER_CELL_PHASES,
    PHASES,
    PHASES_ENV,
    Cell,
    cells,
    deployment_of,
    parse_dag_id,
    pending,
    selected_phases,
    selected_systems,
)
from tests.e2e_runtime.tier import (  # noqa: E402
    RESULTS_ENV,
    CellResult,
    Tier,
    committed_cell,
    write_results,
    write_run,
)

pytestmark = [
    pytest.mark.runtime,
    pytest.mark.reliability,
    pytest.mark.skipif(not shims.DURABLE_RUNTIME, reason="the matrix measures the durable runtime (3.3+)"),
]

#: Two Celery workers of 10 task slots: the 18 Celery-kill cells of a full run hold their try 1 in a slot
#: each when the workers die (one batch, not three), and the side-by-side phases keep their sync tries
#: running while others start.
CONFIG: dict[str, Any] = {
    "database": "postgres",
    "executor": "celery",
    "triggerers": 2,
    "celery_workers": 2,
    "worker_concurrency": 10,
}
#: The run's second deployment, for the scheduler's own stops: LocalExecutor (its workers, the tasks'
#: supervisors, are the scheduler's children), one triggerer (those cells run the sync path only).
LOCAL_CONFIG: dict[str, Any] = {"database": "postgres", "executor": "local", "triggerers": 1}
CONFIGS = {CELERY_DEPLOYMENT: CONFIG, LOCAL_DEPLOYMENT: LOCAL_CONFIG}
#: Cells of the side-by-side phases in flight at once (triggered, not yet collected). Most of a cell is
#: waiting (a heartbeat timeout, a hold, a retry delay, a trigger's poll), so more in flight finish
#: sooner, until the two cores are busy: CPU, not waiting, bounds a full run.
IN_FLIGHT = int(os.environ.get("AFD_RT_IN_FLIGHT", "20"))


SYSTEMS_RUN = selected_systems()
PHASES_RUN = selected_phases()


def _git(*args: str) -> str:
    root = Path(__file__).resolve().parents[2]
    try:
        return subprocess.run(
            ["git", *args], cwd=root, capture_output=True, text=True, timeout=10, check=False
        ).stdout.strip()
    except OSError:
        return ""


class _Run:
    """What the results file says about the run its cells come from: commit, start, length, load."""

    def __init__(self) -> None:
        self.started = time.monotonic()
        self.loads: list[float] = []
        self.info: dict[str, Any] = {
            "commit": _git("rev-parse", "HEAD")[:12],
            "dirty": bool(_git("status", "--porcelain", "--untracked-files=no")),
            "date": datetime.now(UTC).strftime("%Y-%m-%d %H:%M UTC"),
            "cores": os.cpu_count(),
            "os": f"{platform.system()} {platform.release()}",
            "load_before": [round(x, 2) for x in os.getloadavg()],
            "systems": list(SYSTEMS_RUN),
            "phases": list(PHASES_RUN),
            "in_flight": IN_FLIGHT,
        }
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._sample, daemon=True)
        self._thread.start()

    def _sample(self) -> None:
        while not self._stop.wait(15):
            self.loads.append(os.getloadavg()[0])

    def finish(self) -> dict[str, Any]:
        self._stop.set()
        self._thread.join(timeout=5)
        return {
            **self.info,
            "seconds": round(time.monotonic() - self.started),
            "load_max": round(max(self.loads, default=os.getloadavg()[0]), 2),
            "load_median": round(sorted(self.loads)[len(self.loads) // 2], 2) if self.loads else None,
            "load_after": [round(x, 2) for x in os.getloadavg()],
        }


def _served(every: list[Cell], key: str) -> list[Cell]:
    return [c for c in every if deployment_of(c.fault) == key]


@pytest.fixture(scope="module")
def tier() -> Iterator[Tier]:
    """The run's emulators and its deployment: the one of the first selected phase; `_on` replaces it."""
    run = _Run()
    started = time.monotonic()
    faults = tuple(f for phase in PHASES_RUN for f in PHASES[phase])
    every = cells(faults=faults, systems=SYSTEMS_RUN)
    first = deployment_of(faults[0]) if faults else CELERY_DEPLOYMENT
    with Tier(every, serve=_served(every, first), **CONFIGS[first]) as t:
        SUMMARIES.append(
            {
                "scenario": f"matrix deployment start, {first} ({', '.join(SYSTEMS_RUN)})",
                "seconds": time.monotonic() - started,
            }
        )
        yield t
    path = os.environ.get(RESULTS_ENV)
    if path:
        write_run(Path(path), run.finish())
    assert not t.dep or not t.dep.stray_pids(), "a deployment process outlived the tier"


def _on(tier: Tier, key: str) -> Tier:
    """``tier`` with deployment ``key`` running: the run's deployments one at a time, in phase order (the
    LocalExecutor phases come last), so no cell shares the machine with another deployment."""
    if tier.key != key:
        started = time.monotonic()
        tier.redeploy(_served(tier.cells, key), **CONFIGS[key])
        SUMMARIES.append(
            {
                "scenario": f"matrix deployment start, {key} (replacing the other)",
                "seconds": time.monotonic() - started,
            }
        )
    return tier


@pytest.fixture(scope="module")
def side_by_side(tier: Tier) -> dict[str, CellResult]:
    """Every selected cell of the per-cell phases, run together once (the first phase test that needs
    them runs them; each phase test then judges its own)."""
    phases = [p for p in PHASES_RUN if p in PER_CELL_PHASES]
    together = cells(faults=tuple(f for p in phases for f in PHASES[p]), systems=SYSTEMS_RUN)
    started = time.monotonic()
    results = _on(tier, CELERY_DEPLOYMENT).run_phase(together, max_in_flight=IN_FLIGHT)
    SUMMARIES.append(
        {"scenario": f"side-by-side phases {', '.join(phases)}", "seconds": time.monotonic() - started}
    )
    return {r.dag_id: r for r in results}


def _user_xcoms(keys: Any) -> set[str]:
    """The XComs a user's DAG reads: not the owned trigger's note of which try deferred
    (``airflow_durable.deferred_try``), which exists only where the last try deferred, as timing decides."""
    return {key for key in keys or () if not str(key).startswith("airflow_durable.")}


def _check(tier: Tier, results: list[CellResult], phase_cells: list[Cell]) -> None:
    elsewhere = sorted({deployment_of(c.fault) for c in phase_cells} - {tier.key})
    assert not elsewhere, f"cells of {elsewhere} judged while the {tier.key} deployment runs"
    path = os.environ.get(RESULTS_ENV)
    if path:
        write_results(Path(path), tier.key, tier.describe(), results)
    by_id = {r.dag_id: r for r in results}
    missing = [c.dag_id for c in phase_cells if c.dag_id not in by_id]
    assert not missing, f"cells without a result: {missing}"
    problems: list[str] = []
    waiting: list[str] = []  # problems of cells whose fault awaits engine work
    for r in results:
        SUMMARIES.append(
            {
                "scenario": f"{r.system}/{r.fault}/{r.path}",
                "operator": r.side,
                "submissions": r.jobs,
                "tries": r.tries,
                "seconds": r.seconds,
                "final": r.final_state,
                "untracked": r.untracked,
                **({"error": r.error} if r.error else {}),
                **({"log_ok": r.log_ok} if r.log_ok is not None else {}),
            }
        )
        if r.side == "upstream":
            continue  # measured, not judged (a harness error shows as "not measured" in the report)
        before = committed_cell(deployment_of(r.fault), r.dag_id)
        if not r.durable_ok and (before is None or before.get("durable_ok")):
            # A regression against the committed results (or a new cell that does not keep the promise).
            # A cell committed as not measured/broken is reported, and fails once it was committed ok.
            why = " — a regression: the committed result kept the promise" if before else ""
            reason = pending(parse_dag_id(r.dag_id))
            (waiting if reason else problems).append(
                f"{r.dag_id}: jobs={r.jobs} final={r.final_state} untracked={r.untracked} tries={r.tries} "
                f"log_ok={r.log_ok} error={r.error!r}{why}\n{tier.task_logs(r.dag_id)[-4000:]}"
            )
        elif r.durable_ok and before and (lost := _user_xcoms(before.get("xcom_keys")) - set(r.xcom_keys)):
            problems.append(f"{r.dag_id}: lost XComs {lost}")
    # Same operator, same results: a durable cell pushes the XComs its upstream twin pushes.
    for r in results:
        twin = by_id.get(r.dag_id.replace("_durable_", "_upstream_"))
        if r.side == "durable" and twin and twin.final_state == "success" and r.final_state == "success":
            if missing := set(twin.xcom_keys) - set(r.xcom_keys):
                problems.append(f"{r.dag_id}: XComs {missing} missing vs upstream")
    if problems:
        pytest.fail("\n\n".join(problems + waiting))
    if waiting:
        reasons = sorted({pending(parse_dag_id(w.split(":")[0])) for w in waiting})
        pytest.xfail("; ".join(reasons) + "\n" + "\n".join(waiting))


@pytest.mark.parametrize("phase", list(PHASES))
def test_matrix_phase(tier: Tier, phase: str, request: pytest.FixtureRequest) -> None:
    """Judge one phase's cells for the selected systems in the shared deployment: a per-cell phase's
    from the side-by-side run, a deployment-wide fault's from a run of its own."""
    if phase not in PHASES_RUN:
        pytest.skip(f"phase {phase!r} not selected ({PHASES_ENV}={os.environ.get(PHASES_ENV, '')!r})")
    phase_cells = cells(faults=PHASES[phase], systems=SYSTEMS_RUN)
    if phase in PER_CELL_PHASES:
        pool: dict[str, CellResult] = request.getfixturevalue("side_by_side")
        results = [pool[c.dag_id] for c in phase_cells if c.dag_id in pool]
    else:
        (key,) = {deployment_of(f) for f in PHASES[phase]}
        results = _on(tier, key).run_phase(phase_cells)
    _check(tier, results, phase_cells)
