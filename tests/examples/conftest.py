"""Shared by the example-DAG tests: one migrated AIRFLOW_HOME whose dags folder is ``example_dags/``."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from tests.examples.registry import EXAMPLE_DAGS, ROOT


@pytest.fixture(scope="session")
def examples_home(tmp_path_factory: pytest.TempPathFactory) -> dict[str, str]:
    home = tmp_path_factory.mktemp("examples-airflow-home")
    env = {
        **os.environ,
        "AIRFLOW_HOME": str(home),
        "AIRFLOW__CORE__DAGS_FOLDER": str(EXAMPLE_DAGS),
        "AIRFLOW__CORE__LOAD_EXAMPLES": "False",
        "AIRFLOW__DATABASE__SQL_ALCHEMY_CONN": f"sqlite:///{home}/airflow.db",
        "PYTHONPATH": os.pathsep.join([str(ROOT), str(EXAMPLE_DAGS)]),
        "PYTHONWARNINGS": "ignore",
    }
    import airflow

    command = ["db", "migrate"] if int(airflow.__version__.split(".")[0]) >= 3 else ["db", "init"]
    done = subprocess.run(
        [sys.executable, "-m", "airflow", *command], env=env, capture_output=True, text=True, timeout=600
    )
    assert done.returncode == 0, done.stderr[-3000:]
    return env
