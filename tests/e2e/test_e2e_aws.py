"""End to end for the AWS operators: real ``dag.test()`` runs with retries against the AWS emulators.

One subprocess per system and path runs the durable operator through both required scenarios and the
upstream operator through the first, so both counts come from the same scenario (see
``run_aws_scenarios.py``). On Airflow 3.3 the durable operator submits once; below 3.3 it degrades to
upstream's behaviour (a fresh submission per try).
"""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

import tests.conformance.systems  # noqa: F401  (first: test_dag_test_e2e imports a case module)
from tests.e2e.conftest import record_summary
from tests.e2e.test_dag_test_e2e import ROOT, airflow_home  # noqa: F401  (the shared migrated home)
from tests.harness import DURABLE

pytestmark = [pytest.mark.e2e, pytest.mark.filterwarnings("ignore::DeprecationWarning")]


def run_system(env: dict[str, str], system: str, sync: bool = False, runs: str | None = None) -> dict:
    cmd = [sys.executable, "-m", "tests.e2e.run_aws_scenarios", "--system", system]
    if sync:
        cmd.append("--sync")
    if runs:
        cmd += ["--runs", runs]
    done = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=900, cwd=ROOT)
    lines = [line for line in done.stdout.splitlines() if line.startswith("E2E-SUMMARY ")]
    assert done.returncode == 0 and lines, (done.stdout[-3000:], done.stderr[-6000:])
    summaries = {}
    for line in lines:
        summary = json.loads(line.removeprefix("E2E-SUMMARY "))
        record_summary(summary)  # printed at the end of the run (tests/e2e/conftest.py)
        summaries[(summary["operator"].rsplit("-", 1)[1], summary["scenario"])] = summary
    return summaries


def _check_durable(summary: dict, second_decision: str) -> None:
    assert summary["dag_run_state"].endswith("success")
    assert [t["state"] for t in summary["tries"]] == ["failed", "success"]
    assert summary["submissions"] == (1 if DURABLE else 2)
    if DURABLE:
        assert summary["decisions"] == ["fresh_submit", second_decision]


def _check_upstream(summary: dict) -> None:
    # Measured, not wished: the provider operator submits again on the retry.
    assert summary["dag_run_state"].endswith("success")
    assert summary["submissions"] == 2


def test_redshift_data_deferrable(airflow_home):  # noqa: F811
    runs = run_system(airflow_home, "redshift")
    after = runs[("durable", "dies_after_deferral")]
    _check_durable(after, "already_succeeded")
    if DURABLE:
        assert after["trigger_polls"] > 0
        assert len(after["xcoms"]["return_value"]) == 1  # the statement id, as upstream returns it
    _check_durable(runs[("durable", "dies_before_defer")], "reconnect")
    if DURABLE:
        assert runs[("durable", "dies_before_defer")]["trigger_polls"] > 0  # the reconnect deferred again
    _check_upstream(runs[("upstream", "dies_after_deferral")])


@pytest.mark.parametrize("sync", [False, True], ids=["deferrable", "sync"])
def test_batch(airflow_home, sync):  # noqa: F811
    plan = "durable:dies_after_deferral,upstream:dies_after_deferral" if sync else None
    runs = run_system(airflow_home, "batch", sync=sync, runs=plan)
    after = runs[("durable", "dies_after_deferral")]
    _check_durable(after, "already_succeeded")
    job_id = after["xcoms"]["return_value"]
    assert after["xcoms"]["batch_job_details"]["job_id"] == job_id
    assert {"batch_job_definition", "batch_job_queue"} <= set(after["xcoms"])
    if not sync:
        _check_durable(runs[("durable", "dies_before_defer")], "reconnect")
    _check_upstream(runs[("upstream", "dies_after_deferral")])
