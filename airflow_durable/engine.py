"""The durable engine: decide, submit and persist, wait (deferred or polling), complete.

Every durable operator is ``class DurableX(DurableJobEngine, ProviderX)``: the engine owns
``execute``, ``execute_complete``, ``resume_execution``, ``defer`` and ``on_kill``; the provider operator
keeps its constructor, templated fields, XComs and links. An operator module only declares the
system-specific ``durable_*`` methods listed under "adapter contract" below.

What is stored
--------------
One JSON record per task instance under the operator's ``external_id_key`` in Airflow's
``task_state_store`` (shared by all tries of the task instance)::

    {"schema": "airflow-durable/2", "salt": "9f1c…", "generation": 2, "token": "afd-…-g2",
     "state": "submitting" | "submitted" | "done", "external_id": <id or null>,
     "epoch": 0, "max_tries": 2, "clear_number": 0, "owner_try": 3,
     "intent_at": "…", "submitted_at": "…", "deadline": "…", "history": [...], ...}

* A record *lifetime* begins when a try finds no record and writes its first intent with a fresh random
  ``salt`` (`lifetime_salt`: the DAG run's start and clear number); every token of that lifetime is
  derived from (task instance, salt, generation). A record can vanish (DAG run deleted and re-created
  with the same run_id, ``clear_on_success``, retention cleanup, another deployment on the same
  workspace): the next lifetime has another salt, so its tokens never reach an older lifetime's jobs.
* ``submitting`` is written *before* the external call, so a crash inside the submit→persist window
  leaves the token behind and the retry resubmits with the same token (the system deduplicates) or
  looks the job up by it.
* ``submitted`` carries the external id and is written *before* deferring or polling.
* ``done`` replaces it as the last step of success.
* Every record carries the *clear epoch* it belongs to (`Epoch`): a user's clear starts a new
  one. A record of another epoch is never reconnected to nor returned as already succeeded; its job is
  cancelled if still active and the new epoch submits the next generation.
* ``owner_try`` is the try that tracks the job now (a reconnect claims it): only the owner may cancel.
"""

from __future__ import annotations

import abc
import contextlib
import datetime as dt
import enum
import hashlib
import logging
import re
import secrets
import typing
import uuid
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Any, ClassVar

from airflow_durable import catalogue

try:
    from airflow.exceptions import AirflowException
except ModuleNotFoundError as _missing:  # an install without Airflow: `check`/`migrate` only
    if (_missing.name or "").partition(".")[0] != "airflow":
        raise
    raise ModuleNotFoundError(
        "the durable operators need Apache Airflow, which is not installed. Install airflow-durable with "
        "the extra of your system, which brings Airflow and its provider: "
        'pip install "airflow-durable[<extra>]" '
        f"(extras: {', '.join(dict.fromkeys(s.extra for s in catalogue.SYSTEMS))}, all)",
        name="airflow",
    ) from None

from airflow_durable import shims

if TYPE_CHECKING:
    from airflow.sdk import Context

    from airflow_durable.shims import StateStore

log = logging.getLogger(__name__)

RECORD_SCHEMA = "airflow-durable/2"
#: Records written before salts and epochs existed; still read (see `Epoch.same_as`).
RECORD_SCHEMA_V1 = "airflow-durable/1"
_TOKEN_NAMESPACE = uuid.UUID("6f1f3b8e-4c8a-5d2e-9a57-0c1d2b3a4f5e")
#: Decisions kept in a record's ``history`` (oldest dropped first): enough to explain a task's tries.
HISTORY_LIMIT = 20
#: A job the system reports as created this long before our intent was written is not ours.
CREATED_BEFORE_INTENT_TOLERANCE = dt.timedelta(seconds=60)
#: A trigger timeout within this much of the execution deadline is the execution_timeout running out.
_DEADLINE_SLACK = dt.timedelta(seconds=2)


def _utcnow() -> dt.datetime:
    return dt.datetime.now(dt.UTC)


def _iso(moment: dt.datetime | None) -> str | None:
    return moment.isoformat() if moment is not None else None


def _parse_time(value: Any) -> dt.datetime | None:
    if not isinstance(value, str):
        return None
    try:
        moment = dt.datetime.fromisoformat(value)
    except ValueError:
        return None
    return moment if moment.tzinfo is not None else moment.replace(tzinfo=dt.UTC)


class JobPhase(enum.Enum):
    """How the engine classifies a raw external status."""

    ACTIVE = "active"
    SUCCEEDED = "succeeded"
    FAILED = "failed"


class Decision(enum.Enum):
    """What a try does with the job of its task instance (apache/airflow#71485: decide before waiting)."""

    SUBMIT = "fresh_submit"
    RESUME_SUBMIT = "resume_submit"
    RECONNECT = "reconnect"
    ALREADY_SUCCEEDED = "already_succeeded"
    TERMINAL_RESUBMIT = "terminal_resubmit"
    NEW_EPOCH = "new_epoch"


class DurableError(AirflowException):
    """Base class of the engine's errors; each message names the task and the external id."""


class DurableStateError(DurableError):
    """The task state store could not be read or written, or holds a value the engine did not write."""


class DurableStatusError(DurableError):
    """The external system reported a status the operator does not know."""


class DurableEventError(DurableError):
    """A trigger event is malformed or belongs to another job."""


class DurableForeignJobError(DurableError):
    """A submission was answered with a job created before this task instance asked for one."""


class JobNotFoundError(Exception):
    """Raised by an adapter's ``durable_status`` when the system no longer knows the id (404, expired)."""


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
            value = _parse_time(value)
        if isinstance(value, dt.datetime):
            return (0, (value if value.tzinfo else value.replace(tzinfo=dt.UTC)).timestamp())
        if isinstance(value, (int, float)) and not isinstance(value, bool):
            return (0, float(value))
        return (1, 0.0)

    return sorted(created, key=lambda job: (when(created[job]), job))


def new_salt() -> str:
    """A random salt, where nothing identifies the DAG run's incarnation (e.g. a bare unit-test context)."""
    return secrets.token_hex(8)


def lifetime_salt(context: Mapping[str, Any]) -> str:
    """The salt of a new record lifetime: which incarnation of the DAG run this is, and which clear.

    A DAG run deleted and created again with the same run_id, or the same run_id in another deployment,
    starts at another instant; every clear raises the run's ``clear_number`` (and restarts a finished
    run). Tries that decide at the same instant share both, so they derive the same token and converge
    on one job through the system's idempotency key.
    """
    dag_run = context.get("dag_run")
    started = getattr(dag_run, "start_date", None)
    if not isinstance(started, dt.datetime):
        return new_salt()
    basis = "|".join((started.isoformat(), str(getattr(dag_run, "clear_number", None))))
    return hashlib.sha256(basis.encode()).hexdigest()[:16]


@dataclass(frozen=True)
class Epoch:
    """The clear epoch of a try, from what its task instance says.

    Airflow sets ``max_tries = try_number + retries`` on every clear of a task that is not running (and
    when a task cleared while running has been terminated), and changes it on nothing else; retries
    keep it. ``value`` = ``max_tries - retries`` is the try number at which the epoch began, so it also
    changes when a clear coincides with a lowered ``retries`` that leaves ``max_tries`` unchanged; the
    DAG run's ``clear_number`` (raised by every clear in the run) tells that clear apart from a DAG edit
    that lowered ``retries`` between two retries.
    """

    max_tries: int | None
    retries: int | None
    clear_number: int | None

    @property
    def value(self) -> int | None:
        if self.max_tries is None or self.retries is None:
            return None
        return self.max_tries - self.retries

    def same_as(self, record: JobRecord) -> bool:
        if record.schema == RECORD_SCHEMA_V1:
            # v1 stamped only ``done`` records, with max_tries; its other records belong to this epoch.
            if record.state != "done":
                return True
            return record.epoch is not None and record.epoch == self.max_tries
        if record.max_tries is None:  # written without a task instance to stamp it from
            return record.state != "done" or record.epoch == self.value
        if record.max_tries != self.max_tries:
            return False
        return record.epoch == self.value or record.clear_number == self.clear_number


@dataclass(frozen=True)
class JobRecord:
    """The engine's record in the task state store (see the module docstring)."""

    generation: int
    token: str
    state: str  # "submitting" | "submitted" | "done"
    external_id: Any = None
    epoch: int | None = None
    schema: str = RECORD_SCHEMA
    salt: str | None = None
    max_tries: int | None = None
    clear_number: int | None = None
    owner_try: int | None = None
    intent_at: str | None = None
    submitted_at: str | None = None
    done_at: str | None = None
    deadline: str | None = None
    history: tuple[dict[str, Any], ...] = field(default=())

    def to_json(self) -> dict[str, Any]:
        value: dict[str, Any] = {
            "schema": self.schema,
            "generation": self.generation,
            "token": self.token,
            "state": self.state,
            "external_id": self.external_id,
        }
        optional = {
            "salt": self.salt,
            "epoch": self.epoch,
            "max_tries": self.max_tries,
            "clear_number": self.clear_number,
            "owner_try": self.owner_try,
            "intent_at": self.intent_at,
            "submitted_at": self.submitted_at,
            "done_at": self.done_at,
            "deadline": self.deadline,
        }
        value.update({k: v for k, v in optional.items() if v is not None})
        if self.history:
            value["history"] = list(self.history)
        return value


@dataclass(frozen=True)
class Plan:
    """The outcome of the decision step."""

    decision: Decision
    generation: int
    token: DurableToken | None
    external_id: Any = None
    prior_status: str | None = None
    record: JobRecord | None = None  # the record the decision was taken on (None: there was none)
    salt: str | None = None


#: The status the engine reports for a job the system no longer knows (404, expired history).
NOT_FOUND = "NOT_FOUND"


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


def status_needed(record: JobRecord | None, epoch: Epoch) -> bool:
    """Whether `decide` needs the status of the record's job: only a submitted job of this epoch."""
    return record is not None and record.state == "submitted" and epoch.same_as(record)


def decide(
    record: JobRecord | None, epoch: Epoch, status: str | None = None, phase: JobPhase | None = None
) -> Decision:
    """What a try does, from the stored record, its clear epoch and its job's status. No I/O.

    `status` and `phase` are the job's raw status and its classification, read only where
    `status_needed` says so; `NOT_FOUND` means the system no longer knows the job. A known status the
    operator cannot classify raises `DurableStatusError`: the job may still run, so nothing is submitted.
    """
    if record is None:
        return Decision.SUBMIT
    if not epoch.same_as(record):
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
        raise DurableStatusError(f"job {record.external_id!r} reports status {status!r}, which is unknown")
    return _DECISION_OF_PHASE[phase]


_DECISION_OF_PHASE = {
    JobPhase.ACTIVE: Decision.RECONNECT,
    JobPhase.SUCCEEDED: Decision.ALREADY_SUCCEEDED,
    JobPhase.FAILED: Decision.TERMINAL_RESUBMIT,
}


_METRIC_OF_DECISION = {
    Decision.SUBMIT: "resumable_job.fresh_submit",
    Decision.RESUME_SUBMIT: "resumable_job.fresh_submit",
    Decision.NEW_EPOCH: "resumable_job.fresh_submit",
    Decision.RECONNECT: "resumable_job.reconnect_success",
    Decision.ALREADY_SUCCEEDED: "resumable_job.already_succeeded",
    Decision.TERMINAL_RESUBMIT: "resumable_job.terminal_resubmit",
}


def parse_record(raw: Any, parse_id: typing.Callable[[Any], Any]) -> JobRecord:
    """The `JobRecord` stored as `raw`; `ValueError` (or `TypeError`/`KeyError`) if it is not one."""
    if not isinstance(raw, dict) or raw.get("schema") not in (RECORD_SCHEMA, RECORD_SCHEMA_V1):
        raise ValueError(f"expected a dict with schema {RECORD_SCHEMA!r}")
    generation, token, state = raw["generation"], raw["token"], raw["state"]
    if not _is_int(generation) or generation < 1:
        raise ValueError(f"bad generation {generation!r}")
    if not isinstance(token, str) or not token:
        raise ValueError(f"bad token {token!r}")
    if state not in ("submitting", "submitted", "done"):
        raise ValueError(f"bad state {state!r}")
    external_id = raw.get("external_id")
    if state == "submitted" or (state == "done" and external_id is not None):
        external_id = parse_id(external_id)
    ints: dict[str, Any] = {}
    for name in ("epoch", "max_tries", "clear_number", "owner_try"):
        value = raw.get(name)
        if value is not None and not _is_int(value):
            raise ValueError(f"bad {name} {value!r}")
        ints[name] = value
    texts: dict[str, Any] = {}
    for name in ("salt", "intent_at", "submitted_at", "done_at", "deadline"):
        value = raw.get(name)
        if value is not None and not isinstance(value, str):
            raise ValueError(f"bad {name} {value!r}")
        texts[name] = value
    history = raw.get("history") or []
    if not isinstance(history, list):
        raise ValueError(f"bad history {history!r}")
    return JobRecord(
        generation,
        token,
        state,
        external_id,
        schema=raw["schema"],
        history=tuple(entry for entry in history if isinstance(entry, dict)),
        **ints,
        **texts,
    )


def parse_id(value: Any, kind: Any, what: str = "job id") -> Any:
    """A stored or reported id of kind `int` (positive), `str` (non-empty) or `list[str]` (non-empty)."""
    if kind is int:
        if isinstance(value, bool) or not isinstance(value, int) or value <= 0:
            raise ValueError(f"a {what} is a positive integer, got {value!r}")
        return value
    if kind is str:
        if not isinstance(value, str) or not value.strip():
            raise ValueError(f"a {what} is a non-empty string, got {value!r}")
        return value
    if not isinstance(value, (list, tuple)) or not value:
        raise ValueError(f"{what}s are a non-empty list of strings, got {value!r}")
    return [parse_id(item, str, what) for item in value]


@contextlib.contextmanager
def overriding(obj: Any, **attrs: Any) -> Iterator[None]:
    """Set attributes of `obj` for the duration of one provider call, then restore them (even when the
    call raises or defers)."""
    saved = {name: getattr(obj, name) for name in attrs}
    for name, value in attrs.items():
        setattr(obj, name, value)
    try:
        yield
    finally:
        for name, value in saved.items():
            setattr(obj, name, value)


_ID_KINDS: tuple[Any, ...] = (int, str, list[str])
#: What a concrete durable operator class must define (the engine has no default for these).
_ADAPTER_METHODS = (
    "durable_submit",
    "durable_status",
    "durable_cancel",
    "durable_poll",
    "durable_defer",
    "durable_result",
)


def _catalogue_row(cls: type) -> catalogue.Operator | None:
    try:
        row = catalogue.operator(cls.__name__)
    except KeyError:
        return None
    return row if row.durable_module == cls.__module__ else None


class DurableJobEngine:
    """Mixin that makes a provider operator's submit-and-wait crash-safe. See the module docstring.

    Adapter contract (what an operator module declares). Data, read by the engine's defaults:

    * `external_id_key`: the task-state-store key, fixed forever once released (checked against the
      catalogue); `durable_system`, `durable_wait_flag` and `durable_waits_by_default` come from the
      catalogue (`airflow_durable.catalogue`) for the classes it lists.
    * `durable_locator_fields`: the operator attributes that reach the job without the DAG (connection
      id, region, …), stored in the record.
    * `durable_active_statuses` / `durable_succeeded_statuses` / `durable_failed_statuses`: the raw
      statuses of each phase, read by the default `durable_phase` (an operator overrides it only where a
      status is composite, e.g. Databricks' `LIFE_CYCLE:RESULT`).
    * `durable_id_type` (`int`, `str` or `list[str]`) and `durable_id_name`: the default
      `durable_parse_id` validates a stored or reported id against them.
    * `durable_event_id_key` (dotted for a nested key), `durable_event_statuses` (`None`: no status
      field) and `durable_anonymous_event_statuses` (events with a `message` that name no job): the
      default `durable_event_id`.
    * `durable_deferrable_waits`: `deferrable=True` waits even when the wait flag is off.

    Methods every concrete class defines (a class missing one fails at its definition; an
    intermediate base opts out with `durable_abstract = True` in its own body):

    * `durable_submit(context, token)`: submit one job carrying `token` (`None` when not durable) as
      the system's idempotency key / tag (`durable_overriding` sets the provider's own arguments for
      its submit call); return its external id. Must set whatever attribute the provider's own
      `on_kill` uses, as the provider does.
    * `durable_status(external_id, context)`: raw status string; raise `JobNotFoundError` when the
      system no longer knows the id.
    * `durable_cancel(external_id)`: best-effort cancel.
    * `durable_poll(external_id, context, reconnect)`: the provider's synchronous wait; raises on job
      failure. `reconnect`: this try did not submit the job (a retry rejoined it, or adopted another
      try's), so it pushes the XComs and links the submitting try pushed.
    * `durable_defer(external_id, context, reconnect)`: hand the id to the provider's own trigger
      (`self.defer(..., method_name="execute_complete")`) or complete inline as the provider does.
    * `durable_result(external_id, context, already_succeeded)`: the provider's return value and
      XComs; `already_succeeded` means no poll/defer ran in this try, so push what they would have.

    Optional:

    * `durable_find_all(token, context)`: every job carrying `token`, earliest created first, for
      systems without native idempotency; with `durable_converge_after_submit` the engine also looks the
      token up after each submission, so tries that submitted at the same instant all adopt the earliest
      job and cancel the others.
    * `durable_created_at(external_id, context)`: when the system created the job, where that costs no
      extra call (or the token is the user's own): a job older than the intent is refused.

    Where the provider operator only submits (its wait flag off, see `durable_waits`), the task's work
    is done once the job exists: a retry that finds it, in whatever known state, returns its id.
    """

    external_id_key: ClassVar[str]
    durable_system: ClassVar[str] = ""
    durable_locator_fields: ClassVar[tuple[str, ...]] = ()
    #: False for systems whose submit call cannot carry an idempotency key *and* have no lookup.
    durable_window_closed: ClassVar[bool] = True
    #: True for systems without a native idempotency key: look the token up after submitting.
    durable_converge_after_submit: ClassVar[bool] = False
    durable_active_statuses: ClassVar[frozenset[str]] = frozenset()
    durable_succeeded_statuses: ClassVar[frozenset[str]] = frozenset()
    durable_failed_statuses: ClassVar[frozenset[str]] = frozenset()
    durable_id_type: ClassVar[Any] = str
    durable_id_name: ClassVar[str] = "job id"
    durable_event_id_key: ClassVar[str] = ""
    durable_event_statuses: ClassVar[frozenset[str] | None] = frozenset({"success", "error"})
    durable_anonymous_event_statuses: ClassVar[frozenset[str]] = frozenset()
    #: The provider argument that turns "submit and wait" into "submit only"; `None`: it always waits.
    durable_wait_flag: ClassVar[str | None] = None
    durable_waits_by_default: ClassVar[bool] = True
    durable_deferrable_waits: ClassVar[bool] = False
    #: Set in the body of an intermediate base that leaves adapter methods to its subclasses.
    durable_abstract: ClassVar[bool] = False

    if TYPE_CHECKING:
        # Provided by the provider operator the engine is mixed into (BaseOperator and its subclass).
        task_id: str
        log: Any
        deferrable: bool
        do_xcom_push: bool
        execution_timeout: dt.timedelta | None
        retries: int | None

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        row = _catalogue_row(cls)
        if row is not None:
            declared = cls.__dict__.get("external_id_key")
            if declared is not None and declared != row.key:
                raise TypeError(
                    f"{cls.__name__}.external_id_key is {declared!r}; the catalogue says {row.key!r}"
                )
            cls.external_id_key = row.key
            for name, value in (
                ("durable_system", row.system),
                ("durable_wait_flag", row.no_wait_kwarg),
                ("durable_waits_by_default", row.waits_by_default),
            ):
                if name not in cls.__dict__:
                    setattr(cls, name, value)
        if cls.__dict__.get("durable_abstract", False):
            return
        problems = [
            f"{name}()"
            for name in _ADAPTER_METHODS
            if getattr(getattr(cls, name, None), "__isabstractmethod__", False)
        ]
        if not isinstance(getattr(cls, "external_id_key", None), str) or not cls.external_id_key:
            problems.append("external_id_key")
        if cls.durable_phase is DurableJobEngine.durable_phase and not (
            cls.durable_active_statuses and cls.durable_succeeded_statuses and cls.durable_failed_statuses
        ):
            problems.append("durable_active/succeeded/failed_statuses (or durable_phase())")
        if cls.durable_event_id is DurableJobEngine.durable_event_id and not cls.durable_event_id_key:
            problems.append("durable_event_id_key (or durable_event_id())")
        if cls.durable_parse_id is DurableJobEngine.durable_parse_id and cls.durable_id_type not in _ID_KINDS:
            problems.append("durable_id_type: int, str or list[str] (or durable_parse_id())")
        if problems:
            raise TypeError(
                f"durable operator {cls.__module__}.{cls.__qualname__} does not define "
                f"{', '.join(problems)}; an intermediate base declares durable_abstract = True"
            )

    @shims.apply_defaults
    def __init__(self, *, durable: bool | None = None, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        # Set after the provider's __init__: on Airflow 3.3 its ResumableJobMixin sets ``durable`` too,
        # and ours must win so behaviour does not depend on the provider version.
        self.durable = shims.resolve_durable(durable, type(self).__name__)
        self._durable_external_id: Any = None
        self._durable_result: tuple[bool, Any] = (False, None)
        self._durable_context: Context | None = None
        self._durable_store: StateStore | None = None
        self._durable_deadline: dt.datetime | None = None
        # This try's identity, taken when it began: what its on_kill compares the record against.
        self._durable_try: int | None = None
        self._durable_epoch: Epoch | None = None
        # The record this try last wrote: a deferral carries it to execute_complete (no re-read).
        self._durable_written: JobRecord | None = None

    # ------------------------------------------------------------------ the adapter contract
    @abc.abstractmethod
    def durable_submit(self, context: Context, token: DurableToken | None) -> Any: ...

    @abc.abstractmethod
    def durable_status(self, external_id: Any, context: Context) -> str: ...

    @abc.abstractmethod
    def durable_cancel(self, external_id: Any) -> None: ...

    @abc.abstractmethod
    def durable_poll(self, external_id: Any, context: Context, reconnect: bool) -> None: ...

    @abc.abstractmethod
    def durable_defer(self, external_id: Any, context: Context, reconnect: bool) -> None: ...

    @abc.abstractmethod
    def durable_result(self, external_id: Any, context: Context, already_succeeded: bool) -> Any: ...

    def durable_phase(self, status: str) -> JobPhase | None:
        """`JobPhase` of a raw status, `None` for one the operator does not know."""
        return phase_of(
            status,
            self.durable_active_statuses,
            self.durable_succeeded_statuses,
            self.durable_failed_statuses,
        )

    def durable_parse_id(self, value: Any) -> Any:
        """Validate a stored or reported id; `ValueError` if it is malformed."""
        return parse_id(value, self.durable_id_type, self.durable_id_name)

    def durable_event_id(self, event: Any) -> Any:
        """Validate a trigger event and return the id it is about, or `None` for a well-formed event that
        names no job (e.g. an error event): it concerns the tracked job."""
        if not isinstance(event, dict):
            raise ValueError(f"expected a dict event, got {type(event).__name__}")
        status = event.get("status")
        if status in self.durable_anonymous_event_statuses:
            if not isinstance(event.get("message"), str):
                raise ValueError(f"a {status!r} event without a message")
            return None
        if self.durable_event_statuses is not None and status not in self.durable_event_statuses:
            raise ValueError(f"unknown event status {status!r}")
        value: Any = event
        for part in self.durable_event_id_key.split("."):
            if not isinstance(value, dict):
                raise ValueError(f"the event carries no {self.durable_event_id_key}")
            value = value.get(part)
        return self.durable_parse_id(value)

    def durable_find_all(self, token: DurableToken, context: Context) -> list[Any]:
        return []

    def durable_created_at(self, external_id: Any, context: Context) -> dt.datetime | None:
        return None

    def durable_waits(self) -> bool:
        """Whether the provider operator waits for the job, or only submits it (its wait flag is off)."""
        flag = self.durable_wait_flag
        if flag is None or getattr(self, flag, self.durable_waits_by_default):
            return True
        return self.durable_deferrable_waits and bool(getattr(self, "deferrable", False))

    def durable_overriding(
        self, target: Any = None, /, **attrs: Any
    ) -> contextlib.AbstractContextManager[None]:
        """Carry the token into the provider's own submit call: set `attrs` on this operator (or on
        `target`, e.g. its hook) for that call, and restore them after it, even when it raises or defers."""
        return overriding(self if target is None else target, **attrs)

    # ------------------------------------------------------------------ entry points
    def execute(self, context: Context, *_args: Any, **_runner_kwargs: Any) -> Any:
        # Airflow 2's task runner passes an ExecutorSafeguard sentinel keyword, a provider resuming into
        # execute an event (EMR Serverless after starting its application): they mean nothing here.
        store = self._durable_begin(context)
        if store is None:
            self.log.info(
                "task %s [not_durable]: durable=False, Airflow < 3.3 or no task_state_store; submitting a "
                "fresh job",
                self.task_id,
            )
            return self._submit_and_wait(context, None, None, None)

        plan = self._decide(context, store)
        if plan.decision is Decision.RECONNECT:
            assert plan.record is not None
            self._claim(context, store, plan.record, plan)
            return self._wait(context, store, plan.external_id, reconnect=True)
        if plan.decision is Decision.ALREADY_SUCCEEDED:
            assert plan.record is not None
            self._durable_external_id = plan.external_id
            return self._finish(context, store, plan.external_id, True, plan.record, plan)
        return self._submit_and_wait(context, store, plan, plan.record)

    def execute_complete(self, context: Any, event: Any = None, durable_record: Any = None) -> Any:
        store = self._durable_begin(context, quiet=True)
        record = self._carried_record(durable_record) if store is not None else None
        if store is not None and record is None:
            # Deferred without a carried record (by an earlier version of this package): read it.
            record = self._read_record(store)
        stored_id = record.external_id if record is not None and record.state == "submitted" else None
        try:
            event_id = self.durable_event_id(event)
        except Exception as err:
            raise DurableEventError(
                f"task {self.task_id}: malformed trigger event for job {stored_id!r}: {err}. "
                "The job reference is kept; the next try reconnects to the job or sees its outcome."
            ) from err
        # ``None``: the trigger's event names no job (e.g. a failure event); it is about the tracked one.
        if stored_id is not None and event_id is not None and str(event_id) != str(stored_id):
            raise DurableEventError(
                f"task {self.task_id}: trigger event is about job {event_id!r}, but this task instance "
                f"tracks job {stored_id!r}. Refusing to complete on another job's event."
            )
        external_id = stored_id if stored_id is not None else event_id
        self._durable_external_id = external_id
        # The provider's own completion: raises on failure (the record stays, so the next try sees a
        # terminal status and submits fresh), may defer again (e.g. Databricks repair_run).
        super().execute_complete(context, event)  # type: ignore[misc]
        result = self._finish(context, store, external_id, False, record, None)
        self._durable_result = (True, result)
        return result

    def resume_execution(self, next_method: str, next_kwargs: dict[str, Any] | None, context: Any) -> Any:
        # Airflow resumes a task whose trigger timed out with "__fail__": if that timeout was this try's
        # execution_timeout, the job ends with the try, as on the sync path.
        failed = next_method == shims.TRIGGER_FAIL_METHOD
        if failed and (next_kwargs or {}).get("error") == shims.TRIGGER_TIMEOUT:
            store = self._durable_begin(context, quiet=True)
            if store is not None:
                self._on_deferred_timeout(context, store)
        return super().resume_execution(next_method, next_kwargs, context)  # type: ignore[misc]

    def defer(
        self,
        *,
        trigger: Any,
        method_name: str,
        kwargs: dict[str, Any] | None = None,
        timeout: dt.timedelta | float | None = None,
    ) -> Any:
        # Every durable deferral: the trigger checks ownership before cancelling on kill, and the
        # deferral ends no later than this try's execution_timeout.
        if self._durable_store is not None and shims.DURABLE_RUNTIME:
            if isinstance(timeout, (int, float)) and not isinstance(timeout, bool):
                timeout = dt.timedelta(seconds=timeout)
            if self._durable_deadline is not None:
                remaining = max(self._durable_deadline - _utcnow(), dt.timedelta(seconds=1))
                timeout = remaining if timeout is None else min(timeout, remaining)
            trigger = self._durable_wrap_trigger(trigger)
            written = self._durable_written
            if (
                method_name == "execute_complete"
                and written is not None
                and written.state == "submitted"
                and str(written.external_id) == str(self._durable_external_id)
            ):
                # The trigger's event reaches only the deferral that created it, and a newer try has a
                # new task-instance id (its store calls are not ours): the record this try wrote before
                # deferring is the one execute_complete checks the event against and retires.
                kwargs = {**(kwargs or {}), "durable_record": written.to_json()}
        return super().defer(  # type: ignore[misc]
            trigger=trigger, method_name=method_name, kwargs=kwargs, timeout=timeout
        )

    def on_kill(self) -> None:
        external_id = self._durable_external_id
        if external_id is None:
            super().on_kill()  # type: ignore[misc]
            return
        if not getattr(self, "cancel_on_kill", True):  # the provider's switch, where it has one
            self.log.info(
                "task %s: cancel_on_kill=False: leaving job %s running (the record keeps tracking it)",
                self.task_id,
                external_id,
            )
            return
        if self._durable_store is not None:
            owner, why = self._owns(external_id)
            if not owner:
                self.log.warning("task %s: not cancelling job %s on kill: %s", self.task_id, external_id, why)
                return
        # The record stays, so a retry sees "cancelled" and submits fresh.
        self.log.info("task %s: cancelling job %s on kill", self.task_id, external_id)
        self.durable_cancel(external_id)

    # ------------------------------------------------------------------ setup
    def _durable_begin(self, context: Any, quiet: bool = False) -> StateStore | None:
        """Remember this try's context; return its usable state store, or ``None`` (not durable)."""
        if not isinstance(context, Mapping):
            context = {}
        self._durable_context = context
        self._durable_store = None
        store = shims.get_task_state_store(context) if self.durable else None
        usable = (
            store is not None
            and callable(getattr(store, "get", None))
            and callable(getattr(store, "set", None))
        )
        if self.durable and shims.DURABLE_RUNTIME and not usable and not quiet:
            self.log.warning(
                "task %s: no usable task_state_store in the context (%s); running without durability: "
                "this try submits a fresh job",
                self.task_id,
                "no context" if not context else type(store).__name__,
            )
        if not usable:
            return None
        self._durable_store = store
        self._durable_deadline = self._execution_deadline(context)
        self._durable_try = self._try_number(context)
        self._durable_epoch = self._epoch(context)
        return store

    def _execution_deadline(self, context: Context) -> dt.datetime | None:
        timeout = getattr(self, "execution_timeout", None)
        if not isinstance(timeout, dt.timedelta):
            return None
        started = getattr(context.get("ti"), "start_date", None)
        if not isinstance(started, dt.datetime):
            started = _utcnow()
        elif started.tzinfo is None:
            started = started.replace(tzinfo=dt.UTC)
        return started + timeout

    # ------------------------------------------------------------------ the decision
    def _decide(self, context: Context, store: StateStore) -> Plan:
        tags = self._metric_tags(context)
        with shims.durable_span("resumable_job.resume_decision") as span:
            span.set_attribute("operator", type(self).__name__)
            span.set_attribute("resumable.external_id_key", self.external_id_key)
            plan = self._plan(context, store, tags)
            span.set_attribute("resumable.decision", plan.decision.value)
            if plan.external_id is not None:
                span.set_attribute("resumable.external_id", str(plan.external_id))
            if plan.prior_status is not None:
                span.set_attribute("resumable.prior_status", plan.prior_status)
        self._log_decision(plan)
        return plan

    def _plan(self, context: Context, store: StateStore, tags: dict[str, str]) -> Plan:
        """Read what `decide` needs (the record, the epoch, the job's status), then act on its decision."""
        record = self._read_record(store)
        if record is None and (self._try_number(context) or 1) > 1:
            # Only a retry can follow a try that ran the provider's own operator.
            record = self._upstream_record(context, store)
        epoch = self._epoch(context)
        if record is not None and record.state == "submitting" and epoch.same_as(record):
            # A try died inside the submit→persist window: a system without an idempotency key is asked
            # whether the submission reached it.
            found = self._adopt_earliest(
                DurableToken(record.token, record.generation), context, submitted=None
            )
            if found is not None:
                record = replace(record, state="submitted", external_id=found)
        status: str | None = None
        phase: JobPhase | None = None
        if status_needed(record, epoch):
            assert record is not None
            shims.incr_metric("resumable_job.reconnect_attempt", tags)
            status, phase = self._classify(record.external_id, context)
        decision = decide(record, epoch, status, phase)
        shims.incr_metric(_METRIC_OF_DECISION[decision], tags)
        salt = (record.salt if record is not None else None) or lifetime_salt(context)
        if record is None:
            return Plan(decision, 1, self._token(context, 1, salt), salt=salt)
        if decision is Decision.NEW_EPOCH:
            status = self._end_old_epoch(context, record)
        elif record.state == "done":
            status = "done"
        token: DurableToken | None = None
        generation = record.generation
        if decision is Decision.RESUME_SUBMIT:
            token = DurableToken(record.token, record.generation)
        elif decision in (Decision.NEW_EPOCH, Decision.TERMINAL_RESUBMIT):
            generation += 1
            token = self._token(context, generation, salt)
        return Plan(decision, generation, token, record.external_id, status, record, salt)

    def _classify(self, external_id: Any, context: Context) -> tuple[str, JobPhase]:
        try:
            status = self.durable_status(external_id, context)
        except JobNotFoundError:
            return NOT_FOUND, JobPhase.FAILED
        phase = self.durable_phase(status)
        if phase is None:
            raise DurableStatusError(
                f"task {self.task_id}: job {external_id!r} reports status {status!r}, which "
                f"{type(self).__name__} does not know. Not submitting, since the job may still be running; "
                "the next try checks again."
            )
        if not self.durable_waits():
            # The provider operator only submits: its task succeeds once the job exists, so a retry that
            # finds the job in any known state returns it (a user's clear starts a new epoch instead).
            return status, JobPhase.SUCCEEDED
        return status, phase

    def _end_old_epoch(self, context: Context, record: JobRecord) -> str | None:
        """Cancel what an older epoch left running: it belongs to a logical job the user ended."""
        if record.state == "done":
            return "done"
        if record.state == "submitting":
            stale = self.durable_find_all(DurableToken(record.token, record.generation), context)
            for job in stale:
                self._cancel_quietly(job, "it was submitted before the task was cleared")
            if not stale and not self.durable_converge_after_submit:
                self.log.warning(
                    "task %s: a try of the previous clear epoch died while submitting with token %s; if "
                    "that submission reached the system, its job is not tracked any more",
                    self.task_id,
                    record.token,
                )
            return None
        try:
            status = self.durable_status(record.external_id, context)
        except JobNotFoundError:
            return "NOT_FOUND"
        if self.durable_phase(status) in (JobPhase.ACTIVE, None):
            self._cancel_quietly(record.external_id, "the task was cleared, which starts a new logical job")
        return status

    def _adopt_earliest(self, token: DurableToken, context: Context, submitted: Any) -> Any:
        """Every try adopts the earliest job carrying ``token`` and cancels the others; ``None`` if none."""
        jobs = self.durable_find_all(token, context)
        if not jobs:
            return submitted
        earliest = jobs[0]
        others = [job for job in jobs[1:] if str(job) != str(earliest)]
        if (
            submitted is not None
            and str(submitted) != str(earliest)
            and all(str(j) != str(submitted) for j in jobs)
        ):
            others.append(submitted)
        for job in others:
            self._cancel_quietly(job, f"another try started job {earliest!r} with the same token first")
        if others:
            self.log.info(
                "task %s: %d jobs carry token %s; adopting the earliest, %s",
                self.task_id,
                len(jobs),
                token.text,
                earliest,
            )
        return earliest

    _DECISION_MESSAGES: ClassVar[dict[Decision, str]] = {
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

    def _log_decision(self, plan: Plan) -> None:
        message = self._DECISION_MESSAGES[plan.decision].format(
            gen=plan.generation,
            token=plan.token.text if plan.token else None,
            id=plan.external_id,
            status=plan.prior_status,
        )
        self.log.info("task %s [%s]: %s", self.task_id, plan.decision.value, message)

    # ------------------------------------------------------------------ submit, wait, finish
    def _submit_and_wait(
        self,
        context: Context,
        store: StateStore | None,
        plan: Plan | None,
        record: JobRecord | None,
    ) -> Any:
        if store is None or plan is None or plan.token is None:
            external_id = self.durable_submit(context, None)
            self._durable_external_id = external_id
            self.log.info("task %s: submitted job %s", self.task_id, external_id)
            return self._wait(context, None, external_id, reconnect=False)

        token, resumed = plan.token, plan.decision is Decision.RESUME_SUBMIT
        while True:
            if resumed and record is not None:
                intent = record  # the crashed try's intent stands: same token, same intent time
            else:
                intent = self._stamp(
                    context,
                    JobRecord(
                        token.generation, token.text, "submitting", salt=plan.salt, intent_at=_iso(_utcnow())
                    ),
                    record,
                    plan.decision,
                )
                self._write_record(store, intent, what="the submission intent (nothing was submitted)")
            external_id = submitted_id = self.durable_submit(context, token)
            self._durable_external_id = external_id
            self._refuse_foreign(context, external_id, intent)
            if self.durable_converge_after_submit:
                external_id = self._adopt_earliest(token, context, submitted=external_id)
                self._durable_external_id = external_id
            if resumed:
                # The resent token may hand back a job that already ended (e.g. cancelled because its id
                # could not be stored): go on with the next generation in this same try.
                status, phase = self._classify(external_id, context)
                if phase is JobPhase.FAILED:
                    self.log.info(
                        "task %s: the job %s that token %s returned already ended %s; submitting the next "
                        "generation",
                        self.task_id,
                        external_id,
                        token.text,
                        status,
                    )
                    record = replace(intent, state="submitted", external_id=external_id)
                    generation = token.generation + 1
                    token = self._token(context, generation, plan.salt or intent.salt or new_salt())
                    plan = replace(
                        plan, decision=Decision.TERMINAL_RESUBMIT, generation=generation, token=token
                    )
                    resumed = False
                    continue
            break
        submitted = replace(
            intent,
            state="submitted",
            external_id=external_id,
            owner_try=self._try_number(context),
            submitted_at=_iso(_utcnow()),
            deadline=_iso(self._durable_deadline),
        )
        if resumed:
            submitted = self._stamp(context, submitted, intent, plan.decision)
        try:
            self._write_record(store, submitted, what=f"job id {external_id!r}")
        except DurableStateError as err:
            self._cancel_untracked(external_id, err)
            raise
        self.log.info("task %s: submitted job %s", self.task_id, external_id)
        # A try that adopted another try's job waits like a reconnecting one: it pushed its own job's XComs.
        adopted = str(external_id) != str(submitted_id)
        return self._wait(context, store, external_id, reconnect=adopted, written=submitted)

    def _claim(self, context: Context, store: StateStore, record: JobRecord, plan: Plan) -> None:
        """Make this try the job's owner before waiting: an older try resumed later must not cancel it."""
        claimed = self._stamp(
            context,
            replace(
                record,
                state="submitted",
                owner_try=self._try_number(context),
                deadline=_iso(self._durable_deadline),
                salt=record.salt or plan.salt,
            ),
            record,
            plan.decision,
        )
        self._write_record(store, claimed, what=f"ownership of job {record.external_id!r}")

    def _wait(
        self,
        context: Context,
        store: StateStore | None,
        external_id: Any,
        reconnect: bool,
        written: JobRecord | None = None,
    ) -> Any:
        self._durable_external_id = external_id
        # Retiring needs no re-read of the record: a newer try (a retry or a clear) gets a new task-instance
        # id, and the store refuses an older try's calls (DESIGN §8), so what this try wrote still stands.
        held = self._durable_written if written is None else written
        if getattr(self, "deferrable", False):
            self._durable_result = (False, None)
            self.durable_defer(external_id, context, reconnect)
            # No TaskDeferred: the provider completed inline (job already terminal → execute_complete
            # already ran) or does not wait at all (e.g. wait_for_termination=False).
            done, result = self._durable_result
            if done:
                return result
            return self._finish(context, store, external_id, False, held, None)
        self.durable_poll(external_id, context, reconnect)
        return self._finish(context, store, external_id, False, held, None)

    def _finish(
        self,
        context: Context,
        store: StateStore | None,
        external_id: Any,
        already_succeeded: bool,
        record: JobRecord | None,
        plan: Plan | None,
    ) -> Any:
        result = self.durable_result(external_id, context, already_succeeded)
        if store is not None:
            self._retire_record(context, store, external_id, record, plan)
        return result

    def _retire_record(
        self,
        context: Context,
        store: StateStore,
        external_id: Any,
        record: JobRecord | None,
        plan: Plan | None,
    ) -> None:
        """Mark the job ``done``: the last step of success."""
        try:
            if record is None:
                # Nothing this try wrote is at hand (e.g. it deferred under an earlier version): read it.
                record = self._read_record(store)
            # An orphaned older try may still be running beside this one; only retire our own job.
            if record is None or record.state == "submitting" or str(record.external_id) != str(external_id):
                return
            if record.state == "done" and plan is None:
                return
            done = replace(record, state="done", done_at=_iso(_utcnow()))
            if plan is not None:
                done = self._stamp(context, done, record, plan.decision)
            self._write_record(store, done, what="completion")
        except DurableStateError as err:
            # The job succeeded; failing the task now would only make a retry find it succeeded again.
            self.log.error(
                "task %s: job %s succeeded but the completion could not be recorded (%s); a retry of this "
                "try will check the job's status instead",
                self.task_id,
                external_id,
                err,
            )

    def _on_deferred_timeout(self, context: Context, store: StateStore) -> None:
        record = self._read_record(store)
        if record is None or record.state != "submitted":
            return
        deadline = _parse_time(record.deadline)
        if deadline is None or _utcnow() < deadline - _DEADLINE_SLACK:
            # The provider's own wait limit ran out, not execution_timeout: the job stays tracked.
            self.log.warning(
                "task %s: the trigger's wait limit ran out; job %s is left running and tracked, the next "
                "try reconnects to it",
                self.task_id,
                record.external_id,
            )
            return
        if record.owner_try not in (None, self._durable_try):
            return
        self.log.error(
            "task %s: execution_timeout %s ran out while deferred; cancelling job %s",
            self.task_id,
            getattr(self, "execution_timeout", None),
            record.external_id,
        )
        self._cancel_quietly(record.external_id, "the task's execution_timeout ran out")

    def _owns(self, external_id: Any) -> tuple[bool, str]:
        """Whether this try may cancel ``external_id``: the record must still name it, this try and epoch."""
        assert self._durable_store is not None
        try:
            record = self._read_record(self._durable_store)
        except DurableStateError as err:
            return False, f"its ownership could not be checked ({err}); the record keeps tracking it"
        if record is None:
            # The execution API answers "not found" both when the record was deleted with its DAG run
            # and when this try's task instance id was superseded by a newer try (a zombie): ask Airflow
            # whether the task instance still exists.
            ti = (self._durable_context or {}).get("ti")
            try:
                state = shims.get_task_states(
                    str(getattr(ti, "dag_id", "")),
                    str(getattr(ti, "run_id", "")),
                    str(getattr(ti, "task_id", self.task_id)),
                    _map_index(ti),
                )
            except KeyError:
                return True, ""  # the task instance is gone with its DAG run: nothing else tracks the job
            except Exception as err:
                return False, f"its record is unreadable by this try and the task's state unknown ({err})"
            return False, (
                f"the record is not readable by this try while its task instance lives on ({state}): a newer "
                "try holds it, or the record was deleted"
            )
        if str(record.external_id) != str(external_id):
            return (
                False,
                f"this task instance now tracks {record.external_id!r} (generation {record.generation})",
            )
        if record.state == "done":
            return False, "it already succeeded"
        if self._durable_epoch is not None and not self._durable_epoch.same_as(record):
            return False, "the task was cleared since"
        mine = self._durable_try
        if record.owner_try is not None and mine is not None and record.owner_try != mine:
            return False, f"try {record.owner_try} tracks it now (this is try {mine})"
        return True, ""

    def _refuse_foreign(self, context: Context, external_id: Any, intent: JobRecord) -> None:
        intent_at = _parse_time(intent.intent_at)
        if intent_at is None:
            return
        created = self.durable_created_at(external_id, context)
        if created is None:
            return
        if created.tzinfo is None:
            created = created.replace(tzinfo=dt.UTC)
        if created < intent_at - CREATED_BEFORE_INTENT_TOLERANCE:
            raise DurableForeignJobError(
                f"task {self.task_id}: submitting with token {intent.token} returned job {external_id!r}, "
                f"created at {created.isoformat()}, before this task instance asked for a job "
                f"({intent_at.isoformat()}). It belongs to another logical job (an idempotency token reused "
                "across runs?): not adopting it. Leave the idempotency token to airflow-durable, or make "
                "yours unique per run (e.g. template it with {{ run_id }})."
            )

    def _cancel_quietly(self, external_id: Any, why: str) -> None:
        try:
            self.durable_cancel(external_id)
        except Exception as err:
            self.log.error("task %s: could not cancel job %s (%s): %s", self.task_id, external_id, why, err)
        else:
            self.log.warning("task %s: cancelled job %s: %s", self.task_id, external_id, why)

    def _cancel_untracked(self, external_id: Any, err: Exception) -> None:
        try:
            self.durable_cancel(external_id)
        except Exception as cancel_err:
            self.log.error(
                "task %s: could not cancel job %s after failing to persist its id: %s",
                self.task_id,
                external_id,
                cancel_err,
            )
        else:
            self.log.error(
                "task %s: cancelled job %s because its id could not be persisted (%s)",
                self.task_id,
                external_id,
                err,
            )

    def _durable_wrap_trigger(self, trigger: Any) -> Any:
        from airflow_durable.triggers.owned import DurableOwnedTrigger

        context = self._durable_context or {}
        ti = context.get("ti")
        # What the trigger needs to apply the kill policy without the operator: a user who ends the
        # deferred task reaches only the trigger.
        job = {
            "system": self.durable_system,
            "locator": self._locator(),
            "external_id": self._durable_external_id,
            "cancel": bool(getattr(self, "cancel_on_kill", True)),
        }
        return DurableOwnedTrigger.wrap(
            trigger,
            dag_id=str(getattr(ti, "dag_id", "")),
            run_id=str(getattr(ti, "run_id", "")),
            task_id=str(getattr(ti, "task_id", self.task_id)),
            map_index=_map_index(ti),
            job=job if self._durable_external_id is not None and self.durable_system else None,
        )

    def _locator(self) -> dict[str, Any]:
        locator = {name: getattr(self, name, None) for name in self.durable_locator_fields}
        return {k: v for k, v in locator.items() if isinstance(v, (str, int, float, bool))}

    # ------------------------------------------------------------------ the record
    def _read_record(self, store: StateStore) -> JobRecord | None:
        try:
            raw = store.get(self.external_id_key)
        except Exception as err:
            raise DurableStateError(
                f"task {self.task_id}: could not read task_state_store key {self.external_id_key!r} "
                f"({type(err).__name__}: {err}). Not submitting: a job may already be running for this task."
            ) from err
        if raw is None:
            return None
        try:
            return parse_record(raw, self.durable_parse_id)
        except (ValueError, TypeError, KeyError) as err:
            raise DurableStateError(
                f"task {self.task_id}: task_state_store key {self.external_id_key!r} holds {raw!r}, which "
                f"is not an airflow-durable record ({err}). Not submitting, because a job may already be "
                "running for this task: check the external system, then delete the key "
                "(e.g. `context['task_state_store'].delete(key)` or clear the task's state store) and retry."
            ) from err

    def _upstream_record(self, context: Context, store: StateStore) -> JobRecord | None:
        """A job the provider's own ResumableJobMixin stored (the user switched to ours mid-retries).

        Only a job still running is adopted: a finished one cannot be told apart from one of an earlier
        clear epoch (upstream stamps no epoch), so it is left alone and this try submits fresh.
        """
        key = self._upstream_external_id_key()
        if key is None:
            return None
        try:
            value = store.get(key)
            if value is None:
                return None
            external_id = self.durable_parse_id(value)
            status, phase = self._classify(external_id, context)
        except Exception as err:
            self.log.warning(
                "task %s: ignoring the provider's stored job reference under %r (%s)", self.task_id, key, err
            )
            return None
        if phase is not JobPhase.ACTIVE:
            return None
        self.log.info(
            "task %s: adopting job %s (%s) that the provider operator's earlier try stored under %r",
            self.task_id,
            external_id,
            status,
            key,
        )
        epoch = self._epoch(context)
        return JobRecord(
            1,
            "upstream",
            "submitted",
            external_id,
            epoch=epoch.value,
            max_tries=epoch.max_tries,
            clear_number=epoch.clear_number,
        )

    @classmethod
    def _upstream_external_id_key(cls) -> str | None:
        for base in cls.__mro__[1:]:
            if issubclass(base, DurableJobEngine):
                continue
            key = base.__dict__.get("external_id_key")
            if isinstance(key, str) and key:
                return key
        return None

    def _stamp(
        self, context: Context, record: JobRecord, previous: JobRecord | None, decision: Decision
    ) -> JobRecord:
        """``record`` with this try's epoch, the decision appended to the history, and v2 fields."""
        epoch = self._epoch(context)
        history = list(previous.history if previous is not None else record.history)
        history.append(
            {
                "try": self._try_number(context),
                "decision": decision.value,
                "at": _iso(_utcnow()),
                "generation": record.generation,
                "external_id": record.external_id,
            }
        )
        return replace(
            record,
            schema=RECORD_SCHEMA,
            salt=record.salt or (previous.salt if previous is not None else None) or new_salt(),
            epoch=epoch.value,
            max_tries=epoch.max_tries,
            clear_number=epoch.clear_number,
            history=tuple(history[-HISTORY_LIMIT:]),
        )

    def _write_record(self, store: StateStore, record: JobRecord, what: str) -> None:
        value = record.to_json()
        value["operator"] = type(self).__name__
        if self.durable_system:
            value["system"] = self.durable_system
        locator = self._locator()
        if locator:
            value["locator"] = locator
        try:
            store.set(self.external_id_key, value)
        except Exception as err:
            raise DurableStateError(
                f"task {self.task_id}: could not write {what} to task_state_store key "
                f"{self.external_id_key!r} ({type(err).__name__}: {err})"
            ) from err
        self._durable_written = record

    def _carried_record(self, raw: Any) -> JobRecord | None:
        """The record a deferral carried to execute_complete; ``None`` (read the store) if absent or bad."""
        if raw is None:
            return None
        try:
            return parse_record(raw, self.durable_parse_id)
        except (ValueError, TypeError, KeyError) as err:
            self.log.warning(
                "task %s: the deferral carried a malformed record (%s); reading the task_state_store",
                self.task_id,
                err,
            )
            return None

    # ------------------------------------------------------------------ helpers
    def _token(self, context: Context, generation: int, salt: str) -> DurableToken:
        ti = context["ti"]
        return DurableToken.for_task_instance(
            ti.dag_id, ti.run_id, ti.task_id, _map_index(ti), generation, salt
        )

    def _epoch(self, context: Context) -> Epoch:
        ti = context.get("ti")
        dag_run = context.get("dag_run")
        retries = getattr(self, "retries", None)
        return Epoch(
            max_tries=_int_or_none(getattr(ti, "max_tries", None)),
            retries=_int_or_none(retries),
            clear_number=_int_or_none(getattr(dag_run, "clear_number", None)),
        )

    @staticmethod
    def _try_number(context: Context) -> int | None:
        return _int_or_none(getattr(context.get("ti"), "try_number", None))

    def _metric_tags(self, context: Context) -> dict[str, str]:
        tags = {"operator": type(self).__name__}
        ti = context.get("ti")
        team = getattr(ti, "stats_tags", {}).get("team_name") if ti is not None else None
        if team:
            tags["team_name"] = team
        return tags


def _is_int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _int_or_none(value: Any) -> int | None:
    return value if _is_int(value) else None


def _map_index(ti: Any) -> int:
    map_index = getattr(ti, "map_index", -1)
    return -1 if not _is_int(map_index) else map_index
