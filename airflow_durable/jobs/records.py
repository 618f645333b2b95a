"""The durable record as stored in Airflow's task state store, read without importing the engine.

Both schemas are understood: ``airflow-durable/2`` (system, locator, epoch, history...) and the older
``airflow-durable/1`` (generation, token, state, external_id, epoch on ``done`` only). For a v1 record the
system comes from the key and the locator is the provider's default connection (flagged ``assumed``).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from airflow_durable.catalogue import OPERATORS

__all__ = [
    "DURABLE_OPERATORS",
    "KEY_PREFIX",
    "KEY_SYSTEMS",
    "DurableRecord",
    "RecordError",
    "default_locator",
    "parse_record",
]

KEY_PREFIX = "airflow_durable."

#: task-state-store key → system name (RECORD_V2.md; fixed forever once released), from the catalogue.
KEY_SYSTEMS: dict[str, str] = {o.key: o.system for o in OPERATORS}

#: Class names of the shipped durable operators: the task-instance listing is filtered on them (the
#: REST API filters ``operator`` by exact name); subclasses are added with ``--operator``.
DURABLE_OPERATORS: tuple[str, ...] = tuple(o.durable_class for o in OPERATORS)

#: What a v1 record's locator is assumed to be: the provider operators' default connection ids.
_V1_LOCATORS: dict[str, dict[str, Any]] = {
    "databricks": {"databricks_conn_id": "databricks_default"},
    "snowflake": {"snowflake_conn_id": "snowflake_default"},
    "bigquery": {"gcp_conn_id": "google_cloud_default"},
    "dbt-cloud": {"dbt_cloud_conn_id": "dbt_cloud_default"},
    "redshift": {"aws_conn_id": "aws_default"},
    "batch": {"aws_conn_id": "aws_default"},
    "emr-steps": {"aws_conn_id": "aws_default"},
    "emr-serverless": {"aws_conn_id": "aws_default"},
    "emr-eks": {"aws_conn_id": "aws_default"},
}

_STATES = ("submitting", "submitted", "done")


def default_locator(system: str) -> dict[str, Any]:
    """The provider's default connection of a job kind: ``{conn_field: conn_id}``."""
    return dict(_V1_LOCATORS[system])


class RecordError(ValueError):
    """A state-store value under an ``airflow_durable.*`` key that is not a record we can read."""


@dataclass(frozen=True)
class DurableRecord:
    """One task instance's record, schema-independent."""

    key: str
    schema: str
    system: str
    generation: int
    token: str
    state: str
    external_id: Any
    epoch: int | None = None
    owner_try: int | None = None
    max_tries: int | None = None  # the task instance's max_tries when written (v2): a clear raises it
    operator: str | None = None
    locator: dict[str, Any] = field(default_factory=dict)
    locator_assumed: bool = False
    intent_at: str | None = None
    submitted_at: str | None = None
    done_at: str | None = None
    history: list[dict[str, Any]] = field(default_factory=list)
    #: Older jobs the record keeps until they are known ended (a clear whose cancel failed, duplicates).
    unended: list[dict[str, Any]] = field(default_factory=list)
    raw: dict[str, Any] = field(default_factory=dict)

    @property
    def tracks_job(self) -> bool:
        """The record names a job that may still run: submitted, not yet marked done."""
        return self.state == "submitted" and self.external_id is not None

    def superseded_ids(self) -> list[Any]:
        """Job ids the history names that are not the current one (earlier generations)."""
        seen: list[Any] = []
        for entry in self.history:
            ext = entry.get("external_id")
            if ext is None or _same_id(ext, self.external_id) or any(_same_id(ext, s) for s in seen):
                continue
            seen.append(ext)
        return seen


def _same_id(a: Any, b: Any) -> bool:
    return str(a) == str(b)


def _int_or_none(value: Any, name: str) -> int | None:
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int):
        raise RecordError(f"bad {name} {value!r}")
    return value


def parse_record(key: str, raw: Any) -> DurableRecord:
    """Read one state-store value; `RecordError` says why it is not a record."""
    if not isinstance(raw, dict):
        raise RecordError(f"expected a JSON object, got {type(raw).__name__}")
    schema = raw.get("schema")
    if schema not in ("airflow-durable/1", "airflow-durable/2"):
        raise RecordError(f"unknown schema {schema!r}")
    generation, token, state = raw.get("generation"), raw.get("token"), raw.get("state")
    if not isinstance(generation, int) or isinstance(generation, bool) or generation < 1:
        raise RecordError(f"bad generation {generation!r}")
    if not isinstance(token, str) or not token:
        raise RecordError(f"bad token {token!r}")
    if state not in _STATES:
        raise RecordError(f"bad state {state!r}")
    system = raw.get("system") or KEY_SYSTEMS.get(key)
    if not isinstance(system, str) or not system:
        raise RecordError(f"no system for key {key!r}")
    stored_locator = raw.get("locator")
    assumed = not isinstance(stored_locator, dict)
    locator: dict[str, Any] = (
        dict(stored_locator) if isinstance(stored_locator, dict) else dict(_V1_LOCATORS.get(system, {}))
    )
    stored_history = raw.get("history")
    history: list[Any] = stored_history if isinstance(stored_history, list) else []
    stored_unended = raw.get("unended")
    unended: list[Any] = stored_unended if isinstance(stored_unended, list) else []
    return DurableRecord(
        key=key,
        schema=schema,
        system=system,
        generation=generation,
        token=token,
        state=state,
        external_id=raw.get("external_id"),
        epoch=_int_or_none(raw.get("epoch"), "epoch"),
        owner_try=_int_or_none(raw.get("owner_try"), "owner_try"),
        max_tries=_int_or_none(raw.get("max_tries"), "max_tries"),
        operator=raw.get("operator") if isinstance(raw.get("operator"), str) else None,
        locator=locator,
        locator_assumed=assumed,
        intent_at=raw.get("intent_at"),
        submitted_at=raw.get("submitted_at"),
        done_at=raw.get("done_at"),
        history=[h for h in history if isinstance(h, dict)],
        unended=[u for u in unended if isinstance(u, dict)],
        raw=raw,
    )
