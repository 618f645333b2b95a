"""``airflow-durable demo``: end to end on a real deployment, and its output and failure reporting.

The end-to-end test runs the command as a user would (a subprocess, ``--json``) and reads the
measured comparison from its stdout. The fast tests render a known result, and make real steps fail
with a stand-in ``airflow`` executable (``AIRFLOW_DURABLE_RUNTIME_BIN``), so no Airflow starts.
"""

from __future__ import annotations

import json
import os
import re
import sqlite3
import stat
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any

import pytest
from rich.console import Console

from airflow_durable.demo import render, systems
from airflow_durable.demo.deployment import Deployment, DeploymentError
from airflow_durable.demo.runner import DemoResult, DemoStepError, SideResult, Timeouts, run_demo
from airflow_durable.demo.systems import JobRun
from tests.reporting import record

CLI = [sys.executable, "-m", "airflow_durable.cli", "demo"]
HOME_LINE = re.compile(r"create a temporary AIRFLOW_HOME: done in [\d.]+s \((?P<home>[^)]+)\)")


def _airflow_major() -> int:
    import airflow

    return int(airflow.__version__.split(".")[0])


def _demo_env(**extra: str) -> dict[str, str]:
    # The test session's own Airflow settings must not leak into the demo (it makes its own home).
    env = {k: v for k, v in os.environ.items() if not k.startswith("AIRFLOW__") and k != "AIRFLOW_HOME"}
    env.pop("PYTEST_CURRENT_TEST", None)
    return {**env, **extra}


# --------------------------------------------------------------------------- end to end
#: A job's state once the demo finished it, per system.
SUCCESS_STATE = {
    "databricks": "TERMINATED:SUCCESS",
    "snowflake": "SUCCESS",
    "dbt-cloud": "SUCCESS",
    "bigquery": "DONE",
    "redshift": "FINISHED",
    "batch": "SUCCEEDED",
    "emr-eks": "COMPLETED",
    "emr-steps": "COMPLETED",
    "emr-serverless": "SUCCESS",
}
#: Systems the runtime run demos by default (each demo costs ~2 min of CI). The others run when
#: AFD_DEMO_SYSTEMS names them (comma-separated) or is "all".
DEFAULT_DEMO_SYSTEMS = ("databricks",)


def _demo_systems() -> list[Any]:
    wanted = os.environ.get("AFD_DEMO_SYSTEMS", "")
    chosen = set(systems.names()) if wanted == "all" else {w.strip() for w in wanted.split(",") if w.strip()}
    return [
        pytest.param(
            name,
            marks=()
            if name in DEFAULT_DEMO_SYSTEMS or name in chosen
            else pytest.mark.skip(reason=f"opt-in: AFD_DEMO_SYSTEMS={name} (or all) runs this demo"),
        )
        for name in systems.names()
    ]


@pytest.mark.runtime
@pytest.mark.parametrize("system", _demo_systems())
def test_demo_end_to_end_json(system: str) -> None:
    """The command itself: upstream submits twice after the kill, durable once; both succeed on try 2."""
    if _airflow_major() < 3:
        pytest.skip("the demo runs Airflow 3's components")
    from airflow_durable import shims

    done = subprocess.run(
        CLI + ["--json", "--system", system], capture_output=True, text=True, timeout=600, env=_demo_env()
    )
    assert done.returncode == 0, done.stderr[-6000:]
    result = json.loads(done.stdout)  # stdout is the JSON document and nothing else
    up, du = result["upstream"], result["durable"]
    record(
        f"demo {system} (Airflow {result['airflow_version']})",
        f"upstream submissions={up['submissions']} durable submissions={du['submissions']} "
        f"recovery={up['recovery_seconds']:.1f}s/{du['recovery_seconds']:.1f}s "
        f"total={result['total_seconds']:.1f}s",
    )
    assert result["ok"] is True and result["system"] == system
    assert result["durable_runtime"] is shims.DURABLE_RUNTIME
    assert up["submissions"] == 2, up
    assert du["submissions"] == (1 if shims.DURABLE_RUNTIME else 2), du
    for side in (up, du):
        assert side["final_state"] == "success" and side["dag_run_state"] == "success", side
        assert side["tries"] == 2, side
        assert side["try_states"][0][0] == 1 and side["try_states"][-1] == [2, "success"], side
        assert side["killed_pids"] >= 1, side  # try 1 really was killed, not failed some other way
        assert all(job["state"] == SUCCESS_STATE[system] for job in side["jobs"]), side
    assert up["retry_action"] == "submitted"
    if shims.DURABLE_RUNTIME:
        assert du["retry_action"] == "reconnected"
        assert result["cost"]["duplicate_jobs"] == 1 and result["cost"]["duplicate_seconds"] > 0
        assert result["cost"]["statement"].endswith("Durable: none.")
    assert result["as_expected"] is True
    # The temporary AIRFLOW_HOME is gone.
    home = HOME_LINE.search(done.stderr)
    assert home is not None, done.stderr[-3000:]
    assert not Path(home["home"]).exists()
    assert result["airflow_home"] is None


# --------------------------------------------------------------------------- rendering
def _side(side: str, operator: str, jobs: list[JobRun], tries: int = 2) -> SideResult:
    return SideResult(
        side=side,
        operator=operator,
        dag_id=f"afd_demo_databricks_{side}",
        run_id=f"demo__{side}__1",
        submissions=len(jobs),
        jobs=jobs,
        final_state="success",
        tries=tries,
        try_states=[(1, "failed"), (2, "success")],
        dag_run_state="success",
        wall_seconds=41.25,
        recovery_seconds=9.5,
        killed_pids=2,
    )


def _result(durable_runtime: bool = True) -> DemoResult:
    durable_jobs = [JobRun("1002", 1000.0, 1030.0, "TERMINATED:SUCCESS")]
    if not durable_runtime:
        durable_jobs.append(JobRun("1004", 1012.0, 1030.0, "TERMINATED:SUCCESS"))
    return DemoResult(
        system="databricks",
        title="Databricks",
        job_noun="run",
        cost_unit="cluster time",
        operator_args="deferrable=True, retries=2",
        airflow_version="3.3.2" if durable_runtime else "3.2.2",
        durable_runtime=durable_runtime,
        upstream=_side(
            "upstream",
            "DatabricksSubmitRunOperator",
            [
                JobRun("1001", 1000.0, 1030.0, "TERMINATED:SUCCESS"),
                JobRun("1003", 1012.5, 1030.0, "TERMINATED:SUCCESS"),
            ],
        ),
        durable=_side("durable", "DurableDatabricksSubmitRunOperator", durable_jobs),
        total_seconds=70.4,
    )


def _rendered(result: DemoResult) -> str:
    console = Console(record=True, width=render.PLAIN_WIDTH, color_system=None)
    render.print_result(result, console)
    return console.export_text()


def test_table_shows_both_sides_and_the_cost() -> None:
    text = _rendered(_result())
    assert "upstream: DatabricksSubmitRunOperator(deferrable=True, retries=2)" in text
    assert "durable:  DurableDatabricksSubmitRunOperator(deferrable=True, retries=2)" in text
    rows = {
        cells[0]: cells[1:]
        for line in text.splitlines()
        if line.startswith("│") and (cells := [c.strip() for c in line.strip("│").split("│")])
    }
    assert rows["runs submitted"] == ["2 (1001, 1003)", "1 (1002)"]
    assert rows["try 2"] == ["submitted run 1003", "reconnected to 1002"]
    assert rows["final task state"] == ["success", "success"]
    assert rows["tries"] == ["2 (failed, success)", "2 (failed, success)"]
    assert rows["kill → try 2 waiting"] == ["9.5 s", "9.5 s"]
    assert rows["wall time"] == ["41.2 s", "41.2 s"]
    # The cost line: the duplicate's run time here (1030 - 1012.5) and what it means at real durations.
    assert (
        "Cost: upstream ran 1 duplicate Databricks run (1003) next to run 1001, which went on untracked; "
        "here it ran 17.5 s, with a real 1 h job it is 1 h of extra cluster time per crash like this one. "
        "Durable: none."
    ) in text
    assert "Unexpected outcome" not in text and "degraded" not in text
    # The table fits a terminal of 80 columns; the sentences are one line each (soft wrap).
    table = [line for line in text.splitlines() if line[:1] in "┏┃┡│└"]
    assert table and max(len(line) for line in table) <= 80
    assert [line for line in text.splitlines() if line.startswith("Cost: ")] == [_result().cost_statement()]


def test_degraded_durable_side_is_said_plainly() -> None:
    result = _result(durable_runtime=False)
    assert result.as_expected  # below 3.3 two submissions on the durable side are the documented behaviour
    text = _rendered(result)
    assert "(degraded below Airflow 3.3)" in text and "durable (degraded)" in text
    assert "Durable: 1 too (degraded: Airflow 3.2.2 has no task_state_store)." in text
    assert "degrades to submitting a fresh job on every try" in text


def test_an_unexpected_outcome_is_flagged() -> None:
    result = _result()
    result.upstream.submissions = 1
    result.upstream.jobs = result.upstream.jobs[:1]
    assert not result.as_expected
    text = _rendered(result)
    assert "Unexpected outcome" in text and "No duplicate Databricks run" in text


def test_json_carries_the_same_numbers() -> None:
    data = json.loads(render.result_json(_result()))
    assert data["ok"] is True and data["as_expected"] is True
    assert data["upstream"]["submissions"] == 2 and data["durable"]["submissions"] == 1
    assert data["upstream"]["duplicate_jobs"] == 1 and data["durable"]["duplicate_jobs"] == 0
    assert data["upstream"]["try_states"] == [[1, "failed"], [2, "success"]]
    assert data["upstream"]["jobs"][1] == {
        "id": "1003",
        "started_at": 1012.5,
        "ended_at": 1030.0,
        "state": "TERMINATED:SUCCESS",
        "seconds": 17.5,
    }
    assert data["cost"]["duplicate_seconds"] == 17.5
    assert data["cost"]["statement"] == _result().cost_statement()


def test_plain_progress_lines() -> None:
    import io

    stream = io.StringIO()
    reporter = render.PlainReporter(stream)
    reporter.start("airflow db migrate (SQLite)")
    reporter.done("airflow db migrate (SQLite)", 4.25, "detail")
    reporter.failed("import the DAGs", 1.0)
    lines = stream.getvalue().splitlines()
    assert re.fullmatch(r"\[\s+[\d.]+s\] airflow db migrate \(SQLite\) \.\.\.", lines[0])
    assert lines[1].endswith("airflow db migrate (SQLite): done in 4.2s (detail)")
    assert lines[2].endswith("import the DAGs: FAILED after 1.0s")
    assert "\x1b" not in stream.getvalue()  # no terminal codes in a log


# --------------------------------------------------------------------------- registry
def test_registry() -> None:
    assert "databricks" in systems.names()
    dbx = systems.get("databricks")
    assert "build('databricks', globals())" in dbx.dag_source() and dbx.dag_ids == (
        "afd_demo_databricks_upstream",
        "afd_demo_databricks_durable",
    )
    with pytest.raises(KeyError, match="unknown demo system 'nope'; known: .*databricks"):
        systems.get("nope")
    with pytest.raises(ValueError, match="already registered"):
        systems.register(dbx)
    assert systems.names() == [
        "batch",
        "bigquery",
        "databricks",
        "dbt-cloud",
        "emr-eks",
        "emr-serverless",
        "emr-steps",
        "redshift",
        "snowflake",
    ]
    assert systems.get("emr-eks").durable.operator == "DurableEmrContainerOperator"
    assert systems.get("redshift").durable.operator == "DurableRedshiftDataOperator"
    assert systems.get("batch").dag_ids == ("afd_demo_batch_upstream", "afd_demo_batch_durable")
    bq = systems.get("bigquery")
    assert bq.dag_ids == ("afd_demo_bigquery_upstream", "afd_demo_bigquery_durable")
    assert bq.durable.operator == "DurableBigQueryInsertJobOperator"
    assert systems.get("snowflake").dag_ids == ("afd_demo_snowflake_upstream", "afd_demo_snowflake_durable")
    assert systems.get("snowflake").durable.operator == "DurableSnowflakeSqlApiOperator"
    dbt = systems.get("dbt-cloud")
    assert dbt.dag_ids == ("afd_demo_dbt_cloud_upstream", "afd_demo_dbt_cloud_durable")
    assert dbt.durable.operator == "DurableDbtCloudRunJobOperator"
    assert sorted(dbt.job_ids) == sorted(dbt.dag_ids)
    assert set(SUCCESS_STATE) == set(systems.names())


def test_an_emulator_pythonpath_is_prepended_not_swapped_in(monkeypatch: pytest.MonkeyPatch) -> None:
    """Snowflake's routing sitecustomize goes in front; the package's parent and the caller's stay."""
    from airflow_durable.demo.deployment import PACKAGE_PARENT

    monkeypatch.setenv("PYTHONPATH", "/caller/path")
    dep = Deployment(extra_env={"PYTHONPATH": "/emulator/site"})
    try:
        parts = dep.env["PYTHONPATH"].split(os.pathsep)
        assert parts == ["/emulator/site", str(PACKAGE_PARENT), "/caller/path"]
    finally:
        dep.stop()


def test_demo_backends_measure_each_dag_apart() -> None:
    """Both DAGs share an emulator: each backend counts, holds and finishes only its DAG's jobs."""
    #: What each system's environment carries besides its AIRFLOW_CONN_* (TLS CA, endpoint variable).
    transport = {
        "snowflake": "SSL_CERT_FILE",
        "dbt-cloud": "SSL_CERT_FILE",
        "bigquery": "BIGQUERY_EMULATOR_HOST",
    }
    for name, variable in transport.items():
        system = systems.get(name)
        backend = system.start()
        try:
            env = backend.environment()
            assert any(k.startswith("AIRFLOW_CONN_") for k in env) and variable in env
            for dag_id in system.dag_ids:
                assert backend.submissions(dag_id) == 0 and backend.jobs(dag_id) == []
                assert backend.status_reads(dag_id) == 0 and not backend.held(dag_id)
        finally:
            backend.stop()


def _databricks_client(backend: Any) -> tuple[Any, Any]:
    import requests

    emulator = backend.emulator
    url, headers = f"{emulator.url}/api/2.2/jobs/runs/", {"Authorization": f"Bearer {emulator.token}"}

    def submit(kwargs: dict[str, Any]) -> Any:
        return requests.post(url + "submit", json=kwargs["json"], headers=headers, timeout=10).json()[
            "run_id"
        ]

    def read(run_id: Any) -> None:
        requests.get(url + "get", params={"run_id": run_id}, headers=headers, timeout=10).raise_for_status()

    return submit, read


def _batch_client(backend: Any) -> tuple[Any, Any]:
    client = backend.emulator.client()

    def submit(kwargs: dict[str, Any]) -> Any:
        names = {"job_name": "jobName", "job_queue": "jobQueue", "job_definition": "jobDefinition"}
        return client.submit_job(**{names[k]: kwargs[k] for k in names})["jobId"]

    return submit, lambda job_id: client.describe_jobs(jobs=[job_id])


@pytest.mark.parametrize("name, client", [("databricks", _databricks_client), ("batch", _batch_client)])
def test_the_backend_holds_measures_and_finishes_only_its_dags_jobs(name: str, client: Any) -> None:
    """The one backend on an HTTP and an AWS emulator, driven over the wire as the operators do."""
    import time

    system = systems.get(name)
    up, du = system.dag_ids
    backend = system.start()
    try:
        submit, read = client(backend)
        backend.hold_after_submit(up, 0.6)
        ids = {dag_id: submit(system.operator_kwargs(dag_id)) for dag_id in (up, du)}
        started = time.monotonic()
        read(ids[du])  # the other DAG's status read is not held
        assert time.monotonic() - started < 0.5 and not backend.held(up)
        started = time.monotonic()
        read(ids[up])
        assert time.monotonic() - started >= 0.6 and backend.held(up) and not backend.held(du)
        read(ids[up])  # held once only
        assert backend.submissions(up) == backend.submissions(du) == 1
        assert [j.id[:8] for j in backend.jobs(up)] == [str(ids[up])[:8]]
        assert backend.status_reads(up) == 2 and backend.status_reads(du) == 1
        backend.finish(up)
        [done], [running] = backend.jobs(up), backend.jobs(du)
        assert done.state == system.data["success"] and done.seconds is not None
        assert running.state != system.data["success"] and running.ended_at is None
    finally:
        backend.stop()


def test_demo_dags_import_cleanly(tmp_path: Path) -> None:
    """The DAG file the demo writes into its deployment parses, with both DAGs and one task each."""
    if _airflow_major() < 3:
        pytest.skip("the demo DAGs use airflow.sdk (Airflow 3)")
    try:
        from airflow.dag_processing.dagbag import DagBag
    except ImportError:  # before Airflow 3.2
        from airflow.models.dagbag import DagBag

    for name in systems.names():
        system = systems.get(name)
        dag_file = tmp_path / f"airflow_durable_demo_{name}.py"
        dag_file.write_text(system.dag_source())
        bag = DagBag(dag_folder=str(dag_file))
        assert bag.import_errors == {}, bag.import_errors
        assert set(bag.dag_ids) == set(system.dag_ids)
        for dag_id in system.dag_ids:
            assert [t.task_id for t in bag.dags[dag_id].tasks] == [system.task_id]


def test_importing_the_demo_imports_no_airflow_and_no_rich() -> None:
    probe = (
        "import airflow_durable.demo, airflow_durable.demo.systems, sys, json; "
        "print(json.dumps(sorted(sys.modules)))"
    )
    out = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    loaded = json.loads(out.stdout)
    assert not [m for m in loaded if m == "airflow" or m.startswith("airflow.") or m == "rich"]


def test_unknown_system_is_a_usage_error() -> None:
    import typer
    from typer.testing import CliRunner

    from airflow_durable.demo.cli import register

    app = typer.Typer()
    app.callback()(lambda: None)  # a group, so `demo` is a subcommand as in airflow-durable
    register(app)
    unknown = CliRunner().invoke(app, ["demo", "--system", "nope"])
    assert unknown.exit_code == 2
    assert (
        "unknown demo system 'nope'; known: batch, bigquery, databricks, dbt-cloud, emr-eks, "
        "emr-serverless, emr-steps, redshift, snowflake" in unknown.output
    )
    listed = CliRunner().invoke(app, ["demo", "--list"])
    assert listed.exit_code == 0
    assert [line.split()[0] for line in listed.output.splitlines() if line.strip()] == systems.names()


# --------------------------------------------------------------------------- failure reporting
@pytest.mark.skipif(_airflow_major() >= 3, reason="Airflow 2 only")
def test_on_airflow_2_the_demo_says_it_needs_airflow_3() -> None:
    done = subprocess.run(CLI + ["--json"], capture_output=True, text=True, timeout=300, env=_demo_env())
    assert done.returncode == 1, done.stderr[-3000:]
    failure = json.loads(done.stdout)
    assert failure["step"] == "check the installation"
    assert (
        "runs Airflow 3's components" in failure["error"]
        and "install apache-airflow>=3.0" in failure["error"]
    )


def _fake_airflow(tmp_path: Path, script: str) -> Path:
    """A directory with an ``airflow`` executable standing in for Airflow's CLI, and a ``python``
    that answers the installation check as an Airflow 3.3 would (the check itself is covered by
    the end-to-end test; these tests are about the steps after it)."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    probe = {"version": "3.3.2", "durable_runtime": True, "airflow3": True, "provider": True}
    for name, text in (
        ("airflow", textwrap.dedent(script)),
        ("python", f"echo 'AFD-PROBE {json.dumps(probe)}'\n"),
    ):
        exe = bin_dir / name
        exe.write_text("#!/usr/bin/env bash\n" + text)
        exe.chmod(exe.stat().st_mode | stat.S_IXUSR)
    return bin_dir


def test_a_failing_step_is_named_with_its_log_and_exits_non_zero(tmp_path: Path) -> None:
    bin_dir = _fake_airflow(
        tmp_path,
        """
        if [ "$1 $2" = "db migrate" ]; then
            echo "sqlalchemy.exc.OperationalError: unable to open database file" >&2
            exit 3
        fi
        exit 0
        """,
    )
    env = _demo_env(AIRFLOW_DURABLE_RUNTIME_BIN=str(bin_dir))
    done = subprocess.run(CLI + ["--json"], capture_output=True, text=True, timeout=300, env=env)
    assert done.returncode == 1, (done.stdout, done.stderr[-3000:])
    assert json.loads(done.stdout) == {
        "ok": False,
        "system": "databricks",
        "step": "airflow db migrate (SQLite)",
        "error": "airflow db migrate failed (exit 3)",
    }
    assert "airflow-durable demo failed at step: airflow db migrate (SQLite)" in done.stderr
    assert "unable to open database file" in done.stderr  # the component's own words
    home = HOME_LINE.search(done.stderr)
    assert home is not None and not Path(home["home"]).exists()


def test_a_component_that_dies_is_named_with_its_log_tail(tmp_path: Path) -> None:
    bin_dir = _fake_airflow(
        tmp_path,
        """
        case "$1" in
            db) exit 0 ;;
            scheduler) echo "scheduler: cannot bind the log server port" ; exit 1 ;;
            *) exec sleep 60 ;;
        esac
        """,
    )
    env = _demo_env(AIRFLOW_DURABLE_RUNTIME_BIN=str(bin_dir))
    done = subprocess.run(CLI, capture_output=True, text=True, timeout=300, env=env)
    assert done.returncode == 1, done.stderr[-3000:]
    assert done.stdout == ""  # without --json nothing but the table goes to stdout, and there is none
    assert "failed at step: start api-server, scheduler, dag-processor, triggerer" in done.stderr
    assert "reason: scheduler exited with 1" in done.stderr
    assert "----- scheduler.log (tail) -----\nscheduler: cannot bind the log server port" in done.stderr


def test_a_timeout_names_the_step_and_what_it_waited_for(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Components that never answer the health check: the wait runs out.
    bin_dir = _fake_airflow(
        tmp_path, 'case "$1" in db) exit 0 ;; *) echo "$1 starting"; exec sleep 60 ;; esac\n'
    )
    monkeypatch.setenv("AIRFLOW_DURABLE_RUNTIME_BIN", str(bin_dir))
    with pytest.raises(DemoStepError) as caught:
        run_demo(
            systems.get("databricks"), timeouts=Timeouts(healthy=1.0, stop_grace=1.0), durable_runtime=True
        )
    err = caught.value
    assert err.step == "start api-server, scheduler, dag-processor, triggerer"
    assert err.reason == "timed out after 1s waiting for all components healthy"
    assert "----- triggerer.log (tail) -----\ntriggerer starting" in err.logs


def test_a_dag_import_error_fails_the_wait_at_once(tmp_path: Path) -> None:
    dep = Deployment(dags_folder=tmp_path)
    try:
        with sqlite3.connect(dep.db_path) as db:
            db.execute("CREATE TABLE serialized_dag (dag_id TEXT)")
            db.execute("CREATE TABLE import_error (filename TEXT, stacktrace TEXT)")
            db.execute(
                "INSERT INTO import_error VALUES ('demo.py', 'ModuleNotFoundError: No module named x')"
            )
        with pytest.raises(DeploymentError) as caught:
            dep.wait_dags(["afd_demo_databricks_durable"], timeout=30)
        assert caught.value.reason == "the dag-processor could not import the DAG file(s)"
        assert "demo.py:\nModuleNotFoundError: No module named x" in caught.value.logs
    finally:
        dep.stop()
    assert not dep.home.exists()
