"""End to end for Snowflake: real DAGs through ``dag.test()`` on SQLite, durable vs upstream, one process.

Every cell below runs in a single subprocess (``tests/e2e/runner.py``: one Airflow start-up), then each
test reads its scenario's summary. Two-statement requests; ``response_lost``: the submission executes
but its answer is lost, the hook resends it with the same ``requestId``, and only ``retry=true`` (ours)
lets the SQL API recognise it. On Airflow 3.3 the durable operator must submit once in every
scenario; below 3.3 (or for the upstream operator) the counts show the duplicates it exists to avoid.
"""

from __future__ import annotations

from typing import Any

import pytest

from tests.e2e.runner import Cell
from tests.harness import DURABLE

pytest.importorskip("airflow.providers.snowflake")

pytestmark = pytest.mark.e2e

SPECS = [
    ("durable", "deferrable", "crash_after_submit"),
    ("durable", "deferrable", "already_succeeded"),
    ("durable", "deferrable", "response_lost"),
    ("durable", "sync", "crash_after_submit"),
    ("durable", "sync", "already_succeeded"),
    ("durable", "sync", "response_lost"),
    ("upstream", "deferrable", "crash_after_submit"),
    ("upstream", "deferrable", "already_succeeded"),
    ("upstream", "deferrable", "response_lost"),
    ("upstream", "sync", "response_lost"),
]


@pytest.fixture(scope="module")
def summaries(run_cells) -> dict[tuple[str, str, str], dict[str, Any]]:
    return run_cells("snowflake_sql_api", [Cell(*spec) for spec in SPECS])


def _common(summary: dict[str, Any]) -> None:
    assert summary["dag_run_state"].endswith("success")
    assert summary["tries"][-1]["state"] == "success"
    assert summary["emulator_errors"] == []
    # The provider's XCom, naming the statements of the (last) submission, on every path.
    assert summary["xcoms"]["query_ids"] == summary["external_ids"][-1]


@pytest.mark.parametrize("path", ["deferrable", "sync"])
def test_a_try_dies_after_submitting_and_the_retry_reconnects(summaries, path):
    summary = summaries[("durable", path, "crash_after_submit")]
    _common(summary)
    assert [t["state"] for t in summary["tries"]] == ["failed", "success"]
    assert summary["submissions"] == (1 if DURABLE else 2)
    if DURABLE:
        assert summary["decisions"] == ["fresh_submit", "reconnect"]
    if path == "deferrable":
        assert summary["trigger_polls"] > 0  # the reconnect deferred to the provider's trigger


@pytest.mark.parametrize("path", ["deferrable", "sync"])
def test_the_statements_already_succeeded_when_the_retry_starts(summaries, path):
    summary = summaries[("durable", path, "already_succeeded")]
    _common(summary)
    assert summary["submissions"] == (1 if DURABLE else 2)
    if DURABLE:
        assert summary["decisions"] == ["fresh_submit", "already_succeeded"]
        assert summary["trigger_polls"] == 0  # returned the result without a new deferral


@pytest.mark.parametrize("path", ["deferrable", "sync"])
def test_a_lost_submission_response_is_deduplicated_by_request_id(summaries, path):
    summary = summaries[("durable", path, "response_lost")]
    _common(summary)
    assert summary["submit_calls"] == 2  # the hook resent the request itself
    assert summary["submissions"] == (1 if DURABLE else 2)
    assert summary["retry_flags"] == ([True, True] if DURABLE else [False, False])


@pytest.mark.parametrize(
    "path, scenario",
    [
        ("deferrable", "crash_after_submit"),
        ("deferrable", "already_succeeded"),
        ("deferrable", "response_lost"),
        ("sync", "response_lost"),
    ],
)
def test_upstream_submits_twice_in_the_same_scenario(summaries, path, scenario):
    """The measured baseline: the provider's operator, same DAG shape, same faults."""
    summary = summaries[("upstream", path, scenario)]
    _common(summary)
    assert summary["submissions"] == 2
    assert summary["retry_flags"] == [False, False]
