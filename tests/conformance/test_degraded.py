"""The shim's degraded contract (DESIGN.md §4), for every registered operator.

Below Airflow 3.3, or with ``durable=False`` on any Airflow: every try submits fresh, the state store is
never read or written, and the task still submits and waits in one task (polls, or defers to the same
provider trigger). On Airflow 3.3 this file exercises ``durable=False``; on 3.2 / 2.11 the operators'
defaults, which must behave the same.
"""

from __future__ import annotations

from typing import Any

import pytest

from tests.conformance.systems import SystemCase
from tests.harness import DURABLE, MemoryStateStore, TaskRunner

PATHS = [pytest.param(False, id="sync"), pytest.param(True, id="deferrable")]


def degraded_runner(case: SystemCase, emulator: Any, deferrable: bool) -> TaskRunner:
    # On 3.3 degrade explicitly; below it, the default must already be the degraded behaviour.
    overrides = {"durable": False} if DURABLE else {}
    return TaskRunner(lambda: case.make(emulator, deferrable, **overrides), store=MemoryStateStore())


@pytest.mark.parametrize("deferrable", PATHS)
def test_one_task_submits_and_waits_without_touching_the_store(case, emulator, deferrable):
    runner = degraded_runner(case, emulator, deferrable)
    outcome = runner.run()
    assert outcome.state == "success", outcome.error
    assert outcome.deferrals == (1 if deferrable else 0)  # same trigger as the durable path
    assert (case.xcoms_deferrable if deferrable else case.xcoms_sync) <= set(outcome.xcoms)
    assert runner.store.calls == []
    submissions = case.submissions(emulator)
    assert len(submissions) == 1
    # no deterministic token: it would return a failed run forever
    assert not case.is_durable_token(submissions[0].token)


@pytest.mark.parametrize("deferrable", PATHS)
def test_every_try_submits_fresh(case, emulator, deferrable):
    emulator.lifecycle = case.lifecycle(active_reads=8)
    if deferrable:
        case.add_trigger_fault(emulator, status=case.transient_status, times=case.status_errors_to_give_up)
    else:
        case.add_sync_status_fault(emulator, status=case.transient_status)
    runner = degraded_runner(case, emulator, deferrable)
    outcome = runner.run()
    assert [o.state for o in runner.outcomes] == ["failed", "success"]
    assert outcome.state == "success"
    assert len(case.submissions(emulator)) == 2  # the documented cost of no task_state_store
    assert runner.store.calls == []


@pytest.mark.skipif(DURABLE, reason="the no-op warning exists only below Airflow 3.3")
def test_explicit_durable_true_warns_that_it_has_no_effect(case, emulator):
    from airflow_durable import shims

    shims._warned_noop.clear()
    with pytest.warns(UserWarning, match="has no effect on Airflow versions below 3.3"):
        operator = case.make(emulator, True, durable=True)
    assert operator.durable is False
