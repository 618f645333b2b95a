"""The decision: what a try does with its task instance's job. Pure: no I/O, no Airflow.

`decide` maps the stored record, whether it is of this try's clear epoch, and the job's status to a
`Decision` (apache/airflow#71485: decide before waiting); `plan` adds the generation and token that
decision submits with. The mixin reads what these need (the record; the job's status only where
`status_needed` says so) and carries out the plan.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass

from airflow_durable.engine.identity import DurableToken, TryIdentity
from airflow_durable.engine.record import JobRecord

__all__ = [
    "NOT_FOUND",
    "Decision",
    "JobPhase",
    "Plan",
    "UnknownStatus",
    "decide",
    "phase_of",
    "plan",
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


def status_needed(record: JobRecord | None, same_epoch: bool) -> bool:
    """Whether `decide` needs the status of the record's job: only a submitted job of this epoch."""
    return record is not None and record.state == "submitted" and same_epoch


def decide(
    record: JobRecord | None, same_epoch: bool, status: str | None = None, phase: JobPhase | None = None
) -> Decision:
    """What a try does, from the stored record, whether it is of this try's clear epoch, and its job's status.

    ``status`` and ``phase`` are the job's raw status and its classification, read only where
    `status_needed` says so; `NOT_FOUND` means the system no longer knows the job. A known status the
    operator cannot classify raises `UnknownStatus`: the job may still run, so nothing is submitted.
    """
    if record is None:
        return Decision.SUBMIT
    if not same_epoch:
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

    @property
    def submits(self) -> bool:
        return self.token is not None


def plan(decision: Decision, record: JobRecord | None, me: TryIdentity, salt: str) -> Plan:
    """The generation and token of ``decision`` for the try ``me``; ``salt`` is the record lifetime's."""
    if record is None:
        return Plan(decision, 1, me.token(1, salt), salt, None)
    token: DurableToken | None = None
    generation = record.generation
    if decision is Decision.RESUME_SUBMIT:
        token = DurableToken(record.token, record.generation)  # the crashed try's token, resent as is
    elif decision in (Decision.NEW_EPOCH, Decision.TERMINAL_RESUBMIT):
        generation += 1
        token = me.token(generation, salt)
    return Plan(decision, generation, token, salt, record, record.external_id)


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
