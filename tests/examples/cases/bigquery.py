"""BigQuery example DAG: runs against one :class:`~airflow_durable.testing.BigQueryEmulator`."""

from __future__ import annotations

from collections.abc import MutableMapping
from typing import Any

from tests.examples.registry import ExampleDag


def start_bigquery(env: MutableMapping[str, str]) -> Any:
    from airflow_durable.testing import BigQueryEmulator

    emulator = BigQueryEmulator()
    # A few PENDING/RUNNING reads so the deferrable task defers and the sync task polls.
    emulator.lifecycle = ["PENDING", "RUNNING", "RUNNING", "DONE"]
    emulator.start()
    emulator.install(env.__setitem__, conn_id="google_cloud_default")
    return emulator


_LINKS = frozenset({"bigquery_job_detail", "job_id_path"})

EXAMPLES = [
    ExampleDag(
        file="durable_bigquery_insert_job.py",
        setup=start_bigquery,
        system="bigquery",
        submissions=2,  # two tasks, one job each
        task_overrides={"poll_interval": 0.2},
        xcoms={"daily_rollup": _LINKS | {"bigquery_table"}, "audit_rollup": _LINKS},
        # The return value is the job id, as with the provider operator (durable or degraded).
        returns={
            "daily_rollup": lambda job_id: (
                isinstance(job_id, str)
                and job_id.startswith("airflow_durable_bigquery_insert_job_daily_rollup_")
            ),
        },
    ),
]
