"""What the engine assumes of Airflow itself, checked against the installed Airflow with ``dag.test()``.

An Airflow release that changes one of these breaks a guarantee of DESIGN §8 without any of our code
changing: this is where it shows.
"""

from __future__ import annotations

import sys

import pytest

from airflow_durable import shims
from tests.e2e.dagrun import summaries

pytestmark = pytest.mark.skipif(not shims.DURABLE_RUNTIME, reason="durable needs Airflow >= 3.3")


def test_an_older_try_cannot_touch_the_state_store_once_a_newer_try_began(
    airflow_home: dict[str, str],
) -> None:
    (found,), log = summaries(
        [sys.executable, "-m", "tests.e2e.assume", "assume_store_per_try"],
        airflow_home,
        "ASSUME ",
        expected=1,
    )
    assert [t["try"] for t in found["tries"]] == [1, 2], log
    seen = found["xcoms"]["job"]["return_value"]
    # Each try has its own task-instance id...
    assert seen["same_accessor"] is False
    # ...the older try's read finds nothing, its write is refused...
    assert seen["old_get"] == "<default>"
    assert seen["old_set"].startswith("refused"), seen["old_set"]
    # ...and the newer try still reads what the older one wrote in its turn.
    assert seen["new_get"] == "written by try 1"
    assert found["state"].endswith("success")


@pytest.mark.parametrize(("state", "marked"), [("restarting", True), ("running", False)])
def test_airflow_failing_a_task_cleared_while_it_ran_marks_its_record(
    airflow_home: dict[str, str], state: str, marked: bool
) -> None:
    """Airflow's failure handling of a task the user cleared while it ran (its worker gone): the plugin's
    listener marks the record, so the retry Airflow starts begins a new logical job. A plain worker death
    (``running``) marks nothing: its retry reconnects."""
    (found,), log = summaries(
        [sys.executable, "-m", "tests.e2e.clear_listener", state], airflow_home, "CLEAR ", expected=1
    )
    assert found["state"].endswith("up_for_retry"), log
    assert ("cleared_while_running" in found["record"]) is marked, found["record"]
    if marked:
        assert found["record"]["cleared_while_running"]["try"] == 1
