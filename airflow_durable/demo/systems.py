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

import re
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


# --------------------------------------------------------------------------- shared by the backends
class _EmulatorBackend(DemoBackend):
    """What every emulator-backed system does alike: connection, the hold, stop.

    A subclass sets :attr:`status_path` (a substring of the status read's path), implements
    :meth:`_mine` (the DAG's jobs, oldest first) and :meth:`_owns` (is this request about them).
    """

    status_path: str

    def __init__(self, emulator: Any) -> None:
        self.emulator = emulator
        self._holds: dict[str, Any] = {}
        self._ended: dict[Any, float] = {}

    def _mine(self, dag_id: str) -> list[Any]:
        raise NotImplementedError

    def _owns(self, dag_id: str, request: Any) -> bool:
        raise NotImplementedError

    def environment(self) -> dict[str, str]:
        # The emulator's own install_connection: AIRFLOW_CONN_* plus whatever its transport needs
        # (CA variables, Snowflake's routing sitecustomize on PYTHONPATH).
        env: dict[str, str] = {}
        self.emulator.install_connection(env)
        return env

    def hold_after_submit(self, dag_id: str, seconds: float) -> None:
        # The worker's first status read after the submit (sync transport: the trigger's are async).
        self._holds[dag_id] = self.emulator.faults.add(
            method="GET",
            path_contains=self.status_path,
            status=None,
            latency=seconds,
            times=1,
            transport="sync",
            predicate=lambda request: self._owns(dag_id, request),
        )

    def held(self, dag_id: str) -> bool:
        hold = self._holds.get(dag_id)
        return hold is not None and hold.hits >= 1 and bool(self._mine(dag_id))

    def stop(self) -> None:
        self.emulator.stop()


# --------------------------------------------------------------------------- Databricks
class _DatabricksBackend(_EmulatorBackend):
    status_path = "jobs/runs/get"

    def __init__(self) -> None:
        from airflow_durable.testing.databricks import DatabricksEmulator

        # RUNNING is sticky: a job runs until the demo ends it (after Airflow's retry deferred).
        super().__init__(DatabricksEmulator(lifecycle=["PENDING", "RUNNING"]).start())

    def _mine(self, dag_id: str) -> list[Any]:
        runs = [r for r in list(self.emulator.runs.values()) if r.run_name == dag_id]
        return sorted(runs, key=lambda r: r.run_id)

    def _owns(self, dag_id: str, request: Any) -> bool:
        try:
            run = self.emulator.runs.get(int(request.params.get("run_id")))
        except (TypeError, ValueError):
            return False
        return run is not None and run.run_name == dag_id

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
            for run in self._mine(dag_id)
        ]

    def status_reads(self, dag_id: str) -> int:
        runs = self._mine(dag_id)
        return runs[-1].gets if runs else 0

    def finish(self, dag_id: str) -> None:
        for run in self._mine(dag_id):
            if not run.is_terminal:
                self.emulator.set_state(run.run_id, "TERMINATED:SUCCESS")
                self._ended[run.run_id] = time.time()


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


# --------------------------------------------------------------------------- Snowflake
class _SnowflakeBackend(_EmulatorBackend):
    """The SQL API emulator. A DAG's request is the one whose SQL names the dag_id (in a comment)."""

    status_path = "/api/v2/statements/"

    def __init__(self) -> None:
        from airflow_durable.testing.snowflake import SnowflakeEmulator

        # RUNNING is sticky: a statement runs until the demo ends it.
        super().__init__(SnowflakeEmulator(lifecycle=["QUEUED", "RUNNING"]).start())

    def _mine(self, dag_id: str) -> list[Any]:
        return [r for r in list(self.emulator.requests) if dag_id in str(r.payload.get("statement", ""))]

    def _owns(self, dag_id: str, request: Any) -> bool:
        handle = request.path.rstrip("/").rsplit("/", 1)[-1]
        return any(handle in r.handles for r in self._mine(dag_id))

    def submissions(self, dag_id: str) -> int:
        return sum(
            1
            for e in self.emulator.ledger.select("snowflake", "statements")
            if dag_id in str(e.payload.get("statement", ""))
        )

    def jobs(self, dag_id: str) -> list[JobRun]:
        return [
            JobRun(
                # Handles are 36-character UUIDs; the emulator's differ only at the end.
                id=",".join(f"{h[:8]}…{h[-4:]}" for h in r.handles),
                started_at=min(s.created_on for s in r.statements) / 1000,
                ended_at=self._ended.get(r.request_id),
                state=r.state,
            )
            for r in self._mine(dag_id)
        ]

    def status_reads(self, dag_id: str) -> int:
        requests = self._mine(dag_id)
        return max((s.gets for s in requests[-1].statements), default=0) if requests else 0

    def finish(self, dag_id: str) -> None:
        for r in self._mine(dag_id):
            if r.state in ("PENDING", "QUEUED", "RUNNING"):
                self.emulator.set_state(r.handles, "SUCCESS")
                self._ended[r.request_id] = time.time()


class SnowflakeDemo(DemoSystem):
    """``SnowflakeSqlApiOperator`` against ``DurableSnowflakeSqlApiOperator``."""

    name = "snowflake"
    title = "Snowflake"
    job_noun = "statement"
    cost_unit = "warehouse time"
    dag_file = DAGS_DIR / "snowflake.py"
    upstream = Side("afd_demo_snowflake_upstream", "SnowflakeSqlApiOperator")
    durable = Side("afd_demo_snowflake_durable", "DurableSnowflakeSqlApiOperator")
    task_id = "nightly_load"
    operator_args = "deferrable=True, retries=2"
    provider_module = "airflow.providers.snowflake"

    def start(self) -> DemoBackend:
        return _SnowflakeBackend()


# --------------------------------------------------------------------------- dbt Cloud
class _DbtCloudBackend(_EmulatorBackend):
    """The dbt Cloud emulator. Each DAG triggers its own dbt Cloud job (:attr:`DbtCloudDemo.job_ids`)."""

    status_path = "/runs/"

    def __init__(self, job_ids: dict[str, int]) -> None:
        from airflow_durable.testing.dbt_cloud import DbtCloudEmulator

        self.job_ids = dict(job_ids)
        # RUNNING is sticky: a run goes on until the demo ends it.
        super().__init__(DbtCloudEmulator(lifecycle=["QUEUED", "RUNNING"]).start())
        for dag_id, job_id in self.job_ids.items():
            self.emulator.add_job(job_id=job_id, name=dag_id)

    def _mine(self, dag_id: str) -> list[Any]:
        job_id = self.job_ids[dag_id]
        return sorted(
            (r for r in list(self.emulator.runs.values()) if r.job_id == job_id), key=lambda r: r.id
        )

    def _owns(self, dag_id: str, request: Any) -> bool:
        found = re.search(r"/runs/(\d+)/?$", request.path)
        run = self.emulator.runs.get(int(found.group(1))) if found else None
        return run is not None and run.job_id == self.job_ids[dag_id]

    def submissions(self, dag_id: str) -> int:
        job_id = self.job_ids[dag_id]
        return sum(
            1
            for e in self.emulator.ledger.select("dbt_cloud")
            if e.operation in ("jobs/run", "jobs/rerun") and self._job_of(e) == job_id
        )

    def _job_of(self, entry: Any) -> int | None:
        run = self.emulator.runs.get(entry.external_id) if isinstance(entry.external_id, int) else None
        return None if run is None else run.job_id

    def jobs(self, dag_id: str) -> list[JobRun]:
        # The emulator's created_at is a synthetic clock; the ledger has the real submit time.
        submitted = {e.external_id: e.at for e in self.emulator.ledger.submissions("dbt_cloud")}
        return [
            JobRun(
                id=str(run.id),
                started_at=submitted.get(run.id, 0.0),
                ended_at=self._ended.get(run.id),
                state=run.state,
            )
            for run in self._mine(dag_id)
        ]

    def status_reads(self, dag_id: str) -> int:
        runs = self._mine(dag_id)
        return runs[-1].gets if runs else 0

    def finish(self, dag_id: str) -> None:
        for run in self._mine(dag_id):
            if not run.is_terminal:
                self.emulator.set_state(run.id, "SUCCESS")
                self._ended[run.id] = time.time()


class DbtCloudDemo(DemoSystem):
    """``DbtCloudRunJobOperator`` against ``DurableDbtCloudRunJobOperator``."""

    name = "dbt-cloud"
    title = "dbt Cloud"
    job_noun = "run"
    cost_unit = "dbt Cloud run time"
    dag_file = DAGS_DIR / "dbt_cloud.py"
    upstream = Side("afd_demo_dbt_cloud_upstream", "DbtCloudRunJobOperator")
    durable = Side("afd_demo_dbt_cloud_durable", "DurableDbtCloudRunJobOperator")
    task_id = "nightly_models"
    operator_args = "deferrable=True, retries=2"
    provider_module = "airflow.providers.dbt.cloud"
    #: The dbt Cloud job each DAG triggers (one job per DAG, so the emulator tells their runs apart).
    job_ids = {upstream.dag_id: 4201, durable.dag_id: 4202}

    def start(self) -> DemoBackend:
        return _DbtCloudBackend(self.job_ids)


register(SnowflakeDemo())
register(DbtCloudDemo())


# --------------------------------------------------------------------------- BigQuery
class _BigQueryBackend(_EmulatorBackend):
    """The BigQuery jobs emulator. A DAG's job is the one whose query names the dag_id (in a comment)."""

    status_path = "/jobs/"

    def __init__(self) -> None:
        from airflow_durable.testing.bigquery import BigQueryEmulator

        # RUNNING is sticky: a query job runs until the demo ends it.
        super().__init__(BigQueryEmulator(lifecycle=["PENDING", "RUNNING"]).start())

    def environment(self) -> dict[str, str]:
        # BIGQUERY_EMULATOR_HOST + an anonymous google_cloud_default connection.
        return dict(self.emulator.environ())

    @staticmethod
    def _query(configuration: Any) -> str:
        return str(((configuration or {}).get("query") or {}).get("query", ""))

    def _mine(self, dag_id: str) -> list[Any]:
        jobs = [j for j in list(self.emulator.jobs.values()) if dag_id in self._query(j.configuration)]
        return sorted(jobs, key=lambda j: j.created)

    def _owns(self, dag_id: str, request: Any) -> bool:
        found = re.search(r"/jobs/([^/?]+)$", request.path)
        return found is not None and any(j.job_id == found.group(1) for j in self._mine(dag_id))

    def submissions(self, dag_id: str) -> int:
        return sum(
            1
            for e in self.emulator.ledger.select("bigquery", "jobs.insert")
            if dag_id in self._query(e.payload.get("configuration"))
        )

    def jobs(self, dag_id: str) -> list[JobRun]:
        return [
            JobRun(
                # Both sides' ids start "airflow_<dag_id>_<task_id>"; their ends tell them apart.
                id=job.job_id if len(job.job_id) <= 16 else f"…{job.job_id[-14:]}",
                started_at=job.created / 1000,
                ended_at=self._ended.get(job.job_id),
                state=job.state,
            )
            for job in self._mine(dag_id)
        ]

    def status_reads(self, dag_id: str) -> int:
        jobs = self._mine(dag_id)
        return jobs[-1].gets if jobs else 0

    def finish(self, dag_id: str) -> None:
        for job in self._mine(dag_id):
            if not job.done:
                self.emulator.set_state(job.job_id, "DONE")
                self._ended[job.job_id] = time.time()


class BigQueryDemo(DemoSystem):
    """``BigQueryInsertJobOperator`` against ``DurableBigQueryInsertJobOperator``."""

    name = "bigquery"
    title = "BigQuery"
    job_noun = "job"
    cost_unit = "slot time"
    dag_file = DAGS_DIR / "bigquery.py"
    upstream = Side("afd_demo_bigquery_upstream", "BigQueryInsertJobOperator")
    durable = Side("afd_demo_bigquery_durable", "DurableBigQueryInsertJobOperator")
    task_id = "nightly_rollup"
    operator_args = "deferrable=True, retries=2"
    provider_module = "airflow.providers.google"

    def start(self) -> DemoBackend:
        return _BigQueryBackend()


register(BigQueryDemo())


# --------------------------------------------------------------------------- AWS (moto-backed)
class _AwsBackend(_EmulatorBackend):
    """An AWS emulator front: the ``aws_default`` connection's ``endpoint_url`` points every hook here.

    A subclass sets :attr:`status_operation` (the logical path of the status read, e.g.
    ``"/batch/DescribeJobs"``), :attr:`success_state` and implements :meth:`_names_dag` (does this
    submission's payload belong to the DAG) and :meth:`_read_ids` (the job ids a status read asks about).
    """

    status_operation: str
    #: REST-JSON services read status with a GET; JSON-protocol ones POST everything.
    status_method: str = "POST"
    success_state: str

    def _names_dag(self, dag_id: str, payload: Any) -> bool:
        raise NotImplementedError

    def _read_ids(self, request: Any) -> list[str]:
        raise NotImplementedError

    def environment(self) -> dict[str, str]:
        env: dict[str, str] = {}
        self.emulator.install_connection(env)
        # A trimmed botocore endpoints file: every hook's new session parses it 4x faster.
        self.emulator.install_fast_botocore(env)
        return env

    def hold_after_submit(self, dag_id: str, seconds: float) -> None:
        # The front rewrites every AWS call's path to /<service>/<Operation>.
        self._holds[dag_id] = self.emulator.faults.add(
            method=self.status_method,
            path_contains=self.status_operation,
            status=None,
            latency=seconds,
            times=1,
            transport="sync",
            predicate=lambda request: self._owns(dag_id, request),
        )

    def _mine(self, dag_id: str) -> list[Any]:
        jobs = [j for j in list(self.emulator.jobs.values()) if self._names_dag(dag_id, j.payload)]
        return sorted(jobs, key=lambda j: j.created_at)

    def _owns(self, dag_id: str, request: Any) -> bool:
        mine = {j.job_id for j in self._mine(dag_id)}
        return any(i.split(":", 1)[0] in mine for i in self._read_ids(request))

    def submissions(self, dag_id: str) -> int:
        return sum(
            1
            for e in self.emulator.ledger.select(self.emulator.system)
            if e.operation in self.emulator.submit_operations and self._names_dag(dag_id, e.payload)
        )

    def jobs(self, dag_id: str) -> list[JobRun]:
        return [
            JobRun(
                # AWS ids are 36-character UUIDs: the first and last characters tell them apart.
                id=f"{job.job_id[:8]}…{job.job_id[-4:]}" if len(job.job_id) > 16 else job.job_id,
                started_at=job.created_at,
                ended_at=self._ended.get(job.job_id),
                state=job.state,
            )
            for job in self._mine(dag_id)
        ]

    def status_reads(self, dag_id: str) -> int:
        jobs = self._mine(dag_id)
        return jobs[-1].reads if jobs else 0

    def finish(self, dag_id: str) -> None:
        for job in self._mine(dag_id):
            if not self.emulator.is_terminal(job.state):
                self.emulator.set_state(job.job_id, self.success_state)
                self._ended[job.job_id] = time.time()


class _RedshiftDataBackend(_AwsBackend):
    """The Redshift Data emulator. A DAG's statement is the one whose SQL names the dag_id (in a comment)."""

    status_operation = "/redshift-data/DescribeStatement"
    success_state = "FINISHED"

    def __init__(self) -> None:
        from airflow_durable.testing.redshift_data import RedshiftDataEmulator

        # STARTED is sticky: a statement runs until the demo ends it.
        super().__init__(RedshiftDataEmulator(lifecycle=["SUBMITTED", "STARTED"]).start())

    def _names_dag(self, dag_id: str, payload: Any) -> bool:
        sqls = (payload or {}).get("Sqls") or [(payload or {}).get("Sql", "")]
        return any(dag_id in str(sql) for sql in sqls)

    def _read_ids(self, request: Any) -> list[str]:
        body = request.json if isinstance(request.json, dict) else {}
        return [str(body.get("Id", ""))]


class RedshiftDemo(DemoSystem):
    """``RedshiftDataOperator`` against ``DurableRedshiftDataOperator``."""

    name = "redshift"
    title = "Redshift Data"
    job_noun = "statement"
    cost_unit = "cluster time"
    dag_file = DAGS_DIR / "redshift.py"
    upstream = Side("afd_demo_redshift_upstream", "RedshiftDataOperator")
    durable = Side("afd_demo_redshift_durable", "DurableRedshiftDataOperator")
    task_id = "nightly_load"
    operator_args = "deferrable=True, retries=2"
    provider_module = "airflow.providers.amazon"

    def start(self) -> DemoBackend:
        return _RedshiftDataBackend()


class _BatchBackend(_AwsBackend):
    """The AWS Batch emulator (moto behind the front). A DAG's job is the one named after the dag_id."""

    status_operation = "/batch/DescribeJobs"
    success_state = "SUCCEEDED"

    def __init__(self) -> None:
        from airflow_durable.testing.batch import BatchEmulator

        # RUNNING is sticky: a job runs until the demo ends it.
        super().__init__(BatchEmulator(lifecycle=["RUNNABLE", "RUNNING"]).start())

    def _names_dag(self, dag_id: str, payload: Any) -> bool:
        return (payload or {}).get("jobName") == dag_id

    def _read_ids(self, request: Any) -> list[str]:
        body = request.json if isinstance(request.json, dict) else {}
        return [str(i) for i in body.get("jobs") or []]


class BatchDemo(DemoSystem):
    """``BatchOperator`` against ``DurableBatchOperator``."""

    name = "batch"
    title = "AWS Batch"
    job_noun = "job"
    cost_unit = "compute time"
    dag_file = DAGS_DIR / "batch.py"
    upstream = Side("afd_demo_batch_upstream", "BatchOperator")
    durable = Side("afd_demo_batch_durable", "DurableBatchOperator")
    task_id = "nightly_etl"
    operator_args = "deferrable=True, retries=2"
    provider_module = "airflow.providers.amazon"

    def start(self) -> DemoBackend:
        return _BatchBackend()


class _EmrEksBackend(_AwsBackend):
    """The EMR on EKS emulator (moto behind the front). A DAG's job run is the one named after the dag_id."""

    status_operation = "/emr-containers/DescribeJobRun"
    status_method = "GET"
    success_state = "COMPLETED"

    def __init__(self) -> None:
        from airflow_durable.testing.emr import EmrContainersEmulator

        # RUNNING is sticky: a job run goes on until the demo ends it.
        super().__init__(EmrContainersEmulator(lifecycle=["PENDING", "RUNNING"]).start())

    def environment(self) -> dict[str, str]:
        # The virtual cluster is created at start; the DAG reads its id from this Variable.
        return {
            **super().environment(),
            f"AIRFLOW_VAR_{EmrEksDemo.cluster_variable.upper()}": self.emulator.virtual_cluster_id,
        }

    def _names_dag(self, dag_id: str, payload: Any) -> bool:
        return (payload or {}).get("name") == dag_id

    def _read_ids(self, request: Any) -> list[str]:
        params = request.path_params or {}
        return [str(params.get("jobRunId") or params.get("id") or "")]


class EmrEksDemo(DemoSystem):
    """``EmrContainerOperator`` against ``DurableEmrContainerOperator``."""

    name = "emr-eks"
    title = "EMR on EKS"
    job_noun = "job run"
    cost_unit = "EKS cluster time"
    dag_file = DAGS_DIR / "emr_eks.py"
    upstream = Side("afd_demo_emr_eks_upstream", "EmrContainerOperator")
    durable = Side("afd_demo_emr_eks_durable", "DurableEmrContainerOperator")
    task_id = "nightly_spark"
    operator_args = "deferrable=True, retries=2"
    provider_module = "airflow.providers.amazon"
    #: The Airflow Variable carrying the emulator's virtual cluster id to the DAG.
    cluster_variable = "afd_demo_emr_virtual_cluster_id"

    def start(self) -> DemoBackend:
        return _EmrEksBackend()


register(RedshiftDemo())
register(BatchDemo())
register(EmrEksDemo())
