"""Databricks example DAGs: both run against one :class:`~airflow_durable.testing.DatabricksEmulator`."""

from __future__ import annotations

from collections.abc import MutableMapping
from typing import Any

from tests.examples.registry import ExampleDag, start


def start_databricks(env: MutableMapping[str, str]) -> Any:
    from airflow_durable.testing import DatabricksEmulator

    emulator = DatabricksEmulator()
    emulator.add_job(job_id=42, name="refresh-marts")  # durable_databricks_run_now.py runs job 42
    # A few status reads of PENDING/RUNNING so the sync path polls and the deferrable path defers.
    lifecycle = ["PENDING"] * 3 + ["RUNNING"] * 2 + ["TERMINATED:SUCCESS"]
    return start(emulator, env, "databricks_default", lifecycle)


_FAST = {"polling_period_seconds": 1, "databricks_retry_delay": 0.1}

EXAMPLES = [
    ExampleDag(
        file="durable_databricks_submit_run.py",
        setup=start_databricks,
        system="databricks",
        task_overrides=_FAST,
        xcoms={"nightly_etl": frozenset({"run_id", "run_page_url"})},
        returns={"publish": lambda url: isinstance(url, str) and "#job/" in url and "/run/" in url},
    ),
    ExampleDag(
        file="durable_databricks_run_now.py",
        setup=start_databricks,
        system="databricks",
        task_overrides=_FAST,
        xcoms={"refresh_marts": frozenset({"run_id", "run_page_url"})},
    ),
]
