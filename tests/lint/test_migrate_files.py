"""migrate on files: bytes kept except what it changes, ``| git apply`` works, ``--check``, and what it
deliberately leaves alone (a subclass that replaces execute, deprecated module paths handled like check)."""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest
import typer
from typer.testing import CliRunner

from airflow_durable.lint import check_source
from airflow_durable.lint.cli import register
from airflow_durable.lint.migrate import migrate_source

DAG = (
    "# -*- coding: {coding} -*-\n"
    "# caf\u00e9 au lait\n"
    "from airflow.providers.databricks.operators.databricks import DatabricksSubmitRunOperator\n"
    "\n"
    'run = DatabricksSubmitRunOperator(task_id="run", json={{}})'
)


def _app() -> typer.Typer:
    app = typer.Typer()
    register(app)
    return app


def _run(cwd: Path, *args: str) -> tuple[int, bytes, str]:
    old = os.getcwd()
    os.chdir(cwd)
    try:
        result = CliRunner().invoke(_app(), list(args))
    finally:
        os.chdir(old)
    return result.exit_code, result.stdout_bytes, result.stderr


def _variants(root: Path) -> dict[str, bytes]:
    files = {
        "lf.py": DAG.format(coding="utf-8").encode() + b"\n",
        "crlf.py": (DAG.format(coding="utf-8") + "\n").replace("\n", "\r\n").encode(),
        "no_newline.py": DAG.format(coding="utf-8").encode(),
        "latin1.py": (DAG.format(coding="latin-1") + "\n").encode("latin-1"),
        "bom.py": b"\xef\xbb\xbf" + DAG.format(coding="utf-8").encode() + b"\n",
    }
    (root / "dags").mkdir()
    for name, data in files.items():
        (root / "dags" / name).write_bytes(data)
    return files


def _expected(data: bytes) -> bytes:
    return data.replace(
        b"from airflow.providers.databricks.operators.databricks import DatabricksSubmitRunOperator",
        b"from airflow_durable.operators.databricks import DurableDatabricksSubmitRunOperator",
    ).replace(b"run = DatabricksSubmitRunOperator(", b"run = DurableDatabricksSubmitRunOperator(")


@pytest.mark.skipif(shutil.which("git") is None, reason="needs git")
def test_diff_applies_with_git_apply_byte_exact(tmp_path: Path) -> None:
    files = _variants(tmp_path)
    code, diff, err = _run(tmp_path, "migrate", "dags")
    assert code == 0, err
    applied = subprocess.run(
        ["git", "apply", "--unsafe-paths", "-"], cwd=tmp_path, input=diff, capture_output=True, check=False
    )
    assert applied.returncode == 0, applied.stderr.decode()
    for name, data in files.items():
        assert (tmp_path / "dags" / name).read_bytes() == _expected(data), name


def test_write_keeps_every_other_byte(tmp_path: Path) -> None:
    files = _variants(tmp_path)
    code, _, err = _run(tmp_path, "migrate", "dags", "--write")
    assert code == 0, err
    for name, data in files.items():
        assert (tmp_path / "dags" / name).read_bytes() == _expected(data), name
    # Idempotent on disk too.
    code, diff, _ = _run(tmp_path, "migrate", "dags")
    assert code == 0 and diff == b""


def test_check_exits_1_when_a_diff_is_pending_and_changes_nothing(tmp_path: Path) -> None:
    files = _variants(tmp_path)
    code, out, err = _run(tmp_path, "migrate", "dags", "--check")
    assert code == 1 and out == b"" and "would rewrite dags/crlf.py" in err
    assert all((tmp_path / "dags" / n).read_bytes() == d for n, d in files.items())
    _run(tmp_path, "migrate", "dags", "--write")
    code, out, _ = _run(tmp_path, "migrate", "dags", "--check")
    assert code == 0 and out == b""


def test_subclass_replacing_execute_keeps_its_provider_base() -> None:
    source = (
        "from airflow.providers.databricks.operators.databricks import DatabricksSubmitRunOperator\n"
        "\n\nclass Mine(DatabricksSubmitRunOperator):\n"
        "    def execute(self, context):\n"
        "        return self._hook.submit_run(self.json)\n"
    )
    result = migrate_source("mine.py", source)
    assert not result.changed
    assert any(
        "'Mine' subclasses DatabricksSubmitRunOperator and overrides execute()" in n for n in result.notes
    )
    assert [f.code for f in check_source("mine.py", source)] == []  # no "migrate it" advice either
    calls_super = source.replace("return self._hook.submit_run(self.json)", "return super().execute(context)")
    assert "DurableDatabricksSubmitRunOperator" in migrate_source("mine.py", calls_super).migrated


@pytest.mark.parametrize(
    "module,name,durable",
    [
        (
            "airflow.contrib.operators.databricks_operator",
            "DatabricksSubmitRunOperator",
            "DurableDatabricksSubmitRunOperator",
        ),
        (
            "airflow.contrib.operators.emr_add_steps_operator",
            "EmrAddStepsOperator",
            "DurableEmrAddStepsOperator",
        ),
        (
            "airflow.providers.amazon.aws.operators.emr_add_steps",
            "EmrAddStepsOperator",
            "DurableEmrAddStepsOperator",
        ),
        (
            "airflow.providers.amazon.aws.operators.emr_containers",
            "EmrContainerOperator",
            "DurableEmrContainerOperator",
        ),
    ],
)
def test_deprecated_module_paths_same_in_check_and_migrate(module: str, name: str, durable: str) -> None:
    source = f'from {module} import {name}\n\nop = {name}(task_id="op")\n'
    assert [f.code for f in check_source("old.py", source)] == ["ADR007"]
    assert durable in check_source("old.py", source)[0].message
    migrated = migrate_source("old.py", source).migrated
    assert f"import {durable}\n" in migrated and f"op = {durable}(" in migrated and module not in migrated
