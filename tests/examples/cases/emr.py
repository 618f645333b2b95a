"""EMR example DAGs: each runs against its moto-backed emulator (``airflow_durable.testing.emr``)."""

from __future__ import annotations

from collections.abc import MutableMapping
from typing import Any

from tests.examples.registry import ExampleDag, start


def _start(name: str, env: MutableMapping[str, str]) -> Any:
    from airflow_durable.testing import emr

    emulator = getattr(emr, name)()
    # A few status reads of PENDING/RUNNING so the trigger really waits.
    start(emulator, env, "aws_default", ["PENDING"] + ["RUNNING"] * 2 + list(emulator.DEFAULT_LIFECYCLE[-1:]))
    # The DAGs read the resource ids from Airflow Variables, as a deployment would.
    env["AIRFLOW_VAR_EMR_SERVERLESS_APPLICATION_ID"] = getattr(emulator, "application_id", "")
    env["AIRFLOW_VAR_EMR_VIRTUAL_CLUSTER_ID"] = getattr(emulator, "virtual_cluster_id", "")
    return emulator


EXAMPLES = [
    ExampleDag(
        file="durable_emr_add_steps.py",
        setup=lambda env: _start("EmrEmulator", env),
        system="emr",
        task_overrides={"waiter_delay": 1},
        xcoms={"nightly_etl": frozenset({"job_flow_id", "emr_cluster", "emr_logs"})},
        returns={"publish": lambda cluster_id: isinstance(cluster_id, str) and cluster_id.startswith("j-")},
    ),
    ExampleDag(
        file="durable_emr_serverless_start_job.py",
        setup=lambda env: _start("EmrServerlessEmulator", env),
        system="emr-serverless",
        task_overrides={"waiter_delay": 1},
        returns={"nightly_etl": lambda job_id: isinstance(job_id, str) and len(job_id) == 16},
    ),
    ExampleDag(
        file="durable_emr_container.py",
        setup=lambda env: _start("EmrContainersEmulator", env),
        system="emr-containers",
        task_overrides={"poll_interval": 1},
        returns={"nightly_etl": lambda job_id: isinstance(job_id, str) and len(job_id) == 19},
    ),
]
