"""The edges of a logical job that a reading of the engine against Airflow 3.3.2 found broken, one cell
each, for every registered operator (DESIGN.md §8).

Airflow's part is played by the harness (``tests/harness.py``): every retry and every clear gives the
task instance a new id, and a superseded try's store reads find nothing and its writes fail
(``TryStateStore``); a clear raises ``max_tries`` and the run's ``clear_number``; Airflow answers the
engine's question about the task instance's state (``airflow_task_states``).
"""

from __future__ import annotations

import datetime as dt
import json
import re
import threading
import time
import types
from typing import Any

import pytest

from airflow_durable.engine import RECORD_SCHEMA, RECORD_SCHEMA_V1, DurableStateError
from tests.conformance.systems import PATHS, SystemCase, job_ids, runner_for
from tests.harness import DURABLE, TaskRunner, record_state

pytestmark = pytest.mark.skipif(
    not DURABLE,
    reason="Airflow < 3.3: no task_state_store; the degraded contract is tested in test_degraded.py",
)


def crash_once_submitted(runner: TaskRunner) -> None:
    """Try 1 submits, stores the id and dies (its worker is killed, or frozen past the heartbeat)."""
    runner.store.crash_when(record_state("submitted"), before=False)
    assert runner.run_try().state == "crashed"


def decisions(runner: TaskRunner, case: SystemCase) -> list[str]:
    return [entry["decision"] for entry in runner.store.data[case.external_id_key]["history"]]


def cancelled(case: SystemCase, emulator: Any, job: Any) -> bool:
    return emulator.run(job).state == case.cancelled


def held_try(runner: TaskRunner, at: str, while_held: Any) -> list[BaseException]:
    """Run a try in a thread until its write of a record in state ``at`` is in flight, call
    ``while_held()`` there, let the write go on, and return what the try raised."""
    reached, release = runner.store.hold_when(record_state(at))
    operator, context = runner.start_try()
    errors: list[BaseException] = []

    def execute() -> None:
        try:
            operator.execute(context)
        except BaseException as err:  # noqa: BLE001 - the test inspects it
            errors.append(err)

    thread = threading.Thread(target=execute)
    thread.start()
    try:
        assert reached.wait(60)
        while_held(operator)
    finally:
        release.set()
        thread.join(60)
    return errors


# --------------------------------------------------------------------------- where the epoch changes
@pytest.mark.parametrize("deferrable", PATHS)
def test_a_retry_after_a_retries_edit_and_another_tasks_clear_reconnects(case, emulator, deferrable):
    """retries=2; try 1 submits and its worker dies; meanwhile the DAG file lowers retries to 1 and the user
    clears ANOTHER task of the run (which raises the run's clear_number). Try 2 is a plain retry: max_tries is
    unchanged, and a clear of this task could only have kept it with exactly these numbers if it were cleared
    while its job was done. It reconnects; nothing is cancelled, nothing submitted again."""
    emulator.lifecycle = case.lifecycle(active_reads=8)
    settings: dict[str, Any] = {"retries": 2}
    runner = TaskRunner(lambda: case.make(emulator, deferrable, **settings), retries=2)
    crash_once_submitted(runner)
    (job,) = job_ids(case, emulator)
    settings["retries"] = 1
    runner.dag_run.clear_number += 1  # another task of the run was cleared
    outcome = runner.run_try()
    assert outcome.state == "success", outcome.error
    assert job_ids(case, emulator) == [job]
    assert not cancelled(case, emulator, job)
    assert decisions(runner, case)[1] in ("reconnect", "already_succeeded")


@pytest.mark.parametrize("deferrable", PATHS)
def test_a_clear_while_the_try_runs_cancels_its_job_at_once(case, emulator, deferrable):
    """The user clears a task whose try is running (polling, or between its submit and its deferral):
    Airflow gives the task instance a new id and sets it ``restarting``, and terminates the try. The killed
    try cannot read its record any more, but Airflow says the task was cleared while it ran: a new logical
    job begins, so the try's job ends now, not whenever the next try gets to it."""
    if not getattr(case.make(emulator, deferrable), "cancel_on_kill", True):
        pytest.skip(f"{case.id} leaves jobs running on kill by default (cancel_on_kill=False)")
    emulator.lifecycle = case.lifecycle(active_reads=40)
    runner = runner_for(case, emulator, deferrable)
    crash_once_submitted(runner)
    killed = runner.last_operator
    (job,) = job_ids(case, emulator)
    runner.new_ti_id()  # clear_task_instances: prepare_db_for_next_try, then RESTARTING
    runner.ti.state = "restarting"
    killed.on_kill()
    assert cancelled(case, emulator, job)
    # The executor reports the try terminated: Airflow resets max_tries like a clear, the next try runs.
    runner.ti.max_tries = runner.ti.try_number + runner.retries
    runner.dag_run.clear_number += 1
    runner.ti.state = None
    emulator.lifecycle = case.lifecycle()
    outcome = runner.run_try()
    assert outcome.state == "success", outcome.error
    jobs = job_ids(case, emulator)
    assert len(jobs) == 2 and case.reported(outcome) == jobs[1]
    assert decisions(runner, case)[-1] == "new_epoch"


@pytest.mark.parametrize("deferrable", PATHS)
def test_a_clear_of_a_running_task_whose_worker_is_gone_starts_a_new_logical_job(case, emulator, deferrable):
    """The user clears a task whose try runs on a worker that is gone (frozen, killed): Airflow sets it
    restarting without touching max_tries, fails it for its missing heartbeat and retries it, so the retry
    sees what a plain retry sees. Airflow's failure handling is where our listener marks the record
    (proven against Airflow's own code in tests/e2e/test_airflow_assumptions.py); the retry then starts
    a new logical job and ends the old one."""
    emulator.lifecycle = case.lifecycle(active_reads=40)
    runner = runner_for(case, emulator, deferrable)
    crash_once_submitted(runner)
    (old,) = job_ids(case, emulator)
    runner.new_ti_id()  # the clear: prepare_db_for_next_try; RESTARTING; max_tries untouched
    runner.dag_run.clear_number += 1
    runner.store.data[case.external_id_key]["cleared_while_running"] = {
        "try": 1,
        "at": "2026-12-05T00:00:00+00:00",
    }
    emulator.lifecycle = case.lifecycle()
    outcome = runner.run_try()  # the retry Airflow starts after the heartbeat purge
    assert outcome.state == "success", outcome.error
    jobs = job_ids(case, emulator)
    assert len(jobs) == 2 and case.reported(outcome) == jobs[1]
    assert cancelled(case, emulator, old)
    assert decisions(runner, case)[-1] == "new_epoch"
    assert "cleared_while_running" not in runner.store.data[case.external_id_key]


# --------------------------------------------------------------------------- who may cancel
@pytest.mark.parametrize("deferrable", PATHS)
def test_a_superseded_try_whose_id_write_fails_leaves_the_newer_tries_job_alone(case, emulator, deferrable):
    """Try 1 writes its intent, submits, and freezes while its id write is in flight. Its heartbeat times
    out and try 2 takes over: the resent token (or the lookup) hands it try 1's job, which it records and
    waits on. Then try 1 wakes up: its id write fails (its task-instance id is gone). It must not cancel
    that job: try 2 tracks it."""
    emulator.lifecycle = case.lifecycle(active_reads=40)
    runner = runner_for(case, emulator, deferrable)
    reached, release = runner.store.hold_when(lambda v: record_state("submitted")(v) and v["owner_try"] == 1)
    frozen, context = runner.start_try()
    errors: list[BaseException] = []

    def try_1() -> None:
        try:
            frozen.execute(context)
        except BaseException as err:  # noqa: BLE001 - the frozen try's fate is asserted below
            errors.append(err)

    thread = threading.Thread(target=try_1)
    thread.start()
    assert reached.wait(60), "try 1 never wrote its job id"
    (job,) = job_ids(case, emulator)
    runner.store.crash_when(lambda v: isinstance(v, dict) and v.get("owner_try") == 2, before=False)
    assert runner.run_try().state == "crashed"  # try 2 recorded the job as its own, then waits (here: stops)
    assert runner.store.data[case.external_id_key]["owner_try"] == 2
    release.set()
    thread.join(60)
    assert errors and isinstance(errors[0], DurableStateError), errors
    assert not cancelled(case, emulator, job), "the superseded try cancelled the job try 2 waits on"
    emulator.lifecycle = case.lifecycle()
    outcome = runner.run_try()
    assert outcome.state == "success", outcome.error
    assert job_ids(case, emulator) == [job]


@pytest.mark.parametrize("deferrable", PATHS)
def test_a_kill_inside_the_submit_persist_window_cancels_the_job_the_try_created(case, emulator, deferrable):
    """A try is killed (marked failed, execution_timeout) after its submit returned and before its id is
    stored: the record holds its intent, not the id, and still this try owns the job it just created."""
    if not getattr(case.make(emulator, deferrable), "cancel_on_kill", True):
        pytest.skip(f"{case.id} leaves jobs running on kill by default (cancel_on_kill=False)")
    emulator.lifecycle = case.lifecycle(active_reads=40)
    runner = runner_for(case, emulator, deferrable)

    def mark_then_sigterm(operator: Any) -> None:
        (job,) = job_ids(case, emulator)
        runner.ti.state = "failed"  # the user marked it
        operator.on_kill()
        assert cancelled(case, emulator, job)

    # The try's own failure after its job was cancelled under it is not the point here.
    held_try(runner, "submitted", mark_then_sigterm)


@pytest.mark.parametrize("deferrable", PATHS)
def test_a_try_killed_before_it_submits_submits_nothing(case, emulator, deferrable):
    """The user clears (or marks) a running task before its try submitted: the heartbeat's SIGTERM runs
    on_kill (nothing to cancel yet), and Airflow's task runner lets the main thread go on until the SIGKILL.
    That try must not submit: it could neither store the job's id (its task-instance id is superseded) nor
    cancel it, and the next try starts a new logical job that never learns of it.

    Airflow's word is what tells the try to stop: a SIGTERM while Airflow still shows the try running is
    a shutdown, after which the try goes on and submits ("Stopped is not cancelled" in
    docs/how-it-works.md; ``test_stops.py::test_a_shutdown_before_the_first_write_lets_the_try_go_on``).
    So the user's mark comes before the SIGTERM here; the cell sent a bare SIGTERM before stops were told
    apart. (A clear supersedes the try's id: its intent write fails, and it submits nothing either.)"""
    runner = runner_for(case, emulator, deferrable)

    def mark_then_sigterm(operator: Any) -> None:
        runner.ti.state = "failed"  # the user's mark; the heartbeat's 409 → SIGTERM → on_kill
        # The provider's own on_kill may raise with no job (Batch terminates job_id None): upstream's.
        _swallow(operator.on_kill)

    # SIGTERM while the intent write is in flight.
    errors = held_try(runner, "submitting", mark_then_sigterm)
    assert job_ids(case, emulator) == []
    assert len(errors) == 1 and "not submitting" in str(errors[0]), errors


def test_a_kill_that_interrupts_a_call_to_airflow_does_not_wait_on_it(case, emulator, monkeypatch):
    """SIGTERM runs on_kill on the main thread, possibly inside a store call whose channel lock it then
    holds (Airflow's comms lock is not re-entrant): on_kill must not call Airflow again (it would hang until
    the supervisor's SIGKILL). It cannot check who owns the job then, so it leaves the job to the record."""
    from airflow.sdk.execution_time import task_runner

    emulator.lifecycle = case.lifecycle(active_reads=40)
    runner = runner_for(case, emulator, False)
    crash_once_submitted(runner)
    killed = runner.last_operator
    (job,) = job_ids(case, emulator)
    lock = threading.Lock()
    lock.acquire()  # the interrupted frame holds it
    monkeypatch.setattr(
        task_runner, "SUPERVISOR_COMMS", types.SimpleNamespace(_thread_lock=lock), raising=False
    )
    runner.store.fail_get = True  # any store read would stand for the call that hangs
    reads = len(runner.store.calls)
    done = threading.Event()
    threading.Thread(target=lambda: (killed.on_kill(), done.set()), daemon=True).start()
    assert done.wait(30), "on_kill waited on the supervisor channel"
    assert len(runner.store.calls) == reads  # no store call at all
    assert not cancelled(case, emulator, job)
    assert runner.store.data[case.external_id_key]["state"] == "submitted"  # the record keeps tracking it


def _swallow(call: Any, *args: Any) -> None:
    try:
        call(*args)
    except BaseException:  # noqa: BLE001 - a try whose job was cancelled under it fails; not the point
        pass


@pytest.mark.parametrize("deferrable", PATHS)
def test_a_mark_while_a_retry_writes_its_ownership_ends_the_job(case, emulator, deferrable):
    """Try 1 submits and its worker dies; try 2 reads the record and decides to reconnect; the user marks
    the task success while try 2's write of its ownership is in flight, and the SIGTERM's on_kill runs.
    Try 2 already holds the job it reconnects to: on_kill cancels it (it left it running when only a written
    ownership made the job held; the model found it on Batch)."""
    if not getattr(case.make(emulator, deferrable), "cancel_on_kill", True):
        pytest.skip(f"{case.id} leaves jobs running on kill by default (cancel_on_kill=False)")
    emulator.lifecycle = case.lifecycle(active_reads=40)
    runner = TaskRunner(lambda: case.make(emulator, deferrable), retries=1)
    crash_once_submitted(runner)
    (job,) = job_ids(case, emulator)

    def mark_success_then_sigterm(operator: Any) -> None:
        runner.ti.state = "success"
        operator.on_kill()

    held_try(runner, "submitted", mark_success_then_sigterm)
    assert job_ids(case, emulator) == [job]
    assert cancelled(case, emulator, job), "the marked task's job runs on"


@pytest.mark.parametrize("deferrable", PATHS)
def test_a_failed_id_write_after_a_resend_cancels_the_duplicate_too(case, emulator, deferrable):
    """A submission's answer is lost; the resend of the same token makes a second job (no idempotency key,
    and the lookup before the resend missed the first: the list lags) and the try converges on the
    earliest; then the id write fails (twice: it is retried once). The try cancels the job it holds and the
    duplicate, which no record names either (the duplicate ran on before; the model found it on EMR
    steps)."""
    operator = case.make(emulator, deferrable)
    if not getattr(operator, "durable_converge_after_submit", False):
        pytest.skip(f"{case.id}: the system's idempotency key makes a resend return the same job")
    if not getattr(operator, "cancel_on_kill", True):
        pytest.skip(f"{case.id} leaves jobs running on kill by default (cancel_on_kill=False)")
    emulator.lifecycle = case.lifecycle(active_reads=40)
    runner = runner_for(case, emulator, deferrable)
    case.lose_submit_answers(emulator)
    emulator.list_lag_reads = 1
    runner.store.fail_set(record_state("submitted"), times=2)
    outcome = runner.run_try()
    assert isinstance(outcome.error, DurableStateError), outcome.error
    jobs = job_ids(case, emulator)
    assert len(jobs) == 2, jobs
    assert [job for job in jobs if not cancelled(case, emulator, job)] == []


@pytest.mark.parametrize("deferrable", PATHS)
def test_a_read_that_fails_after_a_resend_leaves_the_other_job_to_the_retry(case, emulator, deferrable):
    """A submission's answer is lost; the resend of the same token makes a second job (no idempotency key,
    and the lookup before the resend missed the first: the list lags), and the read that follows it (the
    converging lookup of the token) fails. The try records the job it
    holds, says in the record that its token may name more, and fails. The retry looks the token up before
    it reconnects and cancels the other job: it ran on untracked before (the model found it on EMR steps
    and Batch)."""
    operator = case.make(emulator, deferrable)
    if not getattr(operator, "durable_converge_after_submit", False):
        pytest.skip(f"{case.id}: the system's idempotency key makes a resend return the same job")
    emulator.lifecycle = case.lifecycle(active_reads=40)
    runner = TaskRunner(lambda: case.make(emulator, deferrable), retries=1)
    case.lose_submit_answers(emulator)
    emulator.list_lag_reads = 1
    try_1 = [True]

    def after_the_resend(request: Any) -> bool:
        return try_1[0] and not case.is_submit(request) and len(case.submissions(emulator)) >= 2

    emulator.faults.add(status=case.transient_status, times=None, predicate=after_the_resend)
    failed = runner.run_try()
    try_1[0] = False
    emulator.list_lag_reads = 0
    assert failed.state == "failed", failed.error
    jobs = job_ids(case, emulator)
    assert len(jobs) == 2, jobs
    record = dict(runner.store.data[case.external_id_key])
    (kept,) = [job for job in jobs if case.stored_id(job) == record["external_id"]]
    emulator.script(kept, case.lifecycle(active_reads=2)[1:])  # ends within the provider's wait
    outcome = runner.run_try()
    assert outcome.state == "success", outcome.error
    assert job_ids(case, emulator) == jobs, "the retry submitted again"
    assert [job for job in jobs if not cancelled(case, emulator, job)] == [kept]
    assert record["state"] == "submitted" and record.get("unconverged") is True, record
    assert "unconverged" not in runner.store.data[case.external_id_key]


def _jobs_after(case: SystemCase, emulator: Any, count: int) -> list[Any]:
    """The jobs the system created, once there are ``count`` of them (a try submits in another thread)."""
    deadline = time.monotonic() + 60
    while len(jobs := job_ids(case, emulator)) < count:
        assert time.monotonic() < deadline, f"only {jobs} were created"
        time.sleep(0.01)
    return jobs


@pytest.mark.parametrize("deferrable", PATHS)
@pytest.mark.parametrize("sigterm_during", ["submit", "resend"])
def test_a_mark_while_a_lost_answer_is_resent_ends_every_job_of_its_token(
    case, emulator, deferrable, sigterm_during
):
    """A submission's answer is lost, and the user marks the running task success while that submit (or
    the try's resend of its token) is in flight: the SIGTERM's on_kill holds no job id. A try told to stop
    sends nothing more, and ends every job its token names: on_kill looks the token up, and the main thread
    ends what the resend in flight hands back instead of recording and waiting on it. The job of the lost
    answer ran on after the mark before (the model found it on EMR steps)."""
    operator = case.make(emulator, deferrable)
    if not getattr(operator, "cancel_on_kill", True):
        pytest.skip(f"{case.id} leaves jobs running on kill by default (cancel_on_kill=False)")
    emulator.lifecycle = case.lifecycle(active_reads=40)
    runner = TaskRunner(lambda: case.make(emulator, deferrable), retries=0)
    late = 3.0  # the in-flight answer comes this late: on_kill runs meanwhile
    if sigterm_during == "submit":
        emulator.faults.add(
            status=case.transient_status, latency=late, after=True, times=1, predicate=case.is_submit
        )
    else:
        case.lose_submit_answers(emulator)
        emulator.faults.add(status=None, latency=late, after=True, times=1, predicate=case.is_submit)
        # Without an idempotency key the resend looks the token up first: a lagging list makes it send.
        emulator.list_lag_reads = 1
    operator, context = runner.start_try()
    errors: list[BaseException] = []

    def execute() -> None:
        try:
            operator.execute(context)
        except BaseException as err:  # noqa: BLE001 - the test inspects it
            errors.append(err)

    thread = threading.Thread(target=execute)
    thread.start()
    try:
        resends = 2 if sigterm_during == "resend" and operator.durable_converge_after_submit else 1
        _jobs_after(case, emulator, resends)
        if sigterm_during == "resend" and resends == 1:
            time.sleep(late / 3)  # an idempotent resend makes no job: let it reach the service
        runner.ti.state = "success"  # the user's mark; the heartbeat's 409 → SIGTERM → on_kill
        operator.on_kill()
    finally:
        thread.join(60)
    assert not thread.is_alive()
    assert len(errors) == 1, errors
    jobs = job_ids(case, emulator)
    assert jobs, "the lost answer's job is missing"
    assert [job for job in jobs if not cancelled(case, emulator, job)] == [], "a job runs on after the mark"


# --------------------------------------------------------------------------- no read failure submits
def test_a_failed_read_of_the_providers_own_key_never_leads_to_a_submit(case, emulator):
    """A retry with no record of ours looks for a job the provider operator's own ResumableJobMixin stored
    (the user switched mid-retries). If that read fails, nothing is known: the try fails, submits nothing."""
    operator = case.make(emulator, False)
    key = type(operator)._upstream_external_id_key()
    if key is None:
        pytest.skip(f"the installed provider operator of {case.id} stores no job id of its own")
    runner = runner_for(case, emulator, False)
    runner.ti.try_number = 1  # the next try is a retry
    real_get = runner.store.get

    def get(name: str, default: Any = None) -> Any:
        if name == key:
            raise RuntimeError("execution API: 503 Service Unavailable")
        return real_get(name, default)

    runner.store.get = get  # type: ignore[method-assign]
    outcome = runner.run_try()
    assert isinstance(outcome.error, DurableStateError) and key in str(outcome.error)
    assert job_ids(case, emulator) == []


def test_a_failed_status_read_of_the_providers_job_never_leads_to_a_submit(case, emulator):
    operator = case.make(emulator, False)
    key = type(operator)._upstream_external_id_key()
    if key is None:
        pytest.skip(f"the installed provider operator of {case.id} stores no job id of its own")
    emulator.lifecycle = case.lifecycle(active_reads=40)
    upstream = runner_for(case, emulator, False)
    crash_once_submitted(upstream)
    (job,) = job_ids(case, emulator)
    runner = runner_for(case, emulator, False)
    runner.ti.try_number = 1
    runner.store.data[key] = upstream.store.data[case.external_id_key]["external_id"]
    emulator.faults.add(method=case.status_call[0], path_contains=case.status_call[1], status=500, times=None)
    outcome = runner.run_try()
    assert outcome.state == "failed"
    assert job_ids(case, emulator) == [job]


# --------------------------------------------------------------------------- no id is ever lost
@pytest.mark.parametrize("deferrable", PATHS)
def test_a_clear_whose_cancel_fails_keeps_the_old_job_until_it_is_known_ended(case, emulator, deferrable):
    """The user clears a task whose job runs; the new try's cancel of it fails. The new logical job goes on,
    and the record keeps the old job's id (``unended``) until a later try sees that job ended."""
    emulator.lifecycle = case.lifecycle(active_reads=40)
    runner = runner_for(case, emulator, deferrable)
    crash_once_submitted(runner)
    (old,) = job_ids(case, emulator)
    runner.clear()
    failing = case.fail_cancels(emulator)
    emulator.lifecycle = case.lifecycle()
    outcome = runner.run_try()
    assert outcome.state == "success", outcome.error
    assert not cancelled(case, emulator, old)
    stored_old = case.stored_id(old)
    record = runner.store.data[case.external_id_key]
    assert [entry["external_id"] for entry in record.get("unended", [])] == [stored_old], record
    emulator.faults.remove(failing)
    # The next logical job (another clear) ends the job the record kept, then forgets it once it ended.
    runner.clear()
    assert runner.run_try().state == "success"
    assert cancelled(case, emulator, old)
    runner.clear()
    assert runner.run_try().state == "success"
    assert "unended" not in runner.store.data[case.external_id_key]


@pytest.mark.parametrize("deferrable", PATHS)
def test_a_clear_whose_old_job_cannot_be_read_still_cancels_it(case, emulator, deferrable):
    """The user clears a task whose job runs; the new try cannot read the old job's status (the API fails
    past the hook's retries). Unknown counts as active: the old job is cancelled, not left running beside
    the new logical job's, and the record keeps its id until a later try sees it ended."""
    emulator.lifecycle = case.lifecycle(active_reads=40)
    runner = runner_for(case, emulator, deferrable)
    crash_once_submitted(runner)
    (old,) = job_ids(case, emulator)
    runner.clear()

    def a_read_of_the_old_job(request: Any) -> bool:
        words = re.findall(r"[\w-]+", request.path + json.dumps(request.params, default=str))
        return case.cancel_path not in request.path and str(old) in words

    # As many failures as the hook's retries take to give up: the engine's read of the old job fails.
    gives_up = case.status_errors_to_give_up_sync or case.status_errors_to_give_up
    emulator.faults.add(status=case.transient_status, times=gives_up, predicate=a_read_of_the_old_job)
    emulator.lifecycle = case.lifecycle()
    outcome = runner.run_try()
    assert outcome.state == "success", outcome.error
    assert cancelled(case, emulator, old)
    assert len(job_ids(case, emulator)) == 2
    record = runner.store.data[case.external_id_key]
    assert [entry["external_id"] for entry in record.get("unended", [])] == [case.stored_id(old)], record


@pytest.mark.parametrize("deferrable", PATHS)
def test_a_retries_edit_then_a_clear_of_this_task_starts_a_new_logical_job(case, emulator, deferrable):
    """retries=2; try 1 submits and its worker dies; the DAG file lowers retries to 1 and the user clears
    THIS task: ``max_tries = try_number + retries`` comes out unchanged (1 + 1 = 2), and the run's
    clear_number rises as for a clear of another task, so the numbers look like a plain retry (model
    finding N8). Airflow renews the trace carrier of exactly the task instances a clear clears: the next
    try starts a new logical job and ends the old one."""
    emulator.lifecycle = case.lifecycle(active_reads=40)
    settings: dict[str, Any] = {"retries": 2}
    runner = TaskRunner(lambda: case.make(emulator, deferrable, **settings), retries=2)
    crash_once_submitted(runner)
    (old,) = job_ids(case, emulator)
    settings["retries"] = 1
    runner.clear(retries=1)
    assert runner.ti.max_tries == 2  # what max_tries was: the numbers cannot tell
    emulator.lifecycle = case.lifecycle()
    outcome = runner.run_try()
    assert outcome.state == "success", outcome.error
    jobs = job_ids(case, emulator)
    assert len(jobs) == 2 and case.reported(outcome) == jobs[1]
    assert cancelled(case, emulator, old)
    assert decisions(runner, case)[-1] == "new_epoch"


@pytest.mark.parametrize("deferrable", PATHS)
def test_a_record_deleted_while_its_job_runs_is_not_handed_back_to_the_next_try(case, emulator, deferrable):
    """Try 1 submits and its worker dies; the record is deleted (the Storage tab, retention) while the job
    runs. The retry begins a new record lifetime: its token must not be try 1's, or the system's
    idempotency key (or the token lookup) hands it the older logical job's job (model finding N3). That
    older job is found again only from the system (issue 23's lookup)."""
    emulator.lifecycle = case.lifecycle(active_reads=40)
    runner = runner_for(case, emulator, deferrable)
    crash_once_submitted(runner)
    (old,) = job_ids(case, emulator)
    old_token = runner.store.data[case.external_id_key]["token"]
    runner.store.data.clear()
    emulator.lifecycle = case.lifecycle()
    outcome = runner.run_try()
    assert outcome.state == "success", outcome.error
    jobs = job_ids(case, emulator)
    assert len(jobs) == 2 and case.reported(outcome) == jobs[1] != old
    assert runner.store.data[case.external_id_key]["token"] != old_token


@pytest.mark.parametrize("deferrable", PATHS)
def test_a_submit_whose_answer_was_lost_leaves_its_job_tracked(case, emulator, deferrable):
    """retries=0: the service creates the job but its answer is lost (a 5xx after the job was made), past
    whatever the provider's client retries. The try sends the same token once more (the system's key hands
    back the job that was made), or, without a key, looks the token up first and finds it; it goes on with
    that job and pushes the XComs the provider's submit would have (model finding N2). Before, the try
    failed with only the token recorded, and its job ran on untracked."""
    emulator.lifecycle = case.lifecycle()
    runner = runner_for(case, emulator, deferrable, retries=0)
    case.lose_submit_answers(emulator)
    outcome = runner.run_try()
    assert outcome.state == "success", outcome.error
    jobs = job_ids(case, emulator)
    kept = [job for job in jobs if not cancelled(case, emulator, job)]
    assert kept == [jobs[0]] and case.reported(outcome) == jobs[0], jobs
    assert runner.store.data[case.external_id_key]["state"] == "done"


@pytest.mark.parametrize("deferrable", PATHS)
def test_a_read_that_fails_right_after_the_submit_leaves_the_job_recorded(case, emulator, deferrable):
    """retries=0: the try submits, and the next status read fails past the hook's retries. On a system
    without an idempotency key that read is the lookup that converges on one job, before the id is stored
    (model finding N6, Batch): the try fails, but the record names the job it holds, so the orphans tool,
    a clear's new try or a user's mark can end it."""
    emulator.lifecycle = case.lifecycle(active_reads=40)
    runner = runner_for(case, emulator, deferrable, retries=0)
    method, path = case.status_call_sync or case.status_call
    gives_up = case.status_errors_to_give_up_sync or case.status_errors_to_give_up
    emulator.faults.add(method=method, path_contains=path, status=case.transient_status, times=gives_up)
    runner.run_try()
    (job,) = job_ids(case, emulator)
    record = runner.store.data[case.external_id_key]
    assert record["state"] in ("submitted", "done") and str(record["external_id"]) == str(
        case.stored_id(job)
    ), record


@pytest.mark.parametrize("deferrable", PATHS)
def test_a_try_whose_task_was_marked_and_cleared_before_its_id_write_cancels_its_job(
    case, emulator, deferrable
):
    """The user marks the running task and clears it while the try is between its submit and its id write
    (before the heartbeat's SIGTERM): the write fails (the task-instance id is superseded), and Airflow says
    the task has no state: cleared, no try started since. The next try is a new logical job and never
    reaches this job by its token, so the try that made it cancels it (make explore found it on EMR steps:
    it was left running, named by nothing).

    The clear is played as Airflow does it (the run's clear_number rises): a new id and no state alone is
    a scheduler's reset, which is not a clear (``test_stops.py::test_a_scheduler_reset_is_not_a_clear``)."""
    emulator.lifecycle = case.lifecycle(active_reads=40)
    runner = runner_for(case, emulator, deferrable)

    def mark_then_clear(_operator: Any) -> None:
        runner.ti.state = "failed"  # the mark; then the clear: a new task-instance id, no state
        runner.clear()

    errors = held_try(runner, "submitted", mark_then_clear)
    (job,) = job_ids(case, emulator)
    assert len(errors) == 1 and isinstance(errors[0], DurableStateError), errors
    assert cancelled(case, emulator, job)


def test_a_mark_while_running_ends_the_job_even_when_the_record_cannot_be_read(case, emulator):
    """The user marks a running (sync) task success; the SIGTERM's on_kill cannot read its record (the
    execution API fails). Airflow says the task instance ended, and an ended task instance waits on no job:
    the job is cancelled, not left running with only the record naming it (the model found it on BigQuery)."""
    if not getattr(case.make(emulator, False), "cancel_on_kill", True):
        pytest.skip(f"{case.id} leaves jobs running on kill by default (cancel_on_kill=False)")
    emulator.lifecycle = case.lifecycle(active_reads=40)
    runner = runner_for(case, emulator, False)
    crash_once_submitted(runner)
    killed = runner.last_operator
    (job,) = job_ids(case, emulator)
    runner.ti.state = "success"  # the user's mark
    runner.store.fail_get = True
    killed.on_kill()
    assert cancelled(case, emulator, job)


# --------------------------------------------------------------------------- the schema, once
def test_a_record_of_a_newer_release_fails_the_try_and_submits_nothing(case, emulator):
    runner = runner_for(case, emulator, False)
    runner.store.data[case.external_id_key] = {
        "schema": "airflow-durable/3",
        "generation": 1,
        "token": "afd-x-g1",
        "state": "submitted",
        "external_id": "anything",
    }
    outcome = runner.run_try()
    assert isinstance(outcome.error, DurableStateError)
    assert "newer airflow-durable" in str(outcome.error)
    assert job_ids(case, emulator) == []


@pytest.mark.parametrize("deferrable", PATHS)
def test_a_v1_record_is_carried_on_in_the_current_schema(case, emulator, deferrable):
    """A retry finds a record of release 0.1 (schema 1, no stamps) tracking a running job: it reconnects,
    and every record it writes from then on is schema 2 with its epoch stamped, so that a crash after
    success is still told from a user's clear."""
    emulator.lifecycle = case.lifecycle(active_reads=8)
    runner = runner_for(case, emulator, deferrable)
    crash_once_submitted(runner)
    (job,) = job_ids(case, emulator)
    stored = runner.store.data[case.external_id_key]
    runner.store.data[case.external_id_key] = {
        "schema": RECORD_SCHEMA_V1,
        "generation": stored["generation"],
        "token": stored["token"],
        "state": "submitted",
        "external_id": stored["external_id"],
    }
    runner.store.crash_when(record_state("done"), before=False)  # dies right after success
    assert runner.run_try().state == "crashed"
    done = runner.store.data[case.external_id_key]
    assert done["schema"] == RECORD_SCHEMA and done["state"] == "done"
    assert done["max_tries"] == runner.ti.max_tries
    assert runner.run_try().state == "success"  # a crash after success: the result, no new job
    assert job_ids(case, emulator) == [job]
    runner.clear()
    emulator.lifecycle = case.lifecycle()
    assert runner.run_try().state == "success"  # a clear: the job runs again
    assert len(job_ids(case, emulator)) == 2


def test_a_deferral_of_release_0_1_completes_into_a_current_record(case, emulator):
    """A deferral that release 0.1 started (its record is schema 1, its kwargs carry no record) completes
    under this release: the completion is written in schema 2 with its epoch, so a crash right after it is
    still a crash (the result, no new job), and a clear still runs the job again."""
    from airflow.sdk.exceptions import TaskDeferred

    from tests.harness import WorkerCrash

    emulator.lifecycle = case.lifecycle(active_reads=4)
    runner = runner_for(case, emulator, True)
    operator, context = runner.start_try()
    with pytest.raises(TaskDeferred) as deferred:
        operator.execute(context)
    (job,) = job_ids(case, emulator)
    stored = runner.store.data[case.external_id_key]
    runner.store.data[case.external_id_key] = {
        "schema": RECORD_SCHEMA_V1,
        "generation": stored["generation"],
        "token": stored["token"],
        "state": "submitted",
        "external_id": stored["external_id"],
    }
    event = runner._run_trigger(deferred.value.trigger)
    kwargs = {k: v for k, v in (deferred.value.kwargs or {}).items() if k != "durable_record"}
    resumed = case.make(emulator, True)
    context["task"] = resumed
    runner.store.crash_when(record_state("done"), before=False)
    with pytest.raises(WorkerCrash):
        getattr(resumed, deferred.value.method_name)(context, event=event, **kwargs)
    done = runner.store.data[case.external_id_key]
    assert done["schema"] == RECORD_SCHEMA and done["max_tries"] == runner.ti.max_tries, done
    assert runner.run_try().state == "success"  # the worker died after success: no new job
    assert job_ids(case, emulator) == [job]
    runner.clear()
    emulator.lifecycle = case.lifecycle()
    assert runner.run_try().state == "success"
    assert len(job_ids(case, emulator)) == 2


# --------------------------------------------------------------------------- defined outcomes
def test_a_deferral_timeout_whose_record_read_fails_fails_as_a_timeout(case, emulator):
    """execution_timeout runs out while deferred and the record cannot be read: the try fails as the
    timeout it is (not a store error), and the job it cannot name stays tracked by the record."""
    from airflow.sdk.exceptions import TaskDeferralTimeout, TaskDeferred

    emulator.lifecycle = case.lifecycle(active_reads=40)
    runner = runner_for(case, emulator, True)
    runner.ti.start_date = dt.datetime.now(dt.UTC) - dt.timedelta(hours=1)
    operator, context = runner.start_try()
    operator.execution_timeout = dt.timedelta(seconds=30)
    with pytest.raises(TaskDeferred):
        operator.execute(context)
    (job,) = job_ids(case, emulator)
    resumed = case.make(emulator, True, execution_timeout=dt.timedelta(seconds=30))
    runner.store.fail_get = True
    with pytest.raises(TaskDeferralTimeout):
        resumed.resume_execution("__fail__", {"error": "Trigger timeout"}, runner.context())
    assert not cancelled(case, emulator, job)
    assert runner.store.data[case.external_id_key]["external_id"] == case.stored_id(job)
