"""Why a try stops decides what becomes of its job (DESIGN §8, "Stopped is not cancelled"), one cell per
operator and path.

Airflow 3.3 runs a try's ``on_kill`` when a user marks or clears the task or a newer try supersedes it (the
supervisor's refused heartbeat, then SIGTERM), when ``execution_timeout`` runs out (the task runner calls it
in-process), and on a graceful shutdown of the worker, pod or scheduler (the supervisor forwards the SIGTERM
it received). Only the first two end the logical job. The harness plays Airflow's answers
(``tests/harness.py``): the task instance's state, its id (a read with a superseded id finds nothing) and
the DAG run's clear count.
"""

from __future__ import annotations

import datetime as dt
import threading
from typing import Any

import pytest

from tests.conformance.systems import PATHS, SystemCase, job_ids, runner_for
from tests.harness import DURABLE, TaskRunner, record_state

pytestmark = pytest.mark.skipif(
    not DURABLE,
    reason="Airflow < 3.3: no task_state_store; the degraded contract is tested in test_degraded.py",
)


def submitted_then_stopping(
    case: SystemCase, emulator: Any, deferrable: bool, retries: int = 3
) -> TaskRunner:
    """Try 1 submits and stores its job's id; then its process is told to stop (its main thread is frozen
    here, as the SIGTERM handler runs)."""
    runner = TaskRunner(lambda: case.make(emulator, deferrable), retries=retries)
    runner.store.crash_when(record_state("submitted"), before=False)
    assert runner.run_try().state == "crashed"
    return runner


def cancelled(case: SystemCase, emulator: Any, job: Any) -> bool:
    return emulator.run(job).state == case.cancelled


def recorded(runner: TaskRunner, case: SystemCase, job: Any) -> bool:
    """Whether the record names ``job`` (EMR steps store their step ids as a list)."""
    stored = runner.store.data[case.external_id_key]["external_id"]
    return bool(stored == job or stored == [job])


def decisions(runner: TaskRunner, case: SystemCase) -> list[str]:
    return [entry["decision"] for entry in runner.store.data[case.external_id_key]["history"]]


def killed_while_writing(runner: TaskRunner, state: str) -> list[Any]:
    """Run a sync try in a thread, call its ``on_kill`` (SIGTERM) while its write of a record in ``state``
    is in flight, let the write go on, and return what the try returned or raised."""
    reached, release = runner.store.hold_when(record_state(state))
    operator, context = runner.start_try()
    outcome: list[Any] = []

    def execute() -> None:
        try:
            outcome.append(operator.execute(context))
        except BaseException as err:  # noqa: BLE001 - the test inspects it
            outcome.append(err)

    thread = threading.Thread(target=execute)
    thread.start()
    try:
        assert reached.wait(60)
        operator.on_kill()
    finally:
        release.set()
        thread.join(120)
    return outcome


def _skip_without_cancel_on_kill(case: SystemCase, emulator: Any, deferrable: bool) -> None:
    if not getattr(case.make(emulator, deferrable), "cancel_on_kill", True):
        pytest.skip(f"{case.id} leaves jobs running on kill by default (cancel_on_kill=False)")


# --------------------------------------------------------------------------- stops that are not a cancel
@pytest.mark.parametrize("deferrable", PATHS)
def test_a_shutdown_leaves_the_job_running_and_the_retry_reconnects(case, emulator, deferrable, task_logs):
    """The worker's pod is evicted while try 1 waits: Airflow still shows try 1 running, so on_kill leaves
    the job, and the retry (after the heartbeat timeout) reconnects to it: one job, not two."""
    runner = submitted_then_stopping(case, emulator, deferrable)
    (job,) = job_ids(case, emulator)
    runner.last_operator.on_kill()
    assert not cancelled(case, emulator, job), "a shutdown cancelled the job"
    logs = task_logs()
    assert "leaving job" in logs and "the next try reconnects to it" in logs
    outcome = runner.run_try()
    assert outcome.state == "success", outcome.error
    assert job_ids(case, emulator) == [job]
    assert case.reported(outcome) == job
    assert decisions(runner, case)[-1] == "reconnect"


@pytest.mark.parametrize("deferrable", PATHS)
def test_a_shutdown_on_the_last_try_leaves_the_job_recorded_and_says_so(
    case, emulator, deferrable, task_logs
):
    """No retry is left: the job still runs on, recorded (a scheduler's reset runs the task again and
    reconnects; if Airflow fails it, ``orphans`` lists the job), and the log says so."""
    runner = submitted_then_stopping(case, emulator, deferrable, retries=0)
    (job,) = job_ids(case, emulator)
    runner.last_operator.on_kill()
    assert not cancelled(case, emulator, job)
    assert recorded(runner, case, job)
    assert "no retry is left" in task_logs()


@pytest.mark.parametrize("deferrable", PATHS)
def test_a_scheduler_reset_is_not_a_clear(case, emulator, deferrable):
    """The scheduler that ran the task is gone and a new one resets it (``adopt_or_reset_orphaned_tasks``:
    a new id, no state, max_tries and clear_number unchanged). The old try, still alive, is terminated (its
    heartbeat is refused): its on_kill leaves the job, and the task's next try reconnects to it."""
    runner = submitted_then_stopping(case, emulator, deferrable)
    (job,) = job_ids(case, emulator)
    old_try = runner.last_operator
    runner.reset()
    old_try.on_kill()
    assert not cancelled(case, emulator, job), "a scheduler's reset was taken for a clear"
    outcome = runner.run_try()
    assert outcome.state == "success", outcome.error
    assert job_ids(case, emulator) == [job]


@pytest.mark.parametrize("deferrable", PATHS)
def test_a_scheduler_reset_before_a_timed_out_try_asks_is_not_a_clear(case, emulator, deferrable):
    """The try's execution_timeout runs out, and a new scheduler resets the task instance before the
    timeout's on_kill (``_run_execute_callable``'s ``except``) asks Airflow: the try is superseded, its record
    reads "not found" and the task has no state, as after a clear, but the run's clear_number is unchanged.
    The reset's try carries on with the logical job, so on_kill leaves the job and that try reconnects."""
    from airflow.sdk.exceptions import AirflowTaskTimeout

    runner = submitted_then_stopping(case, emulator, deferrable)
    (job,) = job_ids(case, emulator)
    old_try = runner.last_operator
    runner.reset()
    try:
        raise AirflowTaskTimeout("Timeout")
    except AirflowTaskTimeout:
        old_try.on_kill()
    assert not cancelled(case, emulator, job), "a scheduler's reset after a timeout was taken for a clear"
    outcome = runner.run_try()
    assert outcome.state == "success", outcome.error
    assert job_ids(case, emulator) == [job]


@pytest.mark.parametrize("deferrable", PATHS)
def test_no_answer_from_airflow_leaves_the_job(case, emulator, deferrable, task_logs):
    """SIGTERM while the execution API does not answer (its restart): the stop may be a shutdown, so the job
    is left, recorded; the retry reconnects."""
    runner = submitted_then_stopping(case, emulator, deferrable)
    (job,) = job_ids(case, emulator)
    runner.ti.unanswered = True
    runner.last_operator.on_kill()
    runner.ti.unanswered = False
    assert not cancelled(case, emulator, job)
    assert "Airflow could not be asked why" in task_logs()
    assert runner.run_try().state == "success"
    assert job_ids(case, emulator) == [job]


def test_a_shutdown_while_the_id_write_is_out_lets_the_try_finish(case, emulator):
    """SIGTERM lands while the sync try's write of its job's id is in flight: the main thread goes on,
    records the job and waits; the job ends before the kill that would follow, and the try succeeds."""
    emulator.lifecycle = case.lifecycle(active_reads=3)
    runner = runner_for(case, emulator, False)
    outcome = killed_while_writing(runner, "submitted")
    assert outcome and not isinstance(outcome[0], BaseException), outcome
    (job,) = job_ids(case, emulator)
    assert not cancelled(case, emulator, job)
    assert runner.store.data[case.external_id_key]["state"] == "done"


def test_a_shutdown_before_the_first_write_lets_the_try_go_on(case, emulator):
    """SIGTERM lands while the try's first write (its submission intent) is in flight: a read with its id
    finds no record, as it would for a superseded try, but this try wrote nothing yet and Airflow shows it
    running. It goes on: it submits, waits and succeeds."""
    emulator.lifecycle = case.lifecycle(active_reads=3)
    runner = runner_for(case, emulator, False)
    outcome = killed_while_writing(runner, "submitting")
    assert outcome and not isinstance(outcome[0], BaseException), outcome  # failed 'told to stop' before
    assert len(job_ids(case, emulator)) == 1
    assert runner.store.data[case.external_id_key]["state"] == "done"


def test_a_shutdown_before_execute_began_lets_the_try_go_on(case, emulator):
    """The SIGTERM of a worker's shutdown lands before ``execute`` (Airflow's task runner installs its
    handler, then clears the try's XComs): Airflow shows the try running, so it goes on, submits, waits and
    succeeds. It failed "told to stop" before (make explore, EMR steps)."""
    emulator.lifecycle = case.lifecycle(active_reads=3)
    runner = runner_for(case, emulator, False)
    operator, context = runner.start_try()
    operator.on_kill()
    operator.execute(context)
    assert len(job_ids(case, emulator)) == 1
    assert runner.store.data[case.external_id_key]["state"] == "done"


def test_a_mark_before_execute_began_submits_nothing(case, emulator):
    """The user marks the task before ``execute`` began: the SIGTERM's on_kill holds nothing, and the try,
    once it can ask why it stops, submits nothing."""
    from airflow_durable.engine import DurableError

    runner = runner_for(case, emulator, False)
    operator, context = runner.start_try()
    runner.ti.state = "failed"
    operator.on_kill()
    with pytest.raises(DurableError, match="told to stop"):
        operator.execute(context)
    assert job_ids(case, emulator) == []


# --------------------------------------------------------------------------- stops that end the job
@pytest.mark.parametrize("deferrable", PATHS)
def test_a_users_mark_cancels_the_tracked_job_and_keeps_the_record(case, emulator, deferrable):
    """A user marks the running task failed: the supervisor's heartbeat is refused and it sends SIGTERM."""
    _skip_without_cancel_on_kill(case, emulator, deferrable)
    runner = submitted_then_stopping(case, emulator, deferrable)
    (job,) = job_ids(case, emulator)
    runner.ti.state = "failed"
    runner.last_operator.on_kill()
    assert cancelled(case, emulator, job)
    assert runner.store.data[case.external_id_key]["state"] == "submitted"
    emulator.lifecycle = case.lifecycle()
    outcome = runner.run_try()
    assert outcome.state == "success", outcome.error  # the next try sees "cancelled" and submits fresh
    assert len(case.submissions(emulator)) == 2


@pytest.mark.parametrize("deferrable", PATHS)
def test_a_clear_while_running_cancels_the_job(case, emulator, deferrable):
    """A user clears the running task: Airflow shows it ``restarting`` under a new id."""
    _skip_without_cancel_on_kill(case, emulator, deferrable)
    runner = submitted_then_stopping(case, emulator, deferrable)
    (job,) = job_ids(case, emulator)
    runner.clear_running()
    runner.last_operator.on_kill()
    assert cancelled(case, emulator, job)


def test_a_failed_cancel_on_kill_is_logged_not_raised(case, emulator, task_logs):
    """on_kill runs in the SIGTERM handler: a cancel the service refuses must not raise into whatever the
    main thread was doing. Here a user marks the task while its try writes its completion."""
    _skip_without_cancel_on_kill(case, emulator, False)
    runner = runner_for(case, emulator, False)
    reached, release = runner.store.hold_when(record_state("done"))
    operator, context = runner.start_try()
    thread = threading.Thread(target=operator.execute, args=(context,))
    thread.start()
    try:
        assert reached.wait(60)
        case.fail_cancels(emulator)
        runner.ti.state = "failed"
        operator.on_kill()  # raised the refused cancel on the engine before this cell
    finally:
        release.set()
        thread.join(60)
    if emulator.ledger.select(operation=case.cancel_operation):  # BigQuery's hook skips a finished job's
        assert "could not cancel job" in task_logs()


@pytest.mark.parametrize("deferrable", PATHS)
def test_execution_timeout_cancels_the_job(case, emulator, deferrable):
    """``execution_timeout`` runs out in ``execute`` (here while the write of the job's id is in flight):
    Airflow's task runner calls on_kill while it handles the timeout (``_run_execute_callable``), with the
    try still running and current, and the job ends with the try."""
    from airflow.sdk.exceptions import AirflowTaskTimeout
    from airflow.sdk.execution_time.task_runner import _run_execute_callable

    _skip_without_cancel_on_kill(case, emulator, deferrable)
    runner = runner_for(case, emulator, deferrable)
    reached, release = runner.store.hold_when(record_state("submitted"))
    operator, context = runner.start_try()
    operator.execution_timeout = dt.timedelta(seconds=2)
    try:
        with pytest.raises(AirflowTaskTimeout):
            _run_execute_callable(context, operator.execute, operator)
    finally:
        release.set()
    assert reached.is_set()
    (job,) = job_ids(case, emulator)
    assert cancelled(case, emulator, job)


@pytest.mark.parametrize("deferrable", PATHS)
def test_execution_timeout_while_a_retry_reads_its_jobs_status_ends_that_job(case, emulator, deferrable):
    """Try 1 recorded its job and crashed; try 2, the last, reads the job's status to decide whether to
    reconnect, and its ``execution_timeout`` runs out inside that read. The job is the logical job's, which
    the timeout ends, and no try is left to end it: on_kill does."""
    from airflow.sdk.exceptions import AirflowTaskTimeout
    from airflow.sdk.execution_time.task_runner import _run_execute_callable

    _skip_without_cancel_on_kill(case, emulator, deferrable)
    emulator.lifecycle = case.lifecycle(active_reads=40)
    runner = submitted_then_stopping(case, emulator, deferrable, retries=1)
    (job,) = job_ids(case, emulator)
    method, path = case.status_call
    emulator.faults.add(method=method, path_contains=path, latency=8.0, times=1)
    operator, context = runner.start_try()
    operator.execution_timeout = dt.timedelta(seconds=4)
    with pytest.raises(AirflowTaskTimeout):
        _run_execute_callable(context, operator.execute, operator)
    assert job_ids(case, emulator) == [job], "the timed-out retry submitted a job"
    assert cancelled(case, emulator, job), "the timed-out try left running the job it was reconnecting to"


@pytest.mark.parametrize("deferrable", PATHS)
def test_execution_timeout_while_a_submissions_answer_is_out_ends_its_job(case, emulator, deferrable):
    """``execution_timeout`` runs out while the submission is out: the service made the job, and its answer
    has not come (a 5xx follows: it is lost). on_kill holds no id; it finds the job by the token the record
    keeps (a lookup, or a resend of the token where the system's key hands its job back and nothing lists it:
    Databricks run-now) and ends it. No retry is left, so nothing else would."""
    from airflow.sdk.exceptions import AirflowTaskTimeout
    from airflow.sdk.execution_time.task_runner import _run_execute_callable

    _skip_without_cancel_on_kill(case, emulator, deferrable)
    emulator.lifecycle = case.lifecycle(active_reads=40)
    runner = TaskRunner(lambda: case.make(emulator, deferrable), retries=0)
    # The answer comes after the timeout; the submit reaches the service well before it (a first call in
    # the process imports and connects for a second or more).
    emulator.faults.add(
        status=case.transient_status, latency=8.0, after=True, times=1, predicate=case.is_submit
    )
    operator, context = runner.start_try()
    operator.execution_timeout = dt.timedelta(seconds=4)
    with pytest.raises(AirflowTaskTimeout):
        _run_execute_callable(context, operator.execute, operator)
    jobs = job_ids(case, emulator)
    assert jobs, "the submission made no job"
    running = [job for job in jobs if not cancelled(case, emulator, job)]
    assert running == [], "a job runs on after the timeout"
