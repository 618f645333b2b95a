"""Every command the README and the docs show, run or checked against the installed package.

The commands are the lines of the ``bash``/``sh``/``shell`` blocks and the ``$ `` lines of the ``console``
blocks of README.md and docs/**/*.md. Each is classified by what it runs:

* ``airflow-durable ...``: run for real where it is cheap (``--help``, ``check``, ``migrate`` in a scratch
  folder holding a ``dags/``, ``demo --list``), with the exit status the docs give it (a ``$ echo $?``
  line after it in a console block) or 0. The ones that need a running Airflow (``jobs``, ``orphans``)
  or start one (``demo``) are not run, and say why; their subcommand and every option they use must
  still be in the command's own ``--help``, and a ``--system`` in ``demo --list``.
* ``make ...``: the target must exist with those variables (``make -n``, nothing is run): running them
  is what CI does (``make test`` is this suite).
* ``pip install "airflow-durable[...]"``: the distribution and extras must be pyproject's (not run:
  it downloads from PyPI); an ``# extras: ...`` comment must name every user extra.
* ``curl`` against ``/api/v2/...``: the method and path must be in the installed Airflow's REST API.
* ``python -m <module> ...``: ``--help`` runs and knows the options used. ``python <file>`` of a script
  the docs include from ``docs/snippets/`` runs against a stand-in API (`SNIPPET_RUNS`).
* ``export``: sets the environment of the commands after it. ``sudo``/``apt-get``: not run (system
  packages, needs root).

A command of any other kind fails until it is classified here. A block preceded by
``<!-- docs-commands: skip: <reason> -->`` is not run, for that reason.
"""

from __future__ import annotations

import functools
import http.server
import json
import os
import re
import shlex
import shutil
import subprocess
import sys
import threading
import tomllib
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parents[1]
BIN = Path(sys.executable).parent
SHELL_LANGS = {"bash", "sh", "shell", "console", "zsh"}
SKIP_MARK = re.compile(r"<!--\s*docs-commands:\s*skip:\s*(?P<reason>.*?)\s*-->")
FENCE = re.compile(r"^(?P<indent>\s*)(?P<fence>`{3,}|~{3,})\s*(?P<lang>[\w+-]*)")
# Extras that are the project's own tooling, not something a user installs.
DEV_EXTRAS = {"test", "runtime", "bench", "docs", "lint", "dev"}


@dataclass
class Command:
    page: str
    line: int
    text: str
    expected_exit: int = 0
    skip: str | None = None

    @property
    def id(self) -> str:
        return f"{self.page}:{self.line}: {self.text}"


def doc_pages() -> list[Path]:
    return [ROOT / "README.md", *sorted((ROOT / "docs").rglob("*.md"))]


def _blocks(text: str) -> Iterator[tuple[str, int, list[str], str | None]]:
    """``(language, first line number, lines, skip reason)`` of every fenced block."""
    lines = text.splitlines()
    i = 0
    while i < len(lines):
        match = FENCE.match(lines[i])
        if not match:
            i += 1
            continue
        indent, fence, lang = match["indent"], match["fence"], match["lang"]
        previous = next((lines[j] for j in range(i - 1, -1, -1) if lines[j].strip()), "")
        skip = SKIP_MARK.search(previous)
        body: list[str] = []
        i += 1
        while i < len(lines) and not lines[i].strip().startswith(fence[0] * len(fence)):
            body.append(lines[i][len(indent) :] if lines[i].startswith(indent) else lines[i].lstrip())
            i += 1
        yield lang, i - len(body), body, skip["reason"] if skip else None
        i += 1


def commands_of(page: Path, root: Path = ROOT) -> list[Command]:
    rel = page.relative_to(root).as_posix()
    found: list[Command] = []
    for lang, first, body, skip in _blocks(page.read_text(encoding="utf-8")):
        if lang not in SHELL_LANGS:
            continue
        pending = ""
        exit_follows = False  # after `$ echo $?`: the next output line is the previous command's status
        for offset, raw in enumerate(body):
            line = raw.rstrip()
            if lang == "console" and not pending:
                if not line.startswith("$ "):
                    if exit_follows and found and line.strip().isdigit():
                        found[-1].expected_exit = int(line.strip())
                    exit_follows = False
                    continue
                line = line[2:]
                if line.strip() == "echo $?":
                    exit_follows = True
                    continue
            if not line.strip() or (not pending and line.lstrip().startswith("#")):
                continue
            if line.endswith("\\"):
                pending += line[:-1] + " "
                continue
            found.append(Command(rel, first + offset + 1, (pending + line).strip(), skip=skip))
            pending = ""
    return found


ALL_COMMANDS = [c for page in doc_pages() for c in commands_of(page)]


def test_the_docs_show_commands_and_this_test_finds_them():
    """The extraction itself can fail: the README's quick start, and a console block's exit status."""
    readme = [c.text.split("#")[0].strip() for c in ALL_COMMANDS if c.page == "README.md"]
    assert "make demo" in readme and "make test" in readme
    orphans = [c for c in ALL_COMMANDS if c.page == "docs/jobs.md" and c.text == "airflow-durable orphans"]
    assert orphans and orphans[0].expected_exit == 1  # `$ echo $?` then `1` in the console block


def test_blocks_give_continuations_exit_statuses_and_skip_reasons(tmp_path):
    page = tmp_path / "page.md"
    page.write_text(
        "<!-- docs-commands: skip: shown only -->\n```bash\nmake a \\\n  B=1   # comment\n```\n\n"
        "```console\n$ airflow-durable orphans\nsome output\n$ echo $?\n1\n$ airflow-durable jobs\n```\n",
        encoding="utf-8",
    )
    got = [(c.text, c.expected_exit, c.skip) for c in commands_of(page, tmp_path)]
    assert got == [
        ("make a    B=1   # comment", 0, "shown only"),
        ("airflow-durable orphans", 1, None),
        ("airflow-durable jobs", 0, None),
    ]


# --------------------------------------------------------------------------- running them
def _run(argv: list[str], cwd: Path, env: dict[str, str] | None = None, timeout: int = 180) -> Any:
    return subprocess.run(
        argv,
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=timeout,
        env={**os.environ, "COLUMNS": "200", "NO_COLOR": "1", "TERM": "dumb", **(env or {})},
    )


_HELP: dict[tuple[str, ...], str] = {}


def cli_help(*sub: str) -> str:
    if sub not in _HELP:
        done = _run([str(BIN / "airflow-durable"), *sub, "--help"], ROOT)
        assert done.returncode == 0, f"airflow-durable {' '.join(sub)} --help: {done.stderr[-2000:]}"
        _HELP[sub] = done.stdout
    return _HELP[sub]


def _options(args: list[str]) -> list[str]:
    return [a.split("=", 1)[0] for a in args if a.startswith("-") and a not in ("-", "--")]


PROVIDER_DAG = """from datetime import datetime

from airflow.providers.databricks.operators.databricks import DatabricksSubmitRunOperator
from airflow.sdk import DAG

with DAG("nightly", start_date=datetime(2026, 1, 1), schedule=None):
    DatabricksSubmitRunOperator(task_id="etl", json={"run_name": "etl"}, deferrable=True)
"""


def scratch(tmp_path: Path, paths: list[str]) -> Path:
    """A folder whose ``dags/`` (and any other path a command names) holds clean DAG files: the example
    DAGs without their deliberate anti-patterns, and one DAG on a provider operator for migrate."""
    work = tmp_path / "work"
    dags = work / "dags"
    dags.mkdir(parents=True)
    for dag in sorted((ROOT / "example_dags").glob("*.py")):
        if not dag.name.startswith("before_"):
            shutil.copy(dag, dags / dag.name)
    (dags / "nightly.py").write_text(PROVIDER_DAG)
    for name in paths:
        target = work / name
        if target.exists():
            continue
        if name.endswith(".py"):
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_text(PROVIDER_DAG)
        else:
            shutil.copytree(dags, target)
    return work


def check_airflow_durable(command: Command, argv: list[str], tmp_path: Path) -> None:
    args = argv[1:]
    sub = [args[0]] if args and not args[0].startswith("-") else []
    if sub:
        assert re.search(rf"^\W*{re.escape(sub[0])}\b", cli_help(), re.M), f"no subcommand {sub[0]!r}"
    known = cli_help(*sub)
    for option in _options(args):
        assert option in known, f"{option} is not an option of `airflow-durable {' '.join(sub)}`"
    name = sub[0] if sub else None
    if name in ("jobs", "orphans"):
        pytest.skip("needs a running Airflow API server: tests/jobs/test_jobs_runtime.py runs it on one")
    if name == "demo" and "--list" not in args and "--help" not in args:
        if "--system" in args:
            system = args[args.index("--system") + 1]
            listed = _run([str(BIN / "airflow-durable"), "demo", "--list"], ROOT)
            assert re.search(rf"^{re.escape(system)}\s", listed.stdout, re.M), (
                f"{system!r} not in demo --list"
            )
        pytest.skip("starts a real Airflow deployment (1-2 min): tests/demo runs the demo")
    paths = [a for a in args[1:] if not a.startswith("-") and (a.endswith("/") or a.endswith(".py"))]
    work = scratch(tmp_path, paths)
    done = _run([str(BIN / "airflow-durable"), *args], work)
    said = f"exit {done.returncode}, the docs say {command.expected_exit}"
    assert done.returncode == command.expected_exit, f"{said}\n{done.stdout[-2000:]}\n{done.stderr[-2000:]}"


def make_targets(argv: list[str]) -> None:
    done = _run(["make", "-n", *argv[1:]], ROOT, timeout=60)
    assert done.returncode == 0, f"`make -n {' '.join(argv[1:])}`: {done.stderr[-2000:]}"


def check_pip(command: Command, argv: list[str]) -> None:
    assert argv[1] == "install", command.text
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    extras = set(project["optional-dependencies"])
    for requirement in argv[2:]:
        match = re.fullmatch(r"(?P<name>[\w.-]+)(\[(?P<extras>[^\]]*)\])?", requirement)
        assert match, f"not a requirement: {requirement!r}"
        assert match["name"] == project["name"], requirement
        asked = {e.strip() for e in (match["extras"] or "").split(",") if e.strip()}
        assert asked <= extras, f"no extra {sorted(asked - extras)} in pyproject.toml"
    listed = re.search(r"#\s*extras:\s*(?P<names>.*)", command.text)
    if listed:
        names = {n.strip() for n in listed["names"].split(",")}
        assert names == extras - DEV_EXTRAS, (
            f"the comment lists {sorted(names)}, pyproject has {sorted(extras)}"
        )


@functools.cache
def _openapi() -> dict[str, Any]:
    import importlib.util

    yaml = pytest.importorskip("yaml")
    spec = importlib.util.find_spec("airflow.api_fastapi")
    if spec is None or not spec.submodule_search_locations:
        pytest.skip("this Airflow has no REST API v2 (Airflow 2)")
    path = Path(list(spec.submodule_search_locations)[0]) / "core_api/openapi/v2-rest-api-generated.yaml"
    return yaml.safe_load(path.read_text())


def check_curl(command: Command, argv: list[str]) -> None:
    from airflow_durable import shims

    method = argv[argv.index("-X") + 1].lower() if "-X" in argv else "get"
    (url,) = [a for a in argv[1:] if "/api/" in a]
    path = "/api/" + url.split("/api/", 1)[1].split("?", 1)[0]
    if "/state-store" in path and not shims.DURABLE_RUNTIME:
        pytest.skip("the task state store's API is Airflow 3.3's")
    paths = _openapi()["paths"]
    segments = path.strip("/").split("/")
    matches = [
        template
        for template in paths
        if len(parts := template.strip("/").split("/")) == len(segments)
        and all(
            p == s or (p.startswith("{") and p.endswith("}")) for p, s in zip(parts, segments, strict=True)
        )
    ]
    assert matches, f"{path} is not a path of Airflow's REST API"
    assert any(method in paths[t] for t in matches), f"{method.upper()} {path} is not in Airflow's REST API"


def check_python(command: Command, argv: list[str], tmp_path: Path) -> None:
    if argv[1] == "-m":
        module, args = argv[2], argv[3:]
        done = _run([sys.executable, "-m", module, "--help"], ROOT)
        assert done.returncode == 0, done.stderr[-2000:]
        for option in _options(args):
            assert option in done.stdout, f"{option} is not an option of `python -m {module}`"
        return
    script = ROOT / "docs" / "snippets" / Path(argv[1]).name
    assert script.is_file() and script.name in SNIPPET_RUNS, f"unknown script {argv[1]!r}"
    SNIPPET_RUNS[script.name](script, tmp_path)


# --------------------------------------------------------------------------- snippets
class _Api(http.server.BaseHTTPRequestHandler):
    calls: list[tuple[str, str, str | None]] = []

    def do_DELETE(self) -> None:  # noqa: N802 (http.server's naming)
        type(self).calls.append(("DELETE", self.path, self.headers.get("Authorization")))
        self.send_response(204)
        self.end_headers()

    def log_message(self, *args: Any) -> None:
        return None


def run_delete_records(script: Path, tmp_path: Path) -> None:
    """The rollback script deletes the records of ended tasks only, with the key and ids URL-encoded."""
    row = {
        "map_index": -1,
        "key": "airflow_durable.databricks_submit_run",
        "source": "record",
        "dag_id": "nightly",
    }
    rows = [
        {**row, "run_id": "scheduled__2026-12-05T00:00:00+00:00", "task_id": "etl", "ti_state": "success"},
        {**row, "run_id": "manual__1", "task_id": "etl", "ti_state": "failed", "map_index": 3},
        {**row, "run_id": "manual__2", "task_id": "etl", "ti_state": "deferred"},
        {**row, "run_id": "manual__3", "task_id": "etl", "ti_state": None},
        {**row, "run_id": "manual__4", "task_id": "etl", "ti_state": "success", "source": "history"},
    ]
    listing = tmp_path / "durable-records.json"
    listing.write_text(json.dumps(rows))
    _Api.calls = []
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _Api)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        env = {
            "AIRFLOW_DURABLE_API_URL": f"http://127.0.0.1:{server.server_port}",
            "AIRFLOW_DURABLE_API_TOKEN": "t0k",
        }
        done = _run([sys.executable, str(script), str(listing)], tmp_path, env)
    finally:
        server.shutdown()
        server.server_close()
        thread.join(timeout=10)
    assert done.returncode == 0, done.stderr[-2000:]
    base = (
        "/api/v2/dags/nightly/dagRuns/{}/taskInstances/etl/state-store/airflow_durable.databricks_submit_run"
    )
    assert sorted(_Api.calls) == sorted(
        [
            (
                "DELETE",
                base.format("scheduled__2026-12-05T00%3A00%3A00%2B00%3A00") + "?map_index=-1",
                "Bearer t0k",
            ),
            ("DELETE", base.format("manual__1") + "?map_index=3", "Bearer t0k"),
        ]
    )
    assert "kept nightly/manual__2/etl[-1]" in done.stdout and "not started" in done.stdout


SNIPPET_RUNS: dict[str, Callable[[Path, Path], None]] = {"delete_durable_records.py": run_delete_records}


# --------------------------------------------------------------------------- the test
def argv_of(command: Command) -> list[str]:
    """The command's words: comments, a trailing ``> file`` and ``VAR=value`` prefixes dropped."""
    argv = shlex.split(command.text, comments=True)
    if any(word in ("|", "||", "&&", ";") for word in argv):
        raise AssertionError(f"{command.id}: a pipeline or list; give each command its own line")
    if len(argv) > 2 and argv[-2] == ">":
        argv = argv[:-2]
    while argv and re.fullmatch(r"[A-Za-z_]\w*=.*", argv[0]):
        argv.pop(0)
    # `flock <lock file> <command>` (the dev docs' one-heavy-run-at-a-time wrapper) runs the command.
    if len(argv) > 2 and argv[0] == "flock":
        argv = argv[2:]
    return argv


def classify(command: Command) -> Callable[[list[str], Path], None] | str:
    """What checks ``command``: a function of (argv, tmp_path), or the reason it is not run."""
    program = Path(argv_of(command)[0]).name
    if program == "airflow-durable":
        return lambda argv, tmp: check_airflow_durable(command, argv, tmp)
    if program == "make":
        return lambda argv, tmp: make_targets(argv)
    if program in ("pip", "pip3"):
        return lambda argv, tmp: check_pip(command, argv)
    if program == "curl":
        return lambda argv, tmp: check_curl(command, argv)
    if program in ("python", "python3"):
        return lambda argv, tmp: check_python(command, argv, tmp)
    if program == "export":
        return "sets the environment of the commands after it"
    if program in ("sudo", "apt-get"):
        return "installs Debian packages (needs root): CI's .ci/run installs them"
    raise AssertionError(f"{command.id}: unknown kind of command {program!r}; classify it in {__name__}")


@pytest.mark.parametrize("command", ALL_COMMANDS, ids=[c.id[:120] for c in ALL_COMMANDS])
def test_every_command_in_the_docs(command: Command, tmp_path: Path):
    if command.skip:
        pytest.skip(command.skip)
    check = classify(command)
    if isinstance(check, str):
        pytest.skip(check)
    check(argv_of(command), tmp_path)
