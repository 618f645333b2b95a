"""End to end for dbt Cloud: real ``dag.test()`` runs with retries, durable vs upstream, both paths.

One subprocess per operator kind runs all four DAG runs (``run_dbt_cloud.py``): a crash after deferral
(deferrable) or mid-poll (sync), and a retry that finds the run already succeeded. On Airflow 3.3 the
durable operator must submit exactly one run in each; the upstream ``DbtCloudRunJobOperator`` is
measured in the same scenarios and reported next to it. Below 3.3 the shim degrades to upstream's
behaviour, and the expectations say so.
"""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from tests.e2e.conftest import record_summary
from tests.e2e.test_dag_test_e2e import ROOT, airflow_home  # noqa: F401  (the shared migrated home)
from tests.harness import DURABLE

pytestmark = pytest.mark.e2e


def run_all(env: dict[str, str], kind: str) -> dict[tuple[str, str], dict]:
    done = subprocess.run(
        [sys.executable, "-m", "tests.e2e.run_dbt_cloud", kind],
        env=env,
        capture_output=True,
        text=True,
        timeout=900,
        cwd=ROOT,
    )
    lines = [line for line in done.stdout.splitlines() if line.startswith("E2E-SUMMARY ")]
    assert done.returncode == 0 and len(lines) == 4, (done.stdout[-3000:], done.stderr[-6000:])
    summaries = {}
    for line in lines:
        summary = json.loads(line.removeprefix("E2E-SUMMARY "))
        record_summary(summary)  # printed at the end of the run (tests/e2e/conftest.py)
        summaries[(summary["path"], summary["scenario"])] = summary
    return summaries


def assert_provider_result(summary: dict) -> None:
    run_id = summary["run_ids"][-1]
    xcoms = summary["xcoms"]
    assert summary["dag_run_state"].endswith("success")
    assert [t["state"] for t in summary["tries"]] == ["failed", "success"]
    assert xcoms["return_value"] == xcoms["job_run_id"] == run_id
    assert xcoms["job_run_url"].endswith(f"/runs/{run_id}/")


def test_durable_dbt_cloud_run_job_submits_once_after_a_crash_and_after_success(airflow_home):  # noqa: F811
    summaries = run_all(airflow_home, "durable")
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


def test_upstream_dbt_cloud_run_job_in_the_same_scenarios(airflow_home):  # noqa: F811
    """The measurement the durable numbers are compared with: upstream submits a second run each time."""
    summaries = run_all(airflow_home, "upstream")
    for summary in summaries.values():
        assert_provider_result(summary)
        assert summary["submissions"] == 2
