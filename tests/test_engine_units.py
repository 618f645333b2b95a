"""Pure parts of the engine: the token scheme and the stored record's schema."""

from __future__ import annotations

import re
import uuid
from dataclasses import replace

import pytest

from airflow_durable.engine import (
    GONE,
    RECORD_SCHEMA,
    RECORD_SCHEMA_V1,
    DurableToken,
    JobRecord,
    Knowledge,
    NewerRecordError,
    Origin,
    Read,
    TryIdentity,
    may_cancel,
    parse_id,
    parse_record,
    same_epoch,
)


def test_token_is_deterministic_per_task_instance_and_generation():
    a = DurableToken.for_task_instance("dag", "run", "task", -1, 1)
    assert a == DurableToken.for_task_instance("dag", "run", "task", -1, 1)
    others = [
        DurableToken.for_task_instance("dag", "run", "task", -1, 2),
        DurableToken.for_task_instance("dag", "run", "task", 0, 1),
        DurableToken.for_task_instance("dag", "run2", "task", -1, 1),
        DurableToken.for_task_instance("dag2", "run", "task", -1, 1),
        DurableToken.for_task_instance("dag", "run", "task2", -1, 1),
    ]
    assert len({t.text for t in others} | {a.text}) == 6


def test_identity_parts_cannot_be_confused_by_concatenation():
    assert (
        DurableToken.for_task_instance("a", "bc", "t", -1, 1).text
        != DurableToken.for_task_instance("ab", "c", "t", -1, 1).text
    )


@pytest.mark.parametrize("generation", [1, 9, 10**12])
def test_token_fits_every_system(generation):
    token = DurableToken.for_task_instance("d" * 250, "r" * 250, "t" * 250, 4096, generation)
    assert len(token.text) <= 64  # Databricks idempotency_token, Redshift/EMR ClientToken
    assert re.fullmatch(r"[A-Za-z0-9._-]+", token.text)  # EMR's clientToken alphabet
    assert uuid.UUID(token.uuid).version == 5  # Snowflake's requestId is a UUID
    assert token.generation == generation


def test_record_round_trip_keeps_schema_and_epoch():
    record = JobRecord(generation=3, token="afd-x-g3", state="done", external_id=17, epoch=6)
    value = record.to_json()
    assert value == {
        "schema": RECORD_SCHEMA,
        "generation": 3,
        "token": "afd-x-g3",
        "state": "done",
        "external_id": 17,
        "epoch": 6,
    }
    assert "epoch" not in JobRecord(1, "t", "submitting").to_json()


# --------------------------------------------------------------------------- the schema, once
def _run_id(value):
    return parse_id(value, int, "run id")


def test_a_v1_record_is_upgraded_once_when_parsed():
    """Release 0.1 wrote ``airflow-durable/1``: no salt, no stamps but the max_tries of a ``done`` record,
    in "epoch". Parsing upgrades it, so nothing after the parse sees schema 1, and the next write is /2."""
    done = parse_record(
        {
            "schema": RECORD_SCHEMA_V1,
            "generation": 2,
            "token": "t",
            "state": "done",
            "external_id": 7,
            "epoch": 5,
        },
        _run_id,
    )
    assert (done.max_tries, done.epoch, done.clear_number, done.upgraded_from) == (
        5,
        None,
        None,
        RECORD_SCHEMA_V1,
    )
    assert done.to_json()["schema"] == RECORD_SCHEMA and "epoch" not in done.to_json()
    running = parse_record(
        {"schema": RECORD_SCHEMA_V1, "generation": 1, "token": "t", "state": "submitted", "external_id": 7},
        _run_id,
    )
    assert running.max_tries is None  # unstamped: it belongs to the epoch that reads it
    me = TryIdentity("d", "r", "t", -1, 2, 5, 2, 0)
    assert same_epoch(running, me)
    assert same_epoch(done, me)  # v1 stamped max_tries 5: unchanged, so no clear since
    assert not same_epoch(done, TryIdentity("d", "r", "t", -1, 4, 7, 2, 1))  # a clear raised max_tries


def test_a_record_of_a_newer_release_is_refused_by_name():
    """What this release does with a record a newer release wrote in a newer schema: refuse it, saying
    so (the engine then fails the try and submits nothing, since that record may track a running job)."""
    with pytest.raises(NewerRecordError, match=r"newer airflow-durable.*airflow-durable/3.*upgrade"):
        parse_record({"schema": "airflow-durable/3", "generation": 1, "token": "t", "state": "done"}, _run_id)


def test_fields_of_a_newer_release_survive_a_rewrite():
    """A newer release may add optional fields to /2 records; an older one that rewrites the record (a
    rollback mid-retries) keeps them, so rolling forward again finds what it stored."""
    raw = {
        "schema": RECORD_SCHEMA,
        "generation": 1,
        "token": "t",
        "state": "submitted",
        "external_id": 7,
        "future_field": {"a": 1},
        "operator": "X",
        "system": "databricks",
    }
    record = parse_record(raw, _run_id)
    assert record.extra == {"future_field": {"a": 1}}
    assert replace(record, state="done").to_json()["future_field"] == {"a": 1}


def test_unended_jobs_round_trip_and_are_recognised():
    raw = {
        "schema": RECORD_SCHEMA,
        "generation": 2,
        "token": "t2",
        "state": "submitted",
        "external_id": 8,
        "unended": [{"external_id": 7, "token": "t1", "generation": 1}, {"token": "t0", "generation": 1}],
    }
    record = parse_record(raw, _run_id)
    assert record.keeps(7) and record.keeps("7") and not record.keeps(8)
    assert record.to_json()["unended"] == raw["unended"]


def test_the_unconverged_mark_round_trips_and_is_absent_from_older_records():
    """``unconverged`` (the token may name more jobs than the record's): stored only when true, read as
    false from a record that lacks it (every earlier release's), and refused when it is not a boolean."""
    base = {"schema": RECORD_SCHEMA, "generation": 1, "token": "t", "state": "submitted", "external_id": 7}
    assert parse_record(base, _run_id).unconverged is False
    assert "unconverged" not in parse_record(base, _run_id).to_json()
    marked = parse_record({**base, "unconverged": True}, _run_id)
    assert marked.unconverged is True and marked.extra == {}
    assert marked.to_json()["unconverged"] is True
    assert "unconverged" not in replace(marked, unconverged=False).to_json()
    with pytest.raises(ValueError, match="bad unconverged"):
        parse_record({**base, "unconverged": "yes"}, _run_id)


# --------------------------------------------------------------------------- ownership, one rule
ME = TryIdentity("d", "r", "t", -1, 3, 4, 2, 0)


def _held(state="submitted", job=11, owner=3, token="tok", **fields):
    return JobRecord(
        1,
        token,
        state,
        job if state != "submitting" else None,
        max_tries=4,
        retries=2,
        clear_number=0,
        owner_try=owner,
        **fields,
    )


@pytest.mark.parametrize(
    ("job", "origin", "knowledge", "allowed", "why"),
    [
        pytest.param(11, Origin.TRACKED, Knowledge(Read.OK, _held()), True, "owns it", id="owner"),
        pytest.param(
            11,
            Origin.TRACKED,
            Knowledge(Read.OK, _held(owner=4)),
            False,
            "try 4 tracks it",
            id="a-newer-try-claimed-it",
        ),
        pytest.param(
            11, Origin.TRACKED, Knowledge(Read.OK, _held(state="done")), False, "already succeeded", id="done"
        ),
        pytest.param(
            12,
            Origin.SUBMITTED,
            Knowledge(Read.OK, _held(state="submitting")),
            True,
            "not yet recorded",
            id="own-job-in-the-submit-persist-window",
        ),
        pytest.param(
            12,
            Origin.RESENT,
            Knowledge(Read.OK, _held(state="submitting", token="other")),
            False,
            "tracks None",
            id="window-of-another-intent",
        ),
        pytest.param(
            12,
            Origin.SUBMITTED,
            Knowledge(Read.OK, _held(job=11)),
            True,
            "duplicate",
            id="own-duplicate-of-the-adopted-job",
        ),
        pytest.param(
            12,
            Origin.ADOPTED,
            Knowledge(Read.OK, _held(job=11)),
            False,
            "tracks 11",
            id="adopted-job-the-record-does-not-name",
        ),
        pytest.param(
            7,
            Origin.TRACKED,
            Knowledge(Read.OK, _held(unended=({"external_id": 7},))),
            True,
            "keeps",
            id="an-older-job-the-record-keeps",
        ),
        pytest.param(
            11,
            Origin.RESENT,
            Knowledge(Read.NOT_FOUND, task_state="running"),
            False,
            "lives on (running)",
            id="superseded-zombie",
        ),
        pytest.param(
            11,
            Origin.SUBMITTED,
            Knowledge(Read.NOT_FOUND, task_state="deferred"),
            False,
            "newer try",
            id="superseded-while-a-newer-try-defers",
        ),
        pytest.param(
            11,
            Origin.TRACKED,
            Knowledge(Read.NOT_FOUND, task_state=GONE),
            True,
            "DAG run",
            id="dag-run-deleted",
        ),
        pytest.param(
            11,
            Origin.TRACKED,
            Knowledge(Read.NOT_FOUND, task_state="restarting"),
            True,
            "cleared while it ran",
            id="cleared-while-running",
        ),
        pytest.param(
            11,
            Origin.TRACKED,
            Knowledge(Read.NOT_FOUND, task_state="failed"),
            True,
            "is failed",
            id="marked-failed",
        ),
        pytest.param(
            11,
            Origin.TRACKED,
            Knowledge(Read.NOT_FOUND),
            False,
            "unknown",
            id="state-unknown",
        ),
        pytest.param(
            11,
            Origin.SUBMITTED,
            Knowledge(Read.NOT_FOUND, task_state=None),
            True,
            "cleared and no try has started since",
            id="cleared-no-try-since",
        ),
        pytest.param(
            11,
            Origin.SUBMITTED,
            Knowledge(Read.FAILED),
            True,
            "no record names it",
            id="store-down-own-unrecorded-job",
        ),
        pytest.param(
            11,
            Origin.RESENT,
            Knowledge(Read.FAILED),
            False,
            "could not be checked",
            id="store-down-resent-token",
        ),
        pytest.param(
            11,
            Origin.SUBMITTED,
            Knowledge(Read.SKIPPED),
            False,
            "interrupted",
            id="sigterm-inside-a-store-call",
        ),
    ],
)
def test_may_cancel(job, origin, knowledge, allowed, why):
    recorded = knowledge.read is not Read.FAILED
    verdict = may_cancel(job, ME, origin=origin, intent_token="tok", recorded=recorded, knowledge=knowledge)
    assert verdict.allowed is allowed and why in verdict.reason, verdict
