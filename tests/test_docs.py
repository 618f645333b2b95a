"""The docs site builds with ``mkdocs build --strict``: no broken link, nav entry or docstring warning.

mkdocs and its plugins are installed in the main env only (``docs`` extra); the matrix envs skip.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]

pytest.importorskip("mkdocs", reason="mkdocs is not installed in this env (docs build only in the main env)")
pytest.importorskip("material", reason="mkdocs-material is not installed in this env")
pytest.importorskip("mkdocstrings", reason="mkdocstrings is not installed in this env")


def build(tmp_path: Path, config: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [
            sys.executable,
            "-m",
            "mkdocs",
            "build",
            "--strict",
            "-f",
            str(config),
            "-d",
            str(tmp_path / "site"),
        ],
        capture_output=True,
        text=True,
        timeout=300,
        cwd=ROOT,
        env={"NO_MKDOCS_2_WARNING": "1", "PATH": "/usr/bin:/bin", "HOME": str(tmp_path)},
    )


def test_docs_build_strict(tmp_path):
    done = build(tmp_path, ROOT / "mkdocs.yml")
    assert done.returncode == 0, done.stderr[-6000:]
    site = tmp_path / "site"
    # The API reference is rendered from the docstrings, not written twice.
    assert "DurableJobEngine" in (site / "reference" / "engine" / "index.html").read_text()
    operators = (site / "reference" / "operators" / "index.html").read_text()
    for module in sorted((ROOT / "airflow_durable" / "operators").glob("*.py")):
        if module.stem != "__init__":
            assert f"airflow_durable.operators.{module.stem}" in operators, module.name
    # Offline: no web-font fetch.
    assert "fonts.googleapis.com" not in (site / "index.html").read_text()
