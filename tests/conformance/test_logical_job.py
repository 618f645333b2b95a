"""DESIGN.md §8, once, for every registered durable operator: where a logical job begins, where it ends,
who owns it. The real-deployment proof of the same rules is in ``tests/e2e_runtime/test_logical_job.py``.

Each cell plays the Airflow side as the harness does (``tests/harness.py``): a clear raises ``max_tries``
and the run's ``clear_number``; a DAG run deleted and created again loses its state-store rows and starts
at another instant; a try whose process lives on (zombie) keeps its operator object.
"""

from __future__ import annotations

import asyncio
import contextlib
import datetime as dt
import inspect
from typing import Any

import pytest

from airflow_durable.engine import DurableToken
from tests.conformance.systems import PATHS, SystemCase, job_ids, runner_for
from tests.harness import DURABLE, TaskRunner, record_state

pytestmark = pytest.mark.skipif(
    not DURABLE,
    reason="Airflow < 3.3: no task_state_store; the degraded contract is tested in test_degraded.py",
)


def state_of(case: SystemCase, emulator: Any, external_id: Any) -> str:
    """The job's state, by its id as the ledger holds it."""
    return emulator.run(external_id).state


def crash_once_submitted(runner: TaskRunner) -> Any:
    """Try 1 submits, stores the id and dies (the worker is killed, or the user acts while it waits)."""
    runner.store.crash_when(record_state("submitted"), before=False)
    assert runner.run_try().state == "crashed"
    return runner.store.data


# --------------------------------------------------------------------------- where it begins
@pytest.mark.parametrize("deferrable", PATHS)
def test_a_recreated_dag_run_never_receives_the_old_job(case, emulator, deferrable):
    """The DAG run is deleted (its records go with it) and triggered again with the same run_id: the new
    run's job is new, never the old run's (same task identity, generation 1 again)."""
    runner = runner_for(case, emulator, deferrable)
    assert runner.run().state == "success"
    (old,) = job_ids(case, emulator)
    runner.recreate_dag_run()
    outcome = runner.run()
    assert outcome.state == "success", outcome.error
    jobs = job_ids(case, emulator)
    assert len(jobs) == 2 and jobs[1] != old, jobs  # a new job ran: not the old run's result
    assert case.reported(outcome) == jobs[1]
    tokens = case.tokens(emulator)
    assert tokens[0] != tokens[1]
    assert runner.store.data[case.external_id_key]["generation"] == 1


# --------------------------------------------------------------------------- where it ends
@pytest.mark.parametrize("deferrable", PATHS)
def test_a_clear_while_the_job_runs_starts_a_new_job_and_cancels_the_old(case, emulator, deferrable):
    """The user clears the task while its job runs (deferred, or polling): the new try never reconnects
    to the old epoch's job; it cancels it and submits the next generation."""
    emulator.lifecycle = case.lifecycle(active_reads=40)
    runner = runner_for(case, emulator, deferrable)
    crash_once_submitted(runner)
    (old,) = job_ids(case, emulator)
    runner.clear()
    emulator.lifecycle = case.lifecycle()
    outcome = runner.run_try()
    assert outcome.state == "success", outcome.error
    jobs = job_ids(case, emulator)
    assert len(jobs) == 2 and case.reported(outcome) == jobs[1] != old
    assert state_of(case, emulator, old) == case.cancelled  # nothing left running untracked
    record = runner.store.data[case.external_id_key]
    assert record["generation"] == 2 and record["state"] == "done"
    assert [h["decision"] for h in record["history"]][-1] == "new_epoch"


@pytest.mark.parametrize("deferrable", PATHS)
def test_a_mark_then_clear_runs_the_job_again_even_if_the_old_one_succeeded(case, emulator, deferrable):
    """Marked success while deferred (the trigger never reported), the job then succeeded, then cleared:
    the clear runs the job again instead of returning the old job's result."""
    emulator.lifecycle = case.lifecycle(active_reads=40)
    runner = runner_for(case, emulator, deferrable)
    crash_once_submitted(runner)
    (old,) = job_ids(case, emulator)
    emulator.set_state(old, case.succeeded)
    runner.clear()
    emulator.lifecycle = case.lifecycle()
    outcome = runner.run_try()
    assert outcome.state == "success", outcome.error
    jobs = job_ids(case, emulator)
    assert len(jobs) == 2 and case.reported(outcome) == jobs[1]


@pytest.mark.parametrize("deferrable", PATHS)
def test_a_clear_after_lowering_retries_runs_the_job_again(case, emulator, deferrable):
    """retries 2 → 1 in the DAG, then a clear of the finished task: max_tries = try_number + retries is
    the same number as before the clear, and still the clear is a new logical job."""
    settings = {"retries": 2}
    runner = TaskRunner(lambda: case.make(emulator, deferrable, **settings), retries=2)
    assert runner.run().state == "success"
    settings["retries"] = 1
    before = runner.ti.max_tries
    runner.clear(retries=1)
    assert runner.ti.max_tries == before  # the collision that hid the clear
    outcome = runner.run_try()
    assert outcome.state == "success", outcome.error
    assert len(job_ids(case, emulator)) == 2


@pytest.mark.parametrize("deferrable", PATHS)
def test_lowering_retries_between_two_retries_is_not_a_clear(case, emulator, deferrable):
    """A DAG edit that lowers retries while a try waits for its retry keeps the logical job."""
    emulator.lifecycle = case.lifecycle(active_reads=8)
    settings = {"retries": 3}
    runner = TaskRunner(lambda: case.make(emulator, deferrable, **settings), retries=3)
    crash_once_submitted(runner)
    settings["retries"] = 1
    outcome = runner.run_try()
    assert outcome.state == "success", outcome.error
    assert len(job_ids(case, emulator)) == 1  # reconnected


# --------------------------------------------------------------------------- who owns it
@pytest.mark.parametrize("deferrable", PATHS)
def test_a_zombie_try_does_not_cancel_the_job_its_retry_adopted(case, emulator, deferrable):
    """Try 1 is frozen past the heartbeat timeout, try 2 adopts its job, then try 1 wakes up and is
    killed: its on_kill must leave the job that try 2 tracks alone."""
    emulator.lifecycle = case.lifecycle(active_reads=40)
    runner = runner_for(case, emulator, deferrable)
    crash_once_submitted(runner)
    zombie = runner.last_operator
    claimed_by_try_2 = lambda value: isinstance(value, dict) and value.get("owner_try") == 2  # noqa: E731
    runner.store.crash_when(claimed_by_try_2, before=False)
    assert runner.run_try().state == "crashed"  # try 2 claimed the job, then waits (here: stops)
    zombie.on_kill()
    (job,) = job_ids(case, emulator)
    assert state_of(case, emulator, job) != case.cancelled
    emulator.lifecycle = case.lifecycle()
    assert runner.run_try().state == "success"
    assert job_ids(case, emulator) == [job]


def _has_cancel_on_kill(case: SystemCase, emulator: Any) -> bool:
    operator = case.make(emulator, True)
    return "cancel_on_kill" in inspect.signature(type(operator).__mro__[2].__init__).parameters


@pytest.mark.parametrize("deferrable", PATHS)
def test_cancel_on_kill_false_leaves_the_job_running_and_tracked(case, emulator, deferrable):
    if not _has_cancel_on_kill(case, emulator):
        pytest.skip(f"the provider operator of {case.id} has no cancel_on_kill switch")
    emulator.lifecycle = case.lifecycle(active_reads=40)
    runner = runner_for(case, emulator, deferrable, cancel_on_kill=False)
    crash_once_submitted(runner)
    runner.last_operator.on_kill()
    (job,) = job_ids(case, emulator)
    assert state_of(case, emulator, job) != case.cancelled
    assert runner.store.data[case.external_id_key]["external_id"] == case.stored_id(job)


@pytest.mark.parametrize("deferrable", PATHS)
def test_cancel_on_kill_false_leaves_the_cleared_epochs_job_running_and_tracked(case, emulator, deferrable):
    """A clear that keeps the record (Airflow 3.3) ends the old epoch's job as the lookup path does: only
    where the user's kill policy lets it. With cancel_on_kill=False the old job runs on, and the record
    keeps it (uncancelled) beside the new epoch's job."""
    if not _has_cancel_on_kill(case, emulator):
        pytest.skip(f"the provider operator of {case.id} has no cancel_on_kill switch")
    emulator.lifecycle = case.lifecycle(active_reads=40)
    runner = runner_for(case, emulator, deferrable, cancel_on_kill=False)
    crash_once_submitted(runner)
    (old,) = job_ids(case, emulator)
    runner.clear()
    emulator.lifecycle = case.lifecycle()
    outcome = runner.run_try()
    assert outcome.state == "success", outcome.error
    assert len(job_ids(case, emulator)) == 2
    assert state_of(case, emulator, old) != case.cancelled
    (entry,) = runner.store.data[case.external_id_key]["unended"]
    assert entry["external_id"] == case.stored_id(old) and entry["cancel"] is False


# --------------------------------------------------------------------------- kill and timeout policy
def _deferral(case: SystemCase, emulator: Any, runner: TaskRunner, **overrides: Any) -> tuple[Any, Any]:
    from airflow.sdk.exceptions import TaskDeferred

    operator = case.make(emulator, True, **overrides)
    runner.ti.try_number += 1
    context = runner.context()
    with pytest.raises(TaskDeferred) as deferred:
        operator.execute(context)
    return operator, deferred.value


def test_a_deferral_ends_at_the_execution_timeout(case, emulator):
    emulator.lifecycle = case.lifecycle(active_reads=40)
    runner = runner_for(case, emulator, True)
    runner.ti.start_date = dt.datetime.now(dt.UTC) - dt.timedelta(seconds=20)
    _, deferred = _deferral(case, emulator, runner, execution_timeout=dt.timedelta(seconds=30))
    assert deferred.timeout is not None and deferred.timeout <= dt.timedelta(seconds=10)


def test_execution_timeout_while_deferred_cancels_the_job(case, emulator):
    from airflow.sdk.exceptions import TaskDeferralTimeout

    emulator.lifecycle = case.lifecycle(active_reads=40)
    runner = runner_for(case, emulator, True)
    runner.ti.start_date = dt.datetime.now(dt.UTC) - dt.timedelta(hours=1)
    _deferral(case, emulator, runner, execution_timeout=dt.timedelta(seconds=30))
    (job,) = job_ids(case, emulator)
    resumed = case.make(emulator, True, execution_timeout=dt.timedelta(seconds=30))
    with pytest.raises(TaskDeferralTimeout):
        resumed.resume_execution("__fail__", {"error": "Trigger timeout"}, runner.context())
    assert state_of(case, emulator, job) == case.cancelled


def test_the_providers_own_wait_limit_leaves_the_job_tracked(case, emulator):
    from airflow.sdk.exceptions import TaskDeferralTimeout

    emulator.lifecycle = case.lifecycle(active_reads=40)
    runner = runner_for(case, emulator, True)
    _deferral(case, emulator, runner)
    (job,) = job_ids(case, emulator)
    resumed = case.make(emulator, True)
    with pytest.raises(TaskDeferralTimeout):
        resumed.resume_execution("__fail__", {"error": "Trigger timeout"}, runner.context())
    assert state_of(case, emulator, job) != case.cancelled
    emulator.set_state(job, case.succeeded)
    assert runner.run_try().state == "success"
    assert job_ids(case, emulator) == [job]  # the next try found the tracked job


@pytest.mark.parametrize("deferrable", PATHS)
def test_a_resent_token_answered_by_an_ended_job_submits_the_next_generation_in_the_same_try(
    case, emulator, deferrable
):
    """Try 1 submitted and died before storing the id; the job was cancelled since (e.g. by a cleanup):
    the retry's resent token returns that ended job, and the same try goes on with generation 2."""
    emulator.lifecycle = case.lifecycle(active_reads=40)
    runner = runner_for(case, emulator, deferrable)
    runner.store.crash_when(record_state("submitted"), before=True)
    assert runner.run_try().state == "crashed"
    (old,) = job_ids(case, emulator)
    emulator.set_state(old, case.cancelled)
    emulator.lifecycle = case.lifecycle()
    outcome = runner.run_try()
    assert outcome.state == "success", outcome.error
    jobs = job_ids(case, emulator)
    assert len(jobs) == 2 and case.reported(outcome) == jobs[1]
    assert runner.store.data[case.external_id_key]["generation"] == 2


# --------------------------------------------------------------------------- drop-in fidelity
@pytest.mark.parametrize("store", [None, object(), {"not": "a store"}], ids=["none", "object", "dict"])
def test_a_context_without_a_usable_state_store_runs_non_durable_with_one_warning(
    case, emulator, store, caplog, capsys
):
    runner = runner_for(case, emulator, False)
    runner.store = None  # type: ignore[assignment]
    context = runner.context()
    context["task_state_store"] = store
    runner.ti.try_number = 1
    operator = case.make(emulator, False)
    context["task"] = operator
    operator.execute(context)
    (entry,) = case.submissions(emulator)
    assert not case.is_durable_token(entry.token)
    captured = capsys.readouterr()
    text = caplog.text + captured.out + captured.err
    assert text.count("no usable task_state_store") == 1


def _upstream_key(case: SystemCase, emulator: Any) -> str | None:
    return type(case.make(emulator, False))._upstream_external_id_key()


@pytest.mark.parametrize("deferrable", PATHS)
def test_a_running_job_stored_by_the_provider_operator_is_adopted(case, emulator, deferrable):
    key = _upstream_key(case, emulator)
    if key is None:
        pytest.skip(f"the provider operator of {case.id} stores no job id (no ResumableJobMixin)")
    emulator.lifecycle = case.lifecycle(active_reads=8)
    runner = runner_for(case, emulator, deferrable)
    data = crash_once_submitted(runner)
    # What the provider operator's try 1 would have left: its own key, none of ours.
    data[key] = data.pop(case.external_id_key)["external_id"]
    outcome = runner.run_try()
    assert outcome.state == "success", outcome.error
    (job,) = job_ids(case, emulator)
    assert case.reported(outcome) == job


# --------------------------------------------------------------------------- the trigger on kill
#: A task instance Airflow no longer knows (its DAG run was deleted): GetTaskStates answers without it.
_GONE = "<no task instance>"


class _SupervisorComms:
    """Airflow's supervisor channel as a trigger sees it: answers GetTaskStates with ``state``, and keeps
    the task instance's XComs (SetXCom, GetXCom) in ``xcoms``."""

    def __init__(self, state: str | None) -> None:
        self.state = state
        self.xcoms: dict[str, Any] = {}
        self.asked: list[Any] = []
        #: When set, the channel answers only once this event is set (a slow supervisor).
        self.gate: asyncio.Event | None = None

    def send(self, message: Any) -> Any:
        self.asked.append(message)
        return self._answer(message)

    def _answer(self, message: Any) -> Any:
        from airflow.sdk.execution_time.comms import GetXCom, SetXCom, TaskStatesResult, XComResult

        if isinstance(message, SetXCom):
            self.xcoms[message.key] = message.value
            return None
        if isinstance(message, GetXCom):
            return XComResult(key=message.key, value=self.xcoms.get(message.key))
        if self.state == _GONE:
            return TaskStatesResult(task_states={})
        return TaskStatesResult(task_states={message.run_ids[0]: {message.task_ids[0]: self.state}})

    async def asend(self, message: Any) -> Any:
        # The triggerer's channel: what a trigger's on_kill uses on its event loop.
        self.asked.append(message)
        if self.gate is not None:
            await self.gate.wait()
        return self._answer(message)


@pytest.mark.parametrize(
    ("state", "cancels"),
    [
        ("deferred", False),  # the trigger was handed to another triggerer (apache/airflow#73454)
        ("queued", False),  # it fired there: the task resumes on the event
        (None, True),  # cleared: a new logical job begins, this one's job ends now (finding 11)
        ("up_for_retry", False),  # the retry reconnects
        ("success", True),  # a user marked it: nothing waits on the job any more
        ("failed", True),
        (_GONE, True),  # its DAG run was deleted
    ],
    ids=["reassigned", "resumed", "cleared", "retrying", "marked-success", "marked-failed", "run-deleted"],
)
def test_the_trigger_cancels_on_kill_only_when_no_try_waits_on_the_job(
    case, emulator, state, cancels, monkeypatch
):
    from airflow.sdk.execution_time import task_runner

    from airflow_durable.triggers.owned import DurableOwnedTrigger

    emulator.lifecycle = case.lifecycle(active_reads=40)
    runner = runner_for(case, emulator, True)
    _, deferred = _deferral(case, emulator, runner)
    trigger = deferred.trigger
    assert isinstance(trigger, DurableOwnedTrigger)
    classpath, kwargs = trigger.serialize()
    rebuilt = DurableOwnedTrigger(**kwargs)  # the triggerer rebuilds it from its row
    comms = _SupervisorComms(state)
    monkeypatch.setattr(task_runner, "SUPERVISOR_COMMS", comms, raising=False)
    asyncio.run(rebuilt.on_kill())
    (job,) = job_ids(case, emulator)
    assert comms.asked, "the trigger did not ask whether the task still waits"
    if cancels:
        # The task ended (or is gone): the engine's kill policy cancels the job, whether or not the
        # provider trigger would (most cancel nothing on kill).
        assert state_of(case, emulator, job) == case.cancelled
    else:
        # A try of the task runs (again) and owns the job: cancelling would end what it waits on.
        assert state_of(case, emulator, job) != case.cancelled


#: The try that deferred, as the triggerer hands it to the trigger (``self.task_instance``).
_MY_TI = {"id": "01a2449e-0000-7000-8000-000000000001", "try_number": 1}


def _owned_trigger(case: SystemCase, emulator: Any, comms: _SupervisorComms, monkeypatch: Any) -> Any:
    """Try 1 deferred: its trigger as the triggerer rebuilds and starts it (the note written), with
    ``comms`` as the triggerer's channel from then on."""
    from types import SimpleNamespace

    from airflow.sdk.execution_time import task_runner

    from airflow_durable.triggers.owned import DurableOwnedTrigger

    emulator.lifecycle = case.lifecycle(active_reads=40)
    runner = runner_for(case, emulator, True)
    _, deferred = _deferral(case, emulator, runner)
    _, kwargs = deferred.trigger.serialize()
    rebuilt = DurableOwnedTrigger(**kwargs)
    rebuilt.task_instance = SimpleNamespace(task_id=kwargs["task_id"], **_MY_TI)
    monkeypatch.setattr(task_runner, "SUPERVISOR_COMMS", comms, raising=False)
    asyncio.run(rebuilt._note_try())  # what run() starts in the background on a triggerer
    return rebuilt


@pytest.mark.parametrize(
    ("state", "note", "cancels"),
    [
        ("failed", "mine", True),  # a user marked this trigger's own try
        ("deferred", "mine", False),  # this try, still deferred: the trigger moved to another triggerer
        # issue 22: marked failed, cleared, and try 2 deferred before the answer came: the answer is
        # about try 2, which owns the job's fate (a new logical job ends it itself)
        ("deferred", {"ti_id": "01a2449e-0000-7000-8000-000000000002", "try_number": 2}, False),
        # a newer try that ended waits on nothing and may have been marked before it reached the job
        # (issue 23: before its lookup, after Airflow 3.4's clear discarded the record)
        ("failed", {"ti_id": "01a2449e-0000-7000-8000-000000000002", "try_number": 2}, True),
        ("failed", None, True),  # try 2's task process cleared try 1's note as it started, then ended
        ("running", None, False),  # the same try 2, still running: it decides
        # another task instance's try 1: the DAG run was deleted and run again
        ("deferred", {"ti_id": "01a2449e-0000-7000-8000-000000000003", "try_number": 1}, True),
    ],
    ids=[
        "own-try-marked",
        "own-try-deferred",
        "newer-try-deferred",
        "newer-try-marked",
        "newer-try-started-then-marked",
        "newer-try-started",
        "run-re-created",
    ],
)
def test_the_trigger_decides_by_the_try_the_answer_is_about(
    case, emulator, state, note, cancels, monkeypatch
):
    from airflow_durable.triggers.owned import TRY_NOTE_KEY

    comms = _SupervisorComms(state)
    trigger = _owned_trigger(case, emulator, comms, monkeypatch)
    assert comms.xcoms[TRY_NOTE_KEY] == {"ti_id": _MY_TI["id"], "try_number": 1}
    if note is None:
        comms.xcoms.clear()
    elif note != "mine":
        comms.xcoms[TRY_NOTE_KEY] = note
    asyncio.run(trigger.on_kill())
    (job,) = job_ids(case, emulator)
    assert (state_of(case, emulator, job) == case.cancelled) is cancels


def test_a_mark_cancels_the_job_although_airflow_cancels_on_kill_again(case, emulator, monkeypatch):
    """Airflow's triggerer cancels a killed trigger's task again on every runner loop until it is done
    (``TriggerRunner.cancel_triggers``): an answer slower than one loop must still lead to the cancel."""
    comms = _SupervisorComms("failed")
    trigger = _owned_trigger(case, emulator, comms, monkeypatch)
    (job,) = job_ids(case, emulator)

    async def killed_twice() -> None:
        comms.gate = asyncio.Event()
        asked = len(comms.asked)
        on_kill = asyncio.ensure_future(trigger.on_kill())
        while len(comms.asked) == asked:  # on_kill has asked, the supervisor has not answered yet
            await asyncio.sleep(0.01)
        on_kill.cancel()  # the triggerer's next loop
        with contextlib.suppress(asyncio.CancelledError):
            await on_kill
        comms.gate.set()  # the answer comes after all
        for _ in range(400):
            if state_of(case, emulator, job) == case.cancelled:
                return
            await asyncio.sleep(0.05)

    asyncio.run(killed_twice())
    assert state_of(case, emulator, job) == case.cancelled


def test_the_trigger_leaves_the_job_running_when_cancel_on_kill_is_false(case, emulator, monkeypatch):
    from airflow.sdk.execution_time import task_runner

    from airflow_durable.triggers.owned import DurableOwnedTrigger

    if not _has_cancel_on_kill(case, emulator):
        pytest.skip(f"the provider operator of {case.id} has no cancel_on_kill switch")
    emulator.lifecycle = case.lifecycle(active_reads=40)
    runner = runner_for(case, emulator, True, cancel_on_kill=False)
    _, deferred = _deferral(case, emulator, runner, cancel_on_kill=False)
    _, kwargs = deferred.trigger.serialize()
    rebuilt = DurableOwnedTrigger(**kwargs)
    monkeypatch.setattr(task_runner, "SUPERVISOR_COMMS", _SupervisorComms("failed"), raising=False)
    asyncio.run(rebuilt.on_kill())
    (job,) = job_ids(case, emulator)
    assert state_of(case, emulator, job) != case.cancelled


def test_durable_tokens_differ_per_lifetime_and_repeat_within_one():
    first = DurableToken.for_task_instance("d", "r", "t", -1, 1, "a")
    assert first == DurableToken.for_task_instance("d", "r", "t", -1, 1, "a")
    assert first != DurableToken.for_task_instance("d", "r", "t", -1, 1, "b")
    assert len(first.text) <= 64


# --------------------------------------------------------------------------- the jobs view of the job
def test_the_jobs_view_reads_and_cancels_the_job_from_what_the_engine_records(case, emulator):
    """`airflow-durable jobs`/`orphans` and the owned trigger reach a job from ``(system, locator, id)``
    alone, and classify its status by the operator's own declared status sets."""
    from airflow_durable.jobs import systems

    emulator.lifecycle = case.lifecycle(active_reads=40)
    runner = runner_for(case, emulator, True)
    _, deferred = _deferral(case, emulator, runner)
    job = deferred.trigger.job
    (external_id,) = job_ids(case, emulator)
    live = systems.live_status(job["system"], job["locator"], job["external_id"])
    assert live.phase == systems.ACTIVE, live
    systems.cancel(job["system"], job["locator"], job["external_id"])
    assert state_of(case, emulator, external_id) == case.cancelled
    live = systems.live_status(job["system"], job["locator"], job["external_id"])
    assert live.phase == systems.FAILED, live
