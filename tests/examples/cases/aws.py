"""AWS example DAGs: Redshift Data and Batch, each against its emulator (``aws_default``)."""

from __future__ import annotations

from collections.abc import MutableMapping
from typing import Any

from tests.examples.registry import ExampleDag


def _start(emulator: Any, env: MutableMapping[str, str], lifecycle: list[str]) -> Any:
    # A few active status reads so the deferrable path really defers.
    emulator.lifecycle = lifecycle
    emulator.start()
    emulator.install_connection(env.__setitem__, conn_id="aws_default")
    emulator.install_fast_botocore(env.__setitem__)
    return emulator


def start_redshift_data(env: MutableMapping[str, str]) -> Any:
    from airflow_durable.testing import RedshiftDataEmulator

    return _start(RedshiftDataEmulator(), env, ["SUBMITTED", "STARTED", "STARTED", "FINISHED"])


def start_batch(env: MutableMapping[str, str]) -> Any:
    from airflow_durable.testing import BatchEmulator

    return _start(BatchEmulator(), env, ["SUBMITTED", "RUNNABLE", "RUNNING", "SUCCEEDED"])


EXAMPLES = [
    ExampleDag(
        file="durable_redshift_data.py",
        dag_id="durable_redshift_data",
        setup=start_redshift_data,
        system="redshift-data",
        task_overrides={"poll_interval": 1},
        xcoms={"load_sales": frozenset({"return_value"})},
        returns={"report": lambda count: count == 2},  # two sub-statements
    ),
    ExampleDag(
        file="durable_batch.py",
        dag_id="durable_batch",
        setup=start_batch,
        system="batch",
        task_overrides={"poll_interval": 1},
        xcoms={"nightly_etl": frozenset({"return_value", "batch_job_details", "batch_job_queue"})},
        returns={"publish": lambda job_id: isinstance(job_id, str) and len(job_id) == 36},
    ),
]
