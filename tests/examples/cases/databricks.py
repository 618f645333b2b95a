"""Databricks example DAGs: both run against one :class:`~airflow_durable.testing.DatabricksEmulator`."""

from __future__ import annotations

from collections.abc import MutableMapping
from typing import Any

from tests.examples.registry import ExampleDag


def start_databricks(env: MutableMapping[str, str]) -> Any:
    from airflow_durable.testing import DatabricksEmulator

    emulator = DatabricksEmulator()
    emulator.add_job(job_id=42, name="refresh-marts")  # durable_databricks_run_now.py runs job 42
    # A few status reads of PENDING/RUNNING so the sync path polls and the deferrable path defers.
    emulator.lifecycle = ["PENDING"] * 3 + ["RUNNING"] * 2 + ["TERMINATED:SUCCESS"]
    emulator.start()
    emulator.install_connection(env.__setitem__, conn_id="databricks_default")
    return emulator


_FAST = {"polling_period_seconds": 1, "databricks_retry_delay": 0.1}

EXAMPLES = [
    ExampleDag(
        file="durable_databricks_submit_run.py",
        dag_id="durable_databricks_submit_run",
        setup=start_databricks,
        system="databricks",
        task_overrides=_FAST,
        xcoms={"nightly_etl": frozenset({"run_id", "run_page_url"})},
        returns={"publish": lambda url: isinstance(url, str) and "#job/" in url and "/run/" in url},
    ),
    ExampleDag(
        file="durable_databricks_run_now.py",
        dag_id="durable_databricks_run_now",
        setup=start_databricks,
        system="databricks",
        task_overrides=_FAST,
        xcoms={"refresh_marts": frozenset({"run_id", "run_page_url"})},
    ),
]
