"""End to end on a real deployment: the deferrable Databricks submit-run against the emulator.

``dag.test()`` fails a task without retrying it when an inline trigger raises, so the failure cells
"the trigger gives up while the run goes on" and "the worker dies after submit" can only be shown
under a real scheduler + dag-processor + triggerer + api-server (LocalExecutor, SQLite). One
deployment serves the whole module; each scenario has its own DAG (and Databricks ``run_name``), and
its emulator faults only match the runs of that DAG.

Every run the emulator starts stays RUNNING until the test ends it, after the retry has reconnected
(durable) or resubmitted (upstream) and deferred again — so "the run keeps going" is literal.
"""

from __future__ import annotations

import os
import signal
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import airflow
import pytest

if int(airflow.__version__.split(".")[0]) < 3:
    pytest.skip("real-runtime harness is written for Airflow 3.x component CLI", allow_module_level=True)

from airflow_durable import shims  # noqa: E402
from airflow_durable.demo.deployment import Deployment, DeploymentError  # noqa: E402
from airflow_durable.testing.databricks import DatabricksEmulator  # noqa: E402
from tests.e2e_runtime import actions  # noqa: E402
from tests.e2e_runtime.conftest import SUMMARIES  # noqa: E402

pytestmark = pytest.mark.runtime

DAGS = Path(__file__).resolve().parent / "dags"

TASK_ID = "submit_run"
DURABLE_DAGS = ("rt_durable_trigger_400", "rt_durable_trigger_5xx", "rt_durable_worker_killed")
UPSTREAM_DAGS = ("rt_upstream_trigger_400",)
#: Overall budget of one scenario, from trigger to final state.
SCENARIO_BUDGET = 120.0
#: On Airflow >= 3.3 a retry reconnects; below, the shim submits fresh every try (degraded).
DURABLE_EXPECTED = 1 if shims.DURABLE_RUNTIME else 2
#: databricks_retry_limit in the DAGs: attempts the hook makes before the trigger gives up.
TRIGGER_RETRY_LIMIT = 2
#: runs/get calls the provider's deferrable path makes before it defers (job id, page url, state).
SYNC_GETS_BEFORE_DEFER = 3


@pytest.fixture(scope="module")
def emulator() -> Iterator[DatabricksEmulator]:
    # Started before the components so they inherit AIRFLOW_CONN_DATABRICKS_DEFAULT.
    previous = os.environ.get("AIRFLOW_CONN_DATABRICKS_DEFAULT")
    dbx = DatabricksEmulator(lifecycle=["PENDING", "RUNNING"]).start()  # RUNNING is sticky
    name = dbx.install_connection()
    try:
        yield dbx
    finally:
        dbx.stop()
        if previous is None:
            os.environ.pop(name, None)
        else:
            os.environ[name] = previous


@pytest.fixture(scope="module")
def deployment(emulator: DatabricksEmulator) -> Iterator[Deployment]:
    started = time.monotonic()
    dep = Deployment(dags_folder=DAGS)
    try:
        dep.start(dag_ids=DURABLE_DAGS + UPSTREAM_DAGS, timeout=150)
        SUMMARIES.append({"scenario": "deployment start", "seconds": time.monotonic() - started})
        yield dep
    finally:
        stopping = time.monotonic()
        dep.stop()
        SUMMARIES.append({"scenario": "deployment stop", "seconds": time.monotonic() - stopping})
    assert not dep.stray_pids(), "a deployment process outlived the test"


@dataclass
class Scenario:
    """One DAG run of one scenario DAG, and what the emulator saw of it."""

    dep: Deployment
    dbx: DatabricksEmulator
    dag_id: str
    run_id: str = ""
    started: float = field(default_factory=time.monotonic)

    def __post_init__(self) -> None:
        self.run_id = f"rt__{self.dag_id}__{int(time.time() * 1000)}"
        self.deadline = self.started + SCENARIO_BUDGET

    # -- the emulator's view, scoped to this DAG
    def owns(self, request: Any, after_gets: int = 0) -> bool:
        """Fault predicate: the request is about a run of this scenario's DAG that has already
        answered ``after_gets`` runs/get calls (faulted calls never reach the run, so do not count)."""
        raw = request.params.get("run_id")
        try:
            run = self.dbx.runs.get(int(raw))
        except (TypeError, ValueError):
            return False
        return (
            run is not None
            and run.run_name.partition(" [afd-ti-")[0] == self.dag_id
            and run.gets >= after_gets
        )

    def fail_trigger_polls(self, status: int, times: int) -> Any:
        """Fail the trigger's (async) polls of this DAG's run from its third one on, ``times`` times.

        Not the first poll: a trigger that fails within a second or two of the deferral races the
        executor's event for the deferring try, and the scheduler then fails the try on its own
        ("executor reported success, but the task instance is queued") without running ``__fail__``.
        """
        # The deferring try makes 3 sync runs/get calls (job id, page url, state) before deferring.
        return self.dbx.faults.add(
            method="GET",
            path_contains="jobs/runs/get",
            status=status,
            times=times,
            transport="async",
            predicate=lambda request: self.owns(request, after_gets=SYNC_GETS_BEFORE_DEFER + 2),
        )

    def submissions(self) -> list[Any]:
        return [
            e
            for e in self.dbx.ledger.submissions()
            if actions.named_for(e.payload.get("run_name"), self.dag_id)
        ]

    def runs(self) -> list[Any]:
        return sorted(
            (r for r in list(self.dbx.runs.values()) if r.run_name.partition(" [afd-ti-")[0] == self.dag_id),
            key=lambda r: r.run_id,
        )

    # -- Airflow's view
    def trigger(self) -> None:
        self.dep.trigger(self.dag_id, self.run_id)

    def ti(self) -> Any:
        return self.dep.task_instance(self.dag_id, self.run_id, TASK_ID)

    def wait(self, condition: Callable[[], Any], what: str) -> Any:
        def check() -> Any:
            state = self.dep.dag_run_state(self.dag_id, self.run_id)
            value = condition()
            if not value and state in ("failed", "success"):
                raise DeploymentError(
                    f"{self.dag_id}: DAG run ended {state} while waiting for {what}; "
                    f"history={self.history()} ti={self.ti()}\n{self.dep.task_logs(self.dag_id)}"
                )
            return value

        try:
            return self.dep.wait_for(check, self.deadline - time.monotonic(), f"{self.dag_id}: {what}")
        except DeploymentError as err:
            raise DeploymentError(f"{err}\n{self.dep.task_logs(self.dag_id)}") from None

    def wait_deferred(self, try_number: int) -> Any:
        return self.wait(
            lambda: (
                (ti := self.ti()) is not None
                and ti.try_number == try_number
                and ti.state == "deferred"
                and ti
            ),
            f"try {try_number} deferred",
        )

    def history(self) -> list[tuple[int, str]]:
        return self.dep.try_history(self.dag_id, self.run_id, TASK_ID)

    def finish_runs_and_wait(self) -> str:
        """End this DAG's runs successfully (as Databricks would), then wait for the DAG run to end.

        First let the retry's trigger poll a few times, for the reason given in ``fail_trigger_polls``.
        """
        run = self.runs()[-1]
        seen = run.gets
        self.wait(lambda: run.gets >= seen + 3, f"the retry's trigger polling run {run.run_id}")
        for run in self.runs():
            if not run.is_terminal:
                self.dbx.set_state(run.run_id, "TERMINATED:SUCCESS")
        return self.wait(
            lambda: (s := self.dep.dag_run_state(self.dag_id, self.run_id)) in ("success", "failed") and s,
            "the DAG run to end",
        )

    def attempt_log(self, try_number: int) -> str:
        """The task log of one try (worker part only, not the trigger's)."""
        root = (
            self.dep.home / "logs" / f"dag_id={self.dag_id}" / f"run_id={self.run_id}" / f"task_id={TASK_ID}"
        )
        path = root / f"attempt={try_number}.log"
        return path.read_text(errors="replace") if path.exists() else ""

    def record(self, operator: str, **extra: Any) -> dict[str, Any]:
        ti = self.ti()
        summary = {
            "scenario": self.dag_id,
            "operator": operator,
            "submissions": len(self.submissions()),
            "tries": [*self.history(), (ti.try_number, ti.state)] if ti else self.history(),
            "seconds": time.monotonic() - self.started,
            **extra,
        }
        SUMMARIES.append(summary)
        return summary


def _assert_retry_reconnected(sc: Scenario, run: Any) -> None:
    """The engine's decision, as logged by try 2: reconnect to the run, no submit."""
    if not shims.DURABLE_RUNTIME:
        return
    log = sc.attempt_log(2)
    assert "[reconnect]" in log and f"job {run.run_id} is still" in log, log[-3000:]
    assert "submitted job" not in log, log[-3000:]


def _assert_success_with_xcoms(sc: Scenario, run: Any) -> None:
    ti = sc.ti()
    assert ti is not None and ti.state == "success" and ti.try_number == 2, (ti, sc.history())
    assert [t for t, _ in sc.history()] == [1], sc.history()
    xcoms = sc.dep.xcoms(sc.dag_id, sc.run_id, TASK_ID)
    assert xcoms.get("run_id") == run.run_id, xcoms
    assert xcoms.get("job_id") == run.job_id, xcoms
    assert str(xcoms.get("run_page_url", "")).endswith(f"/run/{run.run_id}"), xcoms


# --------------------------------------------------------------------------- (a) trigger raises
def test_trigger_error_then_retry_reconnects(deployment: Deployment, emulator: DatabricksEmulator) -> None:
    """(a) The trigger's poll gets a 400 → the trigger raises → Airflow fails try 1 (``__fail__``) →
    try 2 reconnects to the run that kept going: one submission, success, the provider's XComs."""
    sc = Scenario(deployment, emulator, "rt_durable_trigger_400")
    fault = sc.fail_trigger_polls(status=400, times=1)
    sc.trigger()
    sc.wait_deferred(try_number=2)
    assert fault.hits == 1
    assert sc.history() and sc.history()[0][0] == 1, sc.history()
    (run,) = sc.runs()
    assert not run.is_terminal and not run.cancelled, run  # try 1 failed while the run went on

    assert sc.finish_runs_and_wait() == "success"
    summary = sc.record("durable")
    assert summary["submissions"] == DURABLE_EXPECTED, sc.submissions()
    _assert_success_with_xcoms(sc, run)
    _assert_retry_reconnected(sc, run)
    assert len({e.token for e in sc.submissions()}) == 1


def test_upstream_trigger_error_then_retry_duplicates(
    deployment: Deployment, emulator: DatabricksEmulator
) -> None:
    """(a), upstream ``DatabricksSubmitRunOperator(deferrable=True)`` in the same harness: try 2
    submits a second run while the first one is still running."""
    sc = Scenario(deployment, emulator, "rt_upstream_trigger_400")
    fault = sc.fail_trigger_polls(status=400, times=1)
    sc.trigger()
    sc.wait_deferred(try_number=2)
    assert fault.hits == 1
    first, second = sc.runs()
    assert not first.is_terminal and not first.cancelled, first  # the orphan is still running

    assert sc.finish_runs_and_wait() == "success"
    summary = sc.record("upstream")
    assert summary["submissions"] == 2, sc.submissions()
    _assert_success_with_xcoms(sc, second)


# --------------------------------------------------------------------------- (d) 5xx beyond retries
def test_trigger_5xx_beyond_retries_then_retry_reconnects(
    deployment: Deployment, emulator: DatabricksEmulator
) -> None:
    """(d) The trigger's polls meet 503 on every attempt its hook makes (databricks_retry_limit=2),
    so it gives up while the run goes on; the retry reconnects: one submission."""
    sc = Scenario(deployment, emulator, "rt_durable_trigger_5xx")
    fault = sc.fail_trigger_polls(status=503, times=TRIGGER_RETRY_LIMIT)
    sc.trigger()
    sc.wait_deferred(try_number=2)
    assert fault.hits == TRIGGER_RETRY_LIMIT
    (run,) = sc.runs()
    assert not run.is_terminal and not run.cancelled, run

    assert sc.finish_runs_and_wait() == "success"
    summary = sc.record("durable")
    assert summary["submissions"] == DURABLE_EXPECTED, sc.submissions()
    _assert_success_with_xcoms(sc, run)
    _assert_retry_reconnected(sc, run)


# --------------------------------------------------------------------------- (e) worker killed
def test_worker_killed_after_submit_then_retry_reconnects(
    deployment: Deployment, emulator: DatabricksEmulator
) -> None:
    """(e) SIGKILL the task process and its supervisor right after the submit (the id is persisted,
    the deferral has not happened: the first ``runs/get`` after submit is held by the emulator). The
    scheduler detects the missing heartbeat, the retry reconnects: one submission, success."""
    sc = Scenario(deployment, emulator, "rt_durable_worker_killed")
    hold = emulator.faults.add(
        method="GET",
        path_contains="jobs/runs/get",
        status=None,
        latency=25.0,
        times=1,
        transport="sync",
        predicate=sc.owns,
    )
    sc.trigger()
    sc.wait(lambda: len(sc.submissions()) == 1 and hold.hits == 1, "the submit, and the next call held")
    ti = sc.wait(lambda: (ti := sc.ti()) is not None and ti.state == "running" and ti, "try 1 running")
    pids = sc.wait(lambda: deployment.worker_pids(ti.id), f"the worker processes of {ti.id}")
    for pid in pids:
        try:
            os.kill(pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
    killed_at = time.monotonic()
    sc.wait_deferred(try_number=2)
    detected_after = time.monotonic() - killed_at
    (run,) = sc.runs()
    assert not run.is_terminal and not run.cancelled, run

    assert sc.finish_runs_and_wait() == "success"
    summary = sc.record("durable", killed_pids=len(pids), retry_deferred_after_kill=round(detected_after, 1))
    assert summary["submissions"] == DURABLE_EXPECTED, sc.submissions()
    _assert_success_with_xcoms(sc, run)
    _assert_retry_reconnected(sc, run)
