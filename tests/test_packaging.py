"""The distribution as users install it: provider registration, typing marker, import isolation."""

from __future__ import annotations

import json
import subprocess
import sys
from importlib import metadata
from pathlib import Path

import jsonschema
import pytest

import airflow_durable
from airflow_durable.get_provider_info import get_provider_info

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
        env={**__import__("os").environ, "PYTHONWARNINGS": "ignore"},
        timeout=180,
    )
    assert out.returncode == 0, out.stderr[-2000:]
    assert "airflow-durable" in out.stdout


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
def test_an_operator_module_imports_no_other_provider(module, own):
    loaded = _modules_after(f"import {module}")
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
