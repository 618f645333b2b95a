"""Operator modules are declarations the engine checks: at class definition, and against the catalogue."""

from __future__ import annotations

import importlib
import json
import subprocess
import sys
import textwrap
from typing import Any

import pytest

from airflow_durable import catalogue
from airflow_durable.engine import DurableJobEngine, JobPhase


def _complete_body() -> dict[str, Any]:
    def method(*_args: Any, **_kwargs: Any) -> None:
        return None

    return {
        "external_id_key": "tests.declarations",
        "durable_active_statuses": frozenset({"RUNNING"}),
        "durable_succeeded_statuses": frozenset({"DONE"}),
        "durable_failed_statuses": frozenset({"FAILED"}),
        "durable_event_id_key": "job_id",
        **{
            name: method
            for name in (
                "durable_submit",
                "durable_status",
                "durable_cancel",
                "durable_poll",
                "durable_defer",
                "durable_result",
            )
        },
    }


def test_a_complete_declaration_defines_a_class_whose_defaults_read_it():
    cls = type("Complete", (DurableJobEngine,), _complete_body())
    operator = object.__new__(cls)
    assert operator.durable_phase("RUNNING") is JobPhase.ACTIVE
    assert operator.durable_phase("FAILED") is JobPhase.FAILED
    assert operator.durable_phase("HIBERNATING") is None
    assert operator.durable_event_id({"status": "success", "job_id": "j-1"}) == "j-1"
    with pytest.raises(ValueError, match="unknown event status"):
        operator.durable_event_id({"status": "paused", "job_id": "j-1"})
    with pytest.raises(ValueError, match="non-empty string"):
        operator.durable_parse_id("  ")


@pytest.mark.parametrize(
    ("missing", "named"),
    [
        ("durable_cancel", "durable_cancel()"),
        ("durable_result", "durable_result()"),
        ("external_id_key", "external_id_key"),
        ("durable_failed_statuses", "durable_active/succeeded/failed_statuses"),
        ("durable_event_id_key", "durable_event_id_key"),
    ],
)
def test_a_concrete_class_missing_part_of_the_contract_fails_at_its_definition(missing, named):
    body = _complete_body()
    del body[missing]
    with pytest.raises(TypeError, match=named.replace("(", r"\(").replace(")", r"\)")):
        type("Incomplete", (DurableJobEngine,), body)


def test_an_unknown_id_kind_fails_at_definition():
    with pytest.raises(TypeError, match="durable_id_type"):
        type("BadId", (DurableJobEngine,), {**_complete_body(), "durable_id_type": dict})


def test_an_intermediate_base_opts_out_and_its_concrete_subclass_is_checked():
    base = type("Base", (DurableJobEngine,), {"durable_abstract": True})
    body = _complete_body()
    del body["durable_poll"]
    with pytest.raises(TypeError, match=r"durable_poll\(\)"):
        type("Concrete", (base,), body)


def test_a_class_mixed_into_a_provider_operator_is_checked_too():
    from airflow.providers.amazon.aws.operators.batch import BatchOperator

    body = _complete_body()
    del body["durable_submit"]
    with pytest.raises(TypeError, match=r"durable_submit\(\)"):
        type("BrokenBatch", (DurableJobEngine, BatchOperator), body)


@pytest.mark.parametrize("row", catalogue.OPERATORS, ids=lambda row: row.durable_class)
def test_every_catalogue_operator_takes_its_key_system_and_wait_flag_from_the_catalogue(row):
    cls = getattr(importlib.import_module(row.durable_module), row.durable_class)
    assert cls.external_id_key == row.key
    assert cls.durable_system == row.system
    assert cls.durable_wait_flag == row.no_wait_kwarg
    assert cls.durable_waits_by_default is row.waits_by_default


def test_a_key_that_contradicts_the_catalogue_fails_at_definition():
    module = importlib.import_module("airflow_durable.operators.redshift")
    provider = module.provider.RedshiftDataOperator
    body = {"__module__": module.__name__, "external_id_key": "airflow_durable.renamed"}
    with pytest.raises(TypeError, match="the catalogue says 'airflow_durable.redshift_data'"):
        type("DurableRedshiftDataOperator", (module.DurableRedshiftDataOperator, provider), body)


_MISSING_PROVIDER = textwrap.dedent(
    """
    import json, sys
    from airflow_durable import catalogue
    import airflow_durable.engine.mixin  # Airflow itself first: its configuration discovers every provider

    results = {}
    for system in catalogue.SYSTEMS:
        package = "airflow.providers." + system.provider_package.removeprefix("apache-airflow-providers-")
        package = package.replace("-", ".")
        saved = {n: m for n, m in sys.modules.items() if n == package or n.startswith(package + ".")}
        for name in saved:
            del sys.modules[name]
        sys.modules[package] = None  # what a missing provider distribution looks like to import
        sys.modules.pop(system.module, None)
        try:
            __import__(system.module)
        except ImportError as err:
            results[system.module] = [type(err).__name__, str(err)]
        else:
            results[system.module] = None
        finally:
            sys.modules.pop(system.module, None)
            del sys.modules[package]
            sys.modules.update(saved)
    print(json.dumps(results))
    """
)


def test_importing_an_operator_module_without_its_provider_names_the_extra_to_install():
    done = subprocess.run(
        [sys.executable, "-c", _MISSING_PROVIDER], capture_output=True, text=True, timeout=300, check=True
    )
    results = json.loads(done.stdout.strip().splitlines()[-1])
    assert set(results) == {system.module for system in catalogue.SYSTEMS}
    for system in catalogue.SYSTEMS:
        outcome = results[system.module]
        assert outcome is not None, f"{system.module} imported without {system.provider_package}"
        kind, message = outcome
        assert kind == "ImportError", (system.module, outcome)
        assert f'pip install "airflow-durable[{system.extra}]"' in message, message
        assert system.provider_package in message, message
