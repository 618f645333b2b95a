"""The systems ``airflow-durable demo --system <name>`` can run, one small class each.

A system declares four things:

* its **emulator** (:meth:`DemoSystem.start`, returning a :class:`DemoBackend`), from
  :mod:`airflow_durable.testing`;
* the **connection** the Airflow components use to reach it (:meth:`DemoBackend.environment`,
  ``AIRFLOW_CONN_*`` variables);
* its **DAG pair**: one DAG file in ``airflow_durable/demo/dags/`` defining an upstream and a durable
  DAG with one task each (:attr:`DemoSystem.dag_file`, :attr:`DemoSystem.upstream`,
  :attr:`DemoSystem.durable`);
* its **cost reading**: the jobs the emulator started for a DAG, with start and end times
  (:meth:`DemoBackend.jobs`), and what one job costs in words (:attr:`DemoSystem.cost_unit`).

Adding a system is a subclass of :class:`DemoSystem` and of :class:`DemoBackend`, a DAG file and one
:func:`register` call at the bottom of this module. Nothing here imports Airflow: the DAG file is
parsed by the Airflow components, never by the demo process.
"""

from __future__ import annotations

import time
from abc import ABC, abstractmethod
from dataclasses import dataclass
from pathlib import Path
from typing import Any

__all__ = [
    "DAGS_DIR",
    "DemoBackend",
    "DemoSystem",
    "JobRun",
    "Side",
    "get",
    "names",
    "register",
]

#: The DAG files of every system (not a package: the Airflow components parse them, nothing imports them).
DAGS_DIR = Path(__file__).resolve().parent / "dags"


@dataclass(frozen=True)
class Side:
    """One side of the comparison: a DAG with one task that runs ``operator``."""

    dag_id: str
    operator: str


@dataclass(frozen=True)
class JobRun:
    """One external job the emulator started, as the cost reading sees it."""

    id: str
    #: Epoch seconds.
    started_at: float
    #: Epoch seconds; ``None`` while the job is still running.
    ended_at: float | None
    state: str

    @property
    def seconds(self) -> float | None:
        return None if self.ended_at is None else max(0.0, self.ended_at - self.started_at)


class DemoBackend(ABC):
    """A started emulator, seen through what the demo needs to drive and measure a DAG run.

    Every method takes the ``dag_id`` whose jobs it is about: both DAGs of a system share one emulator.
    """

    @abstractmethod
    def environment(self) -> dict[str, str]:
        """The ``AIRFLOW_CONN_*`` variables (and any other environment) the components need."""

    @abstractmethod
    def hold_after_submit(self, dag_id: str, seconds: float) -> None:
        """Keep try 1 of ``dag_id`` inside its worker after it submitted its job.

        Hold the first status read that follows the submission for ``seconds``, so the demo can
        SIGKILL the worker while the job runs and before the task hands over to the triggerer.
        """

    @abstractmethod
    def held(self, dag_id: str) -> bool:
        """True once the submitted job is running and the worker is waiting on the held call."""

    @abstractmethod
    def submissions(self, dag_id: str) -> int:
        """How many submit calls for ``dag_id`` reached the emulator (idempotent replays included)."""

    @abstractmethod
    def jobs(self, dag_id: str) -> list[JobRun]:
        """The jobs the emulator started for ``dag_id``, oldest first."""

    @abstractmethod
    def status_reads(self, dag_id: str) -> int:
        """How many status reads the newest job of ``dag_id`` has answered (to see the trigger polling)."""

    @abstractmethod
    def finish(self, dag_id: str) -> None:
        """End every running job of ``dag_id`` successfully, as the real system would when done."""

    @abstractmethod
    def stop(self) -> None:
        """Stop the emulator."""


class DemoSystem(ABC):
    """A system the demo can run. Subclass, fill in the attributes, implement :meth:`start`."""

    #: ``--system`` value.
    name: str
    #: Display name, e.g. ``"Databricks"``.
    title: str
    #: What the system calls one job, singular (``"run"``, ``"query"``, ``"job"``).
    job_noun: str
    #: What a duplicate job costs, for the cost line: ``"cluster time"``, ``"warehouse time"``...
    cost_unit: str
    #: DAG file (in :data:`DAGS_DIR`) defining both DAGs.
    dag_file: Path
    upstream: Side
    durable: Side
    #: The task id inside both DAGs.
    task_id: str
    #: Extra words for the header, e.g. the arguments both operators get.
    operator_args: str = "deferrable=True"
    #: The provider package's module; the demo checks it is installed before starting Airflow.
    provider_module: str = ""

    @abstractmethod
    def start(self) -> DemoBackend:
        """Start the emulator and return it (stopped by the demo with :meth:`DemoBackend.stop`)."""

    @property
    def dag_ids(self) -> tuple[str, str]:
        return (self.upstream.dag_id, self.durable.dag_id)


_REGISTRY: dict[str, DemoSystem] = {}


def register(system: DemoSystem) -> DemoSystem:
    """Make ``system`` available as ``--system <system.name>``."""
    if system.name in _REGISTRY:
        raise ValueError(f"demo system {system.name!r} is already registered")
    if not system.dag_file.is_file():
        raise ValueError(f"demo system {system.name!r}: no DAG file {system.dag_file}")
    _REGISTRY[system.name] = system
    return system


def names() -> list[str]:
    """The registered system names, sorted."""
    return sorted(_REGISTRY)


def get(name: str) -> DemoSystem:
    """The registered system called ``name``; ``KeyError`` names the known ones."""
    try:
        return _REGISTRY[name]
    except KeyError:
        raise KeyError(f"unknown demo system {name!r}; known: {', '.join(names())}") from None


# --------------------------------------------------------------------------- Databricks
class _DatabricksBackend(DemoBackend):
    def __init__(self) -> None:
        from airflow_durable.testing.databricks import DatabricksEmulator

        # RUNNING is sticky: a job runs until the demo ends it (after Airflow's retry deferred).
        self.emulator = DatabricksEmulator(lifecycle=["PENDING", "RUNNING"]).start()
        self._holds: dict[str, Any] = {}
        self._ended: dict[int, float] = {}

    def environment(self) -> dict[str, str]:
        env: dict[str, str] = {}
        self.emulator.install_connection(env)
        return env

    def _runs(self, dag_id: str) -> list[Any]:
        runs = [r for r in list(self.emulator.runs.values()) if r.run_name == dag_id]
        return sorted(runs, key=lambda r: r.run_id)

    def _owns(self, dag_id: str, request: Any) -> bool:
        try:
            run = self.emulator.runs.get(int(request.params.get("run_id")))
        except (TypeError, ValueError):
            return False
        return run is not None and run.run_name == dag_id

    def hold_after_submit(self, dag_id: str, seconds: float) -> None:
        # The worker's first runs/get after runs/submit (sync transport: the trigger's are async).
        self._holds[dag_id] = self.emulator.faults.add(
            method="GET",
            path_contains="jobs/runs/get",
            status=None,
            latency=seconds,
            times=1,
            transport="sync",
            predicate=lambda request: self._owns(dag_id, request),
        )

    def held(self, dag_id: str) -> bool:
        hold = self._holds.get(dag_id)
        return hold is not None and hold.hits >= 1 and bool(self._runs(dag_id))

    def submissions(self, dag_id: str) -> int:
        return sum(1 for e in self.emulator.ledger.submissions() if e.payload.get("run_name") == dag_id)

    def jobs(self, dag_id: str) -> list[JobRun]:
        return [
            JobRun(
                id=str(run.run_id),
                started_at=run.start_time / 1000,
                ended_at=self._ended.get(run.run_id),
                state=run.state,
            )
            for run in self._runs(dag_id)
        ]

    def status_reads(self, dag_id: str) -> int:
        runs = self._runs(dag_id)
        return runs[-1].gets if runs else 0

    def finish(self, dag_id: str) -> None:
        for run in self._runs(dag_id):
            if not run.is_terminal:
                self.emulator.set_state(run.run_id, "TERMINATED:SUCCESS")
                self._ended[run.run_id] = time.time()

    def stop(self) -> None:
        self.emulator.stop()


class DatabricksDemo(DemoSystem):
    """``DatabricksSubmitRunOperator`` against ``DurableDatabricksSubmitRunOperator``."""

    name = "databricks"
    title = "Databricks"
    job_noun = "run"
    cost_unit = "cluster time"
    dag_file = DAGS_DIR / "databricks.py"
    upstream = Side("afd_demo_databricks_upstream", "DatabricksSubmitRunOperator")
    durable = Side("afd_demo_databricks_durable", "DurableDatabricksSubmitRunOperator")
    task_id = "nightly_etl"
    operator_args = "deferrable=True, retries=2"
    provider_module = "airflow.providers.databricks"

    def start(self) -> DemoBackend:
        return _DatabricksBackend()


register(DatabricksDemo())
