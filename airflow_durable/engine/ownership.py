"""Ownership: who may cancel a job. One rule, `may_cancel`, for every path that cancels.

A logical job is owned by the newest try of its clear epoch (DESIGN §8). A superseded try — a zombie
whose task instance went on without it, a try of an older epoch — must not cancel a job a newer try
waits on; a try may always cancel a job it created itself that nobody else tracks, also inside the
submit→persist window. The rule decides by *which try* an answer is about, not by a state alone:

* The task-state store answers a try only while its task-instance id is current: Airflow gives every
  retry and every clear a new task-instance id (``TaskInstance.prepare_db_for_next_try``) and the store
  is addressed by it. A record read with this try's id therefore speaks for this try, and names the
  job and the try that track it (``owner_try``).
* "Not found" is ambiguous (the record was deleted, or this try was superseded): then Airflow's state
  of the task instance decides. Gone (its DAG run was deleted), ``restarting`` (the user cleared it while
  it ran: a new logical job begins) or ended (marked success/failed, skipped): nothing will wait on the
  job, so it ends. Any other state: a try runs, and it decides.

Pure: the caller gathers the `Knowledge` (one store read, one state query at most) and does the cancel.

The deferrable path's kill has no store to read: a user who ends a deferred task reaches only its trigger
(`airflow_durable.triggers.owned`), which asks Airflow what the task instance is now and which try that
answer is about (`TryAnswer`), and applies `may_cancel_on_kill`: the same rule set (a newer try that may
still run owns the job; an ended or vanished task instance waits on nothing, whichever try ended it), by
the try the answer is about.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass
from typing import Any

from airflow_durable.engine.identity import TryIdentity, same_epoch
from airflow_durable.engine.record import JobRecord

__all__ = [
    "ENDED_STATES",
    "GONE",
    "RESTARTING",
    "Knowledge",
    "Stop",
    "Origin",
    "Read",
    "UNASKED",
    "TryAnswer",
    "Verdict",
    "may_cancel",
    "may_cancel_on_kill",
    "stop_reason",
]

#: Task-instance states from which no try runs again without a user's clear (which starts a new
#: logical job): nothing waits on the job any more.
ENDED_STATES = frozenset({"success", "failed", "skipped", "upstream_failed", "removed"})
#: A task instance the user cleared while it ran: Airflow terminates the try and starts a new one.
RESTARTING = "restarting"
#: `Knowledge.task_state` when Airflow was not asked (or did not answer): nothing is known.
UNASKED = "<not asked>"
#: What `Knowledge.task_state` is when Airflow no longer knows the task instance (DAG run deleted).
GONE = "<gone>"


class Read(enum.Enum):
    """What the task-state store said when this try read its record just now."""

    OK = "ok"  # a record, read with this try's task-instance id
    NOT_FOUND = "not_found"  # no record for this try's task-instance id
    FAILED = "failed"  # the store call failed
    SKIPPED = "skipped"  # not asked: the try was interrupted inside a call to Airflow (SIGTERM)


class Origin(enum.Enum):
    """How the try came to hold the job."""

    SUBMITTED = "submitted"  # its own submit, with the token of its own intent
    RESENT = "resent"  # it resent an earlier try's token: the system may have returned that try's job
    ADOPTED = "adopted"  # found by its token, created by another try (the earliest of a convergence)
    DUPLICATE = "duplicate"  # carries its token, created by another try, not the one it adopted
    TRACKED = "tracked"  # the record's job, which it reconnected to


@dataclass(frozen=True)
class Knowledge:
    read: Read
    record: JobRecord | None = None  # with Read.OK
    #: Airflow's state of the task instance, asked when the record was not found or could not be read, or
    #: names an older try as the job's owner (`GONE`: unknown to Airflow; ``None``: no state, i.e. cleared
    #: and no try started since; `UNASKED`: not asked, or the question failed).
    task_state: str | None = UNASKED


class Stop(enum.Enum):
    """Why a try's ``on_kill`` runs: only a timeout or Airflow's word ends the logical job (DESIGN §8)."""

    TIMEOUT = "timeout"  # its execution_timeout ran out
    TOLD = "told"  # Airflow ended or superseded the try: a user's mark or clear, a newer try, a deleted run
    SHUTDOWN = "shutdown"  # Airflow still shows this try running: its worker, pod or scheduler is stopping
    RESET = "reset"  # a scheduler reset the task instance to run it again (adopt_or_reset_orphaned_tasks)
    UNKNOWN = "unknown"  # Airflow could not be asked, or did not answer

    @property
    def ends_job(self) -> bool:
        """Whether the ownership rules decide the job's end; otherwise the job is left running, recorded.

        No answer leaves it too: a job the try holds is recorded or, inside the submit→persist window, named
        by the recorded token that every system finds again, so leaving it loses no work and leaves nothing
        untracked, while a cancel on a stop that was only a shutdown loses the work for good.
        """
        return self in (Stop.TIMEOUT, Stop.TOLD)


def stop_reason(
    knowledge: Knowledge,
    *,
    timed_out: bool,
    run_clear_number: int | None = None,
    my_clear_number: int | None = None,
    wrote_record: bool = True,
) -> Stop:
    """Why this try is stopping, from what Airflow answered when ``on_kill`` asked.

    ``knowledge``: this try's record read with its own task-instance id (a read that answers proves the id is
    still current: Airflow gives every retry, clear and reset a new one) and the task instance's state, both
    asked now. ``run_clear_number``: the DAG run's clear count now, asked only when the state is none;
    ``my_clear_number``: the count this try began with. Every clear raises it; a scheduler's reset does not.
    ``wrote_record``: whether this try wrote its record yet. Until it has, a read that finds nothing does not
    tell a newer try from no record at all; a superseded try's first write fails anyway, before it submits.
    """
    if timed_out:
        return Stop.TIMEOUT
    state = knowledge.task_state
    if state == UNASKED:
        return Stop.UNKNOWN
    if state == GONE or state == RESTARTING or state in ENDED_STATES:
        return Stop.TOLD
    if state is None:
        if run_clear_number is None or my_clear_number is None:
            return Stop.UNKNOWN
        return Stop.RESET if run_clear_number == my_clear_number else Stop.TOLD
    if state == "running":
        if knowledge.read is Read.OK:
            return Stop.SHUTDOWN
        if knowledge.read is Read.NOT_FOUND:
            # Superseded by a newer try (or the record was deleted): ownership decides. Before this try's
            # first write, no record at all reads the same, and Airflow shows it running.
            return Stop.TOLD if wrote_record else Stop.SHUTDOWN
        return Stop.UNKNOWN
    # Queued, scheduled, up for retry, deferred: another try's state, so this one was superseded.
    return Stop.TOLD


@dataclass(frozen=True)
class Verdict:
    allowed: bool
    reason: str


def may_cancel(
    job: Any,
    me: TryIdentity,
    *,
    origin: Origin,
    intent_token: str | None = None,
    recorded: bool = True,
    knowledge: Knowledge,
    next_try_decides: bool = False,
) -> Verdict:
    """Whether the try ``me`` may cancel ``job``.

    ``intent_token``: the token of the intent this try wrote or resumed (``None``: it submitted nothing).
    ``recorded``: whether this try's write of the job's id went through.
    ``next_try_decides``: Airflow discards a task's state on a clear unless the user keeps it (3.4), and a
    later try finds this system's jobs without a record. A try killed by a clear cannot tell which clear it
    was (the clear gave its task instance a new id: it reads nothing either way), so its job is left to the
    next try: it carries on with the kept record, or finds the job (by its record's token, or by lookup)
    and ends it.
    """
    if knowledge.read is Read.OK and knowledge.record is not None:
        return _by_record(job, me, origin, intent_token, knowledge.record, knowledge.task_state)
    if knowledge.read in (Read.OK, Read.NOT_FOUND):
        if next_try_decides and knowledge.task_state in (RESTARTING, None):
            return Verdict(
                False,
                "the task was cleared: Airflow kept its record only if the user asked to carry on, so the "
                "next try decides (it reconnects to the kept record's job, or finds the job and ends it)",
            )
        return _by_task_state(knowledge.task_state)
    if knowledge.read is Read.FAILED:
        if origin is Origin.SUBMITTED and not recorded:
            return Verdict(True, "this try created it and no record names it (its id could not be stored)")
        if knowledge.task_state == GONE or knowledge.task_state in ENDED_STATES:
            # Whatever the record says, an ended (or deleted) task instance waits on no job: a user's mark.
            return _by_task_state(knowledge.task_state)
        return Verdict(
            False, "its ownership could not be checked (the store failed); the record keeps tracking it"
        )
    return Verdict(
        False,
        "the try was interrupted inside a call to Airflow, so it cannot check who owns the job; the record "
        f"or the token {intent_token} keeps it findable",
    )


def _by_record(
    job: Any,
    me: TryIdentity,
    origin: Origin,
    intent_token: str | None,
    record: JobRecord,
    task_state: str | None = None,
) -> Verdict:
    if record.names(job):
        if record.state == "done":
            return Verdict(False, "it already succeeded")
        if not same_epoch(record, me):
            return Verdict(True, "it belongs to a logical job the user ended (cleared since it started)")
        if record.owner_try is not None and me.try_number is not None and record.owner_try > me.try_number:
            return Verdict(False, f"try {record.owner_try} tracks it now (this is try {me.try_number})")
        if record.owner_try is not None and me.try_number is not None and record.owner_try < me.try_number:
            if task_state == GONE or task_state in ENDED_STATES:
                return _by_task_state(task_state)
            # The record answered this try's own task-instance id, so this is the current try: an older
            # try's job is this try's to carry on (its claim in flight, or its status being read).
            return Verdict(True, f"this try carries on try {record.owner_try}'s job")
        return Verdict(True, "this try owns it")
    if record.keeps(job):
        return Verdict(True, "an older job the record keeps until it is known ended")
    mine = intent_token is not None and record.token == intent_token
    if mine and record.state == "submitting" and origin in (Origin.SUBMITTED, Origin.RESENT, Origin.ADOPTED):
        return Verdict(True, "this try's job, not yet recorded (the submit→persist window)")
    if (
        mine
        and record.owner_try == me.try_number
        and record.state == "submitted"
        and origin in (Origin.SUBMITTED, Origin.DUPLICATE)
    ):
        return Verdict(True, f"a duplicate of this try's job {record.external_id!r} (same token)")
    return Verdict(
        False, f"this task instance tracks {record.external_id!r} now (generation {record.generation})"
    )


def _by_task_state(state: str | None) -> Verdict:
    if state == GONE:
        return Verdict(True, "its task instance is gone with its DAG run: nothing else tracks the job")
    if state == RESTARTING:
        return Verdict(True, "the task was cleared while it ran: a new logical job begins")
    if state in ENDED_STATES:
        return Verdict(True, f"the task instance is {state}: no try waits on the job any more")
    if state == UNASKED:
        return Verdict(False, "its record is not readable by this try and the task's state is unknown")
    if state is None:
        # Cleared, and no try started since (a started one is queued or running): no try of the cleared
        # logical job will wait on the job again, and none of the next one can have reached it (a clear
        # starts a new epoch, whose tokens differ).
        return Verdict(True, "the task was cleared and no try has started since: a new logical job begins")
    return Verdict(
        False,
        f"the record is not readable by this try while its task instance lives on ({state}): a newer try "
        "holds it, or the record was deleted",
    )


@dataclass(frozen=True)
class TryAnswer:
    """What Airflow answered when a killed trigger asked about its task instance.

    ``try_number`` (and ``ti_id``, where known) is the try the state is about, ``None`` where nothing
    said; ``exists=False`` when Airflow knows no such task instance (its DAG run was deleted); ``error``
    when there was no answer.
    """

    state: str | None = None
    try_number: int | None = None
    ti_id: str | None = None
    exists: bool = True
    error: str | None = None


def may_cancel_on_kill(
    my_try: int | None,
    answer: TryAnswer,
    *,
    my_ti_id: str | None = None,
    cancel_on_kill: bool = True,
    clear_keeps: bool = False,
    findable: bool = False,
) -> Verdict:
    """Whether a killed trigger cancels the job its try deferred on (only the owner cancels; a user's
    mark ends the job).

    ``my_try``/``my_ti_id``: the try that deferred (the trigger's own task instance), ``None`` if unknown;
    ``answer``: what Airflow says about the task instance *now*. Unlike `may_cancel`'s "not found",
    ``restarting`` keeps the job here: the trigger is not the try's process, and a try that runs (it
    resumed and was cleared) ends its job itself, through its own ``on_kill`` or its successor's new epoch.
    An ended task instance (marked, skipped, …) cancels whichever try the answer is about: a newer try
    that may still run (deferred, queued, running, up for retry, cleared) owns the job and is left to it,
    but one that ended waits on nothing and may have been marked before it reached this job.

    ``clear_keeps``: this Airflow discards a task's state on a clear unless the user keeps it (3.4), so a
    clear no longer tells what becomes of the job: ``findable`` (a later try finds the system's jobs without
    a record) leaves it to the next try, which reconnects (record kept) or finds and ends it (discarded);
    where the next try cannot find it, this trigger is the last to know the job, so a clear ends it here
    (the record kept or not: a kept one then shows it cancelled and the next try submits anew).
    """

    def cancel(why: str) -> Verdict:
        if not cancel_on_kill:
            return Verdict(False, f"{why}; cancel_on_kill=False leaves the job running (still tracked)")
        return Verdict(True, why)

    if answer.error is not None:
        return Verdict(
            False, f"no answer about the task instance ({answer.error}); its record keeps tracking the job"
        )
    if not answer.exists:
        return cancel("the task instance is gone (its DAG run was deleted): no try will wait on the job")
    state, theirs = answer.state, answer.try_number
    if my_ti_id is not None and answer.ti_id is not None:
        if answer.ti_id == my_ti_id:
            theirs = my_try  # this very try
        elif my_try is not None and theirs is not None and theirs <= my_try:
            return cancel(
                f"the task instance was re-created (another try {theirs} than this trigger's try {my_try}: "
                "its DAG run was deleted and run again): no try will wait on the job"
            )
    known = my_try is not None and theirs is not None
    if state in ENDED_STATES:
        # Whichever try the answer is about, an ended task instance waits on no job (only a user's clear,
        # a new logical job, runs a try again). A newer try that ended was marked, possibly before it
        # reached this job at all: marked before its lookup after 3.4's clear discarded the record, or
        # before it decided on 3.3; its own on_kill ends only what it holds, so this trigger ends its job.
        if my_try is not None and theirs is not None and theirs > my_try:
            return cancel(
                f"the task instance is {state} (its newer try {theirs} ended; this trigger's try is "
                f"{my_try}): a user ended it, nothing waits on the job"
            )
        about = f"try {my_try}" if known else "the task instance (which try is not known)"
        return cancel(f"{about} is {state}: a user ended it, nothing waits on the job")
    cleared_states = (None, RESTARTING, "scheduled", "queued", "running")
    if clear_keeps and not findable and state in cleared_states:
        # Only a user's clear leaves these states on a kill (a trigger that fired is not killed): a new try
        # comes, and without a record (3.4's default clear) nothing else can find this job.
        return cancel(
            f"the task was cleared ({state}); Airflow may have discarded its record and the next try cannot "
            "find this system's jobs without it, so this job ends now"
        )
    if my_try is not None and theirs is not None and theirs > my_try:
        return Verdict(
            False,
            f"superseded: try {theirs} ({state}) is newer than this trigger's try {my_try} and owns the "
            "job (it reconnected to it, or as a new logical job finds and ends it itself)",
        )
    if my_try is not None and theirs is not None and theirs < my_try:
        return cancel(
            f"the task instance was re-created (try {theirs} after this trigger's try {my_try}: its DAG "
            "run was deleted and run again): no try will wait on the job"
        )
    about = f"try {my_try}" if known else "the task instance (which try is not known)"
    if state == "deferred":
        if known:
            return Verdict(
                False,
                f"{about} is still deferred: this trigger was handed to another triggerer, not killed by a "
                "user (apache/airflow#73454)",
            )
        return Verdict(False, f"{about} is deferred: a try waits on a job (this one or a newer one)")
    if state is None and clear_keeps:
        return Verdict(
            False,
            f"{about} was cleared: Airflow kept its record only if the user asked to carry on, so the next "
            "try decides (it reconnects to the kept record's job, or finds the job and ends it)",
        )
    if state is None:
        # The kill came from a user's action and the answer says the task was cleared since, with no try
        # started yet (a started one is queued or running, and would have named itself in its note): a
        # mark then a clear before the answer came (a clear alone kills no trigger while the state is none:
        # Trigger.clean_unused's SQL skips a NULL state). The mark ended this logical job, and so does the
        # clear: its job ends now, not when the next try starts.
        return cancel(f"{about} was cleared: a new logical job begins, so this one's job ends")
    if state == RESTARTING:
        return Verdict(
            False,
            f"{about} was cleared while a try of it ran: that try's on_kill or its successor ends the job",
        )
    if state in ("up_for_retry", "up_for_reschedule"):
        return Verdict(False, f"{about} is {state}: the next try reconnects to the job")
    return Verdict(
        False,
        f"{about} is {state}: it resumed (the trigger fired on the triggerer that took it over) or runs "
        "again, and decides itself",
    )
