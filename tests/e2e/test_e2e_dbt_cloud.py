"""End to end for dbt Cloud: real ``dag.test()`` runs with retries, durable vs upstream, both paths.

One subprocess per operator kind runs all four DAG runs (``tests/e2e/runner.py``): a crash after deferral
(deferrable) or mid-poll (sync), and a retry that finds the run already succeeded. On Airflow 3.3 the
durable operator must submit exactly one run in each; the upstream ``DbtCloudRunJobOperator`` is
measured in the same scenarios and reported next to it. Below 3.3 the shim degrades to upstream's
behaviour, and the expectations say so.
"""

from __future__ import annotations

import pytest

from tests.e2e.conftest import cells
from tests.harness import DURABLE

pytestmark = pytest.mark.e2e


def run_all(run_cells, kind: str) -> dict[tuple[str, str], dict]:
    plan = [
        cell for path in ("deferrable", "sync") for cell in cells(kind, path, "crash", "already_succeeded")
    ]
    return {
        (cell.path, cell.scenario): summary for cell, summary in run_cells("dbt_cloud_run_job", plan).items()
    }


def assert_provider_result(summary: dict) -> None:
    run_id = summary["external_ids"][-1]
    xcoms = summary["xcoms"]
    assert summary["dag_run_state"].endswith("success")
    assert [t["state"] for t in summary["tries"]] == ["failed", "success"]
    assert xcoms["return_value"] == xcoms["job_run_id"] == run_id
    assert xcoms["job_run_url"].endswith(f"/runs/{run_id}/")


def test_durable_dbt_cloud_run_job_submits_once_after_a_crash_and_after_success(run_cells):
    summaries = run_all(run_cells, "durable")
    for (path, scenario), summary in summaries.items():
        assert_provider_result(summary)
        assert summary["submissions"] == (1 if DURABLE else 2), (path, scenario)
    if DURABLE:
        crash, done = summaries[("deferrable", "crash")], summaries[("deferrable", "already_succeeded")]
        assert crash["decisions"] == ["fresh_submit", "reconnect"]
        assert crash["trigger_polls"] >= 2  # deferred to the provider trigger again on the reconnect
        assert done["decisions"] == ["fresh_submit", "already_succeeded"] and done["trigger_polls"] == 0
        assert summaries[("sync", "crash")]["decisions"] == ["fresh_submit", "reconnect"]
        assert summaries[("sync", "already_succeeded")]["decisions"] == ["fresh_submit", "already_succeeded"]


def test_upstream_dbt_cloud_run_job_in_the_same_scenarios(run_cells):
    """The measurement the durable numbers are compared with: upstream submits a second run each time."""
    summaries = run_all(run_cells, "upstream")
    for summary in summaries.values():
        assert_provider_result(summary)
        assert summary["submissions"] == 2
