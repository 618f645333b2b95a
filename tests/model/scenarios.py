"""Hand-written paths through the model: each finding of issue 22 the model can express, as a sequence of
the same transitions the state machine draws from (so a reader can check that the model sees it), and the
pair of situations a try cannot tell apart on Airflow 3.3.

Each scenario takes a started `World` and returns the key of the violation it exhibited on the engine of
``59ecc40``, before the fixes of issue 22 (``None``: it exhibited none). ``tests/model/test_scenarios.py``
runs them as regression tests: a scenario must show no violation but one ``tests/model/known.py`` still
lists (and while it lists the scenario's key, the scenario must still show it).
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Callable
from typing import Any

from airflow_durable.triggers.owned import TRY_NOTE_KEY
from tests.model import airflow_side as af
from tests.model.world import COMMS_KINDS, Process, TriggerInstance, World

LIMIT = 400


# ---------------------------------------------------------------------------- steering helpers
def start(world: World) -> Process:
    world.note("try_start", "scheduler: the next try starts")
    world.queue()
    process = world.start_try()
    assert process is not None, world.log
    return process


def run_until(world: World, actor_of: Callable[[], Any], done: Callable[[], bool], what: str) -> None:
    for _ in range(LIMIT):
        if done():
            return
        actor = actor_of()
        if actor is None or actor not in world.steppable():
            break
        world.note("advance", f"{actor.name} runs 1 call(s)")
        world.advance(actor, 1)
        world.check()
    assert done(), f"never reached: {what}\n" + "\n".join(world.log)


def until_waiting(world: World, process: Process) -> None:
    """The try has submitted (or reconnected), stored the id, and now polls or has deferred."""

    def done() -> bool:
        if process.exited or process.dead:
            return True
        park = process.main.parked if process.main else None
        return process.writes > 0 and not process.pending_submit and world.is_status_read(park)

    run_until(world, lambda: process.main, done, f"{process.name} waits on its job")


def until_exit(world: World, process: Process) -> None:
    run_until(world, lambda: process.main, lambda: process.exited or process.dead, f"{process.name} exits")


def until_parked(world: World, process: Process, kind: str, after_jobs: int = 0) -> None:
    def done() -> bool:
        park = process.main.parked if process.main else None
        return park is not None and park.kind == kind and len(process.created) >= after_jobs

    run_until(world, lambda: process.main, done, f"{process.name} parked at {kind}")


def until_killer_done(world: World, process: Process) -> None:
    run_until(
        world,
        lambda: process.killer,
        lambda: process.killer is None or process.killer.done or process.deadlocked,
        f"{process.name}'s on_kill returns",
    )


def instance_of(world: World, row_id: int) -> TriggerInstance:
    return next(i for i in reversed(world.instances) if i.row.id == row_id)


def fire(world: World, instance: TriggerInstance) -> None:
    run_until(
        world,
        lambda: instance.actor,
        lambda: instance.actor is not None and instance.actor.done,
        f"{instance.name} fires",
    )


def job_of(world: World, process: Process) -> Any:
    (key,) = process.created
    return world.jobs[key]


def sync_all(world: World) -> None:
    for triggerer in world.triggerers.values():
        world.note("triggerer_sync", f"{triggerer.name}: load triggers")
        world.triggerer_sync(triggerer)


def events_all(world: World) -> None:
    for triggerer in world.triggerers.values():
        world.note("triggerer_events", f"{triggerer.name}: submit events")
        world.triggerer_events(triggerer)


def act(world: World, name: str, text: str, action: Callable[[], Any]) -> Any:
    world.note(name, text)
    result = action()
    world.check()
    return result


# ---------------------------------------------------------------------------- the findings
def clear_of_deferred_reaches_new_deferral(world: World) -> str:
    """Issue 22, finding 1 (needs deferrable, SQLite trigger ids): try 1 defers on job 1; the user clears;
    the scheduler queues the task and ``clean_unused`` deletes trigger row 1 before the triggerer syncs;
    try 2 cancels job 1, submits job 2 and defers, and its new trigger row gets id 1 again; the triggerer
    still runs the old trigger under id 1, which fires about job 1, and ``Trigger.submit_event`` resumes
    try 2 with it."""
    p1 = start(world)
    until_exit(world, p1)
    sync_all(world)
    act(world, "clear", "user clears the task (deferred)", world.clear)
    # clean_unused skips a task instance with no state (SQL's NULL): the row goes once it is queued.
    act(world, "queue", "scheduler queues the task", world.queue)
    act(world, "clean_unused_triggers", "clean unused triggers", world.clean_unused)
    p2 = world.start_try()
    assert p2 is not None, world.log
    until_exit(world, p2)
    assert world.db.ti is not None and world.db.ti.trigger_id == 1, world.log
    sync_all(world)  # requested {1}, running {1}: the old instance stays
    old = next(i for i in world.instances if i.row.serial == 1)
    fire(world, old)
    events_all(world)
    p3 = start(world)
    until_exit(world, p3)
    return "2:foreign-event-failed-try-after-clear-of-deferred"


def retry_taken_for_new_epoch(world: World) -> str:
    """Finding 2 (needs retries=2): try 1 submits and dies; the DAG is edited to retries=1 and the user
    clears another task of the run; try 2 takes the plain retry for a clear and cancels the running job."""
    p1 = start(world)
    until_waiting(world, p1)
    act(world, "worker_dies", f"SIGKILL {p1.name}", lambda: world.kill_process(p1, node_lost=False))
    act(world, "edit_retries", "DAG edit: retries=1", lambda: world.edit_retries(1))
    act(world, "clear_other_task", "user clears another task of the run", world.clear_other)
    p2 = start(world)
    until_waiting(world, p2)  # the engine of 59ecc40 cancelled job 1 on the way and submitted job 2
    return "4:owner-try-decision-cancels-tracked-job"


def _dead_worker_then(world: World, clear: str | None, reset: bool = True) -> Process:
    """Try 1 submits and its node dies; then ``clear`` ("this", "other" or ``None``) and the heartbeat
    timeout; try 2 starts and runs until it waits (or defers)."""
    p1 = start(world)
    until_waiting(world, p1)
    act(
        world,
        "worker_dies",
        f"SIGKILL {p1.name} and its node",
        lambda: world.kill_process(p1, node_lost=True),
    )
    suffix = "" if reset else " with reset_dag_runs=false"
    if clear == "other":
        act(
            world,
            "clear_other_task",
            f"user clears another task of the run{suffix}",
            lambda: world.clear_other(reset_dag_run=reset),
        )
    elif clear == "this":
        act(
            world,
            "clear",
            f"user clears the task (running, its worker dead){suffix}",
            lambda: world.clear(reset_dag_run=reset),
        )
    act(world, "heartbeat_timeout", "scheduler: heartbeat timeout check", world.purge)
    assert world.db.ti is not None and world.db.ti.state == af.UP_FOR_RETRY, world.log
    p2 = start(world)
    until_waiting(world, p2)
    return p2


def _old_job_succeeds_then_try_2_ends(world: World, p2: Process, suffix: str) -> str | None:
    """Try 2 defers, or (sync) every job still running succeeds (the old one first) and try 2 returns."""
    if world.deferrable:
        until_exit(world, p2)
        return f"2:waits-on-older-lj-after-{suffix}" if suffix else None
    for job in sorted(world.jobs.values(), key=lambda j: j.lj):
        if world.active(job):
            act(
                world,
                "job_ends",
                f"job {job.ledger_id} succeeded",
                lambda j=job: world.end_job(j, "succeeded"),
            )
    until_exit(world, p2)
    return f"2:result-of-older-lj-after-{suffix}" if suffix else None


def clear_of_running_with_dead_worker(world: World) -> str | None:
    """Finding 3 (needs retries >= 1): the user clears a running task whose worker is gone; Airflow sets
    RESTARTING (``max_tries`` untouched); the heartbeat timeout makes it ``up_for_retry``; try 2 sees what
    a retry sees (but a new ``ti.context_carrier``) and continues the old job: the cleared task returns
    (or waits on) the old job."""
    p2 = _dead_worker_then(world, "this")
    return _old_job_succeeds_then_try_2_ends(world, p2, "clear-of-running-dead-worker")


def clear_of_running_with_dead_worker_no_reset(world: World) -> str | None:
    """The same, cleared with ``reset_dag_runs=false``: now not even ``context_carrier`` or the run's
    ``clear_number`` changes; try 2 sees exactly what a plain retry sees."""
    p2 = _dead_worker_then(world, "this", reset=False)
    return _old_job_succeeds_then_try_2_ends(world, p2, "clear-of-running-dead-worker-no-run-reset")


def retry_after_other_clear_with_dead_worker(world: World) -> str | None:
    """The twin of finding 3: the same try 1, the same dead worker, but the user cleared *another* task
    of the run and the heartbeat timeout made it ``up_for_retry``: a plain retry, which must reconnect."""
    p2 = _dead_worker_then(world, "other")
    return _old_job_succeeds_then_try_2_ends(world, p2, "")


def plain_retry_with_dead_worker(world: World) -> str | None:
    """The twin of the ``reset_dag_runs=false`` clear: no user action at all, a plain retry."""
    p2 = _dead_worker_then(world, None)
    return _old_job_succeeds_then_try_2_ends(world, p2, "")


def superseded_try_cancels_adopted_job(world: World) -> str:
    """Finding 4: try 1 submits and freezes before it stores the id; the heartbeat timeout gives the task
    a new try (a new task-instance id), which finds try 1's job (its token) and adopts it; try 1 thaws,
    cannot store the id (its id is superseded) and cancels "its untracked" job: the one try 2 waits on."""
    p1 = start(world)
    until_parked(world, p1, "store_set", after_jobs=1)
    act(world, "worker_freezes", f"{p1.name} freezes", lambda: setattr(p1, "frozen", True))
    act(world, "heartbeat_timeout", "scheduler: heartbeat timeout check", world.purge)
    p2 = start(world)
    until_waiting(world, p2)
    act(world, "worker_thaws", f"{p1.name} thaws", lambda: setattr(p1, "frozen", False))
    until_exit(world, p1)
    return "4:non-owner-try-decision-cancels-tracked-job"


def _sigterm_inside_the_id_write(world: World) -> Process:
    p1 = start(world)
    until_parked(world, p1, "store_set", after_jobs=1)
    act(world, "mark", "user marks the task failed (running)", lambda: world.mark(af.FAILED))
    act(
        world,
        "heartbeat",
        f"{p1.name} heartbeats (SIGTERM inside a channel call)",
        lambda: world.heartbeat(p1, in_call=True),
    )
    until_killer_done(world, p1)
    return p1


def sigterm_in_the_window(world: World) -> str:
    """Finding 5: the user marks the task failed while try 1 is between its submit and storing the id;
    the SIGTERM lands inside that store call (the supervisor channel's lock is held). On ``59ecc40``
    ``on_kill`` blocked on the channel, the supervisor SIGKILLed, and the job ran on with no record naming
    it. Now ``on_kill`` does not touch the channel; the interrupted write returns and names the job (a
    marked task's record: ``orphans`` reports it) before the SIGKILL 5 s later."""
    p1 = _sigterm_inside_the_id_write(world)
    if p1.main is not None and p1.main in world.steppable():
        world.note("advance", f"{p1.name} runs 1 call(s): the interrupted write returns")
        world.advance(p1.main, 1)
        world.check()
    act(world, "sigkill_after_sigterm", f"supervisor escalates {p1.name}", lambda: world.escalate(p1))
    return "3:never-recorded-creator-killed-after-on-kill-deadlock"


def sigterm_in_the_window_killed_before_the_write(world: World) -> str:
    """The same, but the SIGKILL lands before the interrupted write returns: ``on_kill`` could not ask who
    owns the job, so it left it to the record's token; only a lookup by that token finds it (the next
    issue; now `REAPER`: the marked task instance runs no try that would find it)."""
    p1 = _sigterm_inside_the_id_write(world)
    act(world, "sigkill_after_sigterm", f"supervisor escalates {p1.name}", lambda: world.escalate(p1))
    return "3:never-recorded-creator-killed-after-on-kill-in-channel-call"


def sigterm_before_persist(world: World) -> str:
    """Finding 5, the other half: the SIGTERM lands just before that store call: ``on_kill`` runs, but the
    record has no id yet, so it cancels nothing and the job outlives the marked task."""
    p1 = start(world)
    until_parked(world, p1, "store_set", after_jobs=1)
    act(world, "mark", "user marks the task failed (running)", lambda: world.mark(af.FAILED))
    act(world, "heartbeat", f"{p1.name} heartbeats (SIGTERM)", lambda: world.heartbeat(p1, in_call=False))
    until_killer_done(world, p1)
    return "5:mark-running-on-kill-left-job"


def lost_id_when_cancel_fails(world: World) -> str:
    """Finding 7: a clear while the job runs; the new try's cancel of the old job fails; its intent
    overwrites the record and the old id is gone."""
    p1 = start(world)
    until_waiting(world, p1)
    act(world, "worker_dies", f"SIGKILL {p1.name}", lambda: world.kill_process(p1, node_lost=False))
    act(world, "clear", "user clears the task (up_for_retry)", world.clear)
    act(world, "service_fault", "the service's next cancel fails", lambda: world.service_fault("cancel"))
    p2 = start(world)
    until_parked(world, p2, "http", after_jobs=1)
    return "5:old-job-dropped-after-failed-cancel"


def mark_failed_while_up_for_retry(world: World) -> None:
    """Finding 10 (the up_for_retry half): marked failed while waiting for its retry, nothing runs: the
    promise today is that the job keeps running, named by the record, so ``airflow-durable orphans``
    reports it (no violation)."""
    p1 = start(world)
    until_waiting(world, p1)
    act(world, "worker_dies", f"SIGKILL {p1.name}", lambda: world.kill_process(p1, node_lost=False))
    act(world, "mark", "user marks the task failed (up_for_retry)", lambda: world.mark(af.FAILED))
    return None


def _slow_answer_after_mark(world: World, note_first: bool) -> str:
    p1 = start(world)
    until_exit(world, p1)
    sync_all(world)
    if note_first:
        instance = next(i for i in world.instances if i.row.serial == 1)
        run_until(
            world,
            lambda: instance.actor,
            lambda: (
                TRY_NOTE_KEY in world.db.xcom
                and instance.actor is not None
                and instance.actor.parked is not None
                and instance.actor.parked.kind not in COMMS_KINDS
            ),
            f"{instance.name} noted its try",
        )
    act(world, "mark", "user marks the task failed (deferred)", lambda: world.mark(af.FAILED))
    act(world, "clean_unused_triggers", "clean unused triggers", world.clean_unused)
    sync_all(world)  # the row is gone: cancel with the user-action message → on_kill → GetTaskStates
    instance = next(i for i in world.instances if i.row.serial == 1)
    assert instance.actor is not None and instance.actor.parked is not None, world.log
    assert instance.actor.parked.kind == "task_states", world.log
    act(world, "clear", "user clears the task (failed)", world.clear)
    fire(world, instance)
    return "5:mark-deferred-trigger-left-job"


def slow_answer_after_mark(world: World) -> str:
    """Finding 11: the trigger has noted its try (``airflow_durable.deferred_try``); the user marks the
    deferred task failed; the trigger's ``on_kill`` asks the task's state, and before the answer comes the
    user clears the task: the answer ("none", about its own try: the note is still its own, no try started)
    says a try will run, and the trigger cancels nothing although the mark ended the logical job."""
    return _slow_answer_after_mark(world, note_first=True)


def slow_answer_after_mark_note_in_flight(world: World) -> str:
    """Finding 11 with the kill landing while the trigger's note (``SetXCom``, a triggerer's first channel
    call: seconds) is still in flight: the supervisor answers in order, so the note is written before the
    runner learns of the cancel, and ``on_kill``'s questions come after it; the rest as above."""
    return _slow_answer_after_mark(world, note_first=False)


# ---------------------------------------------------------------------------- open on the fixed engine
def record_deleted_then_retry(world: World) -> str:
    """N3, fixed, then issue 23: try 1 submits and waits; the Storage tab deletes the record; try 1's
    worker dies. The retry finds no record, and a new record lifetime (a logical job of its own) begins:
    its tokens differ from try 1's (the lifetime salt names the try), so the system never hands the older
    job back (N3 on ``59ecc40``: it did, and the retry returned it). Airflow shows an earlier lifetime
    (``try_number`` 2), so the retry looks the task instance's jobs up, finds try 1's job still running,
    records and cancels it, then submits its own and returns that job's result."""
    p1 = start(world)
    until_waiting(world, p1)
    old = job_of(world, p1)
    act(
        world,
        "delete_record",
        "the Storage tab deletes the record",
        lambda: world.delete_record("storage tab"),
    )
    act(world, "worker_dies", f"SIGKILL {p1.name}", lambda: world.kill_process(p1, node_lost=False))
    p2 = start(world)
    _ends_old_job_then_returns_its_own(world, p2, old)
    return f"2:{'waits-on' if world.deferrable else 'result-of'}-older-lj-after-record-deleted-storage-tab"


def cancelled_by(world: World, job: Any) -> list[str]:
    """The names of the actors whose cancel of ``job`` reached the system (from the model's log of the
    ledger's cancel entries)."""
    return [
        line.split(" cancels job ")[0].strip()
        for line in world.log
        if f" cancels job {job.ledger_id}" in line and "(already ended)" not in line
    ]


def _ends_old_job_then_returns_its_own(world: World, p2: Process, old: Any) -> None:
    """A try of a new logical job that begins without the record of the older one (``p2``): it ends the
    older job ``old`` before it submits, then waits on the one job it submitted, and (sync: at once;
    deferrable: in the resumed try) returns that job's result, never the older job's."""
    until_parked(world, p2, "http", after_jobs=1)  # its own submit went through
    (mine,) = (world.jobs[k] for k in p2.created)
    assert mine.lj > old.lj and mine is not old, world.log
    assert not world.active(old), f"the older job {old.ledger_id} was left running\n" + "\n".join(world.log)
    assert any(n.startswith(f"p{p2.pid}") for n in cancelled_by(world, old)), (
        f"{p2.name} did not cancel the older job {old.ledger_id}\n" + "\n".join(world.log)
    )
    until_waiting(world, p2)
    ended = p2
    if world.deferrable:
        until_exit(world, p2)
        assert p2.outcome == "deferred", world.log
        ti = world.db.ti
        assert ti is not None and ti.trigger_id is not None, world.log
        assert world.jobs_named_in(world.db.triggers[ti.trigger_id].kwargs) == {mine.key}, world.log
    act(world, "job_ends", f"job {mine.ledger_id} succeeded", lambda: world.end_job(mine, "succeeded"))
    if world.deferrable:
        sync_all(world)
        fire(world, instance_of(world, ti.trigger_id))
        events_all(world)
        ended = start(world)
    until_exit(world, ended)
    assert ended.outcome == "success", world.log
    result = ended.main.result if ended.main else None
    returned = world.jobs_named_in({"result": result, "xcoms": [p2.xcoms, ended.xcoms]})
    assert returned == {mine.key}, f"{ended.name} returned {returned}, not its own job\n" + "\n".join(
        world.log
    )
    assert [j.key for j in world.jobs.values() if world.active(j)] == [], world.log


def clear_discarding_state_of_failed_task(world: World) -> None:
    """Issue 23, item 3: Airflow 3.4's default clear of a failed task whose job outlived its worker. Try 1
    submits and records; its node dies; the heartbeat timeout fails the task (no retry left), the record
    still naming the job. The user clears the task and 3.4 deletes its state rows in the same request:
    the next try finds no record, the clear is its evidence of an earlier lifetime, so it looks the task
    instance's jobs up, ends try 1's job and returns its own job's result."""
    p1 = start(world)
    until_waiting(world, p1)
    old = job_of(world, p1)
    act(
        world,
        "worker_dies",
        f"SIGKILL {p1.name} and its node",
        lambda: world.kill_process(p1, node_lost=True),
    )
    act(world, "heartbeat_timeout", "scheduler: heartbeat timeout check", world.purge)
    assert world.db.ti is not None and world.db.ti.state == af.FAILED, world.log
    assert world.active(old) and world.named(old), world.log
    act(
        world,
        "clear_discarding_state",
        "user clears the task (failed), Airflow 3.4's default: its state is discarded",
        world.clear_discarding_state,
    )
    assert not world.db.store, world.log
    p2 = start(world)
    _ends_old_job_then_returns_its_own(world, p2, old)


def _clear_then_mark_before_the_new_try_decides(world: World, discard: bool) -> None:
    p1 = start(world)
    until_exit(world, p1)
    sync_all(world)
    ti = world.db.ti
    assert ti is not None and ti.trigger_id is not None, world.log
    trigger = instance_of(world, ti.trigger_id)
    run_until(
        world,
        lambda: trigger.actor,
        lambda: trigger.events > 0 or world.is_status_read(trigger.actor.parked if trigger.actor else None),
        f"{trigger.name} polls",
    )
    if discard:
        act(
            world,
            "clear_discarding_state",
            "user clears the task (deferred), Airflow 3.4's default: its state is discarded",
            world.clear_discarding_state,
        )
    else:
        act(world, "clear", "user clears the task (deferred)", world.clear)
    p2 = start(world)
    until_parked(world, p2, "store_get")  # its XComs cleared, its record read (and lookup) not made yet
    act(world, "mark", "user marks the task success (running)", lambda: world.mark(af.SUCCESS))
    act(world, "clean_unused_triggers", "clean unused triggers", world.clean_unused)
    sync_all(world)
    fire(world, trigger)
    job = next(iter(world.jobs.values()))
    assert not world.active(job), f"job {job.ledger_id} runs on after the mark\n" + "\n".join(world.log)
    assert any(n.startswith(trigger.name) for n in cancelled_by(world, job)), world.log


def clear_discarding_state_then_mark_before_the_lookup(world: World) -> str:
    """Issue 23 (fixed): try 1 defers and its trigger runs; the user clears the task with its state
    discarded (Airflow 3.4); the new try starts (its XCom clear deletes the trigger's note) and the user
    marks it success before its lookup; the old trigger, cancelled now, finds its note gone: the answer is
    about a newer try, and it ended. The trigger used to leave the job to that try, as if its record still
    named the job; nothing named it, and it ran on. An ended task instance waits on no job whichever try
    ended it, so the trigger ends it."""
    _clear_then_mark_before_the_new_try_decides(world, discard=True)
    return "5:mark-deferred-after-clear-discarding-state-trigger-left-job"


def clear_then_mark_before_the_new_try_decides(world: World) -> str:
    """The same on Airflow 3.3 (the clear keeps the record): the new try, a new epoch, would end the old
    job as it starts, but the mark kills it first. The record still names the job; the trigger used to
    leave it to the opt-in reaper (``5:clear-then-mark-deferred-trigger-left-job``): it ends it now."""
    _clear_then_mark_before_the_new_try_decides(world, discard=False)
    return "5:clear-then-mark-deferred-trigger-left-job"


def clear_takes_away_the_evidence_of_a_recreated_run(world: World) -> str:
    """Model (make explore, EMR steps): try 1 defers (no triggerer has run its trigger yet); the user deletes
    the run and triggers it again with
    the DAG at retries=3, then edits it to retries=0: the re-created run's first try would show max_tries 3
    > retries 0 and look up. A clear before it starts sets ``max_tries = try_number + retries`` = 0, so the
    try shows no earlier lifetime and, by design, makes no lookup. The model kept expecting that lookup and
    named the old run's job ``missed-by-lookup``; it is the reaper's (a re-created run's first try)."""
    p1 = start(world)
    until_exit(world, p1)  # deferred; no triggerer has loaded its trigger yet
    old = job_of(world, p1)
    act(world, "delete_run", "user deletes the DAG run", world.delete_run)
    act(world, "edit_retries", "DAG edit: retries=3", lambda: world.edit_retries(3))
    act(world, "create_run", "user triggers the run again (same run_id)", world.create_run)
    act(world, "edit_retries", "DAG edit: retries=0", lambda: world.edit_retries(0))
    act(
        world,
        "clear_discarding_state",
        "user clears the task (none), Airflow 3.4's default: its state is discarded",
        lambda: world.clear_discarding_state(reset_dag_run=False),
    )
    p2 = start(world)
    until_waiting(world, p2)
    assert world.active(old) and not world.named(old), world.log
    return "3:unnamed-by-run-recreated-nobody-held-it"


def mark_after_a_resend_made_a_duplicate(world: World) -> None:
    """make explore, Batch (fixed): the service takes try 1's submission but its answer is lost; the try
    resends its token (no idempotency key: a second job), finds both by the token and adopts the earliest.
    The user marks the task success before the id write; the SIGTERM's on_kill cancelled the job the try
    held but not the resend's, which only the main thread knew, and the supervisor's SIGKILL may come
    before the main thread ends it. on_kill now ends the try's duplicates too. With an idempotency key
    (Databricks) the resend hands back the same job."""
    act(
        world,
        "service_fault",
        "the service takes the next submission but its answer is lost",
        lambda: world.service_fault("submit"),
    )
    # The try looks its token up before resending it: the list must lag for the resend to make a second job.
    world.emulator.list_lag_reads = 1
    p1 = start(world)
    if world.case.id != "batch":  # an idempotency key: the resend hands the job back
        run_until(
            world,
            lambda: p1.main,
            lambda: bool(p1.created) and world.named(job_of(world, p1)),
            "the id written",
        )
    else:
        until_parked(world, p1, "store_set", after_jobs=2)  # the id write, after the converging lookup
    act(world, "mark", "user marks the task success (running)", lambda: world.mark(af.SUCCESS))
    act(world, "heartbeat", f"{p1.name} heartbeats (SIGTERM)", lambda: world.heartbeat(p1, in_call=False))
    until_killer_done(world, p1)
    assert all(not world.active(world.jobs[key]) for key in p1.created), world.log


def _start_with_a_lost_answer(world: World) -> Process | None:
    """The service takes try 1's submission but its answer is lost, and try 1 starts. ``None`` where an
    idempotency key makes the resend hand the job back (one job: nothing for these scenarios to show)."""
    act(
        world,
        "service_fault",
        "the service takes the next submission but its answer is lost",
        lambda: world.service_fault("submit"),
    )
    # The try looks its token up before resending it: the list must lag for the resend to make a second job.
    world.emulator.list_lag_reads = 1
    p1 = start(world)
    return p1 if world.case.id == "batch" else None


def _retry_after_a_resend_and_a_failed_job(world: World, failed: int) -> None:
    """Batch: the service takes try 1's submission but its answer is lost; the try resends (a second job)
    and dies before its id write; job ``failed`` (0: the earliest, 1: the resend's) fails. The retry finds
    both by the token: it keeps the earliest while it runs, else submits the next generation, and in
    either case leaves no other job with the token running."""
    p1 = _start_with_a_lost_answer(world)
    if p1 is None:
        return
    until_parked(world, p1, "store_set", after_jobs=2)
    jobs = [world.jobs[key] for key in world.jobs if key in p1.created]  # in the order the service made them
    act(
        world,
        "worker_dies",
        f"SIGKILL {p1.name} and its node",
        lambda: world.kill_process(p1, node_lost=True),
    )
    act(
        world,
        "job_ends",
        f"job {jobs[failed].ledger_id} fails",
        lambda: world.end_job(jobs[failed], "failed"),
    )
    act(world, "heartbeat_timeout", "scheduler: heartbeat timeout check", world.purge)
    p2 = start(world)
    until_waiting(world, p2)
    assert not world.active(jobs[1]), world.log
    assert world.active(jobs[0]) == (failed == 1), world.log


def retry_finds_the_resent_token_s_first_job_failed(world: World) -> None:
    _retry_after_a_resend_and_a_failed_job(world, failed=0)


def retry_finds_the_resent_token_s_second_job_failed(world: World) -> None:
    _retry_after_a_resend_and_a_failed_job(world, failed=1)


def retry_resends_into_a_lagging_list(world: World) -> None:
    """Batch with an eventually consistent list (each job left out of its first list answer): try 1's
    submission is taken but its answer lost, its lookup before the resend misses the job, it resends (a
    second job) and dies before its converging lookup; the
    first job fails. Try 2's lookup by the token sees nothing yet, so it resends (a third job); the
    converging lookup after it shows the first two: the earliest has ended, so the try submits the next
    generation, and must first end the token's other jobs (it used to drop them, running, named by
    nothing)."""
    p1 = _start_with_a_lost_answer(world)
    if p1 is None:
        return
    world.emulator.list_lag_reads = 1
    until_parked(world, p1, "xcom_set", after_jobs=2)  # before its converging lookup
    jobs = [world.jobs[key] for key in world.jobs if key in p1.created]  # in the order the service made them
    act(
        world,
        "worker_dies",
        f"SIGKILL {p1.name} and its node",
        lambda: world.kill_process(p1, node_lost=True),
    )
    act(world, "job_ends", f"job {jobs[0].ledger_id} fails", lambda: world.end_job(jobs[0], "failed"))
    act(world, "heartbeat_timeout", "scheduler: heartbeat timeout check", world.purge)
    # Try 1's lookup before its resend read the list once; at try 2's first lookup the list still lags for
    # both jobs (as a list lagging by time would, try 2 coming right after).
    world.emulator._list_reads.clear()
    p2 = start(world)
    until_waiting(world, p2)
    # The resend's; the last one made is the next generation's.
    others = [world.jobs[key] for key in world.jobs if key in p2.created][:-1]
    assert not any(world.active(job) for job in (jobs[1], *others)), world.log


def _zombie_submits_after_its_retry_recorded(world: World, sigterm: bool) -> None:
    """make explore, EMR steps (fixed): try 1 freezes inside its submit; the heartbeat timeout gives try 2,
    which resends the intent's token, makes its job and records it. Try 1 thaws, is told to stop, and its
    submit lands: on a system without an idempotency key a second job with the same token. The zombie may
    not cancel a job a newer try may own (finding 4), but every converging try keeps the token's earliest
    job, so a later one its own submit made is nobody's: it cancels that one. With an idempotency key the
    submit hands back try 2's job, which it leaves alone."""
    p1 = start(world)

    def at_the_submit() -> bool:
        park = p1.main.parked if p1.main else None
        return (
            park is not None
            and park.kind == "http"
            and any(op in park.detail for op in world.case.submit_operations)
        )

    run_until(world, lambda: p1.main, at_the_submit, f"{p1.name} about to submit")
    act(world, "worker_freezes", f"{p1.name} freezes", lambda: setattr(p1, "frozen", True))
    act(world, "heartbeat_timeout", "scheduler: heartbeat timeout check", world.purge)
    p2 = start(world)
    until_waiting(world, p2)
    kept = job_of(world, p2)
    act(world, "worker_thaws", f"{p1.name} thaws", lambda: setattr(p1, "frozen", False))
    if sigterm:
        act(world, "heartbeat", f"{p1.name} heartbeats (SIGTERM)", lambda: world.heartbeat(p1, in_call=False))
        until_killer_done(world, p1)
    until_exit(world, p1)
    assert world.active(kept), world.log
    assert all(not world.active(world.jobs[key]) for key in p1.created), world.log


def zombie_submits_after_its_retry_recorded(world: World) -> None:
    _zombie_submits_after_its_retry_recorded(world, sigterm=True)


def zombie_submits_after_its_retry_recorded_unwarned(world: World) -> None:
    """The same before any heartbeat tells try 1 to stop: it converges on the token's jobs, holds the
    earliest (try 2's), cannot write the id (superseded), leaves that job to try 2 and cancels its own."""
    _zombie_submits_after_its_retry_recorded(world, sigterm=False)


def _reconnected(world: World, p1: Process, p2: Process) -> None:
    """Try 2 waits on try 1's job, uncancelled, and made none of its own: one job for the logical job."""
    job = job_of(world, p1)
    assert world.active(job) and not cancelled_by(world, job), world.log
    assert not p2.created and job.key in p2.knows, world.log


def worker_shutdown_then_the_retry_reconnects(world: World) -> str:
    """DESIGN §8, "Stopped is not cancelled" (issue 30): try 1 waits on its job; its worker shuts down
    gracefully (the supervisor forwards SIGTERM while Airflow shows the try running); on_kill returns; the
    grace ends with a SIGKILL; the heartbeat timeout retries the task instance. Try 2 reconnects to the job.
    Before f6f3914 on_kill cancelled it and try 2 submitted a second one."""
    p1 = start(world)
    until_waiting(world, p1)
    act(world, "worker_shutdown", f"{p1.name}'s worker shuts down", lambda: world.worker_shutdown(p1))
    until_killer_done(world, p1)
    act(world, "grace_expires", "the grace period ends", lambda: world.grace_expires(p1))
    act(world, "heartbeat_timeout", "scheduler: heartbeat timeout check", world.purge)
    assert world.db.ti is not None and world.db.ti.state == af.UP_FOR_RETRY, world.log
    p2 = start(world)
    until_waiting(world, p2)
    _reconnected(world, p1, p2)
    return "4:shutdown-on-kill-cancels-tracked-job"


def scheduler_reset_then_the_new_try_reconnects(world: World) -> str:
    """The same with a LocalExecutor scheduler restart and no retries: the SIGTERM's on_kill asks Airflow
    only after the new scheduler reset the task instance (new id, no state, the same clear_number), so it
    leaves the job; the reset's new try (try 2, whatever its retries) reconnects. Before f6f3914 on_kill
    cancelled it."""
    p1 = start(world)
    until_waiting(world, p1)
    act(
        world, "scheduler_restart", "the scheduler restarts (local)", lambda: world.scheduler_restart("local")
    )
    assert p1.sigterm and p1.killer is not None and not p1.killer.done, world.log
    act(world, "reset_orphans", "new scheduler: adopt_or_reset_orphaned_tasks", world.reset_orphans)
    until_killer_done(world, p1)
    act(world, "grace_expires", "the grace period ends", lambda: world.grace_expires(p1))
    assert world.db.ti is not None and world.db.ti.state == af.NONE, world.log
    p2 = start(world)
    assert p2.try_number == 2 and not p2.should_retry, world.log
    until_waiting(world, p2)
    _reconnected(world, p1, p2)
    return "4:reset-on-kill-cancels-tracked-job"


def shutdown_in_the_window_on_the_last_try(world: World) -> str:
    """A shutdown between the submit and the id write of a try with no retry left: on_kill leaves the job
    (it cannot know whether a scheduler's reset will run the task again), the grace ends before the write,
    and the heartbeat timeout fails the task instance. The job is the reaper's, named by the record's token
    only (make explore, dbt Cloud)."""
    p1 = start(world)
    until_parked(world, p1, "store_set", after_jobs=1)
    job = job_of(world, p1)
    act(world, "worker_shutdown", f"{p1.name}'s worker shuts down", lambda: world.worker_shutdown(p1))
    until_killer_done(world, p1)
    act(world, "grace_expires", "the grace period ends", lambda: world.grace_expires(p1))
    act(world, "heartbeat_timeout", "scheduler: heartbeat timeout check", world.purge)
    assert world.db.ti is not None and world.db.ti.state == af.FAILED, world.log
    assert world.active(job) and not cancelled_by(world, job), world.log
    return "3:never-recorded-creator-shutdown-killed"


def shutdown_before_the_first_write(world: World) -> None:
    """make explore, dbt Cloud (fixed): try 1's worker shuts down before the try wrote anything; on_kill
    finds no record under the try's id while Airflow shows it running. Before its first write that does not
    tell a newer try from no record at all: the try goes on (invariant 4 fails it if it fails 'told to
    stop')."""
    p1 = start(world)
    act(world, "worker_shutdown", f"{p1.name}'s worker shuts down", lambda: world.worker_shutdown(p1))
    until_killer_done(world, p1)
    until_parked(world, p1, "store_set", after_jobs=1)  # it went on: submitted, and records the job's id
    job = job_of(world, p1)
    assert world.active(job) and not cancelled_by(world, job), world.log


def mark_before_the_retry_holds_the_job(world: World) -> None:
    """make explore, EMR steps (fixed): try 1 submits, records its job and fails at a status read; the
    retry reads the record and, while it decides (its status read of the job), the user marks the task
    failed. The SIGTERM's on_kill holds no job yet; the main thread used to reconnect and wait on the job
    after the kill. It now ends the job it decided on (the ownership rules allow: the task ended) and
    does not wait."""
    p1 = start(world)
    until_waiting(world, p1)
    job = job_of(world, p1)
    act(world, "service_fault", "the service's next status read fails", lambda: world.service_fault("status"))
    until_exit(world, p1)
    assert world.active(job), world.log
    p2 = start(world)
    until_parked(world, p2, "http")  # deciding: the status read of the recorded job
    act(world, "mark", "user marks the task failed (running)", lambda: world.mark(af.FAILED))
    act(world, "heartbeat", f"{p2.name} heartbeats (SIGTERM)", lambda: world.heartbeat(p2, in_call=False))
    until_killer_done(world, p2)
    until_exit(world, p2)
    assert not world.active(job), world.log


def killed_between_the_id_write_and_the_duplicate_cancel(world: World) -> None:
    """make explore, dbt Cloud (fixed): a lost answer, the resend makes a second job, the converging lookup
    keeps the earliest and the try writes its id; the worker dies before it cancels the resend's job. The
    record now says the token was not converged, so the retry looks it up and ends the other job before it
    reconnects. With an idempotency key the resend hands the job back: one job."""
    act(
        world,
        "service_fault",
        "the service takes the next submission but its answer is lost",
        lambda: world.service_fault("submit"),
    )
    # The try looks its token up before resending it: the list must lag for the resend to make a second job.
    world.emulator.list_lag_reads = 1
    p1 = start(world)
    if world.case.id != "batch":
        return
    until_parked(world, p1, "store_set", after_jobs=2)  # the id write
    first, second = [world.jobs[key] for key in world.jobs if key in p1.created]
    run_until(world, lambda: p1.main, lambda: world.named(first), "the id written")
    act(
        world,
        "worker_dies",
        f"SIGKILL {p1.name} and its node",
        lambda: world.kill_process(p1, node_lost=True),
    )
    act(world, "heartbeat_timeout", "scheduler: heartbeat timeout check", world.purge)
    p2 = start(world)
    until_waiting(world, p2)
    assert world.active(first) and not world.active(second), world.log


def mark_then_clear_before_sigterm(world: World) -> str | None:
    """N4: the user marks the running task success, then clears it before the try's next heartbeat; the
    SIGTERM's on_kill cannot read its record (its id is superseded). Airflow answers that the task has no
    state (cleared, no try started since), so on_kill cancels the job (fixed: it used to leave the job to
    the try to come)."""
    p1 = start(world)
    until_waiting(world, p1)
    act(world, "mark", "user marks the task success (running)", lambda: world.mark(af.SUCCESS))
    act(world, "clear", "user clears the task (success)", world.clear)
    act(world, "heartbeat", f"{p1.name} heartbeats (SIGTERM)", lambda: world.heartbeat(p1, in_call=False))
    until_killer_done(world, p1)
    return None


def mark_then_clear_then_a_new_try_before_sigterm(world: World) -> str:
    """N4's remaining case, a limit of Airflow 3.3: as above, but the clear's new try is already running
    when the SIGTERM's on_kill asks: "running" is what a zombie's retry that reconnected by its token
    shows too, so on_kill leaves the job to that try, which ends it as it starts (a new epoch)."""
    p1 = start(world)
    until_waiting(world, p1)
    act(world, "mark", "user marks the task success (running)", lambda: world.mark(af.SUCCESS))
    act(world, "clear", "user clears the task (success)", world.clear)
    start(world)
    act(world, "heartbeat", f"{p1.name} heartbeats (SIGTERM)", lambda: world.heartbeat(p1, in_call=False))
    until_killer_done(world, p1)
    return "5:mark-then-clear-running-on-kill-left-job"


def sigtermed_try_submits(world: World) -> str:
    """N5 (engine, open): the user clears the running task after its intent write, before its submit; the
    heartbeat's SIGTERM runs on_kill (nothing to cancel yet); the user clears again and the new epoch's try
    starts; the old try's main thread goes on, submits, cannot write the id (its task-instance id is
    superseded), sees a try running and, as a superseded try, does not cancel: the job ran untracked.
    Since issue 23 the new epoch's try, whose record keeps the old intent's token, finds that job and
    ends it before it submits its own."""
    p1 = start(world)
    until_parked(world, p1, "http")
    act(world, "clear", "user clears the task (running)", world.clear)
    act(world, "heartbeat", f"{p1.name} heartbeats (SIGTERM)", lambda: world.heartbeat(p1, in_call=False))
    until_killer_done(world, p1)
    act(world, "clear", "user clears the task again (restarting)", world.clear)
    p2 = start(world)  # the new epoch's try is running (parked at its first store read) when p1 asks
    until_exit(world, p1)
    # Issue 23: the record p2 reads is p1's intent, of an older epoch, with the token p1 submitted with;
    # p2 finds the job by it (the token lookup, else the identity lookup) and ends it before submitting.
    _ends_old_job_then_returns_its_own(world, p2, job_of(world, p1))
    return "3:never-recorded-creator-sigtermed"


def status_read_fails_before_the_id_write(world: World) -> str | None:
    """N6 (engine, open; lookup systems): the next status read fails; try 1 submits, looks its token up
    to converge, and the status read that follows fails: it ends failed before writing the id it holds
    (Batch). With an idempotency key (Databricks) the id is written right after the submit: no violation."""
    act(world, "service_fault", "the service's next status read fails", lambda: world.service_fault("status"))
    p1 = start(world)
    until_exit(world, p1)
    return "3:never-recorded-creator-ended-failed" if world.case.id == "batch" else None


def new_epoch_submits_after_failed_status_read(world: World) -> str:
    """N7 (engine, open): try 1 submits and records; its worker freezes; the next status read fails; the
    user clears the running task; the heartbeat timeout fails it (the listener marks the record); try 2
    cannot read the old job's status, keeps it in the record without cancelling it, and submits."""
    p1 = start(world)
    until_waiting(world, p1)
    act(world, "worker_freezes", f"{p1.name} freezes", lambda: setattr(p1, "frozen", True))
    act(world, "service_fault", "the service's next status read fails", lambda: world.service_fault("status"))
    act(world, "clear", "user clears the task (running, its worker frozen)", world.clear)
    act(world, "heartbeat_timeout", "scheduler: heartbeat timeout check", world.purge)
    p2 = start(world)
    until_parked(world, p2, "http", after_jobs=1)
    return "5:old-job-left-running-named-after-clear-of-running-frozen-worker"


def clear_after_retries_lowered(world: World) -> str:
    """N8 (engine, open): try 1 submits and defers; the DAG file lowers retries from 2 to 1; the user
    clears the deferred task: max_tries stays 2 (try_number + retries), clear_number rises (as for a clear
    of another task), and try 2 takes the clear for a retry: it defers on the old job."""
    p1 = start(world)
    until_exit(world, p1)
    act(world, "edit_retries", "DAG edit: retries=1", lambda: world.edit_retries(1))
    act(world, "clear", "user clears the task (deferred)", world.clear)
    p2 = start(world)
    until_exit(world, p2)
    return "2:waits-on-older-lj-after-clear-of-deferred"


def lost_answer_resent_then_a_read_fails(world: World) -> str | None:
    """Issue 22's convergence where no idempotency key exists (engine finding (a)): the service takes try
    1's submission and its answer is lost; try 1 resends the token (on EMR steps and Batch: a second job)
    and a read between that submit and the id write fails (EMR steps: the converging ListSteps; Batch: the
    DescribeJobs after ListJobs). Try 1 records the job it holds, marked unconverged (its token may name
    more jobs), and fails; try 2 looks the token up before it reconnects and cancels the other job. With an
    idempotency key (Databricks) the resend returns the one job: nothing to converge."""
    act(
        world,
        "service_fault",
        "the service's next submission takes effect, its answer is lost",
        lambda: world.service_fault("submit"),
    )
    p1 = start(world)
    until_parked(world, p1, "http", after_jobs=1)  # the first submit made its job; the resend is next
    act(world, "service_fault", "the service's next status read fails", lambda: world.service_fault("status"))
    until_exit(world, p1)
    p2 = start(world)
    until_waiting(world, p2)
    live = [job for job in world.jobs.values() if world.active(job)]
    assert len(live) <= 1, f"{len(live)} jobs of one logical job run\n" + "\n".join(world.log)
    converges = bool(getattr(world._declared, "durable_converge_after_submit", False))
    return (
        "3:missed-by-lookup-never-recorded-duplicate-answer-lost-creator-ended-failed" if converges else None
    )


def mark_while_a_lost_answer_is_resent(world: World) -> str | None:
    """Engine finding (c): the service takes try 1's submission and its answer is lost; the user marks the
    running task success before the try resends the token; the SIGTERM's on_kill has no id to cancel (the
    record holds only the token). A try whose on_kill ran must not submit, not even a resend: it looks its
    token up and cancels what it names (the task instance was marked)."""
    act(
        world,
        "service_fault",
        "the service's next submission takes effect, its answer is lost",
        lambda: world.service_fault("submit"),
    )
    p1 = start(world)
    until_parked(world, p1, "http", after_jobs=1)
    act(world, "mark", "user marks the task success (running)", lambda: world.mark(af.SUCCESS))
    act(world, "heartbeat", f"{p1.name} heartbeats (SIGTERM)", lambda: world.heartbeat(p1, in_call=False))
    until_killer_done(world, p1)
    until_exit(world, p1)
    return "5:mark-running-on-kill-left-job-answer-lost"


def _lost_answer_then_mark_then_clear(world: World) -> Process:
    act(
        world,
        "service_fault",
        "the service's next submission takes effect, its answer is lost",
        lambda: world.service_fault("submit"),
    )
    p1 = start(world)
    until_parked(world, p1, "http", after_jobs=1)
    act(world, "mark", "user marks the task success (running)", lambda: world.mark(af.SUCCESS))
    act(world, "clear", "user clears the task (success)", world.clear)
    return p1


def mark_then_clear_while_a_lost_answer_is_resent(world: World) -> None:
    """Finding (c) after a clear (``5:mark-then-clear-running-on-kill-left-job-answer-lost`` before the fix;
    the key is listed now for the case below, a new try started): as above, and the user clears the marked
    task before the try's next heartbeat. on_kill cannot read its record (its task-instance id is
    superseded); Airflow answers no state (no try started since): a new logical job begins, so on_kill looks
    the token up and ends the lost answer's job, and the main thread ends what its resend made."""
    p1 = _lost_answer_then_mark_then_clear(world)
    act(world, "heartbeat", f"{p1.name} heartbeats (SIGTERM)", lambda: world.heartbeat(p1, in_call=False))
    until_killer_done(world, p1)
    until_exit(world, p1)
    live = [job for job in world.jobs.values() if world.active(job)]
    assert not live, f"jobs {[j.ledger_id for j in live]} run on\n" + "\n".join(world.log)


def mark_then_clear_then_a_new_try_while_a_lost_answer_is_resent(world: World) -> str:
    """The same with the clear's new try already running when the SIGTERM's on_kill asks: "running" is what
    a zombie's retry that reached the job by its token shows too (N4, a limit of Airflow 3.3), so neither
    on_kill nor the stopped main thread ends the jobs of its token; the new epoch's try finds them by the
    older intent's token and ends them before it submits its own."""
    p1 = _lost_answer_then_mark_then_clear(world)
    p2 = start(world)
    act(world, "heartbeat", f"{p1.name} heartbeats (SIGTERM)", lambda: world.heartbeat(p1, in_call=False))
    until_killer_done(world, p1)
    until_exit(world, p1)
    old = [job for job in world.jobs.values() if job.lj < world.lj]
    until_waiting(world, p2)
    live = [job.ledger_id for job in old if world.active(job)]
    assert not live or not world._lookup_ends_jobs(), f"older jobs {live} run on\n" + "\n".join(world.log)
    return "5:mark-then-clear-running-on-kill-left-job-answer-lost"


#: name → (scenario, requirements on the world: deferrable / retries / trigger_ids).
def deferral_timeout_then_retry(world: World) -> str | None:
    """Try 1 (``execution_timeout`` an hour) defers and its trigger polls; the clock passes the deferral's
    timeout (the provider's own wait limit, or the execution deadline the engine caps every deferral at);
    the scheduler times the deferral out (``check_trigger_timeouts``); the resumed try fails with
    ``TaskDeferralTimeout`` and the task is up for retry; the triggerer cancels the trigger with the
    user-action message, past its ``timeout_after`` (``run_trigger``: no ``on_kill``); try 2 starts. If the
    execution deadline ran out, the resumed try ended job 1 and try 2 submits a new one; if the provider's
    limit did, job 1 is left running and try 2 reconnects to it. Found by ``make explore`` on EMR
    Serverless: the provider trigger's own pre-3.3 cancel path (``EmrServerlessStartJobTrigger.run``: no
    user-action message reached it, the task was not deferred) cancelled job 1 under try 2.

    ``world.notes["deferral_timeout"]`` says which limit ran out (``"execution_timeout"``, ``"provider"``)."""
    p1 = start(world)
    until_exit(world, p1)
    ti = world.db.ti
    assert ti is not None and ti.state == af.DEFERRED, "try 1 did not defer\n" + "\n".join(world.log)
    assert ti.trigger_timeout is not None, "the deferral has no timeout\n" + "\n".join(world.log)
    deadline = ti.start_date + world.execution_timeout if world.execution_timeout is not None else None
    world.notes["deferral_timeout"] = (
        "execution_timeout"
        if deadline is not None and ti.trigger_timeout >= deadline - dt.timedelta(seconds=2)
        else "provider"
    )
    sync_all(world)
    (instance,) = [i for i in world.instances if i.row.serial == 1]
    if instance.actor is not None and instance.actor in world.steppable():
        act(world, "advance", f"{instance.name} polls", lambda: world.advance(instance.actor, 2))
    wait = (ti.trigger_timeout - world.now()).total_seconds() + 1
    act(world, "time_passes", f"{wait:.0f} s pass", lambda: world.time_passes(wait))
    timed_out = act(world, "trigger_timeout", "scheduler: the deferral timed out", world.trigger_timeout)
    assert timed_out, "the deferral did not time out\n" + "\n".join(world.log)
    resumed = start(world)
    until_exit(world, resumed)
    assert world.db.ti is not None and world.db.ti.state == af.UP_FOR_RETRY, world.log
    act(world, "clean_unused_triggers", "clean unused triggers", world.clean_unused)
    sync_all(world)
    run_until(
        world,
        lambda: instance.actor,
        lambda: instance.actor is None or instance.actor.done or instance.actor.dead,
        f"{instance.name} ends",
    )
    p2 = start(world)
    until_waiting(world, p2)
    return None


def scheduler_restart_after_the_execution_timeout(world: World) -> str:
    """Try 1 (``execution_timeout`` 10 min) polls its job; an hour passes: SIGALRM, and the main thread's
    ``on_kill`` is about to ask Airflow; then a LocalExecutor scheduler restart forwards SIGTERM, whose
    ``on_kill`` runs first while Airflow still shows the try running. Past the deadline a stop is a timeout
    (``_stop_reason``), so that ``on_kill`` ends the job, as the timeout requires (5): the try fails by its
    timeout whatever the shutdown. ``make explore`` found it on Snowflake; the model counted that cancel as
    a shutdown's until it exempted a timed-out try."""
    p1 = start(world)
    until_waiting(world, p1)
    job = job_of(world, p1)
    act(world, "time_passes", "3600 s pass", lambda: world.time_passes(3600))
    assert p1.timed_out and p1.timed_out_owning, world.log
    act(
        world, "scheduler_restart", "the scheduler restarts (local)", lambda: world.scheduler_restart("local")
    )
    assert p1.stop == "shutdown" and p1.killer is not None, world.log
    until_killer_done(world, p1)
    assert not world.active(job) and cancelled_by(world, job), world.log
    until_exit(world, p1)
    assert p1.outcome == "failed", world.log
    return "4:shutdown-on-kill-cancels-tracked-job"


def scheduler_reset_between_the_timeout_and_its_on_kill(world: World) -> str:
    """The same, but the new scheduler resets the task instance (a new id, no state) before either
    ``on_kill`` asks Airflow: both read "not found" (the try is superseded) and leave the job, which the
    reset's new try, a try of the same logical job, reconnects to. The timed-out try no longer owned the
    job when it could act, so (5) does not hold it to end it; ``make explore`` found it on Snowflake when
    the model judged ownership at the alarm."""
    p1 = start(world)
    until_waiting(world, p1)
    job = job_of(world, p1)
    act(world, "time_passes", "3600 s pass", lambda: world.time_passes(3600))
    assert p1.timed_out and p1.timed_out_owning, world.log
    act(
        world, "scheduler_restart", "the scheduler restarts (local)", lambda: world.scheduler_restart("local")
    )
    act(world, "reset_orphans", "new scheduler: adopt_or_reset_orphaned_tasks", world.reset_orphans)
    until_killer_done(world, p1)
    until_exit(world, p1)
    assert not p1.timed_out_owning and world.active(job) and world.named(job), world.log
    assert world.db.ti is not None and world.db.ti.state == af.NONE, world.log
    p2 = start(world)
    until_waiting(world, p2)
    _reconnected(world, p1, p2)
    return "5:timeout-left-job"


SCENARIOS: dict[str, tuple[Callable[[World], str | None], dict[str, Any]]] = {
    "worker_shutdown_then_the_retry_reconnects": (
        worker_shutdown_then_the_retry_reconnects,
        {"deferrable": False, "retries": 1},
    ),
    "shutdown_before_the_first_write": (shutdown_before_the_first_write, {"deferrable": False, "retries": 1}),
    "shutdown_in_the_window_on_the_last_try": (
        shutdown_in_the_window_on_the_last_try,
        {"deferrable": False, "retries": 0},
    ),
    "scheduler_reset_then_the_new_try_reconnects": (
        scheduler_reset_then_the_new_try_reconnects,
        {"deferrable": False, "retries": 0},
    ),
    "retry_finds_the_resent_token_s_first_job_failed": (
        retry_finds_the_resent_token_s_first_job_failed,
        {"deferrable": False, "retries": 1},
    ),
    "retry_finds_the_resent_token_s_second_job_failed": (
        retry_finds_the_resent_token_s_second_job_failed,
        {"deferrable": False, "retries": 1},
    ),
    "killed_between_the_id_write_and_the_duplicate_cancel": (
        killed_between_the_id_write_and_the_duplicate_cancel,
        {"deferrable": False, "retries": 1},
    ),
    "mark_before_the_retry_holds_the_job": (
        mark_before_the_retry_holds_the_job,
        {"deferrable": False, "retries": 1},
    ),
    "zombie_submits_after_its_retry_recorded": (
        zombie_submits_after_its_retry_recorded,
        {"deferrable": False, "retries": 1},
    ),
    "zombie_submits_after_its_retry_recorded_unwarned": (
        zombie_submits_after_its_retry_recorded_unwarned,
        {"deferrable": False, "retries": 1},
    ),
    "retry_resends_into_a_lagging_list": (
        retry_resends_into_a_lagging_list,
        {"deferrable": False, "retries": 1},
    ),
    "mark_after_a_resend_made_a_duplicate": (
        mark_after_a_resend_made_a_duplicate,
        {"deferrable": False, "retries": 0},
    ),
    "clear_takes_away_the_evidence_of_a_recreated_run": (
        clear_takes_away_the_evidence_of_a_recreated_run,
        {"deferrable": True, "retries": 0},
    ),
    "deferral_timeout_then_retry": (
        deferral_timeout_then_retry,
        {"deferrable": True, "retries": 1, "execution_timeout": 3600.0},
    ),
    "scheduler_restart_after_the_execution_timeout": (
        scheduler_restart_after_the_execution_timeout,
        {"deferrable": False, "retries": 1, "execution_timeout": 600.0},
    ),
    "scheduler_reset_between_the_timeout_and_its_on_kill": (
        scheduler_reset_between_the_timeout_and_its_on_kill,
        {"deferrable": False, "retries": 1, "execution_timeout": 600.0},
    ),
    "clear_of_deferred_reaches_new_deferral": (
        clear_of_deferred_reaches_new_deferral,
        {"deferrable": True, "trigger_ids": "sqlite", "retries": 0},
    ),
    "retry_taken_for_new_epoch": (retry_taken_for_new_epoch, {"retries": 2}),
    "clear_of_running_with_dead_worker": (clear_of_running_with_dead_worker, {"retries": 1}),
    "clear_of_running_with_dead_worker_no_reset": (
        clear_of_running_with_dead_worker_no_reset,
        {"retries": 1},
    ),
    "retry_after_other_clear_with_dead_worker": (retry_after_other_clear_with_dead_worker, {"retries": 1}),
    "plain_retry_with_dead_worker": (plain_retry_with_dead_worker, {"retries": 1}),
    "superseded_try_cancels_adopted_job": (superseded_try_cancels_adopted_job, {"retries": 1}),
    "sigterm_in_the_window": (sigterm_in_the_window, {"retries": 1}),
    "sigterm_in_the_window_killed_before_the_write": (
        sigterm_in_the_window_killed_before_the_write,
        {"retries": 1},
    ),
    "sigterm_before_persist": (sigterm_before_persist, {"retries": 1}),
    "lost_id_when_cancel_fails": (lost_id_when_cancel_fails, {"retries": 1}),
    "mark_failed_while_up_for_retry": (mark_failed_while_up_for_retry, {"retries": 1}),
    "slow_answer_after_mark": (slow_answer_after_mark, {"deferrable": True, "retries": 0}),
    "slow_answer_after_mark_note_in_flight": (
        slow_answer_after_mark_note_in_flight,
        {"deferrable": True, "retries": 0},
    ),
    "record_deleted_then_retry": (record_deleted_then_retry, {"retries": 1}),
    "clear_discarding_state_of_failed_task": (
        clear_discarding_state_of_failed_task,
        {"deferrable": False, "retries": 0},
    ),
    "clear_discarding_state_then_mark_before_the_lookup": (
        clear_discarding_state_then_mark_before_the_lookup,
        {"deferrable": True, "retries": 0},
    ),
    "clear_then_mark_before_the_new_try_decides": (
        clear_then_mark_before_the_new_try_decides,
        {"deferrable": True, "retries": 0},
    ),
    "mark_then_clear_before_sigterm": (mark_then_clear_before_sigterm, {"deferrable": False, "retries": 0}),
    "mark_then_clear_then_a_new_try_before_sigterm": (
        mark_then_clear_then_a_new_try_before_sigterm,
        {"deferrable": False, "retries": 0},
    ),
    "sigtermed_try_submits": (sigtermed_try_submits, {"deferrable": False, "retries": 1}),
    "clear_after_retries_lowered": (clear_after_retries_lowered, {"deferrable": True, "retries": 2}),
    "status_read_fails_before_the_id_write": (
        status_read_fails_before_the_id_write,
        {"deferrable": False, "retries": 0},
    ),
    "new_epoch_submits_after_failed_status_read": (
        new_epoch_submits_after_failed_status_read,
        {"deferrable": False, "retries": 0},
    ),
    "lost_answer_resent_then_a_read_fails": (
        lost_answer_resent_then_a_read_fails,
        {"deferrable": False, "retries": 1},
    ),
    "mark_while_a_lost_answer_is_resent": (
        mark_while_a_lost_answer_is_resent,
        {"deferrable": False, "retries": 0},
    ),
    "mark_then_clear_while_a_lost_answer_is_resent": (
        mark_then_clear_while_a_lost_answer_is_resent,
        {"deferrable": False, "retries": 0},
    ),
    "mark_then_clear_then_a_new_try_while_a_lost_answer_is_resent": (
        mark_then_clear_then_a_new_try_while_a_lost_answer_is_resent,
        {"deferrable": False, "retries": 0},
    ),
}


def relative_view(first: dict[str, Any], later: dict[str, Any]) -> dict[str, Any]:
    """What a later try sees, relative to what try 1 saw: numbers as differences, the rest as
    changed / unchanged (ids and instants differ between any two runs of a scenario)."""
    out: dict[str, Any] = {}
    for key, value in later.items():
        before = first.get(key)
        if isinstance(value, int) and isinstance(before, int) and not isinstance(value, bool):
            out[key] = f"{value - before:+d}"
        elif key in ("task_state_store", "jobs", "ti.context_carrier"):
            out[key] = "unchanged" if value == before else "changed"
        elif key == "ti.id" or key.endswith("_date"):
            out[key] = "unchanged" if value == before else "new"
        else:
            out[key] = value
    return out


def second_try_view(world: World) -> dict[str, Any]:
    first, second = (p for p in world.processes if p.kind == "execute")
    return relative_view(first.view, second.view)
