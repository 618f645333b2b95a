"""Airflow forgets, the job does not (issue 23, DESIGN §8 "Recoverable without the record"), for every
registered durable operator, on both paths.

Airflow 3.4's default clear discards the task's state: the harness does what it does (`runner.clear()`, then
the task's state-store rows are deleted). The next try finds no record, but Airflow shows an earlier
lifetime (a later try, a clear), so the engine looks the task instance's jobs up in the system
(``durable_find``) once, before submitting, and ends every older one still running.

The lookup's requests are told apart from the rest by their signature: the requests ``durable_find`` makes
on an empty emulator (method, path with ids masked, argument names). Systems without a native idempotency
key list jobs with the same call after every submit (the convergence lookup), so the cells count lookups
*before the try's first submit*.
"""

from __future__ import annotations

import contextlib
import inspect
from typing import Any

import pytest

from airflow_durable import catalogue
from airflow_durable.engine import DurableJobEngine, DurableLookupError, DurableStateError
from airflow_durable.identity_tags import task_identity
from tests.conformance.systems import PATHS, SystemCase, job_ids, runner_for
from tests.harness import DURABLE, TaskRunner, record_state

pytestmark = pytest.mark.skipif(
    not DURABLE, reason="Airflow < 3.3: no task_state_store, every try submits fresh (test_degraded.py)"
)


def _lookup(case: SystemCase) -> catalogue.Lookup:
    return catalogue.LOOKUPS[case.external_id_key]


def _implemented(case: SystemCase) -> None:
    if not _lookup(case).implemented:
        pytest.skip(f"{case.id}: no lookup (the gap is asserted in test_without_a_lookup_the_gap_is_logged)")


Signature = tuple[str, str, frozenset[str]]


def _mask(path: str) -> str:
    return "/".join("{id}" if part.isdigit() or len(part) >= 20 else part for part in path.split("/"))


def _signature(request: Any) -> Signature:
    """A request's method, path (ids masked) and argument names: a lookup lists (``ListSteps(ClusterId)``)
    where a status read of the same call names its job (``ListSteps(ClusterId, StepIds)``)."""
    return (request.method, _mask(str(request.path).split("?")[0]), frozenset(request.params))


class _Watch:
    """Sees every request that reaches the emulator (a fault that never matches: it answers nothing) and
    counts the lookups made before the first submit since it was armed."""

    def __init__(self, case: SystemCase, emulator: Any, lookups: set[Signature] | None = None) -> None:
        self.case, self.lookups = case, lookups or set()
        self.seen: set[Signature] = set()
        self.arm()
        self.fault = emulator.faults.add(status=None, times=None, predicate=self._see)

    def arm(self) -> None:
        self.submitted = False
        self.before_submit = 0

    def _see(self, request: Any) -> bool:
        if self.case.is_submit(request):
            self.submitted = True
        signature = _signature(request)
        self.seen.add(signature)
        if not self.submitted and signature in self.lookups:
            self.before_submit += 1
        return False


def _lookup_signatures(case: SystemCase, emulator: Any) -> set[Signature]:
    """The requests a lookup makes (on this emulator, before any job exists)."""
    probe = _Watch(case, emulator)
    # The call reaching the emulator is what counts here, not its answer (e.g. an application not yet made).
    with contextlib.suppress(Exception):
        case.make(emulator, False).durable_find(task_identity("probe", "probe", "probe"))
    probe.fault.remove()
    assert probe.seen or not _lookup(case).implemented, f"{case.id}: durable_find made no request"
    return probe.seen


def _fail_lookups(emulator: Any, lookups: set[Signature]) -> Any:
    """Refuse every lookup (403, as a missing permission would): no client retries it."""
    return emulator.faults.add(
        status=403, times=None, predicate=lambda request: _signature(request) in lookups
    )


def _state_of(emulator: Any, external_id: Any) -> str:
    return emulator.run(external_id).state


def _crash_once_submitted(runner: TaskRunner) -> None:
    """Try 1 submits, stores the id and dies with its job running (its worker is gone)."""
    runner.store.crash_when(record_state("submitted"), before=False)
    assert runner.run_try().state == "crashed"


def _clear_discarding_state(runner: TaskRunner) -> None:
    """Airflow 3.4's default clear: the task is cleared and its task-state rows are deleted."""
    runner.clear()
    runner.store.data.clear()


def _unended(runner: TaskRunner, case: SystemCase) -> list[Any]:
    return [entry.get("external_id") for entry in runner.store.data[case.external_id_key].get("unended", [])]


# --------------------------------------------------------------------------- (a) the default clear
@pytest.mark.parametrize("deferrable", PATHS)
def test_a_clear_that_discards_the_record_ends_the_old_job(case, emulator, deferrable):
    """Try 1's job runs on after its worker died; the user clears the task and Airflow deletes its state.
    Try 2 finds the old job by the task instance's identity, cancels it, runs a new one and succeeds on it;
    the record names the old job until a try sees it ended."""
    _implemented(case)
    emulator.lifecycle = case.lifecycle(active_reads=40)
    runner = runner_for(case, emulator, deferrable)
    _crash_once_submitted(runner)
    (old,) = job_ids(case, emulator)
    _clear_discarding_state(runner)
    emulator.lifecycle = case.lifecycle()
    outcome = runner.run_try()
    assert outcome.state == "success", outcome.error
    jobs = job_ids(case, emulator)
    assert len(jobs) == 2 and case.reported(outcome) == jobs[1] != old, jobs
    assert _state_of(emulator, old) == case.cancelled, "the old job runs on beside the new one"
    assert _unended(runner, case) == [case.stored_id(old)]
    # Cleared again, the record kept: the next try sees the old job ended and lets it go.
    runner.clear()
    outcome = runner.run_try()
    assert outcome.state == "success", outcome.error
    assert _unended(runner, case) == []


@pytest.mark.parametrize("deferrable", PATHS)
def test_a_retry_without_a_record_ends_the_old_job(case, emulator, deferrable):
    """No clear at all: the record went (the UI's Storage tab, retention) while try 1's job ran, and try 1
    died. Try 2 is evidence enough: it finds the job and ends it (its token is of another lifetime)."""
    _implemented(case)
    emulator.lifecycle = case.lifecycle(active_reads=40)
    runner = runner_for(case, emulator, deferrable)
    _crash_once_submitted(runner)
    (old,) = job_ids(case, emulator)
    runner.store.data.clear()
    emulator.lifecycle = case.lifecycle()
    outcome = runner.run_try()
    assert outcome.state == "success", outcome.error
    jobs = job_ids(case, emulator)
    assert len(jobs) == 2 and case.reported(outcome) == jobs[1] != old, jobs
    assert _state_of(emulator, old) == case.cancelled
    assert _unended(runner, case) == [case.stored_id(old)]


def test_cancel_on_kill_false_leaves_the_found_job_running_and_tracked(case, emulator):
    _implemented(case)
    provider_init = type(case.make(emulator, False)).__mro__[2].__init__
    if "cancel_on_kill" not in inspect.signature(provider_init).parameters:
        pytest.skip(f"the provider operator of {case.id} has no cancel_on_kill switch")
    emulator.lifecycle = case.lifecycle(active_reads=40)
    runner = runner_for(case, emulator, False, cancel_on_kill=False)
    _crash_once_submitted(runner)
    (old,) = job_ids(case, emulator)
    _clear_discarding_state(runner)
    emulator.lifecycle = case.lifecycle()
    outcome = runner.run_try()
    assert outcome.state == "success", outcome.error
    assert _state_of(emulator, old) != case.cancelled
    (entry,) = runner.store.data[case.external_id_key]["unended"]
    assert entry["external_id"] == case.stored_id(old) and entry["cancel"] is False


def test_finished_old_jobs_are_left_alone(case, emulator):
    """An old job that already ended is not the new try's business: nothing is cancelled or recorded."""
    _implemented(case)
    emulator.lifecycle = case.lifecycle(active_reads=40)
    runner = runner_for(case, emulator, False)
    _crash_once_submitted(runner)
    (old,) = job_ids(case, emulator)
    emulator.set_state(old, case.failed)
    _clear_discarding_state(runner)
    emulator.lifecycle = case.lifecycle()
    outcome = runner.run_try()
    assert outcome.state == "success", outcome.error
    assert _state_of(emulator, old) == case.failed
    assert _unended(runner, case) == []
    assert emulator.ledger.count(operation=case.cancel_operation) == 0


# --------------------------------------------------------------------------- (b) a list that lags
@pytest.mark.parametrize("deferrable", PATHS)
def test_a_lagging_list_hides_a_young_old_job_until_its_lag(case, emulator, deferrable):
    """An eventually consistent list shows a job only some time after its creation. An old job younger
    than that lag is not found: the new try submits beside it (the documented gap; the record does not
    name it, and `airflow-durable orphans` is the fallback). Once the lag has passed, the list shows it and
    the next try without a record ends it."""
    _implemented(case)
    emulator.lifecycle = case.lifecycle(active_reads=40)
    runner = runner_for(case, emulator, deferrable)
    _crash_once_submitted(runner)
    (old,) = job_ids(case, emulator)
    emulator.list_lag_seconds = 60.0
    _clear_discarding_state(runner)
    emulator.lifecycle = case.lifecycle()
    outcome = runner.run_try()
    assert outcome.state == "success", outcome.error
    jobs = job_ids(case, emulator)
    assert len(jobs) == 2, jobs
    # The gap: not found, so neither ended nor recorded.
    assert _state_of(emulator, old) != case.cancelled
    assert case.stored_id(old) not in _unended(runner, case)
    # A minute later the list shows it, and a try that finds no record ends it.
    emulator.backdate(old, 61)
    _clear_discarding_state(runner)
    outcome = runner.run_try()
    assert outcome.state == "success", outcome.error
    assert _state_of(emulator, old) == case.cancelled
    assert case.stored_id(old) in _unended(runner, case)


# --------------------------------------------------------------------------- (c) the record kept
@pytest.mark.parametrize("deferrable", PATHS)
def test_a_clear_that_keeps_the_record_ends_the_old_job_without_a_lookup(case, emulator, deferrable):
    """``keep_task_state=True`` (or Airflow 3.3's clear): the record tells the new epoch about the old job;
    nothing is looked up."""
    watch = _Watch(case, emulator, _lookup_signatures(case, emulator))
    emulator.lifecycle = case.lifecycle(active_reads=40)
    runner = runner_for(case, emulator, deferrable)
    _crash_once_submitted(runner)
    (old,) = job_ids(case, emulator)
    runner.clear()
    emulator.lifecycle = case.lifecycle()
    watch.arm()
    outcome = runner.run_try()
    assert outcome.state == "success", outcome.error
    assert watch.before_submit == 0
    jobs = job_ids(case, emulator)
    assert len(jobs) == 2 and case.reported(outcome) == jobs[1] != old
    assert _state_of(emulator, old) == case.cancelled
    assert [h["decision"] for h in runner.store.data[case.external_id_key]["history"]][-1] == "new_epoch"


# --------------------------------------------------------------------------- (d) no evidence, no lookup
@pytest.mark.parametrize("deferrable", PATHS)
def test_a_first_try_makes_no_lookup(case, emulator, deferrable):
    """A first try of a run never cleared shows no earlier lifetime: no lookup."""
    _implemented(case)
    watch = _Watch(case, emulator, _lookup_signatures(case, emulator))
    runner = runner_for(case, emulator, deferrable)
    assert runner.run_try().state == "success"
    assert watch.before_submit == 0


@pytest.mark.parametrize("deferrable", PATHS)
def test_a_clear_of_another_task_is_no_evidence(case, emulator, deferrable):
    """Another task of the run was cleared (the run's ``clear_number`` is 1): this task instance never ran
    before, so its first try lists nothing before it submits, and succeeds where the connection may not
    list jobs (every lookup before the submit is refused with 403). A system without an idempotency key
    (Batch, EMR steps, dbt Cloud) lists after its submit to converge, on every first try: that is not
    refused here."""
    _implemented(case)
    lookups = _lookup_signatures(case, emulator)
    watch = _Watch(case, emulator, lookups)
    refused = emulator.faults.add(
        status=403,
        times=None,
        predicate=lambda request: not watch.submitted and _signature(request) in lookups,
    )
    runner = runner_for(case, emulator, deferrable)
    runner.dag_run.clear_number = 1
    outcome = runner.run_try()
    assert outcome.state == "success", outcome.error
    assert watch.before_submit == 0
    assert len(job_ids(case, emulator)) == 1
    refused.remove()


@pytest.mark.parametrize("deferrable", PATHS)
def test_a_clear_of_this_task_instance_is_evidence(case, emulator, deferrable):
    """This task instance ran and was cleared (Airflow raises its ``max_tries`` and the run's
    ``clear_number``), and its record is gone: the next try looks its jobs up."""
    _implemented(case)
    watch = _Watch(case, emulator, _lookup_signatures(case, emulator))
    runner = runner_for(case, emulator, deferrable)
    assert runner.run_try().state == "success"
    _clear_discarding_state(runner)
    watch.arm()
    assert runner.run_try().state == "success"
    assert watch.before_submit >= 1


# --------------------------------------------------------------------------- (e) a lookup that fails
@pytest.mark.parametrize("deferrable", PATHS)
def test_a_failed_lookup_submits_nothing(case, emulator, deferrable):
    """Without a record, a try that cannot list its task instance's jobs does not submit beside an old job
    it cannot see: it fails naming the system and the call, and its retry looks again."""
    _implemented(case)
    lookups = _lookup_signatures(case, emulator)
    emulator.lifecycle = case.lifecycle(active_reads=40)
    runner = runner_for(case, emulator, deferrable)
    _crash_once_submitted(runner)
    (old,) = job_ids(case, emulator)
    _clear_discarding_state(runner)
    fault = _fail_lookups(emulator, lookups)
    outcome = runner.run_try()
    assert outcome.state == "failed"
    assert isinstance(outcome.error, DurableLookupError), repr(outcome.error)
    message = str(outcome.error)
    assert "Not submitting" in message and str(case.make(emulator, False).durable_system) in message
    # It says what the connection lacks: the permission for this system's list call, and which connection.
    operator = case.make(emulator, False)
    assert _lookup(case).permission and _lookup(case).permission in message, message
    conn_field = operator.durable_locator_fields[0]
    assert f"{conn_field}={getattr(operator, conn_field)!r}" in message, message
    assert job_ids(case, emulator) == [old], "submitted beside a job it could not see"
    assert case.external_id_key not in runner.store.data
    assert _state_of(emulator, old) != case.cancelled
    fault.remove()
    emulator.lifecycle = case.lifecycle()
    outcome = runner.run_try()
    assert outcome.state == "success", outcome.error
    assert _state_of(emulator, old) == case.cancelled


def _found_jobs_write(value: Any) -> bool:
    """The write that records the older jobs a lookup found (an intent that submitted nothing yet)."""
    return record_state("submitting")(value) and bool(value.get("unended"))


@pytest.mark.parametrize("deferrable", PATHS)
def test_a_failed_write_of_the_found_jobs_is_written_once_more(case, emulator, deferrable):
    """After Airflow 3.4's default clear the try finds the old job by lookup; the write that records it
    fails once (503): the try writes it once more, then ends the old job and succeeds on its own."""
    _implemented(case)
    emulator.lifecycle = case.lifecycle(active_reads=40)
    runner = runner_for(case, emulator, deferrable)
    _crash_once_submitted(runner)
    (old,) = job_ids(case, emulator)
    _clear_discarding_state(runner)
    runner.store.fail_set(_found_jobs_write, times=1)
    emulator.lifecycle = case.lifecycle()
    outcome = runner.run_try()
    assert outcome.state == "success", outcome.error
    writes = [c for c in runner.store.calls if c.op == "set" and _found_jobs_write(c.value)]
    assert len(writes) >= 2 and writes[0].value == writes[1].value
    jobs = job_ids(case, emulator)
    assert len(jobs) == 2 and case.reported(outcome) == jobs[1] != old, jobs
    assert _state_of(emulator, old) == case.cancelled


@pytest.mark.parametrize("deferrable", PATHS)
def test_found_jobs_whose_write_fails_twice_are_left_for_the_next_lookup(case, emulator, deferrable):
    """Both writes fail: the try cannot tell it still owns the found job (a store that refuses its writes
    is what a superseded try sees), so it neither ends it nor submits, and fails saying so. The job carries
    its identity: the retry finds it again, ends it and succeeds on a job of its own."""
    _implemented(case)
    emulator.lifecycle = case.lifecycle(active_reads=40)
    runner = runner_for(case, emulator, deferrable)
    _crash_once_submitted(runner)
    (old,) = job_ids(case, emulator)
    _clear_discarding_state(runner)
    runner.store.fail_set(_found_jobs_write, times=2)
    outcome = runner.run_try()
    assert outcome.state == "failed"
    assert isinstance(outcome.error, DurableStateError), repr(outcome.error)
    message = str(outcome.error)
    assert "failed twice" in message and str(case.stored_id(old)) in message, message
    assert "the next try looks them up again" in message, message
    assert job_ids(case, emulator) == [old], "submitted beside a job it could not record"
    assert _state_of(emulator, old) != case.cancelled, "a try that cannot prove itself current ended a job"
    assert case.external_id_key not in runner.store.data
    emulator.lifecycle = case.lifecycle()
    outcome = runner.run_try()
    assert outcome.state == "success", outcome.error
    jobs = job_ids(case, emulator)
    assert len(jobs) == 2 and case.reported(outcome) == jobs[1] != old, jobs
    assert _state_of(emulator, old) == case.cancelled
    assert _unended(runner, case) == [case.stored_id(old)]


# --------------------------------------------------------------------------- (f) no lookup at all
@pytest.mark.parametrize("deferrable", PATHS)
def test_without_a_lookup_the_gap_is_logged(case, emulator, deferrable, task_logs):
    """A system that offers no lookup (``notimpl`` in the catalogue): the old job is not found, so it runs
    on beside the new one — the gap — and the try says why, with the catalogue's reason."""
    lookup = _lookup(case)
    if lookup.implemented:
        pytest.skip(f"{case.id} has a lookup (test_a_clear_that_discards_the_record_ends_the_old_job)")
    emulator.lifecycle = case.lifecycle(active_reads=40)
    runner = runner_for(case, emulator, deferrable)
    _crash_once_submitted(runner)
    (old,) = job_ids(case, emulator)
    _clear_discarding_state(runner)
    task_logs()
    emulator.lifecycle = case.lifecycle()
    outcome = runner.run_try()
    assert outcome.state == "success", outcome.error
    assert len(job_ids(case, emulator)) == 2
    assert _state_of(emulator, old) != case.cancelled  # the gap
    assert _unended(runner, case) == []
    assert lookup.reason in task_logs()


# --------------------------------------------------------------------------- token-only older jobs
def _submit_then_die_unrecorded(case: SystemCase, emulator: Any, runner: TaskRunner) -> Any:
    """Try 1 submits and dies before its job's id is stored: the record holds only its token."""
    emulator.lifecycle = case.lifecycle(active_reads=40)
    runner.store.crash_when(record_state("submitted"), before=True)
    assert runner.run_try().state == "crashed"
    assert runner.store.data[case.external_id_key]["state"] == "submitting"
    (old,) = job_ids(case, emulator)
    return old


def test_an_older_job_known_only_by_its_token_is_found_and_ended(case, emulator):
    """The user clears a task whose try died inside the submit→persist window: the older job is known only
    by its token. The new epoch's try names it through the lookup and ends it."""
    _implemented(case)
    runner = runner_for(case, emulator, False)
    old = _submit_then_die_unrecorded(case, emulator, runner)
    runner.clear()
    emulator.lifecycle = case.lifecycle()
    outcome = runner.run_try()
    assert outcome.state == "success", outcome.error
    assert _state_of(emulator, old) == case.cancelled
    assert _unended(runner, case) == [case.stored_id(old)]


def test_a_token_kept_by_the_record_is_resolved_by_a_later_try(case, emulator):
    """The lookup fails while the new epoch begins: the record keeps the token (the try goes on, as
    before). The next try resolves it with the same lookup and ends the job."""
    _implemented(case)
    if type(case.make(emulator, False)).durable_find_all is not DurableJobEngine.durable_find_all:
        pytest.skip(f"{case.id} names such a job by its token lookup at once (durable_find_all)")
    lookups = _lookup_signatures(case, emulator)
    runner = runner_for(case, emulator, False)
    old = _submit_then_die_unrecorded(case, emulator, runner)
    runner.clear()
    emulator.lifecycle = case.lifecycle()
    fault = _fail_lookups(emulator, lookups)
    outcome = runner.run_try()
    fault.remove()
    assert outcome.state == "success", outcome.error
    (entry,) = runner.store.data[case.external_id_key]["unended"]
    assert entry["external_id"] is None and entry["token"]
    assert _state_of(emulator, old) != case.cancelled
    runner.clear()
    outcome = runner.run_try()
    assert outcome.state == "success", outcome.error
    assert _state_of(emulator, old) == case.cancelled
    assert _unended(runner, case) == [case.stored_id(old)]
