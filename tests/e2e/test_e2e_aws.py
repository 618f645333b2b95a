"""End to end for the AWS operators: real ``dag.test()`` runs with retries against the AWS emulators.

One subprocess per system and path runs the durable operator through both required scenarios and the
upstream operator through the first, so both counts come from the same scenario (see
``tests/e2e/runner.py``). On Airflow 3.3 the durable operator submits once; below 3.3 it degrades to
upstream's behaviour (a fresh submission per try).
"""

from __future__ import annotations

import pytest

from tests.e2e.runner import Cell
from tests.harness import DURABLE

pytestmark = [pytest.mark.e2e, pytest.mark.filterwarnings("ignore::DeprecationWarning")]

#: The durable operator through both scenarios and the upstream one through the first.
PLAN = "durable:dies_after_deferral,durable:dies_before_defer,upstream:dies_after_deferral"


def run_system(run_cells, case_id: str, sync: bool = False, runs: str = PLAN) -> dict:
    path = "sync" if sync else "deferrable"
    plan = [Cell(kind, path, scenario) for kind, _, scenario in (p.partition(":") for p in runs.split(","))]
    return {(cell.impl, cell.scenario): summary for cell, summary in run_cells(case_id, plan).items()}


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


def test_redshift_data_deferrable(run_cells):
    runs = run_system(run_cells, "redshift_data")
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
def test_batch(run_cells, sync):
    plan = "durable:dies_after_deferral,upstream:dies_after_deferral" if sync else PLAN
    runs = run_system(run_cells, "batch", sync=sync, runs=plan)
    after = runs[("durable", "dies_after_deferral")]
    _check_durable(after, "already_succeeded")
    job_id = after["xcoms"]["return_value"]
    assert after["xcoms"]["batch_job_details"]["job_id"] == job_id
    assert {"batch_job_definition", "batch_job_queue"} <= set(after["xcoms"])
    if not sync:
        _check_durable(runs[("durable", "dies_before_defer")], "reconnect")
    _check_upstream(runs[("upstream", "dies_after_deferral")])
