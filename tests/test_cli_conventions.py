"""The ``airflow-durable`` command line's conventions, on every subcommand.

``-h`` and ``--help``, ``--version``, one ``--format`` (``text``/``json``; ``check`` adds ``sarif`` and
``github``), ``-q``/``--quiet``, help without Python type names, and the exit codes: the same table in
each command's help and in its docs page, and each code produced by a real invocation. ``jobs`` and
``orphans`` read Airflow's REST API: here a loopback stub of the few endpoints they call answers them
(the real deployment is tests/jobs/test_jobs_runtime.py), and job statuses come from the Databricks
emulator through the provider's own hook.
"""

from __future__ import annotations

import json
import re
import threading
from collections.abc import Iterator, Mapping
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import pytest
from typer.testing import CliRunner, Result

import airflow_durable
from airflow_durable import cli
from airflow_durable.catalogue import OPERATORS
from airflow_durable.demo import cli as demo_cli
from airflow_durable.jobs import cli as jobs_cli
from airflow_durable.lint import cli as lint_cli

ROOT = Path(__file__).resolve().parents[1]
CORPUS = ROOT / "tests" / "lint" / "corpus"
MIGRATE_CASES = ROOT / "tests" / "lint" / "migrate_cases"

#: Every command: its exit codes and the docs page that lists them (None: the top-level command).
EXIT_CODES: dict[str | None, Mapping[int, str]] = {
    None: cli.EXIT_CODES,
    "check": lint_cli.CHECK_EXIT_CODES,
    "migrate": lint_cli.MIGRATE_EXIT_CODES,
    "jobs": jobs_cli.JOBS_EXIT_CODES,
    "orphans": jobs_cli.ORPHANS_EXIT_CODES,
    "demo": demo_cli.EXIT_CODES,
}
DOCS = {
    "check": "check.md",
    "migrate": "migrate.md",
    "jobs": "jobs.md",
    "orphans": "jobs.md",
    "demo": "demo.md",
}
SUBCOMMANDS = [c for c in EXIT_CODES if c is not None]


def invoke(*args: str, cwd: Path | None = None, env: dict[str, str] | None = None) -> Result:
    """The real ``airflow-durable`` app, in process."""
    runner = CliRunner()
    if cwd is None:
        return runner.invoke(cli.build_app(), list(args), prog_name="airflow-durable", env=env)
    with pytest.MonkeyPatch.context() as mp:
        mp.chdir(cwd)
        return runner.invoke(cli.build_app(), list(args), prog_name="airflow-durable", env=env)


def _words(text: str) -> str:
    return " ".join(text.split())


# --------------------------------------------------------------------------- help
def test_version_prints_the_package_version() -> None:
    result = invoke("--version")
    assert result.exit_code == 0 and result.stdout == f"airflow-durable {airflow_durable.__version__}\n"


def test_commands_listed_at_the_top_level_are_all_there_is() -> None:
    listed = invoke("-h").stdout.split("Commands:\n", 1)[1].split("\n\n", 1)[0]
    assert re.findall(r"^  (\S+)", listed, flags=re.M) == SUBCOMMANDS  # wrapped lines are indented deeper


@pytest.mark.parametrize("command", [None, *SUBCOMMANDS], ids=lambda c: c or "airflow-durable")
def test_help_is_conventional_and_lists_the_exit_codes(command: str | None) -> None:
    args = [command] if command else []
    short, long = invoke(*args, "-h"), invoke(*args, "--help")
    assert short.exit_code == long.exit_code == 0, short.output
    assert short.stdout == long.stdout
    text = short.stdout
    assert text.startswith(f"Usage: airflow-durable {command + ' ' if command else ''}[OPTIONS]")
    # typer's own help shows <list[Path]>, <bool>, <str>, <path> beside each parameter.
    assert not re.search(r"<[^>\n]*>", text), text
    assert not re.search(r"\b(list|dict|tuple|set|Optional|Union)\[|NoneType", text), text
    assert "-h, --help" in text
    if command is not None:
        assert "--format [text|json" in text and "-q, --quiet" in text
    codes = EXIT_CODES[command]
    section = text.split("Exit codes:\n", 1)[1]
    assert _words(section) == _words(" ".join(f"{c} {t}" for c, t in sorted(codes.items())))


def test_check_keeps_its_machine_formats() -> None:
    assert "--format [text|json|sarif|github]" in invoke("check", "-h").stdout


@pytest.mark.parametrize("command", SUBCOMMANDS)
def test_the_docs_page_lists_the_same_exit_codes(command: str) -> None:
    page = (ROOT / "docs" / DOCS[command]).read_text(encoding="utf-8")
    for code, meaning in EXIT_CODES[command].items():
        assert f"| {code} | {meaning} |" in page, (command, code, DOCS[command])


def test_no_command_is_a_usage_error_that_shows_the_help() -> None:
    result = invoke()
    assert result.exit_code == 2 and "Usage: airflow-durable [OPTIONS] COMMAND" in result.output
    unknown = invoke("nope")
    assert unknown.exit_code == 2 and "No such command 'nope'" in unknown.stderr


# --------------------------------------------------------------------------- check
@pytest.mark.parametrize(
    ("args", "code"),
    [
        (("check", "la_values.py"), 0),
        (("check", "tp_adr002_watermark.py"), 1),
        (("check", "tp_adr007_dropins.py"), 0),  # info only: below the default --fail-on warning
        (("check", "tp_adr007_dropins.py", "--fail-on", "info"), 1),
        (("check", "tp_adr002_watermark.py", "--format", "xml"), 2),
        (("check", "tp_adr002_watermark.py", "--select", "ADR999"), 2),
        (("check", "nowhere.py"), 2),
        (("check",), 2),
    ],
)
def test_check_exit_codes(args: tuple[str, ...], code: int) -> None:
    result = invoke(*args, "--isolated", cwd=CORPUS)
    assert result.exit_code == code, result.output


def test_check_quiet_prints_the_findings_without_the_summary() -> None:
    loud = invoke("check", "tp_adr002_watermark.py", "--isolated", cwd=CORPUS).stdout.splitlines()
    quiet = invoke("check", "tp_adr002_watermark.py", "--isolated", "-q", cwd=CORPUS).stdout.splitlines()
    assert loud[-1].startswith("2 finding(s)") and quiet == loud[:-1] and len(quiet) == 2
    assert invoke("check", "la_values.py", "--isolated", "--quiet", cwd=CORPUS).stdout == ""


def test_check_format_is_case_insensitive() -> None:
    result = invoke("check", "tp_adr002_watermark.py", "--isolated", "--format", "JSON", cwd=CORPUS)
    assert len(json.loads(result.stdout)["findings"]) == 2


def _dags(tmp_path: Path) -> Path:
    """A project with a DAG to migrate in dags/ and the same DAG in dags/legacy/ and vendor/."""
    before = (MIGRATE_CASES / "databricks_before.py").read_text(encoding="utf-8")
    for name in ("dags/dag.py", "dags/legacy/old.py", "vendor/dag.py"):
        (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / name).write_text(before, encoding="utf-8")
    return tmp_path


def test_check_takes_exclude_from_the_command_line_too(tmp_path: Path) -> None:
    project = _dags(tmp_path)
    everything = json.loads(invoke("check", ".", "--format", "json", "--fail-on", "info", cwd=project).stdout)
    assert {f["path"] for f in everything["findings"]} == {
        "dags/dag.py",
        "dags/legacy/old.py",
        "vendor/dag.py",
    }
    some = invoke(
        "check", ".", "--format", "json", "--exclude", "legacy", "--exclude", "vendor/*", cwd=project
    )
    assert {f["path"] for f in json.loads(some.stdout)["findings"]} == {"dags/dag.py"}


# --------------------------------------------------------------------------- migrate
@pytest.mark.parametrize(
    ("args", "code"),
    [
        (("migrate", "dags/dag.py"), 0),  # the diff
        (("migrate", "dags/dag.py", "--check"), 1),
        (("migrate", "dags/broken.py"), 1),
        (("migrate", "dags/dag.py", "--write", "--check"), 2),
        (("migrate", "dags/dag.py", "--format", "yaml"), 2),
        (("migrate", "dags/missing.py"), 2),
    ],
)
def test_migrate_exit_codes(tmp_path: Path, args: tuple[str, ...], code: int) -> None:
    project = _dags(tmp_path)
    (project / "dags" / "broken.py").write_text("def broken(:\n", encoding="utf-8")
    result = invoke(*args, cwd=project)
    assert result.exit_code == code, result.output
    assert (project / "dags" / "dag.py").read_text(encoding="utf-8") == (
        MIGRATE_CASES / "databricks_before.py"
    ).read_text(encoding="utf-8")


def test_migrate_write_exits_zero_and_then_has_nothing_to_do(tmp_path: Path) -> None:
    project = _dags(tmp_path)
    assert invoke("migrate", "dags/dag.py", "--write", cwd=project).exit_code == 0
    again = invoke("migrate", "dags/dag.py", "--check", cwd=project)
    assert again.exit_code == 0 and again.stdout == ""


def test_migrate_honours_exclude_from_pyproject_and_the_command_line(tmp_path: Path) -> None:
    project = _dags(tmp_path)
    (project / "pyproject.toml").write_text(
        '[tool.airflow-durable]\nexclude = ["legacy"]\n', encoding="utf-8"
    )
    result = invoke("migrate", ".", "--format", "json", cwd=project)
    assert [f["path"] for f in json.loads(result.stdout)["files"]] == ["dags/dag.py", "vendor/dag.py"]
    result = invoke("migrate", ".", "--format", "json", "--exclude", "vendor/*", cwd=project)
    assert [f["path"] for f in json.loads(result.stdout)["files"]] == ["dags/dag.py"]
    written = invoke("migrate", ".", "--write", "--exclude", "vendor/*", cwd=project)
    assert written.exit_code == 0
    before = (MIGRATE_CASES / "databricks_before.py").read_text(encoding="utf-8")
    after = (MIGRATE_CASES / "databricks_after.py").read_text(encoding="utf-8")
    assert (project / "dags" / "dag.py").read_text(encoding="utf-8") == after
    for untouched in ("dags/legacy/old.py", "vendor/dag.py"):
        assert (project / untouched).read_text(encoding="utf-8") == before
    # --isolated ignores the file's exclude, as check's does.
    isolated = invoke("migrate", ".", "--format", "json", "--isolated", cwd=project)
    assert [f["path"] for f in json.loads(isolated.stdout)["files"]] == [
        "dags/legacy/old.py",
        "vendor/dag.py",
    ]


def test_migrate_json_is_one_document_with_the_diff_and_the_errors(tmp_path: Path) -> None:
    project = _dags(tmp_path)
    (project / "dags" / "broken.py").write_text("def broken(:\n", encoding="utf-8")
    result = invoke("migrate", "dags", "--format", "json", "--exclude", "legacy", cwd=project)
    assert result.exit_code == 1  # broken.py
    document = json.loads(result.stdout)
    assert document["mode"] == "diff" and document["files_seen"] == 2 and document["files_changed"] == 1
    (changed,) = document["files"]
    assert changed["path"] == "dags/dag.py" and changed["changed"]
    assert changed["diff"] == invoke("migrate", "dags/dag.py", cwd=project).stdout
    assert "DatabricksSubmitRunOperator -> DurableDatabricksSubmitRunOperator" in changed["swapped"]
    assert [e["path"] for e in document["errors"]] == ["dags/broken.py"]
    assert "dags/broken.py" in result.stderr  # errors reach people watching CI in every format
    assert "would be rewritten" not in result.stderr  # the summary is in the document


def test_migrate_quiet_keeps_the_result_and_drops_the_chatter(tmp_path: Path) -> None:
    (tmp_path / "dag.py").write_text((MIGRATE_CASES / "split_before.py").read_text(), encoding="utf-8")
    loud = invoke("migrate", "dag.py", "--check", cwd=tmp_path)
    quiet = invoke("migrate", "dag.py", "--check", "-q", cwd=tmp_path)
    assert "Not rewritten; suggested:" in loud.stderr and "file(s) would be rewritten" in loud.stderr
    assert loud.exit_code == quiet.exit_code == 1
    assert quiet.stderr.splitlines() == [
        line for line in loud.stderr.splitlines() if line.startswith("would rewrite")
    ]
    assert quiet.stderr.startswith("would rewrite dag.py:")


# --------------------------------------------------------------------------- jobs and orphans
class _AirflowApi(ThreadingHTTPServer):
    """The REST API calls ``jobs`` and ``orphans`` make, answered from ``task_instances`` / ``records``."""

    def __init__(self) -> None:
        super().__init__(("127.0.0.1", 0), _Handler)
        self.task_instances: list[dict[str, Any]] = []
        self.records: dict[tuple[str, str], dict[str, Any]] = {}  # (dag_id, task_id) -> {key: value}

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.server_address[1]}"


class _Handler(BaseHTTPRequestHandler):
    server: _AirflowApi

    def log_message(self, format: str, *args: Any) -> None:  # keep the test output clean
        pass

    def do_GET(self) -> None:
        parts = urlsplit(self.path).path.strip("/").split("/")
        api = self.server
        body: Any
        if parts[-1] == "taskInstances":  # /api/v2/dags/~/dagRuns/~/taskInstances
            body = {"task_instances": api.task_instances, "total_entries": len(api.task_instances)}
        elif parts[-1] == "state-store":  # .../dags/{dag}/dagRuns/{run}/taskInstances/{task}/state-store
            store = api.records.get((parts[3], parts[7]), {})
            entries = [{"key": key, "value": value} for key, value in store.items()]
            body = {"task_state_store": entries, "total_entries": len(entries)}
        else:
            self.send_error(404)
            return
        data = json.dumps(body).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)


@pytest.fixture
def airflow_api() -> Iterator[_AirflowApi]:
    server = _AirflowApi()
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield server
    server.shutdown()
    server.server_close()
    thread.join(10)


def _add_record(
    api: _AirflowApi, dag_id: str, ti_state: str, run_id: int, conn_id: str = "databricks_default"
) -> None:
    """A task instance of the durable Databricks operator whose record tracks ``run_id``."""
    operator = OPERATORS[0]
    assert operator.system == "databricks"
    api.task_instances.append(
        {
            "dag_id": dag_id,
            "dag_run_id": "manual__1",
            "task_id": "submit_run",
            "map_index": -1,
            "state": ti_state,
            "try_number": 1,
            "max_tries": 2,
            "operator": operator.durable_class,
        }
    )
    api.records[(dag_id, "submit_run")] = {
        operator.key: {
            "schema": "airflow-durable/2",
            "system": "databricks",
            "generation": 1,
            "token": f"afd-{dag_id}-g1",
            "state": "submitted",
            "external_id": run_id,
            "max_tries": 2,
            "locator": {"databricks_conn_id": conn_id},
        }
    }


@pytest.fixture
def no_cache(tmp_path: Path) -> dict[str, str]:
    """The jobs cache and cancel audit under tmp_path, never in the user's ~/.cache."""
    return {"XDG_CACHE_HOME": str(tmp_path / "cache"), "AIRFLOW_DURABLE_API_URL": ""}


@pytest.mark.parametrize(
    "args",
    [
        ("jobs",),  # no URL
        ("jobs", "--url", "http://127.0.0.1:9"),  # nothing listens there
        ("jobs", "--url", "http://127.0.0.1:9", "--format", "csv"),
        ("orphans", "--url", "http://127.0.0.1:9"),
        ("orphans", "--url", "http://127.0.0.1:9", "--format", "csv"),
    ],
)
def test_jobs_and_orphans_exit_two_on_usage_and_api_errors(
    args: tuple[str, ...], no_cache: dict[str, str]
) -> None:
    result = invoke(*args, env=no_cache)
    assert result.exit_code == 2, result.output
    assert "error" in result.stderr.lower()


def test_jobs_lists_in_text_and_json_and_quiet_drops_the_progress(
    airflow_api: _AirflowApi, no_cache: dict[str, str]
) -> None:
    _add_record(airflow_api, "nightly", "success", 1001)
    args = ("jobs", "--url", airflow_api.url, "--no-cache")
    table = invoke(*args, env={**no_cache, "COLUMNS": "200"})
    assert table.exit_code == 0 and "1 durable job record(s)" in table.stdout and "nightly" in table.stdout
    listed = invoke(*args, "--format", "json", "-q", env=no_cache)
    assert listed.exit_code == 0 and listed.stderr == ""
    (row,) = json.loads(listed.stdout)
    assert (row["dag_id"], row["external_id"], row["record_state"]) == ("nightly", 1001, "submitted")
    # The old name of the text format still works, with a warning.
    old = invoke(*args, "--format", "table", env={**no_cache, "COLUMNS": "200"})
    assert old.exit_code == 0 and old.stdout == table.stdout and "--format table is deprecated" in old.stderr


def test_orphans_exit_codes_against_the_databricks_emulator(
    airflow_api: _AirflowApi, databricks_emulator: Any, no_cache: dict[str, str]
) -> None:
    from airflow.providers.databricks.hooks.databricks import DatabricksHook

    databricks_emulator.lifecycle = ["RUNNING"]
    run_id = DatabricksHook().submit_run({"run_name": "afd", "tasks": [{"task_key": "t"}]})
    _add_record(airflow_api, "tracked", "deferred", run_id)  # a try waits for it: not an orphan
    args = ("orphans", "--url", airflow_api.url, "--no-cache")

    none = invoke(*args, env=no_cache)
    assert none.exit_code == 0 and "No orphan jobs" in none.stdout, none.output
    quiet = invoke(*args, "-q", env=no_cache)
    assert quiet.exit_code == 0 and quiet.stdout == "" and quiet.stderr == ""

    airflow_api.task_instances[0]["state"] = "failed"  # the task ended, its job runs on
    found = invoke(*args, "--format", "json", "-q", env=no_cache)
    assert found.exit_code == 1, found.output
    (orphan,) = json.loads(found.stdout)["orphans"]
    assert orphan["external_id"] == run_id and orphan["orphan"] == "task instance failed"
    assert "1 orphan job(s)" in invoke(*args, "-q", env=no_cache).stdout
    # --cancel with no terminal to ask on and no --yes: refused, nothing cancelled.
    refused = invoke(*args, "--cancel", env=no_cache)
    assert refused.exit_code == 2 and "--yes" in refused.stderr
    assert not databricks_emulator.jobs[run_id].is_terminal


# --------------------------------------------------------------------------- demo
@pytest.mark.parametrize(
    ("args", "code"),
    [
        (("demo", "--list"), 0),
        (("demo", "--system", "nope"), 2),
        (("demo", "--format", "yaml"), 2),
    ],
)
def test_demo_exit_codes_that_need_no_deployment(args: tuple[str, ...], code: int) -> None:
    assert invoke(*args).exit_code == code


def test_demo_lists_its_systems_in_both_formats_and_keeps_json_as_an_alias() -> None:
    text = invoke("demo", "--list").stdout.splitlines()
    listed = json.loads(invoke("demo", "--list", "--format", "json").stdout)
    assert [line.split()[0] for line in text] == [s["system"] for s in listed]
    assert {
        "system": "databricks",
        "upstream": "DatabricksSubmitRunOperator",
        "durable": "DurableDatabricksSubmitRunOperator",
        "extra": "databricks",
    } in listed
    old = invoke("demo", "--list", "--json")
    assert json.loads(old.stdout) == listed and "--json is deprecated" in old.stderr


def test_orphans_warns_about_a_job_whose_status_it_cannot_read(
    airflow_api: _AirflowApi, no_cache: dict[str, str]
) -> None:
    _add_record(airflow_api, "lost", "failed", 4242, conn_id="afd_no_such_connection")
    result = invoke("orphans", "--url", airflow_api.url, "--no-cache", "--no-scan", "-q", env=no_cache)
    # Not an orphan as far as anyone can tell, but never silently: even --quiet says so.
    assert result.exit_code == 0 and result.stdout == ""
    assert "could not read the status of databricks job 4242 (lost/manual__1/submit_run)" in result.stderr
    # Listing that system's jobs fails the same way: an incomplete look is an error (exit 2), even --quiet.
    listed = invoke("orphans", "--url", airflow_api.url, "--no-cache", "-q", env=no_cache)
    assert listed.exit_code == 2 and listed.stdout == ""
    assert "could not list Databricks jobs at databricks:afd_no_such_connection" in listed.stderr
