"""The testing guide's example (docs/snippets/test_my_dags.py, shown on docs/testing.md) really runs.

It is run the way a user runs it: pytest in a fresh process, with a migrated AIRFLOW_HOME whose dags
folder holds the DAGs, and airflow-durable's pytest plugin providing the emulator fixtures.
"""

from __future__ import annotations

import subprocess
import sys

import pytest

from tests.examples.registry import ROOT
from tests.harness import DURABLE

GUIDE = ROOT / "docs" / "snippets" / "test_my_dags.py"


@pytest.mark.e2e
@pytest.mark.skipif(
    not DURABLE,
    reason="the guide shows the durable behaviour (Airflow 3.3+); below 3.3 every try submits fresh",
)
def test_the_testing_guide_example_passes(examples_home):
    done = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-p", "no:xdist", str(GUIDE)],
        env=examples_home,
        capture_output=True,
        text=True,
        timeout=600,
        cwd=ROOT,
    )
    assert done.returncode == 0, done.stdout[-8000:]
    assert "2 passed" in done.stdout, done.stdout[-3000:]
