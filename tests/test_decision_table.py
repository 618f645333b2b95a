"""The README's decision table, row by row, against the engine's pure decision function.

`parse_record` turns what the task state store holds into a record (or refuses it), `same_epoch` says
whether it is of the deciding try's clear epoch, and `decide` maps record × epoch × job status to a
decision: no Airflow, no emulator, no I/O, so the whole table runs in milliseconds. The engine calls
exactly these functions (`DurableJobEngine._decide`).
"""

from __future__ import annotations

from typing import Any

import pytest

from airflow_durable.engine import (
    NOT_FOUND,
    RECORD_SCHEMA,
    RECORD_SCHEMA_V1,
    Decision,
    DurableToken,
    JobPhase,
    TryIdentity,
    UnknownStatus,
    decide,
    parse_id,
    parse_record,
    plan,
    same_epoch,
    sort_found,
    status_needed,
)
from airflow_durable.identity_tags import FoundJob


def try_(number: int = 2, max_tries: int = 3, retries: int = 2, clear_number: int = 0) -> TryIdentity:
    return TryIdentity("dag", "run", "task", -1, number, max_tries, retries, clear_number)


# The try deciding: try 2, max_tries 3, retries 2 → its clear epoch began at try 1; never cleared.
EPOCH = try_()
# After a user's clear of try 4: Airflow raised max_tries (try 4 + retries 2), the run's clear_number rose.
CLEARED = try_(number=5, max_tries=6, clear_number=1)


def stored(state: str, external_id: Any = 42, **fields: Any) -> dict[str, Any]:
    """A v2 record as the engine writes it, stamped with `EPOCH`."""
    value = {
        "schema": RECORD_SCHEMA,
        "generation": 1,
        "token": "afd-" + "0" * 40 + "-g1",
        "state": state,
        "external_id": None if state == "submitting" else external_id,
        "salt": "5be0c1d29a3f7e14",
        "epoch": EPOCH.epoch,
        "max_tries": EPOCH.max_tries,
        "clear_number": EPOCH.clear_number,
        "retries": EPOCH.retries,
        "owner_try": 1,
    }
    value.update(fields)
    return value


def parse_run_id(value: Any) -> int:
    return parse_id(value, int, "run id")


def outcome(raw: Any, me: TryIdentity, status: str | None, phase: JobPhase | None) -> Decision:
    record = parse_record(raw, parse_run_id) if raw is not None else None
    same = record is None or same_epoch(record, me)
    if not status_needed(record, same):
        # The engine reads no status here: a row that names one would be describing another path.
        assert status is None, "this row's record needs no status read"
    return decide(record, same, status, phase)


ROWS = [
    # stored record, epoch of the try, job status, its phase, decision
    pytest.param(None, EPOCH, None, None, Decision.SUBMIT, id="none"),
    pytest.param(stored("submitted"), CLEARED, None, None, Decision.NEW_EPOCH, id="older-epoch-submitted"),
    pytest.param(stored("submitting"), CLEARED, None, None, Decision.NEW_EPOCH, id="older-epoch-submitting"),
    pytest.param(stored("done"), CLEARED, None, None, Decision.NEW_EPOCH, id="older-epoch-done"),
    pytest.param(
        stored("done", max_tries=2, epoch=0, clear_number=0),
        try_(max_tries=3, retries=2, clear_number=0),
        None,
        None,
        Decision.NEW_EPOCH,
        id="older-epoch-lowered-retries-and-clear",
    ),
    pytest.param(stored("submitting"), EPOCH, None, None, Decision.RESUME_SUBMIT, id="submitting"),
    pytest.param(stored("submitted"), EPOCH, "RUNNING", JobPhase.ACTIVE, Decision.RECONNECT, id="active"),
    pytest.param(
        stored("submitted"), EPOCH, "SUCCESS", JobPhase.SUCCEEDED, Decision.ALREADY_SUCCEEDED, id="succeeded"
    ),
    pytest.param(
        stored("submitted"), EPOCH, "FAILED", JobPhase.FAILED, Decision.TERMINAL_RESUBMIT, id="failed"
    ),
    pytest.param(
        stored("submitted"), EPOCH, "CANCELLED", JobPhase.FAILED, Decision.TERMINAL_RESUBMIT, id="cancelled"
    ),
    pytest.param(stored("submitted"), EPOCH, NOT_FOUND, None, Decision.TERMINAL_RESUBMIT, id="not-found"),
    pytest.param(stored("done"), EPOCH, None, None, Decision.ALREADY_SUCCEEDED, id="done-same-epoch"),
    pytest.param(
        stored("done"),
        try_(max_tries=3, retries=1, clear_number=0),  # a DAG edit lowered retries between two tries
        None,
        None,
        Decision.ALREADY_SUCCEEDED,
        id="done-same-epoch-after-retries-edit",
    ),
    pytest.param(
        # retries 2 → 1 in the DAG file while try 1's job runs, and the user clears ANOTHER task of the run:
        # max_tries is unchanged (only a clear of this task changes it), so try 2 is a plain retry.
        stored("submitted", max_tries=2, epoch=0, retries=2, clear_number=0),
        try_(number=2, max_tries=2, retries=1, clear_number=1),
        "RUNNING",
        JobPhase.ACTIVE,
        Decision.RECONNECT,
        id="retry-after-retries-edit-and-another-tasks-clear",
    ),
    pytest.param(
        # The same numbers with a finished job: the user cleared this task after lowering retries so that
        # try_number + retries gives back the old max_tries. A done record is taken as cleared.
        stored("done", max_tries=2, epoch=0, retries=2, clear_number=0),
        try_(number=2, max_tries=2, retries=1, clear_number=1),
        None,
        None,
        Decision.NEW_EPOCH,
        id="clear-of-a-finished-task-whose-max-tries-came-back-the-same",
    ),
    pytest.param(
        # Another task of the run cleared while this one retries, retries unchanged: max_tries could not
        # have come back the same from a clear of this task, so it was not cleared.
        stored("done"),
        try_(number=2, max_tries=3, retries=2, clear_number=4),
        None,
        None,
        Decision.ALREADY_SUCCEEDED,
        id="done-and-another-tasks-clear",
    ),
    pytest.param(
        {"schema": RECORD_SCHEMA_V1, "generation": 1, "token": "t", "state": "submitted", "external_id": 7},
        EPOCH,
        "RUNNING",
        JobPhase.ACTIVE,
        Decision.RECONNECT,
        id="v1-submitted-active",
    ),
    pytest.param(
        {"schema": RECORD_SCHEMA_V1, "generation": 1, "token": "t", "state": "done", "epoch": 3},
        EPOCH,
        None,
        None,
        Decision.ALREADY_SUCCEEDED,
        id="v1-done-same-max-tries",
    ),
    pytest.param(
        {"schema": RECORD_SCHEMA_V1, "generation": 1, "token": "t", "state": "done", "epoch": 2},
        EPOCH,
        None,
        None,
        Decision.NEW_EPOCH,
        id="v1-done-older-max-tries",
    ),
]


@pytest.mark.parametrize(("raw", "me", "status", "phase", "expected"), ROWS)
def test_decision_table(raw: Any, me: TryIdentity, status: str | None, phase: JobPhase | None, expected):
    assert outcome(raw, me, status, phase) is expected


def test_an_unknown_status_of_a_submitted_job_submits_nothing():
    with pytest.raises(UnknownStatus, match="'HIBERNATING'"):
        outcome(stored("submitted"), EPOCH, "HIBERNATING", None)


def test_a_submitted_job_is_never_decided_on_without_its_status():
    with pytest.raises(ValueError, match="needs its status"):
        decide(parse_record(stored("submitted"), parse_run_id), True)


MALFORMED = [
    pytest.param("42", id="a-bare-id"),
    pytest.param({"run_id": 42}, id="foreign-dict"),
    pytest.param({**stored("submitted"), "schema": "airflow-durable/9"}, id="newer-schema"),
    pytest.param({**stored("submitted"), "schema": "airflow-durable/two"}, id="unknown-schema"),
    pytest.param({**stored("submitted"), "schema": "other/2"}, id="foreign-schema"),
    pytest.param({**stored("submitted"), "unended": {"external_id": 5}}, id="unended-dict"),
    pytest.param({**stored("submitted"), "unended": [{"why": "x"}]}, id="unended-without-job-or-token"),
    pytest.param({**stored("submitted"), "unended": [{"external_id": "abc"}]}, id="unended-id-wrong-kind"),
    pytest.param({**stored("submitted"), "retries": "2"}, id="retries-text"),
    pytest.param({**stored("submitted"), "state": "running"}, id="unknown-state"),
    pytest.param({**stored("submitted"), "generation": 0}, id="generation-0"),
    pytest.param({**stored("submitted"), "generation": True}, id="generation-bool"),
    pytest.param({**stored("submitted"), "token": ""}, id="empty-token"),
    pytest.param(stored("submitted", external_id="abc"), id="id-of-the-wrong-kind"),
    pytest.param(stored("submitted", external_id=None), id="submitted-without-id"),
    pytest.param({**stored("submitted"), "epoch": "1"}, id="epoch-text"),
    pytest.param({**stored("submitted"), "deadline": 5}, id="deadline-number"),
    pytest.param({**stored("submitted"), "history": {"try": 1}}, id="history-dict"),
    pytest.param({k: v for k, v in stored("submitted").items() if k != "token"}, id="no-token"),
]


@pytest.mark.parametrize("raw", MALFORMED)
def test_a_malformed_record_is_refused_before_any_decision(raw: Any):
    # The engine turns this into DurableStateError naming the key: fail the try, submit nothing.
    with pytest.raises(ValueError):
        parse_record(raw, parse_run_id)


@pytest.mark.parametrize(
    ("record", "me", "needed"),
    [
        (None, EPOCH, False),
        (stored("submitting"), EPOCH, False),
        (stored("done"), EPOCH, False),
        (stored("submitted"), CLEARED, False),  # an older epoch's job is ended, not asked about
        (stored("submitted"), EPOCH, True),
    ],
)
def test_the_status_is_read_only_for_a_submitted_job_of_this_epoch(record, me, needed):
    parsed = parse_record(record, parse_run_id) if record is not None else None
    assert status_needed(parsed, parsed is None or same_epoch(parsed, me)) is needed


# --------------------------------------------------------------------------- without the record (issue 23)
@pytest.mark.parametrize(
    ("me", "looks_up"),
    [
        pytest.param(try_(number=1, max_tries=2, retries=2), False, id="first-try"),
        pytest.param(try_(number=2, max_tries=2, retries=2), True, id="a-retry"),
        # Another task of the run was cleared: this one never ran, so it has no job to look for.
        pytest.param(
            try_(number=1, max_tries=2, retries=2, clear_number=1), False, id="another-task-cleared"
        ),
        pytest.param(try_(number=1, max_tries=3, retries=2), True, id="this-task-cleared"),
        pytest.param(
            TryIdentity("dag", "run", "task", -1, None, None, None, None), False, id="nothing-known"
        ),
    ],
)
def test_without_a_record_only_evidence_of_an_earlier_lifetime_looks_up(me: TryIdentity, looks_up: bool):
    assert me.may_have_run_before is looks_up
    assert plan(Decision.SUBMIT, None, me, "salt").look_up is looks_up


def test_with_a_record_nothing_is_looked_up():
    record = parse_record(stored("submitted"), parse_run_id)
    for decision in (Decision.NEW_EPOCH, Decision.TERMINAL_RESUBMIT, Decision.RESUME_SUBMIT):
        assert not plan(decision, record, CLEARED, "salt").look_up


def test_found_jobs_are_sorted_by_lifetime_then_phase():
    me = try_()
    mine = me.token(1, "this-lifetime")
    older = me.token(1, "an-older-lifetime").text
    phase = {"RUNNING": JobPhase.ACTIVE, "DONE": JobPhase.SUCCEEDED, "FAILED": JobPhase.FAILED}.get
    found = [
        FoundJob(1, "RUNNING", None, older),
        FoundJob(2, "DONE", None, older),
        FoundJob(3, "FAILED", None, None),
        FoundJob(4, "WEIRD", None, None),  # unknown: may still run
        FoundJob(5, "RUNNING", None, me.token(2, "this-lifetime").text),  # another process of this try
    ]
    sorted_ = sort_found(found, mine.lifetime, phase)
    assert [job.id for job in sorted_.older_active] == [1, 4]
    assert [job.id for job in sorted_.ended] == [2, 3]
    assert [job.id for job in sorted_.this_lifetime] == [5]
    assert mine.lifetime != DurableToken(older, 1).lifetime
