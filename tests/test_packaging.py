"""The distribution as users install it: provider registration, typing marker, import isolation."""

from __future__ import annotations

import importlib.util
import json
import os
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
from airflow_durable.catalogue import OPERATORS
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


def test_sdist_holds_the_package_readme_license_and_pyproject_only(tmp_path):
    built = _build(tmp_path, "sdist")
    with tarfile.open(built[".gz"]) as sdist:
        names = [n.split("/", 1)[1] for n in sdist.getnames() if "/" in n]
        pkg_info = sdist.extractfile(next(m for m in sdist.getmembers() if m.name.endswith("/PKG-INFO")))
        assert pkg_info is not None
        assert f"Version: {airflow_durable.__version__}" in pkg_info.read().decode()
    top = {n.split("/")[0] for n in names}
    assert top == {"airflow_durable", "README.md", "pyproject.toml", "LICENSE", "PKG-INFO", ".gitignore"}, top
    assert not [n for n in names if "__pycache__" in n or n.endswith(".pyc")]
    # Everything git tracks in the package ships (the demo's DAG files included), nothing else.
    tracked = subprocess.run(
        ["git", "ls-files", "airflow_durable"], capture_output=True, text=True, cwd=ROOT, check=True
    ).stdout.split()
    if tracked:  # a git checkout (not an unpacked sdist)
        assert sorted(n for n in names if n.startswith("airflow_durable/")) == sorted(tracked)


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
        ("airflow_durable.engine", None),
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
