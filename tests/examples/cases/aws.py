"""AWS example DAGs: Redshift Data and Batch, each against its emulator (``aws_default``)."""

from __future__ import annotations

from collections.abc import MutableMapping
from typing import Any

from tests.examples.registry import ExampleDag, start


def start_redshift_data(env: MutableMapping[str, str]) -> Any:
    from airflow_durable.testing import RedshiftDataEmulator

    lifecycle = ["SUBMITTED", "STARTED", "STARTED", "FINISHED"]
    return start(RedshiftDataEmulator(), env, "aws_default", lifecycle, fast_botocore=True)


def start_batch(env: MutableMapping[str, str]) -> Any:
    from airflow_durable.testing import BatchEmulator

    lifecycle = ["SUBMITTED", "RUNNABLE", "RUNNING", "SUCCEEDED"]
    return start(BatchEmulator(), env, "aws_default", lifecycle, fast_botocore=True)


EXAMPLES = [
    ExampleDag(
        file="durable_redshift_data.py",
        setup=start_redshift_data,
        system="redshift-data",
        task_overrides={"poll_interval": 1},
        xcoms={"load_sales": frozenset({"return_value"})},
        returns={"report": lambda count: count == 2},  # two sub-statements
    ),
    ExampleDag(
        file="durable_batch.py",
        setup=start_batch,
        system="batch",
        task_overrides={"poll_interval": 1},
        xcoms={"nightly_etl": frozenset({"return_value", "batch_job_details", "batch_job_queue"})},
        returns={"publish": lambda job_id: isinstance(job_id, str) and len(job_id) == 36},
    ),
]
