"""The decision: what a try does with its task instance's job. Pure: no I/O, no Airflow.

`decide` maps the stored record, whether it is of this try's clear epoch, and the job's status to a
`Decision` (apache/airflow#71485: decide before waiting); `plan` adds the generation and token that
decision submits with. The mixin reads what these need (the record; the job's status only where
`status_needed` says so) and carries out the plan.

Without a record, `Plan.look_up` says whether the try first looks its task instance's jobs up in the system
(only with evidence of an earlier lifetime: `TryIdentity.may_have_run_before`), and `sort_found` sorts what
that lookup found: jobs of an older logical job still active (to end), ended ones (ignored), and jobs of
this very record lifetime (another process of this try, which the submit's token reaches).
"""

from __future__ import annotations

import enum
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from airflow_durable.engine.identity import DurableToken, TryIdentity
from airflow_durable.engine.record import JobRecord
from airflow_durable.identity_tags import FoundJob

__all__ = [
    "NOT_FOUND",
    "Decision",
    "FoundJobs",
    "JobPhase",
    "Plan",
    "UnknownStatus",
    "decide",
    "phase_of",
    "plan",
    "sort_found",
    "status_needed",
]

#: The status the engine reports for a job the system no longer knows (404, expired history).
NOT_FOUND = "NOT_FOUND"


class JobPhase(enum.Enum):
    """How the engine classifies a raw external status."""

    ACTIVE = "active"
    SUCCEEDED = "succeeded"
    FAILED = "failed"


class Decision(enum.Enum):
    """What a try does with the job of its task instance; the value is its log tag."""

    SUBMIT = "fresh_submit"
    RESUME_SUBMIT = "resume_submit"
    RECONNECT = "reconnect"
    ALREADY_SUCCEEDED = "already_succeeded"
    TERMINAL_RESUBMIT = "terminal_resubmit"
    NEW_EPOCH = "new_epoch"


class UnknownStatus(ValueError):
    """A job reports a status the operator cannot classify: it may still run, so nothing is submitted."""


def phase_of(
    status: str, active: frozenset[str], succeeded: frozenset[str], failed: frozenset[str]
) -> JobPhase | None:
    """The phase of a raw status from the three status sets; `None` for a status in none of them."""
    if status in active:
        return JobPhase.ACTIVE
    if status in succeeded:
        return JobPhase.SUCCEEDED
    if status in failed:
        return JobPhase.FAILED
    return None


def status_needed(record: JobRecord | None, same_epoch: bool, carry_on: bool = False) -> bool:
    """Whether `decide` needs the status of the record's job: a submitted job of this epoch, or of an older
    one where a kept record means "carry on" (``carry_on``, see `decide`)."""
    return record is not None and record.state == "submitted" and (same_epoch or carry_on)


def decide(
    record: JobRecord | None,
    same_epoch: bool,
    status: str | None = None,
    phase: JobPhase | None = None,
    carry_on: bool = False,
) -> Decision:
    """What a try does, from the stored record, whether it is of this try's clear epoch, and its job's status.

    ``status`` and ``phase`` are the job's raw status and its classification, read only where
    `status_needed` says so; `NOT_FOUND` means the system no longer knows the job. A known status the
    operator cannot classify raises `UnknownStatus`: the job may still run, so nothing is submitted.

    ``carry_on``: this Airflow discards a task's state on a clear unless the user keeps it (3.4's
    ``keep_task_state``), so a record that outlived a clear is one the user kept: its job, still active, is
    reconnected to instead of ending it. A job that finished (or a record ``done``) follows the rule of any
    clear: the task runs again.
    """
    if record is None:
        return Decision.SUBMIT
    if not same_epoch:
        if carry_on and record.state == "submitted" and status != NOT_FOUND and phase is JobPhase.ACTIVE:
            return Decision.RECONNECT  # cleared with its state kept: the user asked to carry on
        return Decision.NEW_EPOCH  # a user's clear: a new logical job begins
    if record.state == "done":
        return Decision.ALREADY_SUCCEEDED  # same epoch: a crash after success, not a clear
    if record.state == "submitting":
        return Decision.RESUME_SUBMIT  # died inside the submit→persist window: same token again
    if status is None:
        raise ValueError("deciding on a submitted job needs its status")
    if status == NOT_FOUND:
        return Decision.TERMINAL_RESUBMIT
    if phase is None:
        raise UnknownStatus(f"job {record.external_id!r} reports status {status!r}, which is unknown")
    return _DECISION_OF_PHASE[phase]


_DECISION_OF_PHASE = {
    JobPhase.ACTIVE: Decision.RECONNECT,
    JobPhase.SUCCEEDED: Decision.ALREADY_SUCCEEDED,
    JobPhase.FAILED: Decision.TERMINAL_RESUBMIT,
}


@dataclass(frozen=True)
class Plan:
    """A decision with what it needs: the generation and token to submit with (``None``: no submit)."""

    decision: Decision
    generation: int
    token: DurableToken | None
    salt: str
    record: JobRecord | None  # the record the decision was taken on (None: there was none)
    external_id: object = None  # the job the record names
    prior_status: str | None = None  # its status when the decision read one
    #: No record, and Airflow shows an earlier lifetime: look the task instance's jobs up before submitting.
    look_up: bool = False

    @property
    def submits(self) -> bool:
        return self.token is not None


def plan(decision: Decision, record: JobRecord | None, me: TryIdentity, salt: str) -> Plan:
    """The generation and token of ``decision`` for the try ``me``; ``salt`` is the record lifetime's."""
    if record is None:
        return Plan(decision, 1, me.token(1, salt), salt, None, look_up=me.may_have_run_before)
    token: DurableToken | None = None
    generation = record.generation
    if decision is Decision.RESUME_SUBMIT:
        token = DurableToken(record.token, record.generation)  # the crashed try's token, resent as is
    elif decision in (Decision.NEW_EPOCH, Decision.TERMINAL_RESUBMIT):
        generation += 1
        token = me.token(generation, salt)
    return Plan(decision, generation, token, salt, record, record.external_id)


@dataclass(frozen=True)
class FoundJobs:
    """What a lookup by identity found, sorted for a try that begins a record lifetime (`sort_found`)."""

    #: Jobs of an older logical job that may still run (active, or a status the operator does not know).
    older_active: tuple[FoundJob, ...] = ()
    #: Jobs that ended: nothing to do.
    ended: tuple[FoundJob, ...] = ()
    #: Jobs carrying a token of this very lifetime: another process of this try submitted them, and this
    #: try's submit reaches them through the same token (the system's idempotency key, or the lookup after
    #: submitting). Never ended here.
    this_lifetime: tuple[FoundJob, ...] = ()


def sort_found(
    found: Sequence[FoundJob], lifetime: str, phase: Callable[[str], JobPhase | None]
) -> FoundJobs:
    """Sort the jobs a lookup by identity found; ``lifetime`` is `DurableToken.lifetime` of the token this
    try submits with, ``phase`` the operator's classification of a raw status.

    The try's record lifetime began with it (its salt names the try), so every job carrying another
    lifetime's token, or none the list shows, belongs to an older logical job.
    """
    older: list[FoundJob] = []
    ended: list[FoundJob] = []
    mine: list[FoundJob] = []
    for job in found:
        if job.token is not None and job.token.rpartition("-g")[0] == lifetime:
            mine.append(job)
        elif phase(job.status) in (JobPhase.SUCCEEDED, JobPhase.FAILED):
            ended.append(job)
        else:
            older.append(job)  # active, or unknown: it may still run
    return FoundJobs(tuple(older), tuple(ended), tuple(mine))


#: Each decision's counter, as the SDK's ResumableJobMixin names them.
METRIC_OF_DECISION = {
    Decision.SUBMIT: "resumable_job.fresh_submit",
    Decision.RESUME_SUBMIT: "resumable_job.fresh_submit",
    Decision.NEW_EPOCH: "resumable_job.fresh_submit",
    Decision.RECONNECT: "resumable_job.reconnect_success",
    Decision.ALREADY_SUCCEEDED: "resumable_job.already_succeeded",
    Decision.TERMINAL_RESUBMIT: "resumable_job.terminal_resubmit",
}

#: Each decision's log line (`task <id> [<tag>]: <message>`).
MESSAGE_OF_DECISION = {
    Decision.SUBMIT: "no tracked job; submitting generation {gen} (token {token})",
    Decision.RESUME_SUBMIT: "a previous try was interrupted while submitting; resubmitting generation "
    "{gen} with the same token {token} so the system returns the job it already started",
    Decision.RECONNECT: "job {id} is still {status}; reconnecting without submitting",
    Decision.ALREADY_SUCCEEDED: "job {id} already succeeded ({status}); returning its result without "
    "submitting",
    Decision.TERMINAL_RESUBMIT: "job {id} ended {status}; submitting generation {gen} (token {token})",
    Decision.NEW_EPOCH: "the task was cleared since job {id} was started ({status}); a new logical job "
    "begins: submitting generation {gen} (token {token})",
}
