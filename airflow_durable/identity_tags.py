"""The identity a job carries so that a client can find it again without the task-state record.

Airflow forgets (a task's state is discarded on a clear from Airflow 3.4, a DAG run can be deleted); the
system does not. Every job a durable operator submits carries, where its system lets a client list and
filter jobs, the identity of the task instance that asked for it: `task_identity` of (dag_id, run_id,
task_id, map_index). All generations, clear epochs and record lifetimes of one task instance share it;
the job's idempotency token (carried as before) tells them apart.

The identity is ``afd-ti-`` and 16 lower-case hex digits (23 characters): it fits every carrier of the
catalogue (`airflow_durable.catalogue.LOOKUPS`), BigQuery label values included (lower case, at most 63),
and never matches a token (``afd-<40 hex>-g<n>``).

No Airflow import: the ``orphans`` command and the engine compute it alike.
"""

from __future__ import annotations

import datetime as dt
import hashlib
import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

__all__ = [
    "IDENTITY_LABEL",
    "IDENTITY_PATTERN",
    "IDENTITY_TAG",
    "SUBMIT_ONLY",
    "SUBMIT_ONLY_TAG",
    "TOKEN_LABEL",
    "TOKEN_TAG",
    "FoundJob",
    "identities_in",
    "identity_of",
    "is_identity",
    "marker",
    "marked_jobs",
    "submit_only_in",
    "task_identity",
]

#: Every identity `task_identity` makes (whole: 16 hex digits, not one more).
IDENTITY_PATTERN = re.compile(r"afd-ti-[0-9a-f]{16}(?![0-9a-f])")
_WHOLE = re.compile(r"afd-ti-[0-9a-f]{16}")

#: The tag keys (Batch, EMR Serverless, EMR on EKS) under which the identity and the token travel.
IDENTITY_TAG = "airflow-durable-ti"
TOKEN_TAG = "airflow-durable-token"
#: What a job carries when the task that submitted it only submits (its provider wait flag off): the job is
#: that task's finished work, which something else waits on, so ``orphans`` and the reaper never end it. A
#: word in a name or cause (`submit_only_in`), a tag (value ``"true"``) where the identity is a tag.
SUBMIT_ONLY = "afd-submit-only"
SUBMIT_ONLY_TAG = "airflow-durable-submit-only"
_SUBMIT_ONLY_WORD = re.compile(r"(?<![\w-])afd-submit-only(?![\w-])")
#: The BigQuery label keys of the identity and the token (label keys: lower case, at most 63 characters).
IDENTITY_LABEL = "airflow-durable-ti"
TOKEN_LABEL = "airflow-durable-token"


def task_identity(dag_id: str, run_id: str, task_id: str, map_index: int = -1) -> str:
    """The identity of a task instance: ``afd-ti-<16 hex>``, the same for all its tries, clears and runs
    created again with the same run_id."""
    basis = "\x1f".join((str(dag_id), str(run_id), str(task_id), str(int(map_index))))
    return "afd-ti-" + hashlib.sha256(basis.encode()).hexdigest()[:16]


def identity_of(context: Mapping[str, Any]) -> str:
    """`task_identity` of the task instance in an Airflow context (``ti``); ``ValueError`` without one."""
    ti = context.get("ti") or context.get("task_instance")
    dag_id, run_id, task_id = (getattr(ti, name, None) for name in ("dag_id", "run_id", "task_id"))
    if not (dag_id and run_id and task_id):
        raise ValueError("the context names no task instance (ti.dag_id, ti.run_id, ti.task_id)")
    map_index = getattr(ti, "map_index", -1)
    if not isinstance(map_index, int) or isinstance(map_index, bool):
        map_index = -1
    return task_identity(str(dag_id), str(run_id), str(task_id), map_index)


def is_identity(value: Any) -> bool:
    """Whether ``value`` is exactly one identity."""
    return isinstance(value, str) and _WHOLE.fullmatch(value) is not None


def identities_in(text: str | None) -> set[str]:
    """Every identity in a text that carries one (a run name, a cause, a step name, a query tag)."""
    return set(IDENTITY_PATTERN.findall(text or ""))


def marker(identity: str, token: str, submit_only: bool = False) -> str:
    """The text a name or cause carries: ``[<identity> <token>]`` (both whole, in this order), with
    `SUBMIT_ONLY` after the token for a job of a task that only submits."""
    return f"[{identity} {token} {SUBMIT_ONLY}]" if submit_only else f"[{identity} {token}]"


def submit_only_in(text: str | None) -> bool:
    """Whether a name, cause or statement name carries `SUBMIT_ONLY` (as a whole word)."""
    return _SUBMIT_ONLY_WORD.search(text or "") is not None


_MARKED = re.compile(r"\[(afd-ti-[0-9a-f]{16}) (afd-[0-9a-f]{40}-g[0-9]+)[\] ]")


def marked_jobs(text: str | None) -> list[tuple[str, str]]:
    """Every ``(identity, token)`` marker in a text (`marker`, or the EMR step form ``[<identity> <token>
    step i/n]``)."""
    return _MARKED.findall(text or "")


@dataclass(frozen=True)
class FoundJob:
    """One job `durable_find` found by identity: what the engine needs to adopt it or end it."""

    #: The external id, as the operator stores it (a list for Snowflake handles and EMR step sets).
    id: Any
    #: The raw status string, in the operator's vocabulary (what ``durable_status`` would answer).
    status: str
    #: When the system created it (``None``: the list does not say).
    created_at: dt.datetime | None
    #: The idempotency token it carries, where the listing shows it (``None``: not shown).
    token: str | None = None
