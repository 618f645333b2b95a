"""Every example DAG imports on every matrix Airflow, and every durable-operator example runs.

* ``DagBag`` on ``example_dags/``: zero import errors, at least one DAG per file (3.3, 3.2, 2.11).
* Every ``example_dags/durable_*.py`` is registered in ``tests/examples/cases/`` and every durable
  operator class in ``airflow_durable/operators/`` appears in one of them.
* Each registered example runs through real ``dag.test()`` against its emulator, in a subprocess
  (``run_example.py``), and must succeed with the expected number of submissions and XComs.
"""

from __future__ import annotations

import ast
import inspect
import sys
from pathlib import Path

import pytest

from tests.e2e.dagrun import summaries
from tests.examples.registry import EXAMPLE_DAGS, EXAMPLES, ROOT, ExampleDag
from tests.harness import DURABLE

OPERATORS = ROOT / "airflow_durable" / "operators"


def _dagbag(folder: Path):
    try:
        from airflow.dag_processing.dagbag import DagBag  # Airflow 3
    except ImportError:  # Airflow 2.x
        from airflow.models.dagbag import DagBag
    # Airflow 3.3 keeps its examples in a bundle of their own and no longer takes include_examples.
    kwargs = {"include_examples": False} if "include_examples" in inspect.signature(DagBag).parameters else {}
    return DagBag(dag_folder=str(folder), **kwargs)


def test_every_example_dag_imports_without_errors():
    dagbag = _dagbag(EXAMPLE_DAGS)
    assert dagbag.import_errors == {}
    files = sorted(p.name for p in EXAMPLE_DAGS.glob("*.py"))
    assert files, "example_dags/ is empty"
    loaded = {Path(dag.fileloc).name for dag in dagbag.dags.values()}
    assert loaded == set(files), f"files that define no DAG: {sorted(set(files) - loaded)}"


def test_the_import_check_catches_a_broken_dag(tmp_path):
    # The DagBag check above must be able to fail: a DAG that imports a missing name is reported.
    # (Mentions "airflow" and "DAG": DagBag's safe mode skips files that mention neither.)
    (tmp_path / "broken.py").write_text(
        "from airflow import DAG\n"
        "from airflow_durable.operators.databricks import DurableDatabricksNoSuchOperator\n"
    )
    assert list(_dagbag(tmp_path).import_errors) == [str(tmp_path / "broken.py")]


def test_every_durable_example_dag_is_registered():
    files = sorted(p.name for p in EXAMPLE_DAGS.glob("durable_*.py"))
    registered = [example.file for example in EXAMPLES]
    assert sorted(registered) == sorted(set(registered)), "an example DAG is registered twice"
    assert sorted(registered) == files, "register each example_dags/durable_*.py in tests/examples/cases/"


def _durable_operator_classes() -> dict[str, str]:
    found = {}
    for module in sorted(OPERATORS.glob("*.py")):
        for node in ast.parse(module.read_text()).body:
            if (
                isinstance(node, ast.ClassDef)
                and node.name.startswith("Durable")
                and node.name.endswith("Operator")
            ):
                found[node.name] = module.name
    return found


def test_every_durable_operator_has_an_example_dag():
    classes = _durable_operator_classes()
    assert "DurableDatabricksSubmitRunOperator" in classes
    text = "\n".join(p.read_text() for p in EXAMPLE_DAGS.glob("durable_*.py"))
    missing = sorted(f"{name} ({module})" for name, module in classes.items() if name not in text)
    assert not missing, f"no example_dags/durable_*.py uses: {missing}"


@pytest.mark.e2e
@pytest.mark.parametrize("example", EXAMPLES, ids=lambda e: e.file.removesuffix(".py"))
def test_example_dag_runs_against_its_emulator(examples_home, example: ExampleDag):
    cmd = [sys.executable, "-m", "tests.examples.run_example", example.file]
    (summary,), log = summaries(cmd, examples_home, "EXAMPLE-SUMMARY ", expected=1)
    detail = (summary, log)

    assert summary["dag_run_state"].endswith("success"), detail
    assert set(summary["tasks"].values()) == {"success"}, detail
    assert summary["submissions"] == example.submissions, detail
    for task_id, keys in example.xcoms.items():
        assert keys <= set(summary["xcoms"].get(task_id, {})), detail
    for task_id, check in example.returns.items():
        assert check(summary["xcoms"].get(task_id, {}).get("return_value")), detail
    if DURABLE:
        # Nothing failed, so each durable task decided once: submit fresh.
        assert summary["decisions"] == ["fresh_submit"] * example.submissions, detail
    else:
        # Degraded: no decision at all (Airflow 2's dag.test() keeps task logs out of stdout, hence <=).
        assert set(summary["decisions"]) <= {"not_durable"}, detail
