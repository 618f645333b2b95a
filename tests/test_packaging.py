"""The distribution as users install it: provider registration, typing marker, import isolation."""

from __future__ import annotations

import importlib.util
import io
import json
import os
import re
import shutil
import subprocess
import sys
import tarfile
import tomllib
import zipfile
from importlib import metadata
from pathlib import Path

import jsonschema
import pytest

import airflow_durable
from airflow_durable.catalogue import OPERATORS, SYSTEMS
from airflow_durable.get_provider_info import get_provider_info

ROOT = Path(__file__).resolve().parents[1]
OTHER_PROVIDERS = ("google", "amazon", "snowflake", "dbt", "microsoft", "cncf", "databricks")


def test_provider_info_is_valid_for_airflow_and_names_this_distribution():
    import airflow

    schema_path = Path(airflow.__file__).parent / "provider_info.schema.json"
    info = get_provider_info()
    if schema_path.exists():  # Airflow validates every provider dict against this schema
        jsonschema.validate(info, json.loads(schema_path.read_text()))
    assert info["package-name"] == metadata.metadata("airflow-durable")["Name"]


def test_entry_point_is_registered():
    eps = metadata.entry_points(group="apache_airflow_provider")
    ours = [ep for ep in eps if ep.dist is not None and ep.dist.metadata["Name"] == "airflow-durable"]
    assert len(ours) == 1 and ours[0].load() is get_provider_info


def test_airflow_providers_list_shows_the_package(tmp_path):
    out = subprocess.run(
        [sys.executable, "-m", "airflow", "providers", "list", "-o", "json"],
        capture_output=True,
        text=True,
        env={**os.environ, "PYTHONWARNINGS": "ignore"},
        timeout=180,
    )
    assert out.returncode == 0, out.stderr[-2000:]
    listed = json.loads(out.stdout[out.stdout.index("[") :])
    ours = [p for p in listed if p["package_name"] == "airflow-durable"]
    assert len(ours) == 1, listed
    # The one version: __init__.__version__ → the distribution's metadata → what Airflow shows.
    assert ours[0]["version"] == airflow_durable.__version__ == metadata.version("airflow-durable")


def test_py_typed_ships():
    assert (Path(airflow_durable.__file__).parent / "py.typed").exists()


def _modules_after(code: str) -> set[str]:
    probe = f"{code}\nimport sys, json\nprint(json.dumps(sorted(sys.modules)))"
    out = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, timeout=180)
    assert out.returncode == 0, out.stderr[-2000:]
    return set(json.loads(out.stdout.strip().splitlines()[-1]))


def test_importing_the_package_imports_no_airflow_at_all():
    loaded = _modules_after("import airflow_durable")
    assert not [m for m in loaded if m == "airflow" or m.startswith("airflow.")]
    assert not [m for m in loaded if m.split(".")[0] in CLI_ONLY]


# The `airflow-durable` command's own dependencies, and our command-line modules: a worker that imports
# an operator never needs them. (typer, rich and libcst stay core dependencies so that the command
# works after a plain `pip install airflow-durable`; see pyproject.toml.)
CLI_ONLY = ("typer", "rich", "libcst", "click")
CLI_MODULES = ("airflow_durable.cli", "airflow_durable.lint", "airflow_durable.jobs", "airflow_durable.demo")


def _cli_modules(loaded: set[str]) -> set[str]:
    return {m.split(".")[0] for m in loaded if m.split(".")[0] in CLI_ONLY} | {
        m for m in loaded for c in CLI_MODULES if m == c or m.startswith(f"{c}.")
    }


def test_building_the_command_line_imports_no_airflow():
    loaded = _modules_after("import airflow_durable.cli as cli\ncli.build_app()")
    assert not [m for m in loaded if m == "airflow" or m.startswith("airflow.")]


def test_the_import_checks_cover_every_operator_module():
    params = {
        "airflow_durable.operators." + m.stem
        for m in (ROOT / "airflow_durable" / "operators").glob("[a-z]*.py")
    }
    assert {o.durable_module for o in OPERATORS} == params == set(_PROVIDER_MODULE)


def _build(tmp_path: Path, *targets: str) -> dict[str, Path]:
    """Build the distributions offline with the locked hatchling (no build isolation, no index)."""
    out = subprocess.run(
        [
            sys.executable,
            "-m",
            "hatchling",
            "build",
            *[a for t in targets for a in ("-t", t)],
            "-d",
            str(tmp_path),
        ],
        capture_output=True,
        text=True,
        cwd=ROOT,
        timeout=300,
    )
    assert out.returncode == 0, out.stderr[-3000:]
    return {p.suffix: p for p in tmp_path.iterdir()}


def test_sdist_holds_the_package_its_docs_license_and_pyproject_only(tmp_path):
    built = _build(tmp_path, "sdist")
    with tarfile.open(built[".gz"]) as sdist:
        names = [n.split("/", 1)[1] for n in sdist.getnames() if "/" in n]
        pkg_info = sdist.extractfile(next(m for m in sdist.getmembers() if m.name.endswith("/PKG-INFO")))
        assert pkg_info is not None
        assert f"Version: {airflow_durable.__version__}" in pkg_info.read().decode()
    top = {n.split("/")[0] for n in names}
    assert top == {
        "airflow_durable",
        "docs",
        "README.md",
        "CHANGELOG.md",
        "SECURITY.md",
        "pyproject.toml",
        "LICENSE",
        "PKG-INFO",
        ".gitignore",
    }, top
    assert not [n for n in names if "__pycache__" in n or n.endswith(".pyc")]
    # Everything git tracks in the package and the docs ships (the demo's DAG files included), nothing else.
    for folder in ("airflow_durable", "docs"):
        tracked = subprocess.run(
            ["git", "ls-files", folder], capture_output=True, text=True, cwd=ROOT, check=True
        ).stdout.split()
        if tracked:  # a git checkout (not an unpacked sdist)
            assert sorted(n for n in names if n.startswith(f"{folder}/")) == sorted(tracked)


def test_wheel_ships_py_typed_the_demo_dag_builder_and_the_entry_points(tmp_path):
    built = _build(tmp_path, "wheel")
    with zipfile.ZipFile(built[".whl"]) as wheel:
        names = wheel.namelist()
        meta = next(n for n in names if n.endswith(".dist-info/METADATA"))
        entry_points = wheel.read(
            next(n for n in names if n.endswith(".dist-info/entry_points.txt"))
        ).decode()
        metadata_text = wheel.read(meta).decode()
    assert "airflow_durable/py.typed" in names
    assert f"{meta.split('/')[0]}/licenses/LICENSE" in names  # Apache-2.0, as the metadata declares
    # The demo writes a two-line DAG file per system that calls this builder with its table row.
    assert "airflow_durable/demo/dag.py" in names and "airflow_durable/demo/table.py" in names
    assert {n.split("/")[0] for n in names} == {"airflow_durable", meta.split("/")[0]}
    assert f"Version: {airflow_durable.__version__}" in metadata_text
    assert "Requires-Python: >=3.11" in metadata_text
    assert "airflow-durable = airflow_durable.cli:main" in entry_points
    assert "provider_info = airflow_durable.get_provider_info:get_provider_info" in entry_points


def test_requires_python_is_the_tested_python():
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    assert project["requires-python"] == ">=3.11"
    assert "version" not in project and project["dynamic"] == ["version"]


_PROVIDER_MODULE = {o.durable_module: o.provider_module for o in OPERATORS}


def _modules_before_and_after(module: str) -> tuple[set[str], set[str]]:
    """``sys.modules`` after the SDK and the own provider operator module, then after ``module`` too.

    One interpreter for both, so the difference is exactly what importing ``module`` added.
    """
    # Airflow 2 has no task SDK; its BaseOperator (which imports rich itself) is the baseline.
    baseline = "try:\n import airflow.sdk\nexcept ImportError:\n import airflow.models.baseoperator\n" + (
        f"import {_PROVIDER_MODULE[module]}" if module in _PROVIDER_MODULE else ""
    )
    probe = (
        f"import sys, json\n{baseline}\nprint(json.dumps(sorted(sys.modules)))\n"
        f"import {module}\nprint(json.dumps(sorted(sys.modules)))"
    )
    out = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, timeout=180)
    assert out.returncode == 0, out.stderr[-2000:]
    before, after = out.stdout.strip().splitlines()[-2:]
    return set(json.loads(before)), set(json.loads(after))


@pytest.mark.parametrize(
    ("module", "own"),
    [
        ("airflow_durable.operators.databricks", "databricks"),
        ("airflow_durable.engine.mixin", None),
        ("airflow_durable.operators.dbt_cloud", "dbt"),
        ("airflow_durable.operators.snowflake", "snowflake"),
        ("airflow_durable.operators.bigquery", "google"),
        ("airflow_durable.operators.redshift", "amazon"),
        ("airflow_durable.operators.batch", "amazon"),
        ("airflow_durable.operators.emr", "amazon"),
    ],
)
def test_an_operator_module_imports_no_other_provider_and_no_cli_dependency(module, own):
    before, loaded = _modules_before_and_after(module)
    # Airflow's providers manager reads every installed provider's metadata (its package
    # ``__init__`` and ``get_provider_info``): that is Airflow's doing and loads no provider code.
    metadata = {m for m in loaded if m.endswith(".get_provider_info")}
    metadata |= {m.rsplit(".", i)[0] for m in set(metadata) for i in range(1, m.count(".") - 1)}
    others = [
        m
        for m in loaded - metadata
        for p in OTHER_PROVIDERS
        if p != own and m.startswith(f"airflow.providers.{p}")
    ]
    assert others == []
    # Airflow itself imports rich, click and libcst (3.3): what counts is what *our* module adds on top
    # of Airflow's SDK and the provider's own operator module.
    assert _cli_modules(loaded) - _cli_modules(before) == set()


# --------------------------------------------------------------------------- without Airflow
# The core install is the command line and no Airflow (pyproject.toml): the pre-commit hook installs just
# that. Every system's extra brings Airflow next to its provider.
@pytest.fixture(scope="module")
def wheel(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return _build(tmp_path_factory.mktemp("wheel"), "wheel")[".whl"]


def _requirements(wheel: Path) -> list[str]:
    with zipfile.ZipFile(wheel) as archive:
        meta = next(n for n in archive.namelist() if n.endswith(".dist-info/METADATA"))
        text = archive.read(meta).decode()
    return [line.split(":", 1)[1].strip() for line in text.splitlines() if line.startswith("Requires-Dist:")]


def test_the_core_requires_no_airflow_and_every_system_extra_brings_it(wheel: Path):
    requirements = _requirements(wheel)
    core = [r for r in requirements if "extra ==" not in r]
    assert sorted(r.split(">=")[0] for r in core) == ["httpx", "libcst", "packaging", "rich", "typer"], core
    for extra in {s.extra for s in SYSTEMS} | {"all"}:
        of_extra = [r.split(";")[0].strip() for r in requirements if r.endswith(f"extra == '{extra}'")]
        assert "apache-airflow>=2.11.0" in of_extra, (extra, of_extra)


_NO_AIRFLOW = "import sys\nsys.modules['airflow'] = None  # `import airflow` fails, find_spec says absent\n"


def _without_airflow(code: str, cwd: Path = ROOT) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-c", _NO_AIRFLOW + code],
        capture_output=True,
        text=True,
        timeout=180,
        cwd=cwd,
        env={**os.environ, "COLUMNS": "200", "AIRFLOW_DURABLE_API_URL": ""},
    )


def _cli_without_airflow(*args: str, cwd: Path = ROOT) -> subprocess.CompletedProcess[str]:
    code = f"from airflow_durable.cli import main\nsys.argv = ['airflow-durable', *{list(args)!r}]\nmain()\n"
    return _without_airflow(code, cwd)


def test_check_and_migrate_run_where_airflow_cannot_be_imported(tmp_path):
    found = _cli_without_airflow("check", "tests/lint/corpus/tp_adr002_watermark.py", "--isolated")
    assert found.returncode == 1, found.stderr[-2000:]
    assert found.stdout.startswith("tests/lint/corpus/tp_adr002_watermark.py:15:9 ADR002 ")
    (tmp_path / "dag.py").write_bytes((ROOT / "tests/lint/migrate_cases/databricks_before.py").read_bytes())
    would = _cli_without_airflow("migrate", "dag.py", "--check", cwd=tmp_path)
    assert would.returncode == 1 and "would rewrite dag.py" in would.stderr, would.stderr[-2000:]
    version = _cli_without_airflow("--version")
    assert version.returncode == 0 and version.stdout == f"airflow-durable {airflow_durable.__version__}\n"


@pytest.mark.parametrize(
    ("args", "code", "says"),
    [
        (("demo",), 1, "Apache Airflow is not installed here"),
        (("jobs", "--live", "--url", "http://127.0.0.1:9"), 2, "--live reads each job's status"),
        (("orphans", "--url", "http://127.0.0.1:9"), 2, "needs Apache Airflow"),
    ],
)
def test_commands_that_need_airflow_say_so(args, code, says):
    done = _cli_without_airflow(*args)
    assert done.returncode == code, done.stderr[-2000:]
    assert says in done.stderr and "Traceback" not in done.stderr, done.stderr[-2000:]
    assert 'pip install "airflow-durable[databricks]"' in done.stderr


def test_importing_an_operator_without_airflow_names_the_extras():
    done = _without_airflow("import airflow_durable.operators.databricks")
    assert done.returncode == 1
    last = done.stderr.strip().splitlines()[-1]
    assert last.startswith("ModuleNotFoundError: the durable operators need Apache Airflow"), last
    assert 'pip install "airflow-durable[<extra>]"' in last and "databricks, snowflake" in last


def _uv() -> str | None:
    bootstrapped = ROOT / ".venv-tools" / "bin" / "uv"  # the Makefile's
    return str(bootstrapped) if bootstrapped.exists() else shutil.which("uv")


def _pins() -> str:
    """This environment's versions as uv constraints: the fresh install resolves what this suite ran."""
    env = {k: v for k, v in os.environ.items() if k != "VIRTUAL_ENV"}
    frozen = subprocess.run(
        [_uv() or "uv", "pip", "freeze", "--python", sys.executable],
        capture_output=True,
        text=True,
        env=env,
        timeout=120,
        check=True,
    ).stdout.splitlines()
    # An editable or direct-URL install (this checkout) is no pin a registry can serve.
    return "\n".join(line for line in frozen if "==" in line and " @ " not in line) + "\n"


# uv's own words for a registry it could not reach (DNS, refused or reset connections, no route).
_UNREACHABLE = re.compile(
    r"dns error|failed to lookup address|Connection refused|tcp connect error|Network is unreachable"
    r"|error sending request for url|client error \(Connect\)|operation timed out",
    re.IGNORECASE,
)


def test_the_wheel_installs_without_airflow_and_check_runs(wheel: Path, tmp_path: Path):
    """The pre-commit hook's case: a fresh environment with the wheel and its core dependencies only.

    uv installs them at this environment's versions and downloads from the package registry whatever
    its cache lacks, so the test passes on a fresh HOME with an empty cache as on a warm one.
    """
    uv = _uv()
    if uv is None:
        pytest.skip("no uv (make bootstraps it into .venv-tools/)")
    env = {
        **{k: v for k, v in os.environ.items() if k not in ("VIRTUAL_ENV", "PYTHONPATH")},
        "UV_PYTHON_DOWNLOADS": "never",
        "UV_NO_PROGRESS": "1",
        "COLUMNS": "200",
    }
    venv = tmp_path / "venv"
    subprocess.run(
        [uv, "venv", "--quiet", "--python", sys.executable, str(venv)], check=True, env=env, timeout=120
    )
    python = venv / "bin" / "python"
    pins = tmp_path / "pins.txt"
    pins.write_text(_pins(), encoding="utf-8")
    installed = subprocess.run(
        [uv, "pip", "install", "--python", str(python), "--constraints", str(pins), str(wheel)],
        capture_output=True,
        text=True,
        env=env,
        timeout=600,
    )
    if installed.returncode != 0 and _UNREACHABLE.search(installed.stderr):
        pytest.skip(f"the package registry is unreachable: {installed.stderr.strip().splitlines()[-1]}")
    assert installed.returncode == 0, "uv could not install the wheel\n" + installed.stderr[-3000:]
    assert "apache-airflow" not in installed.stderr and "+ airflow-durable==" in installed.stderr
    absent = subprocess.run(
        [str(python), "-c", "import importlib.util as u; print(u.find_spec('airflow'))"],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert absent.stdout.strip() == "None", absent.stdout + absent.stderr

    exe = str(venv / "bin" / "airflow-durable")
    corpus = ROOT / "tests" / "lint" / "corpus"
    found = subprocess.run(
        [exe, "check", "tp_adr002_watermark.py", "la_values.py", "--isolated"],
        capture_output=True,
        text=True,
        cwd=corpus,
        env=env,
        timeout=120,
    )
    assert found.returncode == 1, found.stdout + found.stderr
    assert found.stdout.startswith("tp_adr002_watermark.py:15:9 ADR002 ")
    assert found.stdout.splitlines()[-1].startswith("2 finding(s) in 2 file(s) checked")
    clean = subprocess.run(
        [exe, "check", "la_values.py", "--isolated", "-q"],
        capture_output=True,
        text=True,
        cwd=corpus,
        env=env,
        timeout=120,
    )
    assert clean.returncode == 0 and clean.stdout == "", clean.stdout + clean.stderr
    demo = subprocess.run(
        [exe, "demo", "--format", "json"], capture_output=True, text=True, env=env, timeout=120
    )
    assert demo.returncode == 1 and json.loads(demo.stdout)["ok"] is False, demo.stdout + demo.stderr
    assert "Apache Airflow is not installed" in demo.stderr


# make release-check (tests/release_check.py) also installs the wheel built from the sdist, with [all]
# too, and runs the demo; its sdist checks run here, so that it is known they can fail.
@pytest.fixture(scope="module")
def sdist(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return _build(tmp_path_factory.mktemp("sdist"), "sdist")[".gz"]


def test_the_release_check_accepts_the_sdist_as_built(sdist: Path):
    from tests.release_check import check_sdist

    check_sdist(sdist)


def _altered(sdist: Path, out: Path, drop: str = "", add: dict[str, bytes] | None = None) -> Path:
    """A copy of ``sdist`` without the file ``drop`` and with the files ``add``."""
    with tarfile.open(sdist) as source, tarfile.open(out, "w:gz") as target:
        prefix = source.getnames()[0].split("/")[0]
        for member in source.getmembers():
            if member.name != f"{prefix}/{drop}":
                target.addfile(member, source.extractfile(member) if member.isfile() else None)
        for path, data in (add or {}).items():
            info = tarfile.TarInfo(f"{prefix}/{path}")
            info.size = len(data)
            target.addfile(info, io.BytesIO(data))
    return out


_REDUCED = ROOT / "tests" / "lint" / "real" / "aws_batch_split_attr.py"  # reduced from a public repository


@pytest.mark.parametrize(
    ("drop", "add", "says"),
    [
        ("LICENSE", {}, "no LICENSE"),
        ("docs/differences.md", {}, "['docs/differences.md']"),  # a page the README links
        ("", {"tests/x.py": b"x = 1\n"}, "tests/x.py is from tests/"),
        ("", {"docs/snippets/dag.py": _REDUCED}, "is a copy of tests/lint/real/aws_batch_split_attr.py"),
        ("", {"notes.txt": b"x"}, "unexpected at the top of the sdist: ['notes.txt']"),
    ],
    ids=["no-license", "linked-page-missing", "tests-file", "copy-of-tests-data", "unexpected-file"],
)
def test_the_release_check_names_what_the_sdist_lacks_or_must_not_ship(sdist, tmp_path, drop, add, says):
    from tests.release_check import CheckFailed, check_sdist

    files = {k: v.read_bytes() if isinstance(v, Path) else v for k, v in add.items()}
    with pytest.raises(CheckFailed, match=re.escape(says)):
        check_sdist(_altered(sdist, tmp_path / "altered.tar.gz", drop, files))


def test_the_jobs_page_installs_itself_and_one_setting_switches_it_off():
    """The ``airflow.plugins`` entry point loads everywhere; ``[airflow_durable] jobs_page`` empties it."""
    (plugin,) = [
        ep
        for ep in metadata.entry_points(group="airflow.plugins")
        if ep.dist is not None and ep.dist.metadata["Name"] == "airflow-durable"
    ]
    module, _, attr = plugin.value.partition(":")
    probe = (
        f"import importlib, json; cls = getattr(importlib.import_module({module!r}), {attr!r})\n"
        "print(json.dumps([len(cls.fastapi_apps), len(cls.external_views)]))"
    )
    served = importlib.util.find_spec("fastapi") is not None  # Airflow 2.x has no API server to mount it on

    def sizes(**env: str) -> list[int]:
        out = subprocess.run(
            [sys.executable, "-c", probe],
            capture_output=True,
            text=True,
            timeout=180,
            env={**os.environ, **env},
        )
        assert out.returncode == 0, out.stderr[-2000:]
        return json.loads(out.stdout.strip().splitlines()[-1])

    assert sizes() == ([1, 1] if served else [0, 0])
    assert sizes(AIRFLOW__AIRFLOW_DURABLE__JOBS_PAGE="False") == [0, 0]


# --------------------------------------------------------------------------- the testing extra
# Every third-party module airflow_durable.testing imports, and what brings it to a user who installed
# "airflow-durable[testing,<system>]". A new import fails the test below until it is listed here.
_TESTING_IMPORTS = {
    "trustme": ("testing", "trustme"),
    "moto": ("testing", "moto"),
    "databricks": ("testing", "databricks-sdk"),
    # moto depends on both.
    "boto3": ("requires", "moto"),
    "botocore": ("requires", "moto"),
    # The BigQuery contract reads the discovery document the google extra's provider brings.
    "googleapiclient": ("requires", "apache-airflow-providers-google"),
    # Optional: without it the loopback CA's bundle falls back to the system's (_tls._default_bundle).
    "certifi": ("optional", ""),
    # The pytest plugin runs inside the user's own pytest.
    "pytest": ("optional", ""),
    # Only in _openapi.main, the maintainers' tool that regenerates the contract files.
    "yaml": ("optional", ""),
}


def _third_party_imports(package: Path) -> set[str]:
    import ast

    found = set()
    for path in package.rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Import):
                names = [alias.name for alias in node.names]
            elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
                names = [node.module]
            else:
                continue
            found |= {n.split(".")[0] for n in names}
    return found - set(sys.stdlib_module_names) - {"airflow_durable", "__future__"}


def _names(requirements: list[str] | None) -> set[str]:
    from packaging.requirements import Requirement

    return {Requirement(r).name.lower() for r in requirements or [] if "extra ==" not in r}


def test_the_testing_extra_brings_what_the_emulators_import():
    extras = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["optional-dependencies"]
    testing = _names(extras["testing"])
    assert _third_party_imports(ROOT / "airflow_durable" / "testing") == set(_TESTING_IMPORTS)
    for module, (source, distribution) in _TESTING_IMPORTS.items():
        dist = metadata.packages_distributions().get(module, [])
        if source == "testing":
            assert distribution in testing and distribution in dist, (module, dist, testing)
        elif source == "requires":
            assert _names(metadata.requires(distribution)) & {d.lower() for d in dist}, (module, distribution)
    # The project's own suite installs it too.
    assert "airflow-durable[testing]" in extras["test"]
