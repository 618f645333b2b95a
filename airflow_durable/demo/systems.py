"""The systems ``airflow-durable demo --system <name>`` can run: the catalogue's rows the demo table has.

A `DemoSystem` is one row of `airflow_durable.catalogue` (the operator pair, the provider) joined with
its row of `airflow_durable.demo.table` (the emulator, the DAG arguments, the words of the output).
Every system runs on the one `DemoBackend`: the emulators share their names (``jobs``, ``set_state``,
``install_connection``, a job's ``payload``, ``created_at`` and ``reads``), so nothing here is
written per system. Adding a system to the demo is a row in the table.

Nothing here imports Airflow: the DAG file is parsed by the Airflow components, never by the demo
process.
"""

from __future__ import annotations

import importlib
import json
import time
import warnings
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from airflow_durable import catalogue
from airflow_durable.demo.table import DEMO

__all__ = [
    "DemoBackend",
    "DemoSystem",
    "JobRun",
    "Side",
    "get",
    "names",
    "register",
]


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


@dataclass(frozen=True)
class DemoSystem:
    """A system the demo can run (see the module docstring)."""

    #: ``--system`` value (the catalogue's job kind).
    name: str
    #: Display name, e.g. ``"Databricks"``.
    title: str
    #: What the system calls one job, singular (``"run"``, ``"query"``, ``"job"``).
    job_noun: str
    #: What a duplicate job costs, for the cost line: ``"cluster time"``, ``"warehouse time"``...
    cost_unit: str
    upstream: Side
    durable: Side
    #: The task id inside both DAGs.
    task_id: str
    #: The catalogue row of the durable operator.
    operator: catalogue.Operator
    #: The demo table's row.
    data: Mapping[str, Any] = field(repr=False)
    #: Extra words for the header: the arguments both operators get.
    operator_args: str = "deferrable=True, retries=2"

    @property
    def dag_ids(self) -> tuple[str, str]:
        return (self.upstream.dag_id, self.durable.dag_id)

    @property
    def provider_module(self) -> str:
        """The provider package's module; the demo checks it is installed before starting Airflow."""
        package = catalogue.integration(self.operator.integration).provider_package
        return package.replace("apache-airflow-providers-", "airflow.providers.").replace("-", ".")

    @property
    def extra(self) -> str:
        """``pip install "airflow-durable[<extra>]"`` installs the provider."""
        return catalogue.integration(self.operator.integration).extra

    @property
    def job_ids(self) -> dict[str, int]:
        """The external job each DAG triggers, where the operator starts a predefined one (dbt Cloud)."""
        return dict(self.data.get("job_ids") or {})

    def dag_source(self) -> str:
        """The DAG file the demo writes into its deployment: both DAGs, built by `demo.dag.build`."""
        return (
            f'"""airflow-durable demo: the {self.title} DAG pair, '
            f'{self.upstream.operator} and {self.durable.operator}."""\n\n'
            "from airflow_durable.demo.dag import build\n\n"
            f"build({self.name!r}, globals())\n"
        )

    def operator_kwargs(self, dag_id: str) -> dict[str, Any]:
        """The arguments of ``dag_id``'s task, the table's with the DAG's values filled in."""
        return _fill(dict(self.data["kwargs"]), dag_id, self.job_ids.get(dag_id))

    def start(self, job_ids: Mapping[str, int] | None = None) -> DemoBackend:
        """Start the emulator and return it (stopped by the demo with `DemoBackend.stop`).

        Args:
            job_ids: the predefined job of each DAG (dbt Cloud), instead of the table's.
        """
        return DemoBackend(self, self.job_ids if job_ids is None else dict(job_ids))


def _fill(value: Any, dag_id: str, job_id: int | None) -> Any:
    if isinstance(value, dict):
        return {k: _fill(v, dag_id, job_id) for k, v in value.items()}
    if isinstance(value, list):
        return [_fill(v, dag_id, job_id) for v in value]
    if value == "{job_id}":
        return job_id
    if isinstance(value, str):
        return value.replace("{dag_id}", dag_id)
    return value


class DemoBackend:
    """A started emulator, seen through what the demo needs to drive and measure a DAG run.

    Every method takes the ``dag_id`` whose jobs it is about: both DAGs of a system share one emulator.
    A job is a DAG's when the DAG owns its predefined job (``job_ids``), or else when the DAG's id is in
    the job's submission (its run name, job name or a comment in its SQL: the table's ``{dag_id}``).
    """

    def __init__(self, system: DemoSystem, job_ids: Mapping[str, int] | None = None) -> None:
        self.system = system
        self.job_ids = dict(job_ids or {})
        module, _, name = str(system.data["emulator"]).rpartition(".")
        emulator_class = getattr(importlib.import_module(module), name)
        # The demo's emulator serves a demonstration, not a user's test: where a contract library is not
        # installed (databricks-sdk is not in the databricks extra) it serves unchecked, without a warning.
        from airflow_durable.testing.contracts import ContractUnavailableWarning

        warnings.filterwarnings("ignore", category=ContractUnavailableWarning)
        # The running state is sticky: a job runs until the demo ends it (after Airflow's retry).
        self.emulator: Any = emulator_class(lifecycle=list(system.data["running"])).start()
        self._holds: dict[str, Any] = {}
        self._ended: dict[Any, float] = {}
        for dag_id, job_id in self.job_ids.items():
            self.emulator.add_job(job_id=job_id, name=dag_id)

    # ------------------------------------------------------------------ which jobs are the DAG's
    def _is_mine(self, dag_id: str, job: Any) -> bool:
        if self.job_ids:
            return getattr(job, "job_id", None) == self.job_ids.get(dag_id)
        return dag_id in json.dumps(job.payload, default=str)

    def _mine(self, dag_id: str) -> list[Any]:
        jobs = [j for j in list(self.emulator.jobs.values()) if self._is_mine(dag_id, j)]
        return sorted(jobs, key=lambda j: j.created_at)

    def _owns(self, dag_id: str, request: Any) -> bool:
        """Is this request about one of the DAG's jobs (an id in its path, parameters or body)?"""
        words: set[str] = set(str(request.path).split("/"))
        values = [*(request.path_params or {}).values(), *request.params.values()]
        for value in values:
            for item in value if isinstance(value, list) else [value]:
                words.update({str(item), str(item).split(":", 1)[0]})
        return any(str(j.id) in words for j in self._mine(dag_id))

    # ------------------------------------------------------------------ what the demo asks
    def environment(self) -> dict[str, str]:
        """The ``AIRFLOW_CONN_*`` variables (and any other environment) the components need."""
        # The emulator's own: AIRFLOW_CONN_* plus whatever its transport needs (CA variables,
        # Snowflake's routing sitecustomize on PYTHONPATH, BIGQUERY_EMULATOR_HOST).
        env: dict[str, str] = {}
        self.emulator.install_connection(env)
        fast_botocore = getattr(self.emulator, "install_fast_botocore", None)
        if fast_botocore is not None:  # every AWS hook's new session parses endpoints.json 4x faster
            fast_botocore(env)
        for variable, attribute in (self.system.data.get("variables") or {}).items():
            env[f"AIRFLOW_VAR_{variable.upper()}"] = str(getattr(self.emulator, attribute))
        return env

    def hold_after_submit(self, dag_id: str, seconds: float) -> None:
        """Keep try 1 of ``dag_id`` inside its worker after it submitted its job.

        Hold the first status read that follows the submission for ``seconds`` (the worker's, over the
        sync transport: the trigger's are async), so the demo can SIGKILL the worker while the job runs
        and before the task hands over to the triggerer.
        """
        method, path = self.system.data["status"]
        # ``"hold": "submit"``: the operator defers right after its submit call answers (no status read
        # in the worker), so the submit call itself is held, after it took effect.
        on_submit = self.system.data.get("hold") == "submit"
        self._holds[dag_id] = self.emulator.faults.add(
            method=method,
            path_contains=path,
            status=None,
            latency=seconds,
            times=1,
            transport="sync",
            predicate=(
                (lambda request: dag_id.encode() in request.body)
                if on_submit
                else (lambda request: self._owns(dag_id, request))
            ),
            after=on_submit,
        )

    def held(self, dag_id: str) -> bool:
        """True once the submitted job is running and the worker is waiting on the held call."""
        hold = self._holds.get(dag_id)
        return hold is not None and hold.hits >= 1 and bool(self._mine(dag_id))

    def submissions(self, dag_id: str) -> int:
        """How many submit calls for ``dag_id`` started a job on the emulator.

        An idempotent replay is not one: a retry killed inside its submit call (``"hold": "submit"``)
        resends the same token, and the service answers with the job the first call started.
        """
        jobs = list(self.emulator.jobs.values())
        submits = {j.operation for j in jobs}
        mine = {str(j.id) for j in jobs if self._is_mine(dag_id, j)}
        return sum(
            1
            for e in self.emulator.ledger.select(self.emulator.system, created=True)
            if e.operation in submits
            and {str(i) for i in (e.external_id if isinstance(e.external_id, list) else [e.external_id])}
            & mine
        )

    def jobs(self, dag_id: str) -> list[JobRun]:
        """The jobs the emulator started for ``dag_id``, oldest first."""
        tail = self.system.data.get("id_tail")
        return [
            JobRun(
                id=_short(str(job.id), tail),
                started_at=job.created_at,
                ended_at=self._ended.get(job.id),
                state=job.state,
            )
            for job in self._mine(dag_id)
        ]

    def status_reads(self, dag_id: str) -> int:
        """How many status reads the newest job of ``dag_id`` has answered (to see the trigger polling)."""
        jobs = self._mine(dag_id)
        return jobs[-1].reads if jobs else 0

    def finish(self, dag_id: str) -> None:
        """End every running job of ``dag_id`` successfully, as the real system would when done."""
        for job in self._mine(dag_id):
            if not self.emulator.is_terminal(job.state):
                self.emulator.set_state(job.id, self.system.data["success"])
                self._ended[job.id] = time.time()

    def stop(self) -> None:
        """Stop the emulator."""
        self.emulator.stop()


def _short(job_id: str, tail: int | None) -> str:
    if len(job_id) <= 16:
        return job_id
    # Long ids (UUIDs, handles) differ at the end: the start and the end tell them apart.
    return f"…{job_id[-tail:]}" if tail else f"{job_id[:8]}…{job_id[-4:]}"


# --------------------------------------------------------------------------- the registry
_REGISTRY: dict[str, DemoSystem] = {}


def register(system: DemoSystem) -> DemoSystem:
    """Make ``system`` available as ``--system <system.name>``."""
    if system.name in _REGISTRY:
        raise ValueError(f"demo system {system.name!r} is already registered")
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


def _from_catalogue(name: str, data: Mapping[str, Any]) -> DemoSystem:
    op = catalogue.operators_of(name)[0]  # Databricks: submit run, the first of its two
    prefix = f"afd_demo_{name.replace('-', '_')}"
    return DemoSystem(
        name=name,
        title=str(data.get("title") or catalogue.integration(op.integration).title),
        job_noun=data["job_noun"],
        cost_unit=data["cost_unit"],
        upstream=Side(f"{prefix}_upstream", op.provider_class),
        durable=Side(f"{prefix}_durable", op.durable_class),
        task_id=data["task_id"],
        operator=op,
        data=data,
    )


for _name in catalogue.SYSTEM_NAMES:
    if _name in DEMO:
        register(_from_catalogue(_name, DEMO[_name]))
