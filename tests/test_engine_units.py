"""Pure parts of the engine: the token scheme and the stored record's schema."""

from __future__ import annotations

import re
import uuid

import pytest

from airflow_durable.engine import RECORD_SCHEMA, DurableToken, JobRecord


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
