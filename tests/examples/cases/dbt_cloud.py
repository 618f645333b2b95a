"""dbt Cloud example DAG against one :class:`~airflow_durable.testing.DbtCloudEmulator` (loopback HTTPS)."""

from __future__ import annotations

from collections.abc import MutableMapping
from typing import Any

from tests.examples.registry import ExampleDag, start


def start_dbt_cloud(env: MutableMapping[str, str]) -> Any:
    from airflow_durable.testing import DbtCloudEmulator

    emulator = DbtCloudEmulator()
    emulator.add_job(job_id=42, name="nightly-models")
    # The connection and the emulator's CA variables (the hook forces https).
    return start(emulator, env, "dbt_cloud_default", ["QUEUED", "STARTING", "RUNNING", "RUNNING", "SUCCESS"])


EXAMPLES = [
    ExampleDag(
        file="durable_dbt_cloud_run_job.py",
        setup=start_dbt_cloud,
        system="dbt_cloud",
        task_overrides={"check_interval": 1},
        xcoms={"run_job": frozenset({"job_run_url", "job_run_id"})},
        returns={"run_job": lambda run_id: isinstance(run_id, int) and run_id > 0},
    ),
]
