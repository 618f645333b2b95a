"""End to end for Snowflake: real DAGs through ``dag.test()`` on SQLite, durable vs upstream, one process.

Every scenario of ``run_snowflake.py`` runs in a single subprocess (one Airflow start-up), then each
test reads its scenario's summary. On Airflow 3.3 the durable operator must submit once in every
scenario; below 3.3 (or for the upstream operator) the counts show the duplicates it exists to avoid.
"""

from __future__ import annotations

import json
import subprocess
import sys
from typing import Any

import pytest

import tests.conformance.systems  # noqa: F401  (before test_dag_test_e2e: it imports a case module)
from tests.e2e.conftest import record_summary
from tests.e2e.test_dag_test_e2e import ROOT, airflow_home  # noqa: F401  (the shared migrated home)
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
def summaries(airflow_home: dict[str, str]) -> dict[tuple[str, str, str], dict[str, Any]]:  # noqa: F811
    cmd = [sys.executable, "-m", "tests.e2e.run_snowflake", *(":".join(spec) for spec in SPECS)]
    done = subprocess.run(cmd, env=airflow_home, capture_output=True, text=True, timeout=900, cwd=ROOT)
    lines = [line for line in done.stdout.splitlines() if line.startswith("E2E-SUMMARY ")]
    assert done.returncode == 0 and len(lines) == len(SPECS), (done.stdout[-3000:], done.stderr[-6000:])
    found = {}
    for line in lines:
        summary = json.loads(line.removeprefix("E2E-SUMMARY "))
        record_summary(summary)  # printed at the end of the run (tests/e2e/conftest.py)
        found[(summary["impl"], summary["path"], summary["scenario"])] = summary
    return found


def _common(summary: dict[str, Any]) -> None:
    assert summary["dag_run_state"].endswith("success")
    assert summary["tries"][-1]["state"] == "success"
    assert summary["emulator_errors"] == []
    # The provider's XCom, naming the statements of the (last) submission, on every path.
    assert summary["xcoms"]["query_ids"] == summary["handles"][-1]


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

