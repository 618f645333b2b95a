"""A graceful stop is not a cancel, on a real deployment (DESIGN §8, "Stopped is not cancelled").

Production stops workers with SIGTERM and kills what is left after a grace period: Kubernetes on every pod
eviction, drain, deploy or scale-in (SIGTERM to the container's main process, SIGKILL after
``terminationGracePeriodSeconds``), systemd on ``systemctl restart`` (SIGTERM to every process of the
service, SIGKILL after ``TimeoutStopSec``). Airflow 3.3's supervisor forwards the SIGTERM to the task
process so that ``on_kill`` runs. Each scenario plays one such stop while a synchronous Databricks
submit-run task polls, on one deployment (api-server, scheduler, dag-processor, triggerer, LocalExecutor,
SQLite) against the emulator in the test process, and compares the durable operator with the provider's:

* ``podstop``: SIGTERM to the task's supervisor (a pod's main process), SIGKILL of the supervisor and the
  task process after a grace period; the scheduler then fails try 1 for its missing heartbeat and
  retries it.
* ``schedreset``: the scheduler alone is killed (a crashed or failed-over scheduler) while its LocalExecutor
  worker still supervises the try; a new scheduler resets the orphaned task instance
  (``adopt_or_reset_orphaned_tasks``: a new id, no state, ``max_tries`` and ``clear_number`` unchanged), the
  old try's heartbeat is refused and it is sent SIGTERM. A reset is not a clear: the old try leaves the job,
  the new one reconnects.

Durable: one Databricks run, the task succeeds with the provider's XComs. The provider's operator cancels
its run in ``on_kill`` and the retry submits a second one.
"""

from __future__ import annotations

import signal
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import airflow
import pytest

if int(airflow.__version__.split(".")[0]) < 3:
    pytest.skip("real-runtime harness is written for Airflow 3.x component CLI", allow_module_level=True)

from airflow_durable import shims  # noqa: E402
from airflow_durable.demo.deployment import Deployment  # noqa: E402
from airflow_durable.testing.databricks import DatabricksEmulator  # noqa: E402
from tests.e2e_runtime import actions  # noqa: E402
from tests.e2e_runtime.conftest import SUMMARIES  # noqa: E402
from tests.e2e_runtime.graceful_dags.graceful_stops import SCENARIOS, TASK_ID, dag_id_of  # noqa: E402
from tests.e2e_runtime.test_runtime_databricks import Scenario  # noqa: E402

pytestmark = [
    pytest.mark.runtime,
    pytest.mark.skipif(not shims.DURABLE_RUNTIME, reason="Airflow < 3.3: every try submits fresh"),
]

DAGS = Path(__file__).resolve().parent / "graceful_dags"
#: The grace period between SIGTERM and SIGKILL (Kubernetes' default is 30 s, systemd's 90 s): long enough
#: for a try's on_kill, short enough for the test budget.
GRACE = 10.0
SCENARIO_BUDGET = 240.0


@pytest.fixture(scope="module")
def emulator() -> Iterator[DatabricksEmulator]:
    with actions.installed_databricks_emulator() as dbx:
        yield dbx


@pytest.fixture(scope="module")
def deployment(emulator: DatabricksEmulator) -> Iterator[Deployment]:
    # A new scheduler looks for orphaned task instances this often (default 300 s): the reset comes once the
    # old scheduler's heartbeat is older than scheduler_health_check_threshold (30 s), within the budget. A
    # lower threshold made a loaded scheduler take its own late heartbeat for a dead scheduler's.
    dep = Deployment(dags_folder=DAGS, extra_env={"AIRFLOW__SCHEDULER__ORPHANED_TASKS_CHECK_INTERVAL": "5"})
    dag_ids = [dag_id_of(s, o) for s in SCENARIOS for o in ("durable", "upstream")]
    try:
        dep.start(dag_ids=dag_ids, timeout=180)
        yield dep
    finally:
        dep.stop()
    assert not dep.stray_pids(), "a deployment process outlived the test"


@dataclass
class Run(Scenario):
    """One DAG run of one scenario DAG, and what the emulator saw of it (the runtime tier's `Scenario`),
    with this module's budget."""

    def __post_init__(self) -> None:
        super().__post_init__()
        self.deadline = self.started + SCENARIO_BUDGET

    def polling(self, try_number: int) -> Any:
        """Wait until the given try runs and its run has been polled: the task waits on its worker."""
        return self.wait(
            lambda: (
                (ti := self.ti()) is not None
                and ti.try_number == try_number
                and ti.state == "running"
                and (runs := self.runs())
                and runs[-1].gets >= 6  # past the provider's reads after the submit: it polls
                and ti
            ),
            f"try {try_number} polling its run",
        )

    def finish(self, durable: bool) -> str:
        """Once a later try waits on a run (durable: it decided to reconnect; the provider's: it submitted
        another), end the live runs successfully, as Databricks would, and wait for the DAG run to end."""

        def a_later_try_waits() -> bool:
            ti = self.ti()
            if ti is None or ti.try_number < 2 or ti.state != "running":
                return False
            if durable:
                return "[reconnect]" in self.attempt_log(ti.try_number)
            return len(self.runs()) >= 2

        self.wait(a_later_try_waits, "a later try waiting on a run")
        for run in self.runs():
            if not run.is_terminal:
                self.dbx.set_state(run.run_id, "TERMINATED:SUCCESS")
        return self.wait(
            lambda: (s := self.dep.dag_run_state(self.dag_id, self.run_id)) in ("success", "failed") and s,
            "the DAG run to end",
        )


def _task_and_supervisor(dep: Deployment, run: Run, ti: Any) -> tuple[int, int]:
    """The try's task process and its supervisor (the LocalExecutor worker that forked it): both are
    titled with the task instance's id, and only the task process's parent is among them."""

    def found() -> tuple[int, int] | None:
        pids = dep.worker_pids(ti.id)
        for pid in pids:
            parent = dep.supervisor_pid(pid)
            if parent in pids:
                return pid, parent
        return None

    task, supervisor = run.wait(found, "the task process and its supervisor")
    return task, supervisor


def _pod_stop(dep: Deployment, run: Run, ti: Any) -> None:
    task, supervisor = _task_and_supervisor(dep, run, ti)
    # Only the supervisor gets SIGTERM, as a pod's main process does; it forwards it to the task.
    dep._signal(supervisor, signal.SIGTERM)
    time.sleep(GRACE)
    for pid in (supervisor, task):
        dep._signal(pid, signal.SIGKILL)


def _scheduler_reset(dep: Deployment, run: Run, ti: Any) -> None:
    _task_and_supervisor(dep, run, ti)
    scheduler = dep.procs["scheduler"]
    dep._signal(scheduler.pid, signal.SIGKILL)  # the scheduler alone: its executor's workers run on
    scheduler.wait(timeout=30)
    dep.start_component("scheduler")


STOPS = {"podstop": _pod_stop, "schedreset": _scheduler_reset}


@pytest.mark.parametrize("scenario", SCENARIOS)
@pytest.mark.parametrize("operator", ["durable", "upstream"])
def test_a_graceful_stop_while_the_task_polls(
    deployment: Deployment, emulator: DatabricksEmulator, scenario: str, operator: str
) -> None:
    started = time.monotonic()
    run = Run(deployment, emulator, dag_id_of(scenario, operator))
    run.trigger()
    ti = run.polling(try_number=1)
    (first,) = run.runs()
    STOPS[scenario](deployment, run, ti)
    state = run.finish(durable=operator == "durable")
    runs = run.runs()
    SUMMARIES.append(
        {
            "scenario": f"graceful stop: {scenario}",
            "operator": operator,
            "submissions": len(runs),
            "cancelled": sum(1 for r in runs if r.cancelled),
            "final": state,
            "tries": deployment.try_history(run.dag_id, run.run_id, TASK_ID),
            "seconds": round(time.monotonic() - started, 1),
        }
    )
    if operator == "upstream":
        # Measured, not judged: the provider's on_kill cancels the run and its retry submits another.
        return
    assert state == "success", deployment.task_logs(run.dag_id)
    assert [r.run_id for r in runs] == [first.run_id], runs
    assert not first.cancelled, "the stop cancelled the run"
    log = run.attempt_log(1)
    if scenario == "schedreset":
        # Killed for its refused heartbeat: the reset (no state) or the new try (queued) is not a cancel.
        assert ": cancelling job" not in log, log[-3000:]
    else:
        assert "leaving job" in log and str(first.run_id) in log, log[-3000:]
    final = run.ti()
    assert final is not None
    later = run.attempt_log(final.try_number)
    assert "[reconnect]" in later and "submitted job" not in later, later[-3000:]
    xcoms = deployment.xcoms(run.dag_id, run.run_id, TASK_ID)
    assert xcoms.get("run_id") == first.run_id, xcoms
