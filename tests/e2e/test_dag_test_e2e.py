"""End to end: real DAGs through Airflow's ``dag.test()`` on SQLite, with retries, against the emulator.

Each scenario runs in a fresh process (``run_scenario.py``) sharing one migrated SQLite home. On Airflow
3.3 every scenario must end with exactly one submission per logical job; below 3.3 the shim degrades
to "submit fresh every try", and the expectations say so.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.e2e.conftest import record_summary
from tests.conformance.cases.databricks import upstream_run_now_broken
from tests.harness import DURABLE

# Also on the pre-mixin provider entry of the matrix (CI): the one place provider versions differ.
pytestmark = [pytest.mark.e2e, pytest.mark.provider_matrix]

ROOT = Path(__file__).resolve().parents[2]
DAGS = Path(__file__).parent / "dags"


@pytest.fixture(scope="session")
def airflow_home(tmp_path_factory: pytest.TempPathFactory) -> dict[str, str]:
    home = tmp_path_factory.mktemp("e2e-airflow-home")
    env = {
        **os.environ,
        "AIRFLOW_HOME": str(home),
        "AIRFLOW__CORE__DAGS_FOLDER": str(DAGS),
        "AIRFLOW__CORE__LOAD_EXAMPLES": "False",
        "AIRFLOW__DATABASE__SQL_ALCHEMY_CONN": f"sqlite:///{home}/airflow.db",
        "PYTHONPATH": os.pathsep.join([str(ROOT), str(DAGS)]),
        "PYTHONWARNINGS": "ignore",
    }
    command = ["db", "migrate"] if DURABLE or _airflow_major() >= 3 else ["db", "init"]
    done = subprocess.run(
        [sys.executable, "-m", "airflow", *command], env=env, capture_output=True, text=True, timeout=600
    )
    assert done.returncode == 0, done.stderr[-3000:]
    return env


def _airflow_major() -> int:
    import airflow

    return int(airflow.__version__.split(".")[0])


def run_scenario(env: dict[str, str], scenario: str, operator: str, sync: bool = False) -> dict:
    cmd = [sys.executable, "-m", "tests.e2e.run_scenario", scenario, "--operator", operator]
    if sync:
        cmd.append("--sync")
    done = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=600, cwd=ROOT)
    lines = [line for line in done.stdout.splitlines() if line.startswith("E2E-SUMMARY ")]
    assert done.returncode == 0 and lines, (done.stdout[-3000:], done.stderr[-6000:])
    summary = json.loads(lines[-1].removeprefix("E2E-SUMMARY "))
    record_summary(summary)  # printed at the end of the run (tests/e2e/conftest.py)
    return summary


_RUN_NOW_BROKEN = upstream_run_now_broken()
OPERATORS = [
    "submit_run",
    pytest.param(
        "run_now",
        marks=pytest.mark.skipif(_RUN_NOW_BROKEN is not None, reason=_RUN_NOW_BROKEN or ""),
    ),
]


@pytest.mark.parametrize("operator", OPERATORS)
def test_a_try_dies_before_its_deferral_lands_while_the_run_keeps_going(airflow_home, operator):
    summary = run_scenario(airflow_home, "crash_before_defer", operator)
    assert summary["dag_run_state"].endswith("success")
    assert [t["state"] for t in summary["tries"]][-1] == "success"
    assert summary["submissions"] == (1 if DURABLE else 2)
    if DURABLE:
        assert summary["decisions"] == ["fresh_submit", "reconnect"]
    assert summary["trigger_polls"] > 0  # the reconnect deferred to the provider trigger again
    assert {"run_id", "run_page_url", "job_id"} <= set(summary["xcoms"])


@pytest.mark.parametrize("operator", OPERATORS)
def test_b_the_run_already_succeeded_when_the_retry_starts(airflow_home, operator):
    summary = run_scenario(airflow_home, "already_succeeded", operator)
    assert summary["dag_run_state"].endswith("success")
    assert summary["submissions"] == (1 if DURABLE else 2)
    if DURABLE:
        assert summary["decisions"] == ["fresh_submit", "already_succeeded"]
        assert summary["trigger_polls"] == 0  # returned the result without a new deferral
    assert {"run_id", "run_page_url", "job_id"} <= set(summary["xcoms"])


@pytest.mark.parametrize("sync", [False, True], ids=["deferrable", "sync"])
@pytest.mark.parametrize("operator", OPERATORS)
def test_c_the_run_failed_so_the_retry_submits_a_new_run(airflow_home, operator, sync):
    summary = run_scenario(airflow_home, "run_failed", operator, sync=sync)
    assert summary["dag_run_state"].endswith("success")
    assert summary["submissions"] == 2
    if DURABLE:
        assert len(set(summary["tokens"])) == 2  # a new generation, a new idempotency token
        assert summary["decisions"] == ["fresh_submit", "terminal_resubmit"]
    else:
        assert summary["tokens"] == [None, None]


@pytest.mark.parametrize("operator", OPERATORS)
def test_d_status_api_5xx_past_the_hook_retries(airflow_home, operator):
    summary = run_scenario(airflow_home, "status_5xx_before_defer", operator)
    assert summary["dag_run_state"].endswith("success")
    assert summary["submissions"] == (1 if DURABLE else 2)
    if DURABLE:
        assert summary["decisions"] == ["fresh_submit", "reconnect"]


@pytest.mark.parametrize("operator", OPERATORS)
def test_sync_status_errors_mid_poll(airflow_home, operator):
    summary = run_scenario(airflow_home, "sync_status_error", operator, sync=True)
    assert summary["dag_run_state"].endswith("success")
    assert summary["submissions"] == (1 if DURABLE else 2)
    assert {"run_id", "run_page_url"} <= set(summary["xcoms"])
