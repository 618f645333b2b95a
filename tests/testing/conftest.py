"""Helpers for the emulator tests: real provider hooks pointed at the ``databricks_emulator`` fixture."""

from __future__ import annotations

from typing import Any

import pytest


def fast_retry_args(attempts: int = 3) -> dict[str, Any]:
    """The hook's own tenacity loop with ``attempts`` tries and no back-off sleeps."""
    from tenacity import stop_after_attempt, wait_none

    return {"stop": stop_after_attempt(attempts), "wait": wait_none()}


@pytest.fixture
def hook(databricks_emulator: Any) -> Any:
    """The unmodified provider hook on ``databricks_default`` (installed by the fixture)."""
    from airflow.providers.databricks.hooks.databricks import DatabricksHook

    return DatabricksHook(retry_limit=3, retry_args=fast_retry_args(3))
