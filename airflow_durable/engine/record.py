"""The record: what the engine keeps in Airflow's task-state store for one task instance.

One JSON value per task instance under the operator's ``external_id_key``, shared by all its tries::

    {"schema": "airflow-durable/2", "salt": "9f1c…", "generation": 2, "token": "afd-…-g2",
     "state": "submitting" | "submitted" | "done", "external_id": <id or null>,
     "epoch": 0, "max_tries": 2, "clear_number": 0, "retries": 2, "clear_mark": "5be0…", "owner_try": 3,
     "intent_at": "…", "submitted_at": "…", "deadline": "…",
     "unended": [{"external_id": 1037, "generation": 1, "token": "afd-…-g1", …}], "history": [...],
     "unconverged": true, ...}

* ``submitting`` is written before the external call, ``submitted`` (with the id) before waiting, ``done``
  as the last step of success.
* ``max_tries``, ``clear_number`` and ``retries`` are the writing try's view of its task instance: what the
  clear epoch is decided from (`airflow_durable.engine.identity.same_epoch`), with ``clear_mark`` (a
  digest of the task instance's trace carrier, which every clear of it renews) first where both sides
  have one; ``epoch`` is ``max_tries - retries``, kept for readers of older releases.
* ``unended`` holds every job of an older generation or clear epoch that is not known to have ended (its
  cancel failed, or was only requested): a record never forgets a job that may still run.
* ``unconverged`` (stored only when true): on a system without an idempotency key, the try that wrote this
  ``submitted`` record failed before its converging lookup of the token ended (a read after the submit
  failed), so the token may name more jobs than ``external_id`` (a lost answer's job and its resend's).
  The next try looks the token up before it reconnects. Absent in records of earlier releases: false.

Only this module knows the stored shape. Older schemas are upgraded once, here, when a value is parsed;
every write is in the current schema. A value of a newer schema than this release knows is refused
with `NewerRecordError` (nothing is submitted for it), and fields this release does not know are kept
when it rewrites a record, so a rollback never erases what a newer release stored.

No Airflow import: the ``airflow-durable jobs`` command reads records with this module.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, replace
from typing import Any

__all__ = [
    "CLEARED_FIELD",
    "HISTORY_LIMIT",
    "RECORD_SCHEMA",
    "RECORD_SCHEMA_V1",
    "JobRecord",
    "NewerRecordError",
    "RecordError",
    "parse_id",
    "parse_record",
]

RECORD_SCHEMA = "airflow-durable/2"
#: Records of release 0.1: no salt, no epoch but on ``done``; upgraded by `parse_record`.
RECORD_SCHEMA_V1 = "airflow-durable/1"
_SCHEMA_RE = re.compile(r"airflow-durable/([0-9]+)")
_CURRENT_VERSION = 2
#: Decisions kept in a record's ``history`` (oldest dropped first): enough to explain a task's tries.
HISTORY_LIMIT = 20
STATES = ("submitting", "submitted", "done")
#: Set by Airflow's side (`airflow_durable.plugins.listener`) on the record of a task the user cleared while
#: it ran and whose worker was gone: ``{"try": <the try that ran>, "at": "…"}``.
CLEARED_FIELD = "cleared_while_running"

#: Fields the engine derives on every write; anything else in a stored value is a newer release's.
_OWN_FIELDS = frozenset(
    {
        "schema",
        "generation",
        "token",
        "state",
        "external_id",
        "salt",
        "epoch",
        "max_tries",
        "clear_number",
        "retries",
        "clear_mark",
        "owner_try",
        "intent_at",
        "submitted_at",
        "done_at",
        "deadline",
        "unended",
        "history",
        "unconverged",
        CLEARED_FIELD,
        # written from the operator on every write (`DurableJobEngine._write_record`)
        "operator",
        "system",
        "locator",
    }
)
_INT_FIELDS = ("epoch", "max_tries", "clear_number", "retries", "owner_try")
_TEXT_FIELDS = ("salt", "clear_mark", "intent_at", "submitted_at", "done_at", "deadline")


class RecordError(ValueError):
    """A stored value that is not an airflow-durable record this release can use."""


class NewerRecordError(RecordError):
    """A record written by a newer airflow-durable, in a schema this release does not know."""


@dataclass(frozen=True)
class JobRecord:
    """The engine's record (see the module docstring)."""

    generation: int
    token: str
    state: str  # one of STATES
    external_id: Any = None
    epoch: int | None = None
    schema: str = RECORD_SCHEMA
    salt: str | None = None
    max_tries: int | None = None
    clear_number: int | None = None
    retries: int | None = None
    #: The writing try's `airflow_durable.engine.identity.clear_mark_of` (renewed by every clear of it).
    clear_mark: str | None = None
    owner_try: int | None = None
    intent_at: str | None = None
    submitted_at: str | None = None
    done_at: str | None = None
    deadline: str | None = None
    #: Older jobs not known to have ended: ``{"external_id", "token", "generation", "epoch", "why"}``.
    unended: tuple[dict[str, Any], ...] = field(default=())
    history: tuple[dict[str, Any], ...] = field(default=())
    #: The mark of a clear while the try ran (`CLEARED_FIELD`): the record is of an ended logical job.
    cleared_while_running: Mapping[str, Any] | None = None
    #: The token may name more jobs than ``external_id``: the writing try's converging lookup never ended.
    unconverged: bool = False
    #: Fields of a newer release, written back unchanged.
    extra: Mapping[str, Any] = field(default_factory=dict)
    #: The schema the value was stored in, when `parse_record` upgraded it (never written).
    upgraded_from: str | None = None

    def names(self, job: Any) -> bool:
        """Whether this record's current job is ``job`` (ids compare as text: 42 and "42" are one job)."""
        return self.external_id is not None and job is not None and str(self.external_id) == str(job)

    def keeps(self, job: Any) -> bool:
        """Whether ``job`` is one of the older jobs this record keeps until they are known ended."""
        return any(
            entry.get("external_id") is not None and str(entry["external_id"]) == str(job)
            for entry in self.unended
        )

    def to_json(self) -> dict[str, Any]:
        value: dict[str, Any] = dict(self.extra)
        value.update(
            {
                "schema": RECORD_SCHEMA,
                "generation": self.generation,
                "token": self.token,
                "state": self.state,
                "external_id": self.external_id,
            }
        )
        optional = {
            "salt": self.salt,
            "epoch": self.epoch,
            "max_tries": self.max_tries,
            "clear_number": self.clear_number,
            "retries": self.retries,
            "clear_mark": self.clear_mark,
            "owner_try": self.owner_try,
            "intent_at": self.intent_at,
            "submitted_at": self.submitted_at,
            "done_at": self.done_at,
            "deadline": self.deadline,
        }
        value.update({k: v for k, v in optional.items() if v is not None})
        if self.unended:
            value["unended"] = [dict(entry) for entry in self.unended]
        if self.history:
            value["history"] = [dict(entry) for entry in self.history[-HISTORY_LIMIT:]]
        if self.cleared_while_running is not None:
            value[CLEARED_FIELD] = dict(self.cleared_while_running)
        if self.unconverged:
            value["unconverged"] = True
        return value

    def with_history(self, entry: dict[str, Any]) -> JobRecord:
        return replace(self, history=(*self.history, entry)[-HISTORY_LIMIT:])


def parse_id(value: Any, kind: Any, what: str = "job id") -> Any:
    """A stored or reported id of kind `int` (positive), `str` (non-empty) or `list[str]` (non-empty)."""
    if kind is int:
        if isinstance(value, bool) or not isinstance(value, int) or value <= 0:
            raise RecordError(f"a {what} is a positive integer, got {value!r}")
        return value
    if kind is str:
        if not isinstance(value, str) or not value.strip():
            raise RecordError(f"a {what} is a non-empty string, got {value!r}")
        return value
    if not isinstance(value, (list, tuple)) or not value:
        raise RecordError(f"{what}s are a non-empty list of strings, got {value!r}")
    return [parse_id(item, str, what) for item in value]


def parse_record(raw: Any, parse_id: Callable[[Any], Any]) -> JobRecord:
    """The `JobRecord` stored as ``raw``, in the current schema; `RecordError` says why it is not one.

    ``parse_id`` validates a job id (the operator's `durable_parse_id`); any ``ValueError`` it raises is
    reported as a `RecordError`.
    """
    if not isinstance(raw, dict):
        raise RecordError(f"expected a JSON object with schema {RECORD_SCHEMA!r}, got {type(raw).__name__}")
    schema = raw.get("schema")
    matched = _SCHEMA_RE.fullmatch(schema) if isinstance(schema, str) else None
    if matched is None:
        raise RecordError(f"expected a dict with schema {RECORD_SCHEMA!r}, got schema {schema!r}")
    version = int(matched.group(1))
    if version > _CURRENT_VERSION:
        raise NewerRecordError(
            f"written by a newer airflow-durable (schema {schema!r}; this release reads up to "
            f"{RECORD_SCHEMA!r}): upgrade airflow-durable on every worker and triggerer"
        )
    if version < 1:
        raise RecordError(f"unknown schema {schema!r}")
    try:
        return _parse(raw, parse_id, upgraded_from=schema if version < _CURRENT_VERSION else None)
    except RecordError:
        raise
    except (ValueError, TypeError, KeyError) as err:
        raise RecordError(str(err)) from err


def _parse(raw: dict[str, Any], parse_id: Callable[[Any], Any], upgraded_from: str | None) -> JobRecord:
    generation, token, state = raw.get("generation"), raw.get("token"), raw.get("state")
    if not isinstance(generation, int) or isinstance(generation, bool) or generation < 1:
        raise RecordError(f"bad generation {generation!r}")
    if not isinstance(token, str) or not token:
        raise RecordError(f"bad token {token!r}")
    if state not in STATES:
        raise RecordError(f"bad state {state!r}")
    external_id = raw.get("external_id")
    if state == "submitted" or (state == "done" and external_id is not None):
        external_id = parse_id(external_id)
    ints: dict[str, int | None] = {}
    for name in _INT_FIELDS:
        value = raw.get(name)
        if value is not None and not _is_int(value):
            raise RecordError(f"bad {name} {value!r}")
        ints[name] = value
    texts: dict[str, str | None] = {}
    for name in _TEXT_FIELDS:
        value = raw.get(name)
        if value is not None and not isinstance(value, str):
            raise RecordError(f"bad {name} {value!r}")
        texts[name] = value
    history = raw.get("history") or []
    if not isinstance(history, list):
        raise RecordError(f"bad history {history!r}")
    cleared = raw.get(CLEARED_FIELD)
    if cleared is not None and not isinstance(cleared, dict):
        raise RecordError(f"bad {CLEARED_FIELD} {cleared!r}")
    unconverged = raw.get("unconverged", False)
    if not isinstance(unconverged, bool):
        raise RecordError(f"bad unconverged {unconverged!r}")
    unended = raw.get("unended") or []
    if not isinstance(unended, list) or not all(isinstance(entry, dict) for entry in unended):
        raise RecordError(f"bad unended {unended!r}")
    kept: list[dict[str, Any]] = []
    for entry in unended:
        entry = dict(entry)
        if entry.get("external_id") is not None:
            entry["external_id"] = parse_id(entry["external_id"])
        elif not isinstance(entry.get("token"), str):
            raise RecordError(f"an unended entry names neither a job nor a token: {entry!r}")
        kept.append(entry)
    if upgraded_from == RECORD_SCHEMA_V1:
        # Release 0.1 stamped only `done` records, with the task instance's max_tries in "epoch"; its
        # other records carry no stamp at all, and an unstamped record belongs to the epoch reading it.
        ints.update(
            epoch=None,
            max_tries=ints["epoch"] if state == "done" else None,
            clear_number=None,
            retries=None,
        )
    return JobRecord(
        generation,
        token,
        state,
        external_id,
        epoch=ints["epoch"],
        max_tries=ints["max_tries"],
        clear_number=ints["clear_number"],
        retries=ints["retries"],
        owner_try=ints["owner_try"],
        salt=texts["salt"],
        clear_mark=texts["clear_mark"],
        intent_at=texts["intent_at"],
        submitted_at=texts["submitted_at"],
        done_at=texts["done_at"],
        deadline=texts["deadline"],
        unended=tuple(kept),
        history=tuple(entry for entry in history if isinstance(entry, dict)),
        cleared_while_running=cleared,
        unconverged=unconverged,
        extra={k: v for k, v in raw.items() if k not in _OWN_FIELDS},
        upgraded_from=upgraded_from,
    )


def _is_int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)
