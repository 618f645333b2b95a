"""End to end, Databricks: real DAGs through Airflow's ``dag.test()`` on SQLite, with retries, against
the emulator (``tests/e2e/runner.py``; every scenario of one operator in one subprocess).

On Airflow 3.3 every scenario must end with exactly one submission per logical job; below 3.3 the shim
degrades to "submit fresh every try", and the expectations say so.
"""

from __future__ import annotations

import pytest

from tests.conformance.conftest import case_param
from tests.conformance.systems import SYSTEMS
from tests.e2e.conftest import cells
from tests.e2e.runner import Cell
from tests.harness import DURABLE

# Also on the pre-mixin provider entry of the matrix (CI): the one place provider versions differ.
pytestmark = [pytest.mark.e2e, pytest.mark.provider_matrix]

DEFERRABLE = ("crash_before_defer", "already_succeeded", "run_failed", "status_5xx_before_defer")
CELLS = cells("durable", "deferrable", *DEFERRABLE) + cells(
    "durable", "sync", "run_failed", "sync_status_error"
)


@pytest.mark.parametrize("case", [case_param(c) for c in SYSTEMS if c.id.startswith("databricks_")])
def test_every_scenario_ends_with_one_submission_per_logical_job(run_cells, case):
    runs = run_cells(case.id, CELLS)
    a_try_dies_before_its_deferral_lands_while_the_run_keeps_going(runs[CELLS[0]])
    the_run_already_succeeded_when_the_retry_starts(runs[CELLS[1]])
    for path in ("deferrable", "sync"):
        the_run_failed_so_the_retry_submits_a_new_run(runs[Cell("durable", path, "run_failed")])
    status_api_5xx_past_the_hook_retries(runs[CELLS[3]])
    sync_status_errors_mid_poll(runs[CELLS[5]])


def a_try_dies_before_its_deferral_lands_while_the_run_keeps_going(summary):
    assert summary["dag_run_state"].endswith("success")
    assert [t["state"] for t in summary["tries"]][-1] == "success"
    assert summary["submissions"] == (1 if DURABLE else 2)
    if DURABLE:
        assert summary["decisions"] == ["fresh_submit", "reconnect"]
    assert summary["trigger_polls"] > 0  # the reconnect deferred to the provider trigger again
    assert {"run_id", "run_page_url", "job_id"} <= set(summary["xcoms"])


def the_run_already_succeeded_when_the_retry_starts(summary):
    assert summary["dag_run_state"].endswith("success")
    assert summary["submissions"] == (1 if DURABLE else 2)
    if DURABLE:
        assert summary["decisions"] == ["fresh_submit", "already_succeeded"]
        assert summary["trigger_polls"] == 0  # returned the result without a new deferral
    assert {"run_id", "run_page_url", "job_id"} <= set(summary["xcoms"])


def the_run_failed_so_the_retry_submits_a_new_run(summary):
    assert summary["dag_run_state"].endswith("success"), summary["path"]
    assert summary["submissions"] == 2
    if DURABLE:
        assert len(set(summary["tokens"])) == 2  # a new generation, a new idempotency token
        assert summary["decisions"] == ["fresh_submit", "terminal_resubmit"]
    else:
        assert summary["tokens"] == [None, None]


def status_api_5xx_past_the_hook_retries(summary):
    assert summary["dag_run_state"].endswith("success")
    assert summary["submissions"] == (1 if DURABLE else 2)
    if DURABLE:
        assert summary["decisions"] == ["fresh_submit", "reconnect"]


def sync_status_errors_mid_poll(summary):
    assert summary["dag_run_state"].endswith("success")
    assert summary["submissions"] == (1 if DURABLE else 2)
    assert {"run_id", "run_page_url"} <= set(summary["xcoms"])
