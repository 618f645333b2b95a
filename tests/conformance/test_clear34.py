"""Airflow 3.4's clear, both ways, both paths, for every registered durable operator (issue 23, item 3).

3.4 cannot be installed here: `airflow_34_clear` gives this process's Airflow the feature the shim detects
(the clear body's ``keep_task_state`` field), and the harness does what a 3.4 clear does to the task's
state rows (``keep_task_state=False``: deleted in the same request). The rules under test:

* the default clear (state discarded) starts a new logical job and ends the old one: while deferred, while
  running, and of a failed task whose job outlived its worker. Two jobs, the old one cancelled, none left
  running. Where the system lists jobs by identity the next try finds and ends it (a kill leaves it to
  that try); where it does not, the kill that the clear brings ends it (nothing else could);
* ``keep_task_state=True`` is "carry on": the next try reconnects to the still-running job (one job);
  a finished job runs again, as after any clear. Where the system has no lookup the kill cannot leave the
  job to the next try, so it ends it and the next try submits anew (the documented gap);
* under 3.3's clear (state always kept) nothing changes: the other modules' cells run without the patch.
"""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from airflow_durable import catalogue
from tests.conformance.systems import PATHS, SystemCase, job_ids, runner_for
from tests.conformance.test_logical_job import _deferral, _SupervisorComms
from tests.harness import DURABLE, TaskRunner, airflow_34_clear, record_state

pytestmark = pytest.mark.skipif(
    not DURABLE, reason="Airflow < 3.3: no task_state_store, every try submits fresh (test_degraded.py)"
)


@pytest.fixture(autouse=True)
def airflow_34() -> Any:
    with airflow_34_clear():
        yield


def findable(case: SystemCase) -> bool:
    return catalogue.LOOKUPS[case.external_id_key].implemented


def state_of(emulator: Any, job: Any) -> str:
    return emulator.run(job).state


def decisions(runner: TaskRunner, case: SystemCase) -> list[str]:
    return [h["decision"] for h in runner.store.data[case.external_id_key]["history"]]


def cancels_on_kill(case: SystemCase, emulator: Any, deferrable: bool) -> bool:
    return bool(getattr(case.make(emulator, deferrable), "cancel_on_kill", True))


def running_try(
    case: SystemCase, emulator: Any, deferrable: bool, active_reads: int = 40
) -> tuple[TaskRunner, Any, Any]:
    """Try 1 submitted and stored its job's id, and runs on (polling, or about to defer): the runner, the
    try's operator and its job, active for ``active_reads`` status reads (fewer than a provider's waiter
    gives up after, where a later try waits on it)."""
    emulator.lifecycle = case.lifecycle(active_reads=active_reads)
    runner = runner_for(case, emulator, deferrable)
    runner.store.crash_when(record_state("submitted"), before=False)
    assert runner.run_try().state == "crashed"
    (job,) = job_ids(case, emulator)
    return runner, runner.last_operator, job


def deferred_try(
    case: SystemCase, emulator: Any, monkeypatch: Any, active_reads: int = 40
) -> tuple[TaskRunner, Any, Any]:
    """Try 1 deferred on its job: the runner, its trigger as the triggerer rebuilt it (with the triggerer's
    channel, answering ``queued``: a clear kills the trigger once the scheduler queues the task), the job."""
    from airflow.sdk.execution_time import task_runner

    from airflow_durable.triggers.owned import DurableOwnedTrigger

    emulator.lifecycle = case.lifecycle(active_reads=active_reads)
    runner = runner_for(case, emulator, True)
    _, deferred = _deferral(case, emulator, runner)
    _, kwargs = deferred.trigger.serialize()
    trigger = DurableOwnedTrigger(**kwargs)
    monkeypatch.setattr(task_runner, "SUPERVISOR_COMMS", _SupervisorComms("queued"), raising=False)
    (job,) = job_ids(case, emulator)
    return runner, trigger, job


def next_try(case: SystemCase, emulator: Any, runner: TaskRunner) -> Any:
    emulator.lifecycle = case.lifecycle()
    outcome = runner.run_try()
    assert outcome.state == "success", outcome.error
    return outcome


def assert_new_job_and_old_cancelled(case: SystemCase, emulator: Any, outcome: Any, old: Any) -> None:
    jobs = job_ids(case, emulator)
    assert len(jobs) == 2 and case.reported(outcome) == jobs[1] != old, jobs
    assert state_of(emulator, old) == case.cancelled, "the old job runs on beside the new one"
    assert state_of(emulator, jobs[1]) == case.succeeded


# --------------------------------------------------------------------------- the default clear
def test_a_default_clear_while_deferred_ends_the_old_job(case, emulator, monkeypatch):
    """Cleared while deferred, the record deleted. Where the system lists jobs by identity the trigger's kill
    leaves the job to the next try (which could have been told to carry on), and that try finds it and ends
    it; where it does not, the trigger is the last to know the job and ends it."""
    if not cancels_on_kill(case, emulator, True):
        pytest.skip(f"{case.id} leaves jobs running on kill by default (cancel_on_kill=False)")
    runner, trigger, old = deferred_try(case, emulator, monkeypatch)
    runner.clear(keep_task_state=False)
    asyncio.run(trigger.on_kill())
    if findable(case):
        assert state_of(emulator, old) != case.cancelled, "the kill decided what the next try decides"
    else:
        assert state_of(emulator, old) == case.cancelled, "nothing but this kill can end the job"
    outcome = next_try(case, emulator, runner)
    assert_new_job_and_old_cancelled(case, emulator, outcome, old)


def test_a_default_clear_while_deferred_then_a_mark_before_the_lookup_ends_the_old_job(
    case, emulator, monkeypatch
):
    """Cleared while deferred, the record deleted; the next try starts (its XCom clear takes the trigger's
    note) and the user marks it success before its lookup, so no try will ever find the job. The trigger's
    kill comes after the mark: the answer is about that newer try, which ended, and the trigger ends the
    job, findable or not (model scenario clear_discarding_state_then_mark_before_the_lookup)."""
    from types import SimpleNamespace

    from airflow.sdk.execution_time import task_runner

    from airflow_durable.triggers.owned import TRY_NOTE_KEY

    if not cancels_on_kill(case, emulator, True):
        pytest.skip(f"{case.id} leaves jobs running on kill by default (cancel_on_kill=False)")
    runner, trigger, old = deferred_try(case, emulator, monkeypatch)
    comms = _SupervisorComms("deferred")
    monkeypatch.setattr(task_runner, "SUPERVISOR_COMMS", comms, raising=False)
    trigger.task_instance = SimpleNamespace(
        task_id=trigger.owner_task_id, id=runner.ti.id, try_number=runner.ti.try_number
    )
    asyncio.run(trigger._note_try())  # what run() starts in the background on a triggerer
    assert comms.xcoms[TRY_NOTE_KEY]["try_number"] == 1
    runner.clear(keep_task_state=False)
    assert not runner.store.data
    comms.xcoms.clear()  # try 2's task process clears the task instance's XComs as it starts
    comms.state = "success"  # and the user marks it before its lookup (its SIGTERM: nothing held yet)
    asyncio.run(trigger.on_kill())
    assert state_of(emulator, old) == case.cancelled, "the job runs on, named by nothing"


@pytest.mark.parametrize("deferrable", PATHS)
def test_a_default_clear_while_running_ends_the_old_job(case, emulator, deferrable):
    """Cleared while the try runs (polling, or between its submit and its deferral), the record deleted: the
    killed try cannot read its record either way (its task instance has a new id). Where the next try can
    find the job it leaves it to that try, which ends it; elsewhere it ends it itself."""
    if not cancels_on_kill(case, emulator, deferrable):
        pytest.skip(f"{case.id} leaves jobs running on kill by default (cancel_on_kill=False)")
    runner, killed, old = running_try(case, emulator, deferrable)
    runner.clear_running(keep_task_state=False)
    killed.on_kill()
    assert (state_of(emulator, old) == case.cancelled) is not findable(case)
    runner.terminated()
    outcome = next_try(case, emulator, runner)
    assert_new_job_and_old_cancelled(case, emulator, outcome, old)


@pytest.mark.parametrize("deferrable", PATHS)
def test_a_default_clear_of_a_failed_task_ends_the_job_that_outlived_its_worker(case, emulator, deferrable):
    """The try's worker died with its job running and the task failed (no retry left): no process is left
    to kill. The default clear deletes the record; the next try finds the job by lookup and ends it. Where
    the system has no lookup it cannot: the gap is logged (test_forgets.py) and the job runs on."""
    runner, _, old = running_try(case, emulator, deferrable)
    runner.ti.state = "failed"
    runner.clear(keep_task_state=False)
    outcome = next_try(case, emulator, runner)
    if findable(case):
        assert_new_job_and_old_cancelled(case, emulator, outcome, old)
    else:
        assert state_of(emulator, old) != case.cancelled  # the documented gap: nothing knows it any more


# --------------------------------------------------------------------------- keep_task_state: carry on
@pytest.mark.parametrize("deferrable", PATHS)
def test_a_keep_task_state_clear_while_running_carries_on_with_the_job(case, emulator, deferrable):
    """Cleared while the try runs, state kept: the next try reconnects to the job and succeeds on it, one
    job. Without a lookup the kill cannot leave the job to the next try (a default clear would strand it):
    it ends it, and the next try starts a new one (two jobs, none left running)."""
    if not cancels_on_kill(case, emulator, deferrable):
        pytest.skip(f"{case.id} leaves jobs running on kill by default (cancel_on_kill=False)")
    runner, killed, job = running_try(case, emulator, deferrable, active_reads=8)
    runner.clear_running(keep_task_state=True)
    killed.on_kill()
    runner.terminated()
    outcome = next_try(case, emulator, runner)
    if findable(case):
        assert job_ids(case, emulator) == [job] and case.reported(outcome) == job
        assert state_of(emulator, job) == case.succeeded
        assert decisions(runner, case)[-1] == "reconnect"
    else:
        assert_new_job_and_old_cancelled(case, emulator, outcome, job)


def test_a_keep_task_state_clear_while_deferred_carries_on_with_the_job(case, emulator, monkeypatch):
    """Cleared while deferred, state kept: the trigger's kill leaves the job, the next try reconnects."""
    if not cancels_on_kill(case, emulator, True):
        pytest.skip(f"{case.id} leaves jobs running on kill by default (cancel_on_kill=False)")
    runner, trigger, job = deferred_try(case, emulator, monkeypatch, active_reads=8)
    runner.clear(keep_task_state=True)
    asyncio.run(trigger.on_kill())
    outcome = next_try(case, emulator, runner)
    if findable(case):
        assert job_ids(case, emulator) == [job] and case.reported(outcome) == job
        assert decisions(runner, case)[-1] == "reconnect"
    else:
        assert_new_job_and_old_cancelled(case, emulator, outcome, job)


@pytest.mark.parametrize("deferrable", PATHS)
def test_a_keep_task_state_clear_of_a_finished_task_runs_the_job_again(case, emulator, deferrable):
    """A finished job's result follows the rule of any clear: the task runs again."""
    runner = runner_for(case, emulator, deferrable)
    assert runner.run().state == "success"
    (old,) = job_ids(case, emulator)
    runner.clear(keep_task_state=True)
    outcome = next_try(case, emulator, runner)
    jobs = job_ids(case, emulator)
    assert len(jobs) == 2 and case.reported(outcome) == jobs[1] != old
    assert decisions(runner, case)[-1] == "new_epoch"


@pytest.mark.parametrize("deferrable", PATHS)
def test_a_keep_task_state_clear_of_a_failed_job_submits_anew(case, emulator, deferrable):
    """The kept record's job failed: carrying on means a new generation, as a retry would."""
    runner, _, old = running_try(case, emulator, deferrable)
    emulator.set_state(old, case.failed)
    runner.ti.state = "failed"
    runner.clear(keep_task_state=True)
    outcome = next_try(case, emulator, runner)
    jobs = job_ids(case, emulator)
    assert len(jobs) == 2 and case.reported(outcome) == jobs[1] != old
