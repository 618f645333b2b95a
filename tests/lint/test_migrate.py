"""migrate: before -> after equals the golden file, a second run changes nothing, and the Databricks
result imports under the installed Airflow 3.3."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

import libcst as cst
import pytest

from airflow_durable.lint import catalogue
from airflow_durable.lint.migrate import migrate_source
from tests.lint.conftest import MIGRATE

CASES = sorted(p.name.removesuffix("_before.py") for p in MIGRATE.glob("*_before.py"))


def _case(name: str) -> tuple[str, str]:
    before = (MIGRATE / f"{name}_before.py").read_text(encoding="utf-8")
    after = (MIGRATE / f"{name}_after.py").read_text(encoding="utf-8")
    return before, after


@pytest.mark.parametrize("name", CASES)
def test_round_trip_matches_golden(name: str) -> None:
    before, after = _case(name)
    assert migrate_source(f"{name}.py", before).migrated == after


@pytest.mark.parametrize("name", CASES)
def test_idempotent(name: str) -> None:
    _, after = _case(name)
    again = migrate_source(f"{name}.py", after)
    assert not again.changed and again.diff() == ""


def _imported_names(source: str) -> dict[str, str]:
    """name bound -> 'module.Class' for every from-import in a module."""
    out: dict[str, str] = {}
    for stmt in cst.parse_module(source).body:
        if isinstance(stmt, cst.SimpleStatementLine) and isinstance(stmt.body[0], cst.ImportFrom):
            node = stmt.body[0]
            if isinstance(node.names, cst.ImportStar) or node.module is None:
                continue
            module = cst.helpers.get_full_name_for_node(node.module)
            for alias in node.names:
                name = cst.helpers.get_full_name_for_node(alias.name)
                bound = alias.asname.name.value if alias.asname else name  # type: ignore[union-attr]
                out[str(bound)] = f"{module}.{name}"
    return out


def test_every_catalogue_class_is_reached() -> None:
    """Across the goldens, every durable class is imported from its documented module."""
    imported: set[str] = set()
    for name in CASES:
        imported |= set(_imported_names(_case(name)[1]).values())
    assert {d.durable_qualname for d in catalogue.DROP_INS} <= imported
    assert not {d.provider_qualname for d in catalogue.DROP_INS} & imported


def test_other_systems_golden_parses_with_durable_imports() -> None:
    # Their operator modules are not on main yet: parse and check imports instead of importing.
    _, after = _case("other_systems")
    names = _imported_names(after)
    assert names["Redshift"] == "airflow_durable.operators.redshift.DurableRedshiftDataOperator"  # alias kept
    assert names["EmrCreateJobFlowOperator"].startswith("airflow.providers.amazon")  # no drop-in: untouched
    compile(after, "other_systems_after.py", "exec")


def test_migrated_databricks_dag_imports_under_airflow() -> None:
    pytest.importorskip("airflow.providers.databricks")
    pytest.importorskip("airflow.sdk", reason="the golden DAGs are Airflow 3 DAGs (airflow.sdk)")
    from airflow_durable.operators.databricks import (
        DurableDatabricksRunNowOperator,
        DurableDatabricksSubmitRunOperator,
    )

    for name in ("databricks", "split"):
        path = MIGRATE / f"{name}_after.py"
        spec = importlib.util.spec_from_file_location(f"_migrated_{name}", path)
        assert spec and spec.loader
        module = importlib.util.module_from_spec(spec)
        sys.modules[spec.name] = module
        try:
            spec.loader.exec_module(module)
        finally:
            sys.modules.pop(spec.name, None)
        dag = module.submit.dag
        assert dag.dag_id == f"migrate_{name}"
        submit = dag.get_task("submit")
        assert isinstance(submit, DurableDatabricksSubmitRunOperator)
        if name == "databricks":
            assert submit.deferrable is True  # arguments untouched
            assert isinstance(dag.get_task("run_now"), DurableDatabricksRunNowOperator)
            assert isinstance(dag.get_task("again"), DurableDatabricksRunNowOperator)
            assert dag.get_task("create").upstream_list == []  # structure untouched
        else:
            assert submit.wait_for_termination is False  # the split is reported, never restructured
            assert [t.task_id for t in submit.downstream_list] == ["wait_for_run"]


def test_split_is_reported_not_rewritten() -> None:
    before, after = _case("split")
    result = migrate_source("split.py", before)
    assert len(result.split_suggestions) == 1
    text = result.split_suggestions[0]
    assert "DurableDatabricksSubmitRunOperator(" in text and "deferrable=True" in text
    assert 'mode="reschedule"' in text and "wait_for_termination" not in text.splitlines()[1]
    # The file itself keeps both tasks and the no-wait flag.
    assert "wait_for_termination=False" in after and "wait_for_run(submit.output)" in after


def test_unparsable_file_raises_and_is_left_alone(tmp_path: Path) -> None:
    with pytest.raises(cst.ParserSyntaxError):
        migrate_source("broken.py", "def broken(:\n")


def test_star_import_is_noted_not_rewritten() -> None:
    source = "from airflow.providers.databricks.operators.databricks import *\n"
    result = migrate_source("star.py", source)
    assert not result.changed and result.notes and "import *" in result.notes[0]
