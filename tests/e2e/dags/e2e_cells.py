"""The end-to-end DAGs of the registry case named in ``E2E_CASE`` (set by ``tests/e2e/runner.py``).

Kept in the dags folder because Airflow's ``dag.test()`` needs the file inside a configured bundle (it
parses the folder on every run: one case's four DAGs, not every system's). The words "airflow" and "dag"
in this docstring matter: the DAG bag's safe mode skips a file that mentions neither.
"""

from __future__ import annotations

import os

from tests.e2e.runner import build_dags

DAGS = build_dags(os.environ.get("E2E_CASE"))
globals().update(DAGS)
