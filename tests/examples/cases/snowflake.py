"""Snowflake example DAG: runs against one :class:`~airflow_durable.testing.SnowflakeEmulator`."""

from __future__ import annotations

from collections.abc import MutableMapping
from typing import Any

from tests.examples.registry import ExampleDag, start


def start_snowflake(env: MutableMapping[str, str]) -> Any:
    from airflow_durable.testing import SnowflakeEmulator

    # A few running reads so the deferrable path defers to the trigger before the statements finish.
    emulator = SnowflakeEmulator(lifecycle=["QUEUED", "RUNNING", "RUNNING", "SUCCESS"])
    return start(emulator, env, "snowflake_default")


EXAMPLES = [
    ExampleDag(
        file="durable_snowflake_sql_api.py",
        setup=start_snowflake,
        system="snowflake",
        task_overrides={"poll_interval": 0},
        xcoms={"load_orders": frozenset({"query_ids"})},
        returns={"report": lambda handles: isinstance(handles, list) and len(handles) == 2},
    ),
]
