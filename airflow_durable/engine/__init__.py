"""The durable engine: decide, submit and persist, wait (deferred or polling), complete.

One concern per module, in the order a try applies them:

* `airflow_durable.engine.record`: what is stored in the task-state store, parsing, the schema upgrade;
* `airflow_durable.engine.identity`: the try's identity (taken once), the record lifetime's salt, the
  token, the clear epoch;
* `airflow_durable.engine.decision`: the pure decision;
* `airflow_durable.engine.ownership`: who may cancel a job (`may_cancel`, used by every cancel; its
  deferred twin `may_cancel_on_kill` for the owned trigger);
* `airflow_durable.engine.mixin`: `DurableJobEngine`, the mixin that does the I/O.

The rules, in that order: ``docs/how-it-works.md``. ``record`` and ``identity`` import no Airflow (the
``airflow-durable jobs`` command reads records with them); the names below load their module on first use.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from airflow_durable.engine.decision import (
        NOT_FOUND,
        Decision,
        JobPhase,
        Plan,
        UnknownStatus,
        decide,
        phase_of,
        plan,
        status_needed,
    )
    from airflow_durable.engine.errors import (
        DurableError,
        DurableEventError,
        DurableForeignJobError,
        DurableStateError,
        DurableStatusError,
        JobNotFoundError,
    )
    from airflow_durable.engine.identity import (
        TOKEN_PATTERN,
        DurableToken,
        TryIdentity,
        earliest_first,
        new_salt,
        same_epoch,
        tokens_in,
    )
    from airflow_durable.engine.mixin import (
        CREATED_BEFORE_INTENT_TOLERANCE,
        UNENDED_LIMIT,
        DurableJobEngine,
        overriding,
    )
    from airflow_durable.engine.ownership import (
        GONE,
        Knowledge,
        Origin,
        Read,
        TryAnswer,
        Verdict,
        may_cancel,
        may_cancel_on_kill,
    )
    from airflow_durable.engine.record import (
        HISTORY_LIMIT,
        RECORD_SCHEMA,
        RECORD_SCHEMA_V1,
        JobRecord,
        NewerRecordError,
        RecordError,
        parse_id,
        parse_record,
    )

_WHERE = {
    "record": (
        "HISTORY_LIMIT",
        "RECORD_SCHEMA",
        "RECORD_SCHEMA_V1",
        "JobRecord",
        "NewerRecordError",
        "RecordError",
        "parse_id",
        "parse_record",
    ),
    "identity": (
        "TOKEN_PATTERN",
        "DurableToken",
        "TryIdentity",
        "earliest_first",
        "new_salt",
        "same_epoch",
        "tokens_in",
    ),
    "decision": (
        "NOT_FOUND",
        "Decision",
        "JobPhase",
        "Plan",
        "UnknownStatus",
        "decide",
        "phase_of",
        "plan",
        "status_needed",
    ),
    "ownership": (
        "GONE",
        "Knowledge",
        "Origin",
        "Read",
        "TryAnswer",
        "Verdict",
        "may_cancel",
        "may_cancel_on_kill",
    ),
    "errors": (
        "DurableError",
        "DurableEventError",
        "DurableForeignJobError",
        "DurableStateError",
        "DurableStatusError",
        "JobNotFoundError",
    ),
    "mixin": ("CREATED_BEFORE_INTENT_TOLERANCE", "UNENDED_LIMIT", "DurableJobEngine", "overriding"),
}
_MODULE_OF = {name: module for module, names in _WHERE.items() for name in names}
__all__ = [
    "GONE",
    "CREATED_BEFORE_INTENT_TOLERANCE",
    "Decision",
    "DurableError",
    "DurableEventError",
    "DurableForeignJobError",
    "DurableJobEngine",
    "DurableStateError",
    "DurableStatusError",
    "DurableToken",
    "HISTORY_LIMIT",
    "JobNotFoundError",
    "JobPhase",
    "JobRecord",
    "Knowledge",
    "NOT_FOUND",
    "NewerRecordError",
    "Origin",
    "Plan",
    "RECORD_SCHEMA",
    "RECORD_SCHEMA_V1",
    "Read",
    "RecordError",
    "TOKEN_PATTERN",
    "TryAnswer",
    "TryIdentity",
    "UNENDED_LIMIT",
    "UnknownStatus",
    "Verdict",
    "decide",
    "earliest_first",
    "may_cancel",
    "may_cancel_on_kill",
    "new_salt",
    "overriding",
    "parse_id",
    "parse_record",
    "phase_of",
    "plan",
    "same_epoch",
    "status_needed",
    "tokens_in",
]


def __getattr__(name: str) -> Any:
    module = _MODULE_OF.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(f"{__name__}.{module}"), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(__all__))
