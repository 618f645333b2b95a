"""End to end for the EMR operators: real ``dag.test()`` on SQLite, retries, the moto-backed emulators.

One subprocess per EMR flavour runs both required scenarios (a deferred try that fails while the job
runs; a retry that finds the job already succeeded) with the durable operator and, side by side, with
the provider's own operator. On Airflow 3.3 the durable operator submits once per logical job; the
upstream one (and the durable one below 3.3, degraded) submits again on the retry.
"""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

import tests.conformance.systems  # noqa: F401  (first: cases.databricks imports systems, which imports it)
from tests.e2e.conftest import record_summary
from tests.e2e.test_dag_test_e2e import ROOT, airflow_home  # noqa: F401  (the shared migrated home)
from tests.harness import DURABLE

pytestmark = pytest.mark.e2e


def run_flavour(env: dict[str, str], flavour: str) -> dict[tuple[str, str], dict]:
    cmd = [sys.executable, "-m", "tests.e2e.run_emr_scenarios", flavour]
    done = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=900, cwd=ROOT)
    lines = [line for line in done.stdout.splitlines() if line.startswith("E2E-SUMMARY ")]
    assert done.returncode == 0 and len(lines) == 4, (done.stdout[-3000:], done.stderr[-8000:])
    summaries = {}
    for line in lines:
        summary = json.loads(line.removeprefix("E2E-SUMMARY "))
        record_summary(summary)
        summaries[(summary["impl"], summary["scenario"])] = summary
    return summaries


@pytest.mark.parametrize("flavour", ["steps", "serverless", "containers"])
def test_emr_retry_after_a_failed_deferral_and_after_success(airflow_home, flavour):  # noqa: F811
    runs = run_flavour(airflow_home, flavour)
    for key, summary in runs.items():
        assert summary["dag_run_state"].endswith("success"), (key, summary)
        states = [t["state"] for t in summary["tries"]]
        assert states[-1] == "success", (key, summary)
        if DURABLE:  # Airflow 2's dag.test keeps no history row for the failed try
            assert states == ["failed", "success"], (key, summary)

    crash, done = runs[("durable", "crash_after_defer")], runs[("durable", "already_succeeded")]
    assert crash["submissions"] == (1 if DURABLE else 2)
    assert done["submissions"] == (1 if DURABLE else 2)
    if DURABLE:
        assert crash["decisions"] == ["fresh_submit", "reconnect"]
        assert crash["trigger_polls"] > 1  # the reconnect deferred to the provider trigger again
        assert done["decisions"] == ["fresh_submit", "already_succeeded"]
        assert done["trigger_polls"] == 1  # only try 1's failed read: no new deferral
    for summary in (crash, done):
        result = summary["result"]
        assert result and (result if isinstance(result, str) else result[0])  # the provider's return value

    # Measured, the same scenarios with the provider's operator: it submits the job again on the retry.
    assert runs[("upstream", "crash_after_defer")]["submissions"] == 2
    assert runs[("upstream", "already_succeeded")]["submissions"] == 2
