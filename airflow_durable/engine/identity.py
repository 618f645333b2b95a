"""Identity: which task instance, which try, which record lifetime, which clear epoch, which token.

`TryIdentity` is what a try knows about itself, taken once when it begins (`TryIdentity.of`): every
decision, stamp and ownership check of that try reads it, nothing re-derives it from the context.

* A record *lifetime* begins when a try finds no record: its ``salt`` says which incarnation of the DAG
  run this is (when the run started, and how often its tasks were cleared), so a DAG run deleted and
  created again with the same run_id, another deployment on the same workspace, or a record dropped by
  retention never gets an older lifetime's tokens, hence never an older lifetime's jobs.
* The token of a logical job is derived from the task instance, the salt and the *generation*, and is
  the same for every try that resubmits it (so the system deduplicates a crash-window resubmission).
* The *clear epoch*: a user's clear ends a logical job. `same_epoch` tells a record of this epoch from
  one of an older epoch, from what Airflow tells a try (see its docstring for the rule and its limits).

No Airflow import.
"""

from __future__ import annotations

import datetime as dt
import hashlib
import re
import secrets
import uuid
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from airflow_durable.engine.record import JobRecord

__all__ = [
    "TOKEN_PATTERN",
    "DurableToken",
    "TryIdentity",
    "earliest_first",
    "new_salt",
    "same_epoch",
    "tokens_in",
]

_TOKEN_NAMESPACE = uuid.UUID("6f1f3b8e-4c8a-5d2e-9a57-0c1d2b3a4f5e")


@dataclass(frozen=True)
class DurableToken:
    """The idempotency token of one logical job: task instance identity, record salt and generation.

    ``text`` is at most 64 characters of ``[A-Za-z0-9-]`` (fits Databricks, Redshift, EMR, BigQuery job
    ids); ``uuid`` is the same token as a UUID for systems that want one (Snowflake's ``requestId``).
    """

    text: str
    generation: int

    @property
    def uuid(self) -> str:
        return str(uuid.uuid5(_TOKEN_NAMESPACE, self.text))

    @property
    def lifetime(self) -> str:
        """The part of the token that names its record lifetime (all but the generation): two tokens of one
        lifetime share it, tokens of two lifetimes never do."""
        return self.text.rpartition("-g")[0] or self.text

    @classmethod
    def for_task_instance(
        cls, dag_id: str, run_id: str, task_id: str, map_index: int, generation: int, salt: str = ""
    ) -> DurableToken:
        identity = "\x1f".join((dag_id, run_id, task_id, str(map_index), salt))
        digest = hashlib.sha256(identity.encode()).hexdigest()[:40]
        return cls(text=f"afd-{digest}-g{generation}", generation=generation)


#: Every token `DurableToken.for_task_instance` makes (whole tokens: ``-g1`` never matches ``-g12``).
TOKEN_PATTERN = re.compile(r"afd-[0-9a-f]{40}-g[0-9]+")


def tokens_in(text: str | None) -> set[str]:
    """Every airflow-durable token in a text that carries one (a run's cause, a step's name)."""
    return set(TOKEN_PATTERN.findall(text or ""))


def earliest_first(created: Mapping[Any, Any]) -> list[Any]:
    """Job ids ordered by when each was created, ties by id: the order `durable_find_all` returns.

    A creation time is a `datetime`, a number (epoch) or ISO 8601 text; an unknown one sorts last.
    """

    def when(value: Any) -> tuple[int, float]:
        if isinstance(value, str):
            value = parse_time(value)
        if isinstance(value, dt.datetime):
            return (0, (value if value.tzinfo else value.replace(tzinfo=dt.UTC)).timestamp())
        if isinstance(value, (int, float)) and not isinstance(value, bool):
            return (0, float(value))
        return (1, 0.0)

    return sorted(created, key=lambda job: (when(created[job]), job))


def new_salt() -> str:
    """A random salt, where nothing identifies the DAG run's incarnation (e.g. a bare unit-test context)."""
    return secrets.token_hex(8)


def parse_time(value: Any) -> dt.datetime | None:
    if not isinstance(value, str):
        return None
    try:
        moment = dt.datetime.fromisoformat(value)
    except ValueError:
        return None
    return moment if moment.tzinfo is not None else moment.replace(tzinfo=dt.UTC)


@dataclass(frozen=True)
class TryIdentity:
    """One try of one task instance, as Airflow describes it in the try's context.

    ``max_tries`` and ``try_number`` come from the task instance, ``clear_number`` and ``run_started``
    from its DAG run, ``retries`` from the operator as this try parsed it.
    """

    dag_id: str
    run_id: str
    task_id: str
    map_index: int
    try_number: int | None
    max_tries: int | None
    retries: int | None
    clear_number: int | None
    run_started: dt.datetime | None = None
    #: A digest of the task instance's trace carrier: Airflow renews it for exactly the task instances a
    #: clear clears (`clear_mark_of`), never on a retry, a DAG edit or a clear of another task.
    clear_mark: str | None = None

    @classmethod
    def of(cls, context: Mapping[str, Any], retries: Any, task_id: str = "") -> TryIdentity:
        ti = context.get("ti")
        dag_run = context.get("dag_run")
        started = getattr(dag_run, "start_date", None)
        map_index = getattr(ti, "map_index", -1)
        return cls(
            dag_id=str(getattr(ti, "dag_id", "")),
            run_id=str(getattr(ti, "run_id", "")),
            task_id=str(getattr(ti, "task_id", task_id)),
            map_index=map_index if _is_int(map_index) else -1,
            try_number=_int_or_none(getattr(ti, "try_number", None)),
            max_tries=_int_or_none(getattr(ti, "max_tries", None)),
            retries=_int_or_none(retries),
            clear_number=_int_or_none(getattr(dag_run, "clear_number", None)),
            run_started=started if isinstance(started, dt.datetime) else None,
            clear_mark=clear_mark_of(getattr(ti, "context_carrier", None)),
        )

    @property
    def epoch(self) -> int | None:
        """``max_tries - retries``: the try number at which this clear epoch began (stored for readers)."""
        if self.max_tries is None or self.retries is None:
            return None
        return self.max_tries - self.retries

    @property
    def may_have_run_before(self) -> bool:
        """Whether Airflow shows an earlier lifetime of this very task instance: a later try (``try_number >
        1``) or a clear of it after it ran (``max_tries > retries``). A try that finds no record then looks
        its jobs up in the system (`airflow_durable.engine.decision.plan`): a record can vanish while its job
        runs (DESIGN §8).

        Airflow raises ``try_number`` each time it schedules a task instance and never lowers it, and
        ``clear_task_instances`` sets ``max_tries = try_number + retries``: a task instance that ran has
        ``try_number >= 1`` from then on, so every later try of it shows ``try_number > 1``, whatever cleared
        it or its record (a 3.4 clear discarding the record included). The run's ``clear_number`` is no
        evidence: it rises on a clear of any task in the run, and a task instance that never ran has no job.
        """
        return (self.try_number is not None and self.try_number > 1) or (
            self.max_tries is not None and self.retries is not None and self.max_tries > self.retries
        )

    def lifetime_salt(self) -> str:
        """The salt of a record lifetime beginning now: this incarnation of the DAG run, its clears and
        the try that begins it.

        Two processes of one try that decide at the same instant share it, so they derive the same token
        and converge on one job through the system's idempotency key. The try number is in it because a
        record can vanish while its job runs (the Storage tab, retention) and a later try of the same
        clear epoch then begins a new lifetime: it must not derive the tokens of the lifetime before it,
        which the system would answer with the older job (DESIGN §8). A try begins at most one lifetime:
        its own intent is the record every later read of it finds.
        """
        if self.run_started is None:
            return new_salt()
        basis = "|".join((self.run_started.isoformat(), str(self.clear_number), str(self.try_number)))
        return hashlib.sha256(basis.encode()).hexdigest()[:16]

    def token(self, generation: int, salt: str) -> DurableToken:
        return DurableToken.for_task_instance(
            self.dag_id, self.run_id, self.task_id, self.map_index, generation, salt
        )


def clear_mark_of(carrier: Any) -> str | None:
    """A short digest of a task instance's ``context_carrier`` (its W3C trace context), ``None`` if absent.

    Airflow 3.3's ``clear_task_instances`` gives every task instance it clears a new carrier, under the
    run's new trace (``new_task_run_carrier`` of a ``new_dagrun_trace_carrier``, random ids whether or not
    tracing is on); a retry, a DAG edit and a clear of another task in the run leave it as it was. So a
    changed mark is a clear of this very task instance, which ``max_tries`` cannot always tell.
    """
    if not isinstance(carrier, Mapping) or not carrier:
        return None
    text = "\x1f".join(f"{key}={carrier[key]}" for key in sorted(map(str, carrier)))
    return hashlib.sha256(text.encode()).hexdigest()[:16]


def same_epoch(record: JobRecord, me: TryIdentity) -> bool:
    """Whether ``record`` belongs to the clear epoch of the try ``me`` (no user's clear since it was written).

    What Airflow 3.3 changes, and what it does not (``airflow.models.taskinstance.clear_task_instances``):
    a clear of a task instance that is not running sets ``max_tries = try_number + retries``, and a task
    cleared while running gets the same once the executor reports it terminated
    (``SchedulerJobRunner.process_executor_events``); nothing else changes ``max_tries`` — not a retry,
    not a DAG edit. Every clear in the run (of any task) raises the run's ``clear_number``. So:

    1. ``max_tries`` changed → this task instance was cleared: another epoch.
    2. ``max_tries`` unchanged and no clear in the run (``clear_number`` unchanged) → the same epoch,
       whatever happened to ``retries`` in the DAG file.
    3. ``max_tries`` unchanged but a clear in the run: another task was cleared — unless this one was, at
       ``try_number - 1``, with ``retries`` lowered in the DAG file just so that ``try_number - 1 +
       retries`` gives back the same ``max_tries`` (a clear at the same try number with the same
       ``retries`` cannot: the record was written by a later try than the one its epoch began at). Only
       then do the numbers not tell a retry (beside a DAG edit and another task's clear) from this
       collision: a ``done`` record is taken as cleared (a retry after success is a crash in a sub-second
       window; a clear of a finished task is what users do), a job still in flight as the same epoch (its
       retry reconnects; rerunning it would throw away work on a coincidence).

    One clear leaves no trace a try can see: of a task whose try runs on a worker that is gone. Airflow
    sets it ``restarting`` without touching ``max_tries``, fails it for its missing heartbeat and retries
    it, and the retry sees what any retry sees. Airflow's own failure handling still knows it was
    ``restarting``: there our listener (`airflow_durable.plugins.listener`) marks the record
    (``cleared_while_running``), which ends its epoch.

    Where both the record and the try carry a clear mark (`clear_mark_of`: Airflow renews the task
    instance's trace carrier on every clear of it, and on nothing else), a changed mark is a clear. An
    unchanged one rules out a clear that reset the run (it renews the run's carrier, which the task
    instance's derives from), so a changed ``clear_number`` is another task's clear and only a changed
    ``max_tries`` (a clear with ``reset_dag_runs=false``) still means one: rule 3's collision cannot happen.
    The arithmetic alone stays for records written without a mark (and ``dag.test()``, which hands none).

    A record without stamps (release 0.1, or written with no task instance) belongs to the epoch that
    reads it, except a stamped ``done`` record, which is compared on ``max_tries``.
    """
    if record.cleared_while_running is not None:
        return False
    if record.clear_mark is not None and me.clear_mark is not None:
        if record.clear_mark != me.clear_mark:
            return False
        # Unchanged: no clear of this task instance that reset its run. One that did not reset it (REST
        # ``reset_dag_runs=false``) may leave the mark (without OpenTelemetry the task instance's carrier
        # is its run's) and the run's clear_number as they were; max_tries still tells that one.
        return record.max_tries is None or me.max_tries is None or record.max_tries == me.max_tries
    if record.max_tries is None or me.max_tries is None:
        return True
    if record.max_tries != me.max_tries:
        return False
    if record.clear_number is None or me.clear_number is None or record.clear_number == me.clear_number:
        return True
    if me.try_number is None or me.retries is None:
        return True
    recorded_retries = record.retries
    if recorded_retries is None and record.epoch is not None:
        recorded_retries = record.max_tries - record.epoch  # records written before "retries" was stored
    lowered = recorded_retries is None or me.retries < recorded_retries
    if not (lowered and me.max_tries == me.try_number - 1 + me.retries):
        return True
    return record.state != "done"


def _is_int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _int_or_none(value: Any) -> int | None:
    return value if _is_int(value) else None
