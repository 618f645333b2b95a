"""Fast checks that the runtime tier's matrix is the catalogue's (no deployment): every job kind the
catalogue ships runs in the matrix (or is left out with a reason), its DAG-id keys stay stable, and the
emulator runner hands the matrix DAGs the connections and Variables they read."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from collections.abc import Iterator
from typing import Any

import pytest

from airflow_durable import catalogue
from tests.e2e_runtime import reliability_report
from tests.e2e_runtime.matrix import (
    AWS_SYSTEMS,
    CELLS_ENV,
    CI_GROUPS,
    DEFINED_JOB_SYSTEMS,
    KEYS,
    KINDS,
    MORE_KEYS,
    NOT_IN_MATRIX,
    SYSTEMS,
    UNMEASURED,
    Cell,
    parse_dag_id,
    selected_systems,
)

#: The keys docs/reliability.json stores results under before issue 12: never renamed.
_STORED_KEYS = ("databricks", "snowflake", "bigquery", "dbtcloud", "redshift", "batch", "emreks")


def test_every_catalogue_job_kind_is_in_the_matrix() -> None:
    """A job kind added to the catalogue must get a matrix key (and so cells, a CI group, a report row)."""
    assert set(KEYS) == set(catalogue.SYSTEM_NAMES), (
        f"catalogue job kinds without a matrix key: {sorted(set(catalogue.SYSTEM_NAMES) - set(KEYS))}"
    )
    assert list(SYSTEMS) == [*KEYS.values(), *MORE_KEYS.values()]
    assert len(set(SYSTEMS)) == len(KEYS) + len(MORE_KEYS), "a key names two operators"
    assert all(KINDS[key] == kind for kind, key in KEYS.items())
    for durable, key in MORE_KEYS.items():
        kind = catalogue.operator(durable).system
        # A kind's further operator: its kind runs under KEYS too, with another operator first.
        assert KINDS[key] == kind and KEYS[kind] != key, (durable, key)
        assert SYSTEMS[KEYS[kind]][2] != durable, (durable, key)


def test_every_catalogue_operator_runs_or_is_left_out_with_a_reason() -> None:
    """One durable/upstream pair per job kind runs; every other catalogue operator is named, with why."""
    running = {durable for _, _, durable in SYSTEMS.values()}
    for op in catalogue.OPERATORS:
        assert (op.durable_class in running) != (op.durable_class in NOT_IN_MATRIX), op.durable_class
        assert NOT_IN_MATRIX.get(op.durable_class, "x").strip(), op.durable_class
    assert set(NOT_IN_MATRIX) <= {op.durable_class for op in catalogue.OPERATORS}
    for key, (_, upstream, durable) in SYSTEMS.items():
        row = catalogue.operator(durable)
        assert (row.system, row.provider_class) == (KINDS[key], upstream)


def test_keys_are_dag_id_safe_and_stable() -> None:
    """No ``_`` in a key (the DAG id splits on it); the keys results are stored under stay."""
    for key in SYSTEMS:
        assert re.fullmatch(r"[a-z]+", key), key
        cell = Cell(key, "clear", "durable", "sync")
        assert parse_dag_id(cell.dag_id) == cell
    assert set(_STORED_KEYS) <= set(SYSTEMS)
    stored = json.loads(reliability_report.RESULTS.read_text())["configurations"]
    for entry in stored.values():
        assert {c["system"] for c in entry["cells"].values()} <= set(SYSTEMS)
    assert set(UNMEASURED) <= set(SYSTEMS)
    assert set(reliability_report.SYSTEM_TITLES) == set(SYSTEMS)


def test_one_system_per_ci_group() -> None:
    """Each CI push runs one system's cells, as before the EMR systems joined."""
    assert CI_GROUPS == len(SYSTEMS)
    assert [selected_systems(f"{i}/{CI_GROUPS}") for i in range(CI_GROUPS)] == [(s,) for s in SYSTEMS]


def test_matrix_imports_nothing_from_airflow() -> None:
    """The matrix module is read by the report and the CLI-side tests on machines without Airflow."""
    code = (
        "import sys, tests.e2e_runtime.matrix, tests.e2e_runtime.reliability_report; "
        "print(sorted(m for m in sys.modules if m.split('.')[0] == 'airflow'))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, timeout=60)
    assert out.stdout.strip() == "[]", out.stdout


def test_every_matrix_system_has_a_demo_backend() -> None:
    """The emulator runner builds each system's backend from the demo's row of its job kind."""
    from airflow_durable.demo import systems as demo

    assert set(KINDS.values()) <= set(demo.names())


# --------------------------------------------------------------------------- runner -> DAG file
_VAR = re.compile(r"\{\{\s*var\.value\.(\w+)\s*\}\}")


@pytest.fixture(scope="module")
def dag_module() -> Iterator[Any]:
    """The matrix DAG file, defining one cell (its module-level loop builds ``AFD_RT_CELLS``'s DAGs)."""
    pytest.importorskip("airflow.sdk")
    import importlib

    old = os.environ.get(CELLS_ENV)
    os.environ[CELLS_ENV] = "rt_emr_clear_durable_sync"
    try:
        sys.modules.pop("tests.e2e_runtime.matrix_dags.runtime_matrix", None)
        yield importlib.import_module("tests.e2e_runtime.matrix_dags.runtime_matrix")
    finally:
        sys.modules.pop("tests.e2e_runtime.matrix_dags.runtime_matrix", None)
        if old is None:
            os.environ.pop(CELLS_ENV, None)
        else:
            os.environ[CELLS_ENV] = old


@pytest.mark.parametrize("system", [s for s in SYSTEMS if s in AWS_SYSTEMS or s in MORE_KEYS.values()])
def test_runner_environment_reaches_the_dag_arguments(system: str, dag_module: Any) -> None:
    """Each AWS system's emulator (started for real), and that of a kind's second system, gives its own
    connection (``aws_<system>``, ``databricks_<system>``: none replaces another emulator's) and the
    Variables its matrix DAGs read; the classes the DAG file builds are the catalogue's pair."""
    from tests.e2e_runtime.emulator_runner import _backend, _environment

    dag_id = f"rt_{system}_clear_durable_sync"
    backend = _backend(system, [dag_id])
    try:
        env = _environment(system, backend)
    finally:
        backend.stop()
    arguments = dag_module._arguments(system, dag_id, False)
    (conn_id,) = [value for name, value in arguments.items() if name.endswith("_conn_id")]
    assert conn_id.endswith(f"_{system}")
    assert f"AIRFLOW_CONN_{conn_id.upper()}" in env
    assert not [n for n in env if n.startswith("AIRFLOW_CONN_") and n.endswith("_DEFAULT")]
    wanted = set(_VAR.findall(json.dumps(arguments)))
    provided = {name.removeprefix("AIRFLOW_VAR_").lower() for name in env if name.startswith("AIRFLOW_VAR_")}
    assert wanted <= provided, (wanted, provided)
    assert all(env[f"AIRFLOW_VAR_{name.upper()}"] for name in wanted)
    upstream, durable = dag_module._classes(system)
    assert (upstream.__name__, durable.__name__) == SYSTEMS[system][1:]


@pytest.mark.parametrize("system", DEFINED_JOB_SYSTEMS)
def test_a_defined_job_system_starts_the_dags_own_job(system: str, dag_module: Any) -> None:
    """A system whose operator starts a defined job (dbt Cloud, Databricks run-now) finds it in its
    emulator, one per DAG: the emulator counts a DAG's jobs by it."""
    from tests.e2e_runtime.emulator_runner import _backend

    dag_ids = [f"rt_{system}_clear_durable_sync", f"rt_{system}_clear_upstream_sync"]
    backend = _backend(system, dag_ids)
    try:
        defined = backend.emulator.job_definitions
        jobs = [dag_module._arguments(system, dag_id, False)["job_id"] for dag_id in dag_ids]
        assert len(set(jobs)) == 2 and set(jobs) <= set(defined), (jobs, sorted(defined))
    finally:
        backend.stop()
    assert set(DEFINED_JOB_SYSTEMS) <= set(SYSTEMS)


def test_a_task_process_defines_only_its_own_dag() -> None:
    """Airflow's parsing context names the DAG a task process runs: the matrix file then defines that DAG
    alone and imports one system's provider, not every selected cell's (a CPU second per task process)."""
    pytest.importorskip("airflow.sdk")
    wanted = "rt_redshift_clear_durable_sync"
    code = (
        "import sys, tests.e2e_runtime.matrix_dags.runtime_matrix as m; "
        "print('>>', sorted(k for k in vars(m) if k.startswith('rt_'))); "
        "print('>>', sorted(n for n in sys.modules if n.startswith('airflow_durable.operators.')))"
    )

    def printed(out: str) -> list[str]:
        # Airflow's logging may write warnings (a library's FutureWarning) to stdout: only our lines count.
        return [line[3:] for line in out.splitlines() if line.startswith(">> ")]

    cells_ = ",".join(["rt_bigquery_clear_durable_sync", wanted, "rt_snowflake_clear_upstream_sync"])
    env = {**os.environ, CELLS_ENV: cells_}
    everything = subprocess.run(
        [sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=300
    )
    assert everything.returncode == 0, everything.stderr[-2000:]
    ours = "airflow_durable.operators."
    assert printed(everything.stdout) == [
        str(sorted(cells_.split(","))),
        str([ours + "bigquery", ours + "redshift", ours + "snowflake"]),
    ]
    env["_AIRFLOW_PARSING_CONTEXT_DAG_ID"] = wanted  # what the task runner sets while it parses
    own = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=300)
    assert own.returncode == 0, own.stderr[-2000:]
    assert printed(own.stdout) == [str([wanted]), str([ours + "redshift"])]


def test_a_scheduler_stop_cell_needs_xcoms_that_name_its_one_job() -> None:
    """``Fault.xcom_job``: a durable cell keeps the promise only if its XComs hold its one job's full id
    as a whole value (an item of a list, or the list joined as EMR's job id is); not a URL containing it."""
    from dataclasses import replace

    from tests.e2e_runtime.tier import CellResult, _xcom_job

    cell = Cell("databricks", "schedstop", "durable", "sync")
    assert _xcom_job(cell, ["7"], "success", {"run_id": 7, "run_page_url": "https://x/7"}) is True
    assert _xcom_job(cell, ["7"], "success", {"run_id": 8, "run_page_url": "https://x/runs/7"}) is False
    assert _xcom_job(cell, ["s-1,s-2"], "success", {"return_value": ["s-1", "s-2"]}) is True
    assert _xcom_job(cell, ["q1"], "success", {"query_ids": ["q1"]}) is True
    # Not asked: the provider's side, two jobs, a task that did not succeed, a fault without the flag.
    assert _xcom_job(Cell("databricks", "schedstop", "upstream", "sync"), ["7"], "success", {}) is None
    assert _xcom_job(cell, ["7", "8"], "success", {}) is None
    assert _xcom_job(cell, ["7"], "failed", {}) is None
    assert _xcom_job(Cell("databricks", "taskkill", "durable", "sync"), ["7"], "success", {}) is None
    ok = CellResult(
        cell.dag_id, cell.system, cell.fault, cell.side, cell.path, "x", jobs=1, final_state="success"
    )
    assert (
        ok.durable_ok and not replace(ok, xcom_job=False).durable_ok and replace(ok, xcom_job=True).durable_ok
    )
