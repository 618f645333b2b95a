"""Everything that enumerates systems or operators agrees with `airflow_durable.catalogue`.

Generated from it: ``get_provider_info``, the lint's drop-in table, the jobs CLI's systems and records, and
the README/docs tables (between marker comments). Checked against it here: the operators themselves
(key, ``durable_system``, provider base class, trigger), the demo's systems, the conformance registry,
the docs navigation and the pyproject extras.
"""

from __future__ import annotations

import importlib
import inspect
import json
import shutil
import subprocess
import sys
import tomllib
import types
from importlib import metadata
from pathlib import Path

import pytest
import yaml

import airflow_durable
from airflow_durable import catalogue
from airflow_durable.catalogue import OPERATORS, SYSTEM_NAMES, SYSTEMS

ROOT = Path(__file__).resolve().parents[1]


# --------------------------------------------------------------------------- the catalogue itself
def test_catalogue_is_consistent():
    assert len({s.name for s in SYSTEMS}) == len(SYSTEMS) == 7
    assert len({o.durable_class for o in OPERATORS}) == len({o.key for o in OPERATORS}) == len(OPERATORS)
    assert {o.integration for o in OPERATORS} == {s.name for s in SYSTEMS}
    for o in OPERATORS:
        assert o.durable_module == catalogue.integration(o.integration).module, o
        assert o.key.startswith("airflow_durable."), o
        assert o.submit_call and o.window and o.trigger, o
    assert SYSTEM_NAMES == tuple(dict.fromkeys(o.system for o in OPERATORS))
    with pytest.raises(KeyError, match="known: databricks"):
        catalogue.integration("nope")
    with pytest.raises(KeyError, match="unknown system"):
        catalogue.operators_of("nope")


def test_the_catalogue_imports_nothing_but_the_standard_library():
    probe = (
        "import sys, json; before = set(sys.modules); import airflow_durable.catalogue; "
        "print(json.dumps(sorted(set(sys.modules) - before)))"
    )
    out = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr[-2000:]
    loaded = json.loads(out.stdout.strip().splitlines()[-1])
    foreign = [m for m in loaded if m.split(".")[0] not in sys.stdlib_module_names | {"airflow_durable"}]
    assert foreign == []


# --------------------------------------------------------------------------- the operators
@pytest.mark.parametrize("row", OPERATORS, ids=lambda o: o.durable_class)
def test_the_operator_class_matches_its_row(row):
    durable = getattr(importlib.import_module(row.durable_module), row.durable_class)
    provider_module = importlib.import_module(row.provider_module)
    provider = getattr(provider_module, row.provider_class)
    assert issubclass(durable, provider)
    assert durable.external_id_key == row.key
    assert durable.durable_system == row.system
    # The provider trigger the deferrable path defers to: in the provider module's namespace (the
    # operators call it through that module, so a test that patches it there patches ours too).
    from airflow.triggers.base import BaseTrigger

    trigger = getattr(provider_module, row.trigger)
    assert isinstance(trigger, type) and issubclass(trigger, BaseTrigger)
    assert row.trigger in inspect.getsource(importlib.import_module(row.durable_module))
    # The argument that turns "submit and wait" into "submit only" is the provider's own.
    if row.no_wait_kwarg is not None:
        assert row.no_wait_kwarg in inspect.signature(provider.__init__).parameters


def test_every_durable_operator_in_the_package_is_in_the_catalogue():
    from airflow.models import BaseOperator

    found = set()
    for system in SYSTEMS:
        module = importlib.import_module(system.module)
        for name, obj in vars(module).items():
            if (
                isinstance(obj, type)
                and name.startswith("Durable")
                and issubclass(obj, BaseOperator)
                and obj.__module__ == module.__name__
            ):
                found.add(name)
    assert found == {o.durable_class for o in OPERATORS}


# --------------------------------------------------------------------------- generated: get_provider_info
def test_provider_info_is_generated_from_the_catalogue():
    from airflow_durable.get_provider_info import get_provider_info

    info = get_provider_info()
    assert [i["integration-name"] for i in info["integrations"]] == [f"Durable {s.title}" for s in SYSTEMS]
    assert [i["external-doc-url"] for i in info["integrations"]] == [catalogue.docs_url(s) for s in SYSTEMS]
    assert [(o["integration-name"], o["python-modules"]) for o in info["operators"]] == [
        (f"Durable {s.title}", [s.module]) for s in SYSTEMS
    ]
    assert info["versions"] == [airflow_durable.__version__] == [metadata.version("airflow-durable")]
    assert info["plugins"] == [
        {"name": "airflow_durable_jobs", "plugin-class": "airflow_durable.plugins.DurableJobsPlugin"}
    ]
    for plugin in info["plugins"]:
        module, _, cls = plugin["plugin-class"].rpartition(".")
        assert inspect.isclass(getattr(importlib.import_module(module), cls))


def _provider_info_schema() -> dict:
    import airflow

    for path in (Path(airflow.__file__).parent / "provider_info.schema.json",):
        if path.is_file():
            return json.loads(path.read_text())
    pytest.skip("this Airflow ships no provider_info.schema.json")


def test_provider_info_validates_against_airflows_schema_and_a_bad_one_does_not():
    import jsonschema

    from airflow_durable.get_provider_info import get_provider_info

    schema = _provider_info_schema()
    info = get_provider_info()
    jsonschema.validate(info, schema)
    # The schema is strict enough to catch a malformed entry: the check can fail.
    broken = {**info, "name": ["not", "a", "string"]}
    with pytest.raises(jsonschema.ValidationError):
        jsonschema.validate(broken, schema)


def test_provider_info_imports_no_provider_and_no_airflow():
    probe = (
        "import sys, json; from airflow_durable.get_provider_info import get_provider_info; "
        "get_provider_info(); print(json.dumps(sorted(sys.modules)))"
    )
    out = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr[-2000:]
    loaded = json.loads(out.stdout.strip().splitlines()[-1])
    assert [m for m in loaded if m == "airflow" or m.startswith("airflow.")] == []


# --------------------------------------------------------------------------- generated: the lint's table
def test_lint_drop_ins_are_the_catalogue():
    from airflow_durable.lint import catalogue as lint

    assert [
        (d.provider_module, d.provider_class, d.durable_module, d.durable_class, d.no_wait_kwarg)
        for d in lint.DROP_INS
    ] == [
        (o.provider_module, o.provider_class, o.durable_module, o.durable_class, o.no_wait_kwarg)
        for o in OPERATORS
    ]
    assert [d.waits_by_default for d in lint.DROP_INS] == [o.waits_by_default for o in OPERATORS]
    assert lint.DURABLE_CLASSES == {o.durable_class for o in OPERATORS}
    # Deprecated paths stand for a provider module the catalogue knows.
    assert set(lint.DEPRECATED_MODULES.values()) <= {o.provider_module for o in OPERATORS}
    assert (
        lint.lookup("airflow.contrib.operators.databricks_operator.DatabricksSubmitRunOperator") is not None
    )


# --------------------------------------------------------------------------- generated: the jobs CLI
def test_jobs_systems_and_records_are_the_catalogue():
    from airflow_durable.jobs import records, systems

    assert list(systems.SYSTEMS) == list(SYSTEM_NAMES)
    assert {name: s.title for name, s in systems.SYSTEMS.items()} == {
        name: catalogue.kind_title(name) for name in SYSTEM_NAMES
    }
    assert records.KEY_SYSTEMS == {o.key: o.system for o in OPERATORS}
    assert records.DURABLE_OPERATORS == tuple(o.durable_class for o in OPERATORS)


# --------------------------------------------------------------------------- checked: the demo
def test_demo_systems_are_catalogue_job_kinds_with_their_classes():
    from airflow_durable.demo import systems as demo

    assert demo.names(), "no demo system registered"
    for name in demo.names():
        system = demo.get(name)
        assert name in SYSTEM_NAMES, f"demo system {name!r} is not a catalogue job kind"
        rows = catalogue.operators_of(name)
        assert system.durable.operator in {o.durable_class for o in rows}, name
        row = catalogue.operator(system.durable.operator)
        assert system.upstream.operator == row.provider_class, name


# --------------------------------------------------------------------------- checked: conformance
def _names_used(code: types.CodeType) -> set[str]:
    names = set(code.co_names)
    for const in code.co_consts:
        if isinstance(const, types.CodeType):
            names |= _names_used(const)
    return names


def test_conformance_registry_is_the_catalogue():
    from tests.conformance.systems import SYSTEMS as CASES

    by_key = {o.key: o for o in OPERATORS}
    assert sorted(c.external_id_key for c in CASES) == sorted(by_key)
    durable_classes = {o.durable_class for o in OPERATORS}
    for case in CASES:
        row = by_key[case.external_id_key]
        assert case.id == row.key.removeprefix("airflow_durable."), case.id
        # The class the case builds (named in its ``make``) is the catalogue's for that key.
        built = _names_used(case.make.__code__) & durable_classes
        assert built == {row.durable_class}, (case.id, built)


# --------------------------------------------------------------------------- generated: docs tables
def test_generated_docs_tables_are_fresh():
    stale = catalogue.sync_docs(str(ROOT), write=False)
    assert stale == [], f"run `python -m airflow_durable.catalogue --write-docs`; stale: {stale}"


def test_every_system_is_in_the_readme_table():
    readme = (ROOT / "README.md").read_text()
    for o in OPERATORS:
        assert f"| `{o.durable_class}` |" in readme and f"`{o.key}`" in readme


def _copy_docs(tmp_path: Path) -> Path:
    for rel in catalogue.DOC_BLOCKS:
        (tmp_path / rel).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy(ROOT / rel, tmp_path / rel)
    return tmp_path


def test_a_hand_edited_table_is_reported_stale_and_rewritten(tmp_path, capsys):
    root = _copy_docs(tmp_path)
    readme = root / "README.md"
    readme.write_text(readme.read_text().replace("closed: native `ClientToken`", "closed, trust me"))
    assert catalogue.main(["--check-docs", "--root", str(root)]) == 1
    assert "stale: README.md" in capsys.readouterr().out
    assert catalogue.main(["--write-docs", "--root", str(root)]) == 0
    assert readme.read_text() == (ROOT / "README.md").read_text()
    assert catalogue.main(["--check-docs", "--root", str(root)]) == 0


def test_a_page_without_its_markers_is_an_error(tmp_path, capsys):
    root = _copy_docs(tmp_path)
    page = root / "docs" / "systems" / "emr.md"
    page.write_text(page.read_text().replace("<!-- /catalogue:system:emr -->", ""))
    assert catalogue.main(["--check-docs", "--root", str(root)]) == 2
    assert "no generated block 'system:emr'" in capsys.readouterr().out


def test_docs_navigation_lists_every_system_page_in_catalogue_order():
    class _Loader(yaml.SafeLoader):
        pass

    # mkdocs.yml may carry !!python/name tags (none today); read it as plain data regardless.
    _Loader.add_multi_constructor("tag:yaml.org,2002:python/", lambda loader, suffix, node: None)
    nav = yaml.load((ROOT / "mkdocs.yml").read_text(), Loader=_Loader)["nav"]
    systems = next(entry["Systems"] for entry in nav if isinstance(entry, dict) and "Systems" in entry)
    assert [next(iter(e.items())) for e in systems] == [(s.title, s.doc) for s in SYSTEMS]
    for s in SYSTEMS:
        assert (ROOT / "docs" / s.doc).is_file(), s.doc


# --------------------------------------------------------------------------- checked: pyproject extras
def test_every_system_has_its_extra_with_its_provider():
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    extras = project["optional-dependencies"]
    for s in SYSTEMS:
        assert s.extra in extras, s.name
        assert any(req.startswith(s.provider_package) for req in extras[s.extra]), (s.extra, extras[s.extra])
    everything = extras["all"][0]
    assert all(s.extra in everything for s in SYSTEMS), everything


# ------------------------------------------------------------------- documented idempotency (issue 25)
def test_every_operator_declares_its_documented_idempotency():
    from tests.conformance.systems import SYSTEMS as CASES

    lookup = {c.external_id_key: c.window_closed_by == "lookup" for c in CASES}
    for o in OPERATORS:
        facts = o.idempotency
        assert facts is catalogue.IDEMPOTENCY[o.key], o.key
        for name in ("carrier", "characters", "window", "on_finished", "on_failed", "on_cancelled"):
            assert getattr(facts, name).strip(), (o.key, name)
        assert facts.on_deleted and facts.on_expired and facts.sources, o.key
        # A system without native deduplication must close the window by lookup (EMR on EKS does both).
        assert facts.native or lookup[o.key], o.key
        # Only a native key has a window that can lapse (the engine's lookup before resending hangs on it).
        assert facts.native or not facts.lapses, o.key
    assert set(catalogue.IDEMPOTENCY) == {o.key for o in OPERATORS}


def _aws_max(service: str, operation: str, *path: str) -> int:
    from airflow_durable.testing.contracts._aws import service_model

    shape = service_model(service).operation_model(operation).input_shape
    for step in path:
        shape = shape.member if step == "[]" else shape.value if step == "{}" else shape.members[step]
    return int(shape.metadata["max"])


def test_the_emulators_enforce_the_catalogues_token_limits():
    from airflow_durable.testing import bigquery, databricks, dbt_cloud, redshift_data

    limit = {o.key: o.idempotency.max_length for o in OPERATORS}
    assert databricks.MAX_TOKEN_LENGTH == limit["airflow_durable.databricks_submit_run"] == 64
    assert bigquery.MAX_JOB_ID_LENGTH == limit["airflow_durable.bigquery_insert_job"]
    assert dbt_cloud.MAX_CAUSE_LENGTH == limit["airflow_durable.dbt_cloud_run_job"]
    assert redshift_data.MAX_TOKEN_LENGTH == limit["airflow_durable.redshift_data"]
    assert limit["airflow_durable.snowflake_sql_api"] == len("00000000-0000-0000-0000-000000000000")
    # The AWS limits are botocore's model's, which the emulators enforce on every request.
    assert (
        _aws_max("redshift-data", "ExecuteStatement", "ClientToken") == limit["airflow_durable.redshift_data"]
    )
    assert (
        _aws_max("emr-serverless", "StartJobRun", "clientToken")
        == limit["airflow_durable.emr_serverless_start_job"]
    )
    assert _aws_max("emr-containers", "StartJobRun", "clientToken") == limit["airflow_durable.emr_container"]
    assert _aws_max("batch", "SubmitJob", "tags", "{}") == limit["airflow_durable.batch"]
    assert (
        _aws_max("elasticmapreduce", "AddJobFlowSteps", "Steps", "[]", "Name")
        == limit["airflow_durable.emr_add_steps"]
    )
    from airflow_durable.testing.contracts._aws import service_model

    pattern = (
        service_model("emr-serverless").operation_model("StartJobRun").input_shape.members["clientToken"]
    )
    assert (
        catalogue.IDEMPOTENCY["airflow_durable.emr_serverless_start_job"].characters
        == pattern.metadata["pattern"]
    )


def test_every_operator_declares_where_its_jobs_carry_their_identity():
    """Issue 23: each row has a `Lookup`; a `notimpl` one says why; an implemented one names its list call
    and its carrier takes the identity (and, where the catalogue gives a limit, the model agrees)."""
    from airflow_durable.identity_tags import is_identity, task_identity

    identity = task_identity("dag", "manual__2026-12-02", "task", -1)
    assert is_identity(identity) and len(identity) == 23
    assert set(catalogue.LOOKUPS) == {o.key for o in OPERATORS}
    for row in OPERATORS:
        lookup = row.lookup
        assert lookup.sources, row.key
        if not lookup.implemented:
            assert lookup.reason, row.key
            continue
        assert lookup.list_call and lookup.carrier != "none", row.key
        assert lookup.max_length is None or lookup.max_length >= len(identity), row.key
    assert sorted(o.key for o in OPERATORS if not o.lookup.implemented) == [
        "airflow_durable.databricks_run_now",
    ]
    limit = {o.key: o.lookup.max_length for o in OPERATORS}
    assert (
        _aws_max("redshift-data", "ExecuteStatement", "StatementName")
        == limit["airflow_durable.redshift_data"]
    )
    assert (
        _aws_max("emr-serverless", "StartJobRun", "name") == limit["airflow_durable.emr_serverless_start_job"]
    )
    assert (
        _aws_max("elasticmapreduce", "AddJobFlowSteps", "Steps", "[]", "Name")
        == limit["airflow_durable.emr_add_steps"]
    )
