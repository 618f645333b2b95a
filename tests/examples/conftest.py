"""Shared by the example-DAG tests: one migrated AIRFLOW_HOME whose dags folder is ``example_dags/``."""

from __future__ import annotations

import pytest

from tests.e2e.dagrun import migrated_home
from tests.examples.registry import EXAMPLE_DAGS


@pytest.fixture(scope="session")
def examples_home(tmp_path_factory: pytest.TempPathFactory) -> dict[str, str]:
    return migrated_home(tmp_path_factory.mktemp("examples-airflow-home"), EXAMPLE_DAGS)
