"""The one end-to-end runner: registry cases through real Airflow ``dag.test()``, one JSON summary per cell.

Usage: ``python -m tests.e2e.runner CASE IMPL:PATH:SCENARIO [IMPL:PATH:SCENARIO ...]``

``CASE`` is a conformance registry id (``tests/conformance/systems.py``): it names the emulator, the
durable operator (through the catalogue, by its task-state-store key; ``upstream`` runs the provider
operator it replaces, with the same arguments) and the status endpoint and states the fault plans use.
``IMPL`` is ``durable`` or ``upstream``, ``PATH`` ``deferrable`` or ``sync``; ``SCENARIO`` one of the
case's scenarios below. Every cell of one case runs in this one process (an Airflow start-up costs more
than a DAG run), each as a new DAG run against the same emulator with a fresh ledger and fault plan.
The emulator runs here on loopback; the unmodified provider hooks and triggers reach it as they would
the real service. The DAGs live in ``tests/e2e/dags/e2e_cells.py`` (``dag.test()`` needs the file
inside a bundle), built from `E2E` for the case named in ``E2E_CASE``.

Scenarios (DESIGN.md §6), the fault plan of each per system family:

* ``crash_before_defer`` / ``crash_after_submit`` / ``dies_before_defer`` — the try dies right after
  submitting (its first status read fails hard: HTTP 400/403, not retried) while the job keeps running;
  the retry must reconnect (and defer again), submitting nothing.
* ``already_succeeded`` — the same death (BigQuery, EMR: the same failed deferral), but the job is done
  when the retry starts: it must return the result and XComs without submitting or deferring.
* ``crash_after_deferral`` / ``crash_after_defer`` / ``crash`` — the task deferred; the trigger's status
  poll fails (an API error it does not retry) and the try fails while the job runs on (sync: the poll
  fails mid-way). The retry must reconnect.
* ``dies_after_deferral`` — the job succeeds under the trigger; the resumed try dies in
  ``execute_complete`` (sync: on a read after the job finished). The retry finds it already succeeded.
* ``run_failed`` — the job fails; the retry must submit a second one with a new token.
* ``status_5xx_before_defer`` — the status API answers 5xx past the hook's retries right after submit.
* ``sync_status_error`` — (sync) the poll meets 5xx past the hook's retries mid-poll.
* ``response_lost`` — the submission executes but its answer is lost; the hook resends the request.

A trigger that *raises* cannot be shown here: ``dag.test()`` marks the task failed without a retry when
an inline trigger raises, unlike the real triggerer. Those cells run against a real scheduler +
triggerer in ``tests/e2e_runtime`` and in the conformance suite.
"""

from __future__ import annotations

import importlib
import inspect
import json
import os
import sys
import uuid
from collections.abc import Callable, MutableMapping
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any, NamedTuple

from tests.e2e import dagrun

TASK_ID = "durable_job"
#: One botocore attempt per call: an injected fault reaches the operator at once.
BOTOCORE = {"retries": {"mode": "standard", "total_max_attempts": 1}}
EMR_ROLE = "arn:aws:iam::123456789012:role/emr-job"


class Cell(NamedTuple):
    impl: str
    path: str
    scenario: str

    @classmethod
    def parse(cls, text: str) -> Cell:
        impl, path, scenario = text.split(":")
        return cls(impl, path, scenario)

    def __str__(self) -> str:
        return f"{self.impl}:{self.path}:{self.scenario}"


#: ``configure(emulator, case, cell)``: the lifecycle and faults of one scenario, on a cleared emulator.
Configure = Callable[[Any, Any, Cell], None]


@dataclass(frozen=True)
class E2ECase:
    """How one registry case runs under ``dag.test()``: the DAG task's arguments, the emulator's setup,
    the scenarios and what its summary adds to the common one."""

    #: ``task(deferrable)`` → the operator's arguments (the same for the durable and the upstream class).
    task: Callable[[bool], dict[str, Any]]
    #: ``setup(emulator, env)``: after start, install the connection / resources the DAG uses into ``env``.
    setup: Callable[[Any, MutableMapping[str, str]], None]
    scenarios: dict[str, Configure]
    #: ``extra(emulator, case, output)`` → summary fields of this system.
    extra: Callable[[Any, Any, str], dict[str, Any]] = lambda emulator, case, output: {}
    #: The provider class to run as ``upstream``, when it must differ from the catalogue's.
    upstream: Callable[[], type] | None = None
    retries: int = 2


# --- scenarios -----------------------------------------------------------------------------------


def _count_after(n: int) -> Callable[[Any], bool]:
    """A fault predicate that lets the first ``n`` matching requests through ("mid-poll")."""
    calls = [0]

    def predicate(request: Any) -> bool:
        calls[0] += 1
        return calls[0] > n

    return predicate


def _nth(n: int) -> Callable[[Any], bool]:
    calls = [0]

    def predicate(request: Any) -> bool:
        calls[0] += 1
        return calls[0] == n

    return predicate


def _status(case: Any) -> str:
    return case.status_call[1]


def _databricks(lifecycle: list[str], status: int = 0, times: int = 1, after: int | None = None) -> Configure:
    def configure(emulator: Any, case: Any, cell: Cell) -> None:
        emulator.lifecycle = lifecycle
        if status:
            predicate = _count_after(after) if after is not None else None
            emulator.faults.add(
                method="GET",
                path_contains=_status(case),
                status=status,
                times=times,
                transport="sync",
                predicate=predicate,
            )

    return configure


def _databricks_run_failed(emulator: Any, case: Any, cell: Cell) -> None:
    emulator.lifecycle = ["PENDING"] * 4 + ["RUNNING"] * 2 + ["TERMINATED:SUCCESS"]
    emulator.queue_lifecycles(["PENDING"] * 4 + ["RUNNING"] * 2 + ["TERMINATED:FAILED"])


_DATABRICKS_SCENARIOS: dict[str, Configure] = {
    # Reads before the provider defers: get_job_id, get_run_page_url, get_run (all runs/get).
    "crash_before_defer": _databricks(["PENDING"] * 4 + ["RUNNING"] * 3 + ["TERMINATED:SUCCESS"], 400),
    "already_succeeded": _databricks(["TERMINATED:SUCCESS"], 400),
    "run_failed": _databricks_run_failed,
    # databricks_retry_limit=2: two 503s in a row and the hook gives up.
    "status_5xx_before_defer": _databricks(
        ["PENDING"] * 4 + ["RUNNING"] * 3 + ["TERMINATED:SUCCESS"], 503, times=2
    ),
    "sync_status_error": _databricks(
        ["PENDING"] * 3 + ["RUNNING"] * 3 + ["TERMINATED:SUCCESS"], 503, times=2, after=3
    ),
}


def _snowflake(emulator: Any, case: Any, cell: Cell) -> None:
    if cell.scenario == "response_lost":
        emulator.lifecycle = ["RUNNING", "SUCCESS"]
        emulator.faults.add(
            method="POST", predicate=lambda r: r.path == "/api/v2/statements", drop=True, after=True, times=1
        )
        return
    emulator.lifecycle = (
        ["RUNNING"] * 3 + ["SUCCESS"] if cell.scenario == "crash_after_submit" else ["SUCCESS"]
    )
    emulator.faults.add(method="GET", path_contains=_status(case), status=400, times=1, transport="sync")


def _bigquery(emulator: Any, case: Any, cell: Cell) -> None:
    if cell.scenario == "crash_after_deferral":
        emulator.lifecycle = ["PENDING"] + ["RUNNING"] * 4 + ["DONE"]
    else:
        emulator.lifecycle = ["PENDING", "DONE"]
    # The operator's own first status read (deferrable: job.running() before deferring; sync: the
    # first poll) goes through; the next one — the trigger's first poll, or the second sync poll —
    # fails with a reason the google client does not retry.
    emulator.faults.add(method="GET", path_contains=_status(case), status=503, times=1, predicate=_nth(2))


def _dbt_cloud(emulator: Any, case: Any, cell: Cell) -> None:
    status = _status(case)
    if cell.scenario == "already_succeeded":
        emulator.lifecycle = ["SUCCESS"]
        emulator.faults.add(method="GET", path_contains=status, status=400, times=1, transport="sync")
        return
    emulator.lifecycle = ["QUEUED"] + ["RUNNING"] * 3 + ["SUCCESS"]
    if cell.path == "deferrable":  # the trigger's poll fails: an "error" event while the run goes on
        emulator.faults.add(method="GET", path_contains=status, status=503, times=1, transport="async")
    else:
        emulator.faults.add(
            method="GET",
            path_contains=status,
            status=503,
            times=1,
            transport="sync",
            predicate=_count_after(1),
        )


def _aws(emulator: Any, case: Any, cell: Cell) -> None:
    path = _status(case)
    emulator.lifecycle = [case.running] * 3 + [case.succeeded]
    # A hard, non-retryable failure of one sync status read stands in for the worker dying there.
    crash = dict(path_contains=path, status=403, times=1, transport="sync")
    if cell.scenario == "dies_before_defer":
        emulator.faults.add(**crash)
    elif cell.path == "deferrable":
        # The first sync read after the trigger has polled: the resumed try's execute_complete.
        emulator.faults.add(
            **crash, predicate=lambda request: bool(emulator.server.requests_to(path, transport="async"))
        )
    else:
        # Sync: the try polls until this cell's job is done, then dies on a later read (result / links).
        earlier = set(emulator.jobs)

        def after_done(request: Any) -> bool:
            return any(
                job.reported == case.succeeded for key, job in emulator.jobs.items() if key not in earlier
            )

        emulator.faults.add(**crash, predicate=after_done)


def _emr(emulator: Any, case: Any, cell: Cell) -> None:
    emulator.lifecycle = ["PENDING"] + ["RUNNING"] * 3 + [case.succeeded]

    def fail_once(request: Any) -> bool:
        if cell.scenario == "already_succeeded":  # the job finishes while the failed try is down
            emulator.set_state(emulator.latest_job().job_id, case.succeeded)
        return True

    # HTTP 500, which the provider's wait does not retry: the deferred try fails while the job runs.
    emulator.faults.add(
        method=None, path_contains=_status(case), status=500, times=1, transport="async", predicate=fail_once
    )


# --- what each case's DAG task is --------------------------------------------------------------------


def _databricks_task(run_now: bool) -> Callable[[bool], dict[str, Any]]:
    def task(deferrable: bool) -> dict[str, Any]:
        common = dict(polling_period_seconds=1, databricks_retry_limit=2, databricks_retry_delay=0.1)
        if run_now:
            return dict(job_id=42, notebook_params={"run": "{{ run_id }}"}, **common)
        job = {
            "run_name": "e2e-{{ ds }}",
            "new_cluster": {"spark_version": "15.4.x-scala2.12", "num_workers": 1},
            "notebook_task": {"notebook_path": "/Shared/etl"},
        }
        return dict(json=job, **common)

    return task


def _snowflake_task(deferrable: bool) -> dict[str, Any]:
    from tenacity import stop_after_attempt, wait_fixed

    return dict(
        sql="insert into audit select '{{ run_id }}'; select count(*) from audit",
        statement_count=2,
        poll_interval=0,
        # The hook's own retries (connection errors, 429/503/504) without its 1-60 s back-off.
        snowflake_api_retry_args={"stop": stop_after_attempt(3), "wait": wait_fixed(0.1)},
    )


def _bigquery_task(deferrable: bool) -> dict[str, Any]:
    query = {
        "query": "SELECT '{{ ds }}' AS day",
        "useLegacySql": False,
        "destinationTable": {"projectId": "emulator-project", "datasetId": "ds", "tableId": "daily"},
    }
    return dict(configuration={"query": query}, poll_interval=0.5)


def _dbt_cloud_task(deferrable: bool) -> dict[str, Any]:
    return dict(job_id=42, check_interval=1, timeout=600)


def _redshift_task(deferrable: bool) -> dict[str, Any]:
    return dict(
        sql="insert into sales select * from staging_sales where day = '{{ ds }}'",
        database="dev",
        cluster_identifier="analytics",
        poll_interval=1,
        botocore_config=BOTOCORE,
    )


def _batch_task(deferrable: bool) -> dict[str, Any]:
    from tests.aws_support import PromptBatchWaiters

    return dict(
        job_name="nightly-etl",
        job_queue="emulator-queue",
        job_definition="emulator-job-def",
        container_overrides={"command": ["python", "etl.py", "{{ ds }}"]},
        poll_interval=1,
        max_retries=1000,
        # The provider's default sync wait sleeps 3 x U(1, 10) s; a prompt user-supplied waiter instead.
        waiters=None if deferrable else PromptBatchWaiters(),
        botocore_config=BOTOCORE,
    )


def _emr_steps_task(deferrable: bool) -> dict[str, Any]:
    step = {
        "Name": "etl-{{ ds }}",
        "ActionOnFailure": "CONTINUE",
        "HadoopJarStep": {"Jar": "command-runner.jar", "Args": ["spark-submit", "s3://jobs/etl.py"]},
    }
    return dict(
        job_flow_id=os.environ.get("E2E_EMR_CLUSTER_ID", "j-unset"),
        steps=[step],
        waiter_delay=1,
        waiter_max_attempts=30,
        botocore_config=BOTOCORE,
    )


def _emr_serverless_task(deferrable: bool) -> dict[str, Any]:
    return dict(
        application_id=os.environ.get("E2E_EMR_APPLICATION_ID", "unset"),
        execution_role_arn=EMR_ROLE,
        job_driver={"sparkSubmit": {"entryPoint": "s3://jobs/etl.py"}},
        waiter_delay=1,
        waiter_max_attempts=30,
        botocore_config=BOTOCORE,
    )


def _emr_container_task(deferrable: bool) -> dict[str, Any]:
    return dict(
        name="etl",
        virtual_cluster_id=os.environ.get("E2E_EMR_VIRTUAL_CLUSTER_ID", "unset"),
        execution_role_arn=EMR_ROLE,
        release_label="emr-7.1.0-latest",
        job_driver={"sparkSubmitJobDriver": {"entryPoint": "s3://jobs/etl.py"}},
        poll_interval=1,
        botocore_config=BOTOCORE,
    )


def _upstream_emr_serverless() -> type:
    from airflow.providers.amazon.aws.operators.emr import EmrServerlessStartJobOperator

    class UpstreamEmrServerlessStartJobOperator(EmrServerlessStartJobOperator):
        """The provider operator as a real worker runs it: every try parses the DAG file anew, so its
        ``client_request_token`` (a uuid4 made in ``__init__``) is new on every try. ``dag.test()`` runs
        all tries on one parsed object, which would hide that; this restores it and changes nothing else."""

        def execute(self, context: Any, event: Any = None) -> Any:
            if event is None:
                self.client_request_token = str(uuid.uuid4())
            return super().execute(context, event)

    return UpstreamEmrServerlessStartJobOperator


# --- emulator setup and summary extras -------------------------------------------------------------


def _connection(conn_id: str, job_id: int | None = None, fast_botocore: bool = False) -> Callable[..., None]:
    def setup(emulator: Any, env: MutableMapping[str, str]) -> None:
        if job_id is not None:
            emulator.add_job(job_id=job_id, name="nightly-etl")
        emulator.install_connection(env.__setitem__, conn_id=conn_id)
        if fast_botocore:
            emulator.install_fast_botocore(env.__setitem__)

    return setup


def _bigquery_setup(emulator: Any, env: MutableMapping[str, str]) -> None:
    emulator.install(env.__setitem__)


def _emr_setup(emulator: Any, env: MutableMapping[str, str]) -> None:
    emulator.install_connection(env.__setitem__, conn_id="aws_default")
    env["E2E_EMR_CLUSTER_ID"] = getattr(emulator, "cluster_id", "")
    env["E2E_EMR_APPLICATION_ID"] = getattr(emulator, "application_id", "")
    env["E2E_EMR_VIRTUAL_CLUSTER_ID"] = getattr(emulator, "virtual_cluster_id", "")


def _snowflake_extra(emulator: Any, case: Any, output: str) -> dict[str, Any]:
    return {"retry_flags": [e.payload.get("retry") for e in case.submit_calls(emulator)]}


def _bigquery_extra(emulator: Any, case: Any, output: str) -> dict[str, Any]:
    # The provider trigger logs this once per success event it yields.
    return {"trigger_successes": output.count("BigQuery Job succeeded")}


_DATABRICKS = dict(setup=_connection("databricks_default", job_id=42), scenarios=_DATABRICKS_SCENARIOS)
_AWS_SCENARIOS: dict[str, Configure] = {"dies_after_deferral": _aws, "dies_before_defer": _aws}
_EMR_SCENARIOS: dict[str, Configure] = {"crash_after_defer": _emr, "already_succeeded": _emr}

#: Registry case id → how it runs end to end.
E2E: dict[str, E2ECase] = {
    "databricks_submit_run": E2ECase(task=_databricks_task(run_now=False), **_DATABRICKS),
    "databricks_run_now": E2ECase(task=_databricks_task(run_now=True), **_DATABRICKS),
    "snowflake_sql_api": E2ECase(
        task=_snowflake_task,
        setup=_connection("snowflake_default"),
        scenarios=dict.fromkeys(("crash_after_submit", "already_succeeded", "response_lost"), _snowflake),
        extra=_snowflake_extra,
    ),
    "bigquery_insert_job": E2ECase(
        task=_bigquery_task,
        setup=_bigquery_setup,
        scenarios=dict.fromkeys(("crash_after_deferral", "already_succeeded"), _bigquery),
        extra=_bigquery_extra,
    ),
    "dbt_cloud_run_job": E2ECase(
        task=_dbt_cloud_task,
        setup=_connection("dbt_cloud_default", job_id=42),
        scenarios=dict.fromkeys(("crash", "already_succeeded"), _dbt_cloud),
    ),
    "redshift_data": E2ECase(
        task=_redshift_task, setup=_connection("aws_default", fast_botocore=True), scenarios=_AWS_SCENARIOS
    ),
    "batch": E2ECase(
        task=_batch_task, setup=_connection("aws_default", fast_botocore=True), scenarios=_AWS_SCENARIOS
    ),
    "emr_add_steps": E2ECase(task=_emr_steps_task, setup=_emr_setup, scenarios=_EMR_SCENARIOS, retries=1),
    "emr_serverless_start_job": E2ECase(
        task=_emr_serverless_task,
        setup=_emr_setup,
        scenarios=_EMR_SCENARIOS,
        upstream=_upstream_emr_serverless,
        retries=1,
    ),
    "emr_container": E2ECase(task=_emr_container_task, setup=_emr_setup, scenarios=_EMR_SCENARIOS, retries=1),
}

#: Emulator fixture name of the registry → the emulator class the fixture starts.
EMULATORS = {
    "databricks_emulator": "airflow_durable.testing.databricks.DatabricksEmulator",
    "snowflake_emulator": "airflow_durable.testing.snowflake.SnowflakeEmulator",
    "bigquery_emulator": "airflow_durable.testing.bigquery.BigQueryEmulator",
    "dbt_cloud_emulator": "airflow_durable.testing.dbt_cloud.DbtCloudEmulator",
    "redshift_data_emulator": "airflow_durable.testing.redshift_data.RedshiftDataEmulator",
    "batch_emulator": "airflow_durable.testing.batch.BatchEmulator",
    "emr_emulator": "airflow_durable.testing.emr.EmrEmulator",
    "emr_serverless_emulator": "airflow_durable.testing.emr.EmrServerlessEmulator",
    "emr_containers_emulator": "airflow_durable.testing.emr.EmrContainersEmulator",
}


# --- the registry, the DAGs and the run ------------------------------------------------------------


def registry_case(case_id: str) -> Any:
    from tests.conformance.systems import SYSTEMS

    for case in SYSTEMS:
        if case.id == case_id:
            return case
    raise SystemExit(f"no conformance case {case_id!r}: one of {sorted(c.id for c in SYSTEMS)}")


def operator_class(case: Any, impl: str) -> type:
    """The durable class of ``case`` (found in the catalogue by its task-state-store key), or the
    provider class it replaces."""
    from airflow_durable.catalogue import OPERATORS

    spec = E2E[case.id]
    if impl == "upstream" and spec.upstream is not None:
        return spec.upstream()
    key = case.external_id_key.removeprefix("airflow_durable.")
    entry = next(op for op in OPERATORS if op.key.removeprefix("airflow_durable.") == key)
    module, name = (
        (entry.durable_module, entry.durable_class)
        if impl == "durable"
        else (entry.provider_module, entry.provider_class)
    )
    return getattr(importlib.import_module(module), name)


def dag_id(case_id: str, impl: str, path: str) -> str:
    return f"e2e__{case_id}__{impl}__{path}"


def build_dags(case_id: str | None) -> dict[str, Any]:
    """The DAGs of one case: one task each, durable or upstream, deferrable or sync."""
    if not case_id:
        return {}
    try:
        from airflow.sdk import DAG
    except ImportError:  # Airflow 2.x
        from airflow import DAG

    case, spec = registry_case(case_id), E2E[case_id]
    dags = {}
    for impl in ("durable", "upstream"):
        cls = operator_class(case, impl)
        for path in ("deferrable", "sync"):
            with DAG(
                dag_id=dag_id(case_id, impl, path),
                schedule=None,
                start_date=datetime(2026, 1, 1),
                catchup=False,
                tags=["airflow-durable", "e2e"],
            ) as dag:
                cls(
                    task_id=TASK_ID,
                    deferrable=path == "deferrable",
                    retries=spec.retries,
                    retry_delay=timedelta(seconds=1),
                    **spec.task(path == "deferrable"),
                )
            dags[dag.dag_id] = dag
    return dags


def _date_arg() -> str:
    from airflow.models.dag import DAG

    # Airflow 3 names it logical_date, Airflow 2 execution_date.
    return "logical_date" if "logical_date" in inspect.signature(DAG.test).parameters else "execution_date"


def run_cell(emulator: Any, case: Any, dags: dict[str, Any], cell: Cell, day: int) -> dict[str, Any]:
    spec = E2E[case.id]
    if cell.scenario not in spec.scenarios:
        raise SystemExit(f"{case.id} has no scenario {cell.scenario!r}: one of {sorted(spec.scenarios)}")
    emulator.ledger.clear()
    emulator.faults.clear()
    emulator.server.log.clear()
    spec.scenarios[cell.scenario](emulator, case, cell)
    dag = dags[dag_id(case.id, cell.impl, cell.path)]
    # A distinct logical date per cell: several runs of one DAG in one process.
    date = datetime(2026, 1, 1, tzinfo=UTC) + timedelta(hours=day)
    dag_run, output = dagrun.run_dag(dag, **{_date_arg(): date})
    submissions = case.submissions(emulator)
    xcoms = dagrun.xcoms(dag.dag_id, dag_run.run_id).get(TASK_ID, {})
    return {
        "case": case.id,
        "operator": f"{case.id}/{cell.impl}",
        "impl": cell.impl,
        "path": cell.path,
        "scenario": cell.scenario,
        "dag_run_state": str(getattr(dag_run, "state", None)),
        "submissions": len(submissions),
        "submit_calls": len(case.submit_calls(emulator)),
        "tokens": [e.token for e in submissions],
        "external_ids": [e.external_id for e in submissions],
        "decisions": dagrun.decisions(output),
        "trigger_polls": len(emulator.server.requests_to(_status(case), transport="async")),
        "tries": dagrun.tries(dag.dag_id, dag_run.run_id, TASK_ID),
        "xcoms": xcoms,
        "result": xcoms.get("return_value"),
        "emulator_errors": [repr(e) for e in getattr(emulator.server, "errors", [])],
        **spec.extra(emulator, case, output),
    }


def main(argv: list[str]) -> int:
    if len(argv) < 2:
        raise SystemExit(__doc__)
    case = registry_case(argv[0])
    cells = [Cell.parse(text) for text in argv[1:]]
    emulator_module, _, emulator_class = EMULATORS[case.emulator_fixture].rpartition(".")
    emulator = getattr(importlib.import_module(emulator_module), emulator_class)().start()
    try:
        E2E[case.id].setup(emulator, os.environ)
        os.environ["E2E_CASE"] = case.id
        dags = importlib.import_module("e2e_cells").DAGS  # the dags folder is on PYTHONPATH
        for day, cell in enumerate(cells):
            summary = run_cell(emulator, case, dags, cell, day)
            print("E2E-SUMMARY " + json.dumps(summary, default=str), flush=True)
    finally:
        emulator.stop()
    return 0


@dataclass
class Plan:
    """Cells of one case to run in one subprocess; ``run(env)`` → summaries by cell."""

    case_id: str
    cells: list[Cell] = field(default_factory=list)

    def run(self, env: dict[str, str]) -> dict[Cell, dict[str, Any]]:
        cmd = [sys.executable, "-m", "tests.e2e.runner", self.case_id, *map(str, self.cells)]
        found, _ = dagrun.summaries(cmd, env, "E2E-SUMMARY ", expected=len(self.cells))
        return {Cell(s["impl"], s["path"], s["scenario"]): s for s in found}


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
