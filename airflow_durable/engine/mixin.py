"""The mixin that does the I/O: `DurableJobEngine`.

Every durable operator is ``class DurableX(DurableJobEngine, ProviderX)``: the engine owns ``execute``,
``execute_complete``, ``resume_execution``, ``defer`` and ``on_kill``; the provider operator keeps its
constructor, templated fields, XComs and links. An operator module only declares the system-specific
``durable_*`` members listed in the class docstring.

This module reads in the order a try decides: the record (read, parse, write), the try's identity
(taken once), the decision (pure, `airflow_durable.engine.decision`), ownership (who may cancel,
`airflow_durable.engine.ownership`), then the I/O of carrying it out: finding older jobs without the record
and ending them, one step per generation of the submit loop, waiting, completing.
"""

from __future__ import annotations

import abc
import contextlib
import datetime as dt
import re
import sys
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any, ClassVar

from airflow_durable import catalogue, shims
from airflow_durable.engine.decision import (
    MESSAGE_OF_DECISION,
    METRIC_OF_DECISION,
    NOT_FOUND,
    Decision,
    JobPhase,
    Plan,
    decide,
    phase_of,
    plan,
    sort_found,
    status_needed,
)
from airflow_durable.engine.errors import (
    DurableError,
    DurableEventError,
    DurableForeignJobError,
    DurableLookupError,
    DurableStateError,
    DurableStatusError,
    JobNotFoundError,
)
from airflow_durable.engine.identity import DurableToken, TryIdentity, new_salt, parse_time, same_epoch
from airflow_durable.engine.ownership import (
    GONE,
    UNASKED,
    Knowledge,
    Origin,
    Read,
    Stop,
    Verdict,
    may_cancel,
    stop_reason,
)
from airflow_durable.engine.record import (
    RECORD_SCHEMA,
    JobRecord,
    NewerRecordError,
    RecordError,
    parse_id,
    parse_record,
)
from airflow_durable.identity_tags import FoundJob, task_identity

if TYPE_CHECKING:
    from airflow.sdk import Context

    from airflow_durable.shims import StateStore

__all__ = ["CREATED_BEFORE_INTENT_TOLERANCE", "UNENDED_LIMIT", "DurableJobEngine", "overriding"]

#: A job the system reports as created this long before our intent was written is not ours.
CREATED_BEFORE_INTENT_TOLERANCE = dt.timedelta(seconds=60)
#: A trigger timeout within this much of the execution deadline is the execution_timeout running out.
_DEADLINE_SLACK = dt.timedelta(seconds=2)
#: Older jobs a record keeps at most (oldest dropped first, logged): only a clear whose cancel failed,
#: again and again, adds one.
UNENDED_LIMIT = 20


def _utcnow() -> dt.datetime:
    return dt.datetime.now(dt.UTC)


def _iso(moment: dt.datetime | None) -> str | None:
    return moment.isoformat() if moment is not None else None


def _is_timeout(error: BaseException | None) -> bool:
    """Whether ``error`` is Airflow's execution timeout: the task runner calls ``on_kill`` handling it."""
    return error is not None and type(error).__name__ == "AirflowTaskTimeout"


def _same(a: Any, b: Any) -> bool:
    return a is not None and b is not None and str(a) == str(b)


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


@dataclass(frozen=True)
class _Generation:
    """One step of the submit loop: submit this token (or resend it), under this decision."""

    decision: Decision
    token: DurableToken
    resumed: bool  # resend a crashed try's token as is (its intent stands)
    prior: JobRecord | None  # the record this generation follows (history, salt, the crashed intent)
    unended: tuple[dict[str, Any], ...]


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
    """Mixin that makes a provider operator's submit-and-wait crash-safe. See `airflow_durable.engine`.

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
      job and the duplicates are cancelled.
    * `durable_token_gone(error)`: whether a submit's error is the system's specific answer that its
      idempotency token names a deleted job; a crash-window resend so refused submits the next generation.
    * `durable_created_at(external_id, context)`: when the system created the job, where that costs no
      extra call (or the token is the user's own): a job older than the intent is refused.
    * `durable_find(identity, context)`: every job of the task instance ``identity``
      (`airflow_durable.identity_tags.task_identity`) the system lists, of any generation, clear epoch and
      record lifetime, as `FoundJob`; ``NotImplementedError`` (with the catalogue's reason) where the
      system offers no way. The engine calls it only without a record, when Airflow shows an earlier
      lifetime, and to resolve an older job the record knows only by its token.

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
    #: True where the native key's window may lapse while the job still runs (the catalogue's
    #: ``Idempotency.lapses``): a crash-window retry looks the token up by identity before resending it.
    durable_key_lapses: ClassVar[bool] = False
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
                ("durable_key_lapses", row.idempotency.lapses),
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
        self._durable_context: Context | None = None
        self._durable_store: StateStore | None = None
        self._durable_deadline: dt.datetime | None = None
        #: This try, as its task instance described it when the try began (`TryIdentity.of`).
        self._durable_try: TryIdentity | None = None
        #: The job this try holds, and how it came to hold it (what its on_kill may cancel).
        self._durable_external_id: Any = None
        self._durable_origin: Origin = Origin.TRACKED
        #: The held job came from a lookup of the token, not from a submit call's answer: the provider's
        #: submit pushed none of its XComs, so the wait pushes them as a reconnecting try's does.
        self._durable_looked_up = False
        #: Other jobs carrying this try's token (a resend's), not cancelled yet: its on_kill ends them too.
        self._durable_duplicates: tuple[Any, ...] = ()
        #: The token of the intent this try wrote or resumed, and whether its id write went through.
        self._durable_intent_token: str | None = None
        self._durable_recorded = False
        #: The token of a submission this try sent whose job's id is not stored yet: its job (a lost
        #: answer's, a resend's) may be known only by that token.
        self._durable_sending: DurableToken | None = None
        #: The record this try last wrote: a deferral carries it to execute_complete (no re-read).
        self._durable_written: JobRecord | None = None
        self._durable_result: tuple[bool, Any] = (False, None)
        #: This Airflow discards a task's state on a clear unless the user keeps it (3.4): a record that
        #: outlived a clear means "carry on" (`shims.clear_discards_task_state`, asked as a try begins).
        self._durable_clear_keeps = False

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

    def durable_status_text(self, status: str) -> str:
        """A raw status as the decision's log line shows it (default: as it is)."""
        return status

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

    def durable_token_gone(self, error: Exception) -> bool:
        """Whether a submit's ``error`` is the system's answer that the job its idempotency token names was
        deleted (so the token can never be used again). Only a specific, documented answer qualifies."""
        return False

    def durable_find(self, identity: str, context: Context | None = None) -> list[FoundJob]:
        raise NotImplementedError(f"{type(self).__name__} declares no lookup of its jobs by task instance")

    def durable_resend(self, token: DurableToken) -> Any:
        """Send this try's submission with ``token`` again, exactly as it went out and without its side
        effects (no cancel_previous_runs), and return the job id the system answers: its idempotency key
        hands back the job the token made. Only where nothing lists a token's job (`_looks_tokens_up`
        False) and the key is native: a stopped try resolves a lost answer's job this way. Raise
        `NotImplementedError` where this try sent no such submission."""
        raise NotImplementedError(f"{type(self).__name__} cannot resend a submission")

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
            external_id = self.durable_submit(context, None)
            self._hold(external_id, Origin.SUBMITTED)
            self.log.info("task %s: submitted job %s", self.task_id, external_id)
            return self._wait(context, None, external_id, reconnect=False)

        the_plan, duplicates = self._decide(context, store)
        found = self._track_found_jobs(context, store, the_plan) if the_plan.look_up else None
        unended = self._end_older_jobs(context, the_plan, duplicates, found)
        if the_plan.decision is Decision.RECONNECT:
            claimed = self._claim(store, the_plan, unended)
            return self._wait(context, store, the_plan.external_id, reconnect=True, written=claimed)
        if the_plan.decision is Decision.ALREADY_SUCCEEDED:
            assert the_plan.record is not None
            self._hold(the_plan.external_id, Origin.TRACKED)
            return self._finish(
                context, store, the_plan.external_id, True, the_plan.record, the_plan, unended
            )
        return self._submit_and_wait(context, store, the_plan, unended)

    def execute_complete(self, context: Any, event: Any = None, durable_record: Any = None) -> Any:
        store = self._durable_begin(context, quiet=True)
        record = self._carried_record(durable_record) if store is not None else None
        if store is not None and record is None:
            # Deferred without a carried record (by an earlier version of this package): read it.
            record = self._read_record(store)
        tracked = record.external_id if record is not None and record.state == "submitted" else None
        try:
            event_id = self.durable_event_id(event)
        except Exception as err:
            raise DurableEventError(
                f"task {self.task_id}: malformed trigger event for job {tracked!r}: {err}. "
                "The job reference is kept; the next try reconnects to the job or sees its outcome."
            ) from err
        if tracked is not None and event_id is not None and not _same(event_id, tracked):
            # Airflow delivered another deferral's event to this one: on SQLite a new trigger row can take
            # the id of a just-deleted one, and a triggerer still running the old trigger under that id
            # fires for the old job (see docs/how-it-works.md). It says nothing about the tracked job.
            self.log.warning(
                "task %s: a trigger event about job %s reached this deferral, which waits on job %s; it is "
                "not about the tracked job, so waiting on job %s again",
                self.task_id,
                event_id,
                tracked,
                tracked,
            )
            assert record is not None
            self._durable_written = record
            self._hold(tracked, Origin.TRACKED)
            # As a reconnecting try does: the job's status first (adapters defer on what it read).
            self._classify(tracked, context)
            return self._wait(context, store, tracked, reconnect=True, written=record)
        external_id = tracked if tracked is not None else event_id
        self._hold(external_id, Origin.TRACKED)
        # The provider's own completion: raises on failure (the record stays, so the next try sees a
        # terminal status and submits fresh), may defer again (e.g. Databricks repair_run).
        super().execute_complete(context, event)  # type: ignore[misc]
        result = self._finish(context, store, external_id, False, record, None, None)
        self._durable_result = (True, result)
        return result

    def resume_execution(self, next_method: str, next_kwargs: dict[str, Any] | None, context: Any) -> Any:
        # Airflow resumes a task whose trigger timed out with "__fail__": if that timeout was this try's
        # execution_timeout, the job ends with the try, as on the sync path.
        failed = next_method == shims.TRIGGER_FAIL_METHOD
        if failed and (next_kwargs or {}).get("error") == shims.TRIGGER_TIMEOUT:
            store = self._durable_begin(context, quiet=True)
            if store is not None:
                self._on_deferred_timeout(store)
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
                and written.names(self._durable_external_id)
            ):
                # The trigger's event reaches only the deferral that created it, and a newer try has a
                # new task-instance id (its store calls are not ours): the record this try wrote before
                # deferring is the one execute_complete checks the event against and retires.
                kwargs = {**(kwargs or {}), "durable_record": written.to_json()}
        return super().defer(  # type: ignore[misc]
            trigger=trigger, method_name=method_name, kwargs=kwargs, timeout=timeout
        )

    def on_kill(self) -> None:
        # SIGTERM or execution_timeout runs this, and the try's main thread goes on until the process exits
        # or is SIGKILLed. Only a timeout or Airflow's word ends the logical job; a stop from outside the
        # task's lifecycle (worker, pod or scheduler shutdown) leaves the job to the next try.
        external_id = self._durable_external_id
        sending = None if self._durable_recorded else self._durable_sending
        if self._durable_store is None:
            if self._durable_context is None:
                # Before execute began (the task runner installs its SIGTERM handler before it clears the
                # try's XComs): no job is held, and only once execute has its store can the try ask why it
                # stops. A shutdown must not fail the try, so execute decides (`_durable_begin`). The
                # provider's on_kill is not called: it holds nothing yet (Batch's raises on its None job id).
                self.__dict__["_durable_stop_pending"] = True
                return
            self.__dict__["_durable_killed"] = True
            if external_id is None:
                super().on_kill()  # type: ignore[misc]
                return
            self.log.info("task %s: cancelling job %s on kill", self.task_id, external_id)
            self._cancel_quietly(external_id, "on kill")
            return
        stop, knowledge = self._stop_reason()
        if stop is Stop.TIMEOUT and (external_id is not None or sending is not None):
            # Who owns the job is asked only now: a scheduler's reset since the timeout superseded this try,
            # and a reset is not a clear, whatever the deadline: the reset's try carries on with the job.
            knowledge = self._knowledge()
            if self._reset_since(knowledge):
                stop = Stop.RESET
        if not stop.ends_job:
            self._leave_on_stop(stop, external_id, sending)
            return
        # From here the try must not submit: a job it could neither record nor cancel.
        self.__dict__["_durable_killed"] = True
        if external_id is None and sending is None:
            super().on_kill()  # type: ignore[misc]
            return
        if not getattr(self, "cancel_on_kill", True):  # the provider's switch, where it has one
            self.log.info(
                "task %s: cancel_on_kill=False: leaving job %s running (the record keeps tracking it)",
                self.task_id,
                external_id if external_id is not None else f"of token {sending.text if sending else None}",
            )
            return
        if sending is not None:
            # Its submission is out and no id is stored: the job of a lost answer (and a resend's, on a system
            # without an idempotency key) is known only by the token.
            look_up = external_id is None or self.durable_converge_after_submit
            self._end_jobs_of_token(sending, external_id, "on kill", look_up=look_up)
            return
        verdict = self._may_cancel(external_id, recorded=self._durable_recorded, knowledge=knowledge)
        if not verdict.allowed:
            self.log.warning(
                "task %s: not cancelling job %s on kill: %s", self.task_id, external_id, verdict.reason
            )
            return
        self.log.info("task %s: cancelling job %s on kill: %s", self.task_id, external_id, verdict.reason)
        # The main thread may not live to cancel its duplicates (the supervisor's SIGKILL follows).
        for duplicate in self._durable_duplicates:
            self._cancel_quietly(
                duplicate, f"another job with this try's token, {external_id!r}, is ended on kill"
            )
        # The record stays, so a retry sees "cancelled" and submits fresh. on_kill runs in a signal handler:
        # a failed cancel is logged, never raised into whatever the main thread was doing.
        self._cancel_quietly(external_id, f"on kill: {verdict.reason}")

    def _stop_reason(self) -> tuple[Stop, Knowledge | None]:
        """Why ``on_kill`` runs (`stop_reason`), and what Airflow answered (``None``: not asked)."""
        timed_out = _is_timeout(sys.exc_info()[1]) or (
            self._durable_deadline is not None and _utcnow() >= self._durable_deadline
        )
        if timed_out:
            return Stop.TIMEOUT, None
        knowledge = self._knowledge(ask_state=True)
        run_clear_number = None
        if knowledge.read is not Read.SKIPPED and knowledge.task_state is None:
            run_clear_number = self._run_clear_number()
        stop = stop_reason(
            knowledge,
            timed_out=False,
            run_clear_number=run_clear_number,
            my_clear_number=self._me().clear_number,
            wrote_record=self._durable_intent_token is not None or self._durable_written is not None,
        )
        return stop, knowledge

    def _reset_since(self, knowledge: Knowledge) -> bool:
        """Whether a scheduler reset the task instance since this try began (`stop_reason`'s rule): its
        record reads "not found" with its own id, the task has no state, and the run's clear count is the
        one this try began with (every clear raises it)."""
        if knowledge.read is not Read.NOT_FOUND or knowledge.task_state is not None:
            return False
        clear_number = self._run_clear_number()
        return clear_number is not None and clear_number == self._me().clear_number

    def _run_clear_number(self) -> int | None:
        me = self._me()
        try:
            return shims.get_run_clear_number(me.dag_id, me.run_id)
        except Exception as err:
            self.log.warning("task %s: could not ask Airflow for the DAG run (%s)", self.task_id, err)
            return None

    def _leave_on_stop(self, stop: Stop, external_id: Any, sending: DurableToken | None) -> None:
        """A stop that does not end the logical job: the job runs on, recorded, and the main thread goes on
        (if the job ends before the process is killed, the try finishes normally)."""
        if external_id is None and sending is None:
            return
        job = (
            f"job {external_id}"
            if external_id is not None
            else f"the job of token {sending.text if sending else None}"
        )
        me = self._me()
        why = {
            Stop.SHUTDOWN: f"Airflow still shows try {me.try_number} running, so its worker, pod or "
            "scheduler is shutting down",
            Stop.RESET: "a scheduler reset the task instance to run it again (not a clear)",
            Stop.UNKNOWN: "Airflow could not be asked why (no answer leaves the job: it is recorded, or "
            "found again by its recorded token)",
        }[stop]
        retry_left = me.try_number is None or me.max_tries is None or me.try_number <= me.max_tries
        nxt = (
            "the next try reconnects to it"
            if retry_left or stop is Stop.RESET
            else "no retry is left: a scheduler's reset or a new try reconnects to it; if Airflow fails the "
            "task instead, `airflow-durable orphans` lists the job (the reaper, where enabled, ends it)"
        )
        self.log.info(
            "task %s: stopping: %s; leaving %s running and recorded: %s", self.task_id, why, job, nxt
        )

    # ------------------------------------------------------------------ 1. the record
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
        except NewerRecordError as err:
            raise DurableStateError(
                f"task {self.task_id}: task_state_store key {self.external_id_key!r} was {err}. Not "
                "submitting: the record may track a running job."
            ) from err
        except RecordError as err:
            raise DurableStateError(
                f"task {self.task_id}: task_state_store key {self.external_id_key!r} holds {raw!r}, which "
                f"is not an airflow-durable record ({err}). Not submitting, because a job may already be "
                "running for this task: check the external system, then delete the key "
                "(e.g. `context['task_state_store'].delete(key)` or clear the task's state store) and retry."
            ) from err

    def _carried_record(self, raw: Any) -> JobRecord | None:
        """The record a deferral carried to execute_complete; ``None`` (read the store) if absent or bad."""
        if raw is None:
            return None
        try:
            return parse_record(raw, self.durable_parse_id)
        except RecordError as err:
            self.log.warning(
                "task %s: the deferral carried a malformed record (%s); reading the task_state_store",
                self.task_id,
                err,
            )
            return None

    def _upstream_record(self, context: Context, store: StateStore) -> JobRecord | None:
        """A job the provider's own ResumableJobMixin stored (the user switched to ours mid-retries).

        Only a job still running is adopted: a finished one cannot be told apart from one of an earlier
        clear epoch (upstream stamps no epoch), so this try submits fresh. A failed read, a value that is
        not an id, or a status the system will not give fails the try: none of them may lead to a submit.
        """
        key = self._upstream_external_id_key()
        if key is None:
            return None
        try:
            value = store.get(key)
        except Exception as err:
            raise DurableStateError(
                f"task {self.task_id}: could not read the provider operator's task_state_store key {key!r} "
                f"({type(err).__name__}: {err}). Not submitting: an earlier try may have started a job."
            ) from err
        if value is None:
            return None
        try:
            external_id = self.durable_parse_id(value)
        except ValueError as err:
            raise DurableStateError(
                f"task {self.task_id}: the provider operator's task_state_store key {key!r} holds {value!r}, "
                f"which is not a {self.durable_id_name} ({err}). Not submitting: check the external system, "
                "then delete the key and retry."
            ) from err
        status, phase = self._classify(external_id, context)
        if phase is not JobPhase.ACTIVE:
            return None
        self.log.info(
            "task %s: adopting job %s (%s) that the provider operator's earlier try stored under %r",
            self.task_id,
            external_id,
            status,
            key,
        )
        me = self._me()
        return self._stamp(
            JobRecord(
                1, "upstream", "submitted", external_id, salt=me.lifetime_salt(), owner_try=me.try_number
            ),
            None,
            None,
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

    def _stamp(self, record: JobRecord, previous: JobRecord | None, decision: Decision | None) -> JobRecord:
        """``record`` as this try writes it: its identity, its lifetime's salt, the decision in history."""
        me = self._me()
        history = previous.history if previous is not None else record.history
        if decision is not None:
            history = (
                *history,
                {
                    "try": me.try_number,
                    "decision": decision.value,
                    "at": _iso(_utcnow()),
                    "generation": record.generation,
                    "external_id": record.external_id,
                },
            )
        return replace(
            record,
            schema=RECORD_SCHEMA,
            salt=record.salt or (previous.salt if previous is not None else None) or new_salt(),
            epoch=me.epoch,
            max_tries=me.max_tries,
            clear_number=me.clear_number,
            retries=me.retries,
            clear_mark=me.clear_mark,
            extra=record.extra or (previous.extra if previous is not None else {}),
            history=tuple(history),
            upgraded_from=None,
        )

    def _record_job(self, store: StateStore, record: JobRecord, job: Any) -> None:
        """Store the id of the job this try holds; if that fails, cancel the job where this try may, and
        raise the write's `DurableStateError`."""
        try:
            self._write_job_id(store, record, what=f"job id {job!r}")
        except DurableStateError as err:
            self._cancel_unrecorded(job, err)
            raise
        self._durable_recorded = True
        self._durable_sending = None

    def _write_job_id(self, store: StateStore, record: JobRecord, what: str) -> None:
        """Write a record that names a job this try holds, once more if the first write fails: a job whose
        id is not stored is cancelled, and if that cancel fails too it runs on named by nothing."""
        try:
            self._write_record(store, record, what)
        except DurableStateError as err:
            self.log.warning("task %s: %s; writing it once more", self.task_id, err)
            self._write_record(store, record, what)

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

    # ------------------------------------------------------------------ 2. identity
    def _durable_begin(self, context: Any, quiet: bool = False) -> StateStore | None:
        """Take this try's identity; return its usable state store, or ``None`` (not durable)."""
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
        self._durable_try = TryIdentity.of(context, getattr(self, "retries", None), self.task_id)
        self._durable_deadline = self._execution_deadline(context)
        # Asked once, when the try begins: on_kill runs in a signal handler, where an import may block.
        self._durable_clear_keeps = shims.clear_discards_task_state()
        if self.__dict__.pop("_durable_stop_pending", False):
            stop, _ = self._stop_reason()
            if stop.ends_job:
                self.__dict__["_durable_killed"] = True
            self.log.info(
                "task %s: a SIGTERM came before the try began (%s): %s",
                self.task_id,
                stop.value,
                "submitting nothing" if stop.ends_job else "going on",
            )
        return store

    def _me(self) -> TryIdentity:
        if self._durable_try is None:
            self._durable_try = TryIdentity.of(
                self._durable_context or {}, getattr(self, "retries", None), self.task_id
            )
        return self._durable_try

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

    # ------------------------------------------------------------------ 3. the decision
    def _decide(self, context: Context, store: StateStore) -> tuple[Plan, list[Any]]:
        """Read what the decision needs, decide (pure), and say so once: log, metrics, span.

        Returns the plan and the duplicates a lookup found of a crashed try's submission (to cancel).
        """
        me = self._me()
        tags = self._metric_tags(context)
        duplicates: list[Any] = []
        with shims.durable_span("resumable_job.resume_decision") as span:
            span.set_attribute("operator", type(self).__name__)
            span.set_attribute("resumable.external_id_key", self.external_id_key)
            record = self._read_record(store)
            if record is None and (me.try_number or 1) > 1:
                # Only a retry can follow a try that ran the provider's own operator.
                record = self._upstream_record(context, store)
            same = record is None or same_epoch(record, me)
            if record is not None and record.state == "submitting" and same:
                # A try died inside the submit→persist window: the system is asked whether the submission
                # reached it, where its key alone may not answer (`_jobs_in_window`).
                jobs = self._jobs_in_window(DurableToken(record.token, record.generation), context)
                if jobs:
                    record = replace(record, state="submitted", external_id=jobs[0])
                    duplicates = [job for job in jobs[1:] if not _same(job, jobs[0])]
            elif record is not None and record.state == "submitted" and record.unconverged:
                # The try that recorded this job failed before its converging lookup ended: its token may name
                # another job (a lost answer's, then its resend's). Keep the recorded one, end the others.
                duplicates = self._converge_recorded(record, context)
                record = replace(record, unconverged=False)
            status: str | None = None
            phase: JobPhase | None = None
            carry_on = not same and self._durable_clear_keeps
            if status_needed(record, same, carry_on):
                assert record is not None
                shims.incr_metric("resumable_job.reconnect_attempt", tags)
                # Held while its status is read: the job of the logical job this try carries on is its to
                # end if a timeout or Airflow's word stops it here (a shutdown leaves it, as ever). Still
                # held when the read raises: the timeout's on_kill runs once AirflowTaskTimeout unwound.
                self._hold(record.external_id, Origin.TRACKED)
                status, phase = self._classify(record.external_id, context)
                self._durable_external_id = None
            decision = decide(record, same, status, phase, carry_on)
            if carry_on and decision is Decision.RECONNECT:
                self.log.info(
                    "task %s: the task was cleared and Airflow kept its state (keep_task_state, or a DAG-run "
                    "clear): carrying on with job %s instead of starting a new logical job",
                    self.task_id,
                    record.external_id if record is not None else None,
                )
            salt = (record.salt if record is not None else None) or me.lifetime_salt()
            the_plan = replace(
                plan(decision, record, me, salt),
                prior_status="done" if record is not None and record.state == "done" else status,
            )
            span.set_attribute("resumable.decision", decision.value)
            if the_plan.external_id is not None:
                span.set_attribute("resumable.external_id", str(the_plan.external_id))
            if the_plan.prior_status is not None:
                span.set_attribute("resumable.prior_status", the_plan.prior_status)
        shims.incr_metric(METRIC_OF_DECISION[decision], tags)
        message = MESSAGE_OF_DECISION[decision].format(
            gen=the_plan.generation,
            token=the_plan.token.text if the_plan.token else None,
            id=the_plan.external_id,
            status=self.durable_status_text(str(the_plan.prior_status)),
        )
        self.log.info("task %s [%s]: %s", self.task_id, decision.value, message)
        return the_plan, duplicates

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

    # ------------------------------------------------------------------ 4. ownership
    def _hold(self, external_id: Any, origin: Origin) -> None:
        self._durable_external_id = external_id
        self._durable_origin = origin

    def _knowledge(self, ask_state: bool = False) -> Knowledge:
        """What this try can learn now about who tracks its task instance's job: its record, read with its
        own task-instance id, and where that finds nothing (or ``ask_state``), Airflow's state of the task
        instance."""
        if shims.supervisor_comms_busy():
            return Knowledge(Read.SKIPPED)
        assert self._durable_store is not None
        try:
            record = self._read_record(self._durable_store)
        except DurableStateError:
            return Knowledge(Read.FAILED, task_state=self._task_state())
        if record is not None:
            mine = self._me().try_number
            if ask_state or (record.owner_try is not None and mine is not None and record.owner_try < mine):
                # An older try's ownership: whether this try may end the job depends on Airflow's state.
                return Knowledge(Read.OK, record, task_state=self._task_state())
            return Knowledge(Read.OK, record)
        return Knowledge(Read.NOT_FOUND, task_state=self._task_state())

    def _task_state(self) -> str | None:
        """Airflow's state of this task instance now (`GONE` if Airflow no longer knows it), or ``None``."""
        me = self._me()
        try:
            return shims.get_task_states(me.dag_id, me.run_id, me.task_id, me.map_index)
        except KeyError:
            return GONE
        except Exception as err:
            self.log.warning("task %s: could not ask Airflow for the task's state (%s)", self.task_id, err)
            return UNASKED

    def _may_cancel(
        self,
        external_id: Any,
        *,
        recorded: bool,
        origin: Origin | None = None,
        knowledge: Knowledge | None = None,
    ) -> Verdict:
        return may_cancel(
            external_id,
            self._me(),
            origin=self._durable_origin if origin is None else origin,
            intent_token=self._durable_intent_token,
            recorded=recorded,
            knowledge=self._knowledge() if knowledge is None else knowledge,
            next_try_decides=self._durable_clear_keeps and self._durable_findable(),
        )

    def _durable_findable(self) -> bool:
        """Whether a later try can find this operator's jobs without their record (`durable_find`)."""
        if type(self).durable_find is DurableJobEngine.durable_find:
            return False
        row = catalogue.LOOKUPS.get(self.external_id_key)
        return row is None or row.implemented

    def _cancel_quietly(self, external_id: Any, why: str) -> bool:
        """Cancel, logging the outcome; whether the cancel call went through."""
        try:
            self.durable_cancel(external_id)
        except Exception as err:
            self.log.error("task %s: could not cancel job %s (%s): %s", self.task_id, external_id, why, err)
            return False
        self.log.warning("task %s: cancelled job %s: %s", self.task_id, external_id, why)
        return True

    # ------------------------------------------------------------------ 5. I/O: find jobs without the record
    def _find_by_identity(self, context: Context) -> list[FoundJob] | None:
        """This task instance's jobs as the system lists them (`durable_find`); ``None`` where the system
        offers no lookup (logged at INFO with the reason). Any other failure is raised to the caller."""
        me = self._me()
        identity = task_identity(me.dag_id, me.run_id, me.task_id, me.map_index)
        try:
            found = self.durable_find(identity, context)
        except NotImplementedError as err:
            self.log.info(
                "task %s: its jobs cannot be looked up in the system (%s); a job an earlier try left running "
                "without a record is not found by this try",
                self.task_id,
                err,
            )
            return None
        self.log.info("task %s: looked up the jobs of %s: %d found", self.task_id, identity, len(found))
        return list(found)

    def _looks_tokens_up(self) -> bool:
        """Whether `_jobs_of_token` can ask the system (a token lookup, or a lookup by identity)."""
        return (
            type(self).durable_find_all is not DurableJobEngine.durable_find_all or self._durable_findable()
        )

    def _jobs_of_token(self, token: DurableToken, context: Context) -> list[Any]:
        """Every job carrying ``token``, earliest first: the system's token lookup (`durable_find_all`), else
        this task instance's jobs (`durable_find`) that carry it; ``[]`` where the system offers neither.
        A failed lookup raises."""
        if type(self).durable_find_all is not DurableJobEngine.durable_find_all:
            return list(self.durable_find_all(token, context))
        if not self._durable_findable():
            return []
        ids: list[Any] = []
        for job in self._find_by_identity(context) or []:
            if job.token != token.text:
                continue
            try:
                ids.append(self.durable_parse_id(job.id))
            except ValueError:
                continue
        return ids

    def _jobs_in_window(self, token: DurableToken, context: Context) -> list[Any]:
        """The jobs a crashed try's submission with ``token`` made, looked up before the token is resent.

        A system with a token lookup (`durable_find_all`) is asked; its failure fails the try. A native key
        whose window may lapse while the job runs (`durable_key_lapses`) is looked up by the task instance's
        identity: the key deduplicates the resend only inside its window. That lookup failing (e.g. a
        connection without the list permission) resends, as the key alone did. Elsewhere the key is the
        protection (BigQuery: the job id stays taken, a resend adopts the job) and nothing is looked up.
        """
        if type(self).durable_find_all is not DurableJobEngine.durable_find_all:
            return list(self.durable_find_all(token, context))
        if not self.durable_key_lapses or not self._durable_findable():
            return []
        try:
            return self._jobs_of_token(token, context)
        except Exception as err:
            self.log.warning(
                "task %s: looking token %s up before sending it again failed (%s: %s); sending it again, "
                "which the system's idempotency key deduplicates within its window",
                self.task_id,
                token.text,
                type(err).__name__,
                err,
            )
            return []

    def _converge_recorded(self, record: JobRecord, context: Context) -> list[Any]:
        """The other jobs the token of an `unconverged` record names (to end as duplicates); a failed lookup
        fails the try (`DurableLookupError`): reconnecting would leave such a job running untracked."""
        token = DurableToken(record.token, record.generation)
        try:
            found = self._jobs_of_token(token, context)
        except Exception as err:
            raise DurableLookupError(
                f"task {self.task_id}: the try that recorded job {record.external_id!r} failed before it "
                f"could tell whether its token {record.token} made other jobs (a lost answer, then a "
                f"resend), and looking the token up failed now ({type(err).__name__}: {err}). Not "
                "reconnecting: another job of this task may run beside it. The next try looks again."
            ) from err
        others = [job for job in found if not _same(job, record.external_id)]
        if others:
            self.log.warning(
                "task %s: token %s names job(s) %s besides the recorded job %s; keeping %s, ending the rest",
                self.task_id,
                record.token,
                others,
                record.external_id,
                record.external_id,
            )
        return others

    def _lookup_failed(self, err: Exception) -> DurableLookupError:
        me = self._me()
        row = catalogue.LOOKUPS.get(self.external_id_key)
        call = re.search(r"`([^`]+)`", row.list_call) if row is not None else None
        how = f"{self.durable_system or type(self).__name__} {call.group(1) if call else 'list call'}"
        evidence = []
        if me.try_number is not None and me.try_number > 1:
            evidence.append(f"try {me.try_number}")
        if me.max_tries is not None and me.retries is not None and me.max_tries > me.retries:
            evidence.append(f"max_tries {me.max_tries} > retries {me.retries}: it was cleared")
        conn = next((name for name in self.durable_locator_fields if name.endswith("conn_id")), None)
        whose = (
            f"the task's connection ({conn}={getattr(self, conn, None)!r})"
            if conn
            else "the task's connection"
        )
        needs = f"{row.permission}" if row is not None and row.permission else f"the {how} call"
        return DurableLookupError(
            f"task {self.task_id}: no record of this task instance's job, and Airflow shows an earlier "
            f"lifetime of it ({', '.join(evidence) or 'an earlier try'}); looking its jobs up ({how}) "
            f"failed ({type(err).__name__}: {err}). Not submitting: a job of an earlier try may still be "
            "running, and a new one would run beside it. The next try looks again; if the call was refused, "
            f"{whose} needs {needs}."
        )

    def _track_found_jobs(self, context: Context, store: StateStore, the_plan: Plan) -> JobRecord | None:
        """No record, and Airflow shows an earlier lifetime: find the jobs of older logical jobs that still
        run, and record them before anything ends them; the intent written, or ``None`` (none found).

        Every job found belongs to an older logical job (this try's lifetime began with it), except one of
        this very lifetime (another process of this try), which the submit's token reaches. The intent,
        written with them as ``unended``, tracks them from now on and proves this try current: a try
        superseded meanwhile cannot write (its task-instance id is stale), so it ends nothing. A failed
        lookup fails the try (`DurableLookupError`): it must not submit blindly beside an older job.
        """
        try:
            listed = self._find_by_identity(context)
        except Exception as err:
            raise self._lookup_failed(err) from err
        if not listed:
            return None
        assert the_plan.token is not None
        found = sort_found(listed, the_plan.token.lifetime, self.durable_phase)
        for job in found.this_lifetime:
            self.log.info(
                "task %s: job %s carries this try's token %s: the submit reaches it",
                self.task_id,
                job.id,
                job.token,
            )
        if found.ended:
            self.log.info(
                "task %s: older jobs found that already ended: %s",
                self.task_id,
                ", ".join(f"{job.id} ({job.status})" for job in found.ended),
            )
        if not self.durable_waits():
            if found.older_active:
                # Ours only submits, like the provider operator: a job an earlier try submitted is that
                # try's finished work, not a wait to end (its record would be `done`; a clear leaves it).
                self.log.info(
                    "task %s: this operator only submits; earlier jobs left as they are: %s",
                    self.task_id,
                    [job.id for job in found.older_active],
                )
            return None
        cancel = bool(getattr(self, "cancel_on_kill", True))
        why = "found by its task instance's identity: the record that tracked it was lost"
        entries: list[dict[str, Any]] = []
        for job in found.older_active:
            try:
                external_id = self.durable_parse_id(job.id)
            except ValueError as err:
                self.log.error(
                    "task %s: the lookup returned a job id %r that is not a %s (%s): not tracked",
                    self.task_id,
                    job.id,
                    self.durable_id_name,
                    err,
                )
                continue
            entry: dict[str, Any] = {"external_id": external_id, "token": job.token, "why": why}
            if job.created_at is not None:
                entry["created_at"] = _iso(job.created_at)
            if not cancel:
                entry["why"] = f"{why}; cancel_on_kill=False leaves it running"
                entry["cancel"] = False
            entries.append(entry)
        if not entries:
            return None
        me = self._me()
        tracking = self._stamp(
            JobRecord(
                the_plan.token.generation,
                the_plan.token.text,
                "submitting",
                salt=the_plan.salt,
                owner_try=me.try_number,
                intent_at=_iso(_utcnow()),
                unended=tuple(entries),
            ),
            None,
            the_plan.decision,
        )
        self.log.warning(
            "task %s: older jobs of this task instance still run without a record: %s; recording them%s",
            self.task_id,
            [entry["external_id"] for entry in entries],
            " (cancel_on_kill=False: they are left running)" if not cancel else ", then ending them",
        )
        what = "the older jobs found without a record (nothing was submitted)"
        try:
            self._write_record(store, tracking, what=what)
        except DurableStateError as first:
            # Once more: a write whose failure was passing (a busy execution API) would otherwise end the
            # try with the jobs it found still running, and with no retry left nothing finds them again.
            self.log.warning("task %s: %s; writing it once more", self.task_id, first)
            try:
                self._write_record(store, tracking, what=what)
            except DurableStateError as err:
                raise self._found_jobs_unwritten(entries, err) from err
        return tracking

    def _found_jobs_unwritten(self, entries: list[dict[str, Any]], err: Exception) -> DurableStateError:
        """Both writes of the found jobs failed: the try neither ends them nor submits.

        A write that fails twice is most often a try that is no longer current (a clear or a retry gave its
        task instance a new id, which the store refuses): a newer try owns these jobs, and may be carrying
        on with one of them. Ending them here could end that try's job, while leaving them loses nothing:
        each carries its task instance's identity, and the next try (a retry, or the newer one) finds no
        record either and looks them up again."""
        ids = [entry["external_id"] for entry in entries]
        return DurableStateError(
            f"task {self.task_id}: older jobs of this task instance still run without a record: {ids}; "
            f"writing them down failed twice (last: {err}). Neither ending them nor submitting: a try that "
            "cannot write its task state cannot tell that it still owns them (a newer try may). They stay "
            "findable by the task instance's identity: the next try looks them up again and ends them; "
            "with no try to come, `airflow-durable orphans --scan` lists them."
        )

    def _resolve_tokens(self, context: Context, entries: list[dict[str, Any]]) -> list[dict[str, Any]]:
        """Older jobs the record knows only by their token (a submit interrupted, then cleared): look them up
        by the task instance's identity and name them by id. One lookup, only when there is such an entry;
        where the system offers none, or the lookup fails, the token stays (nothing is lost)."""
        if not any(entry.get("external_id") is None and entry.get("token") for entry in entries):
            return entries
        try:
            listed = self._find_by_identity(context)
        except Exception as err:
            self.log.warning(
                "task %s: looking up the older jobs known only by their token failed (%s: %s); the record "
                "keeps their tokens",
                self.task_id,
                type(err).__name__,
                err,
            )
            return entries
        if not listed:
            return entries
        resolved: list[dict[str, Any]] = []
        for entry in entries:
            token = entry.get("token")
            matches = [
                job for job in listed if entry.get("external_id") is None and token and job.token == token
            ]
            ids: list[Any] = []
            for job in matches:
                try:
                    ids.append(self.durable_parse_id(job.id))
                except ValueError:
                    continue
            if not ids:
                resolved.append(entry)
                continue
            self.log.info("task %s: token %s names job(s) %s", self.task_id, token, ids)
            resolved += [{**entry, "external_id": job} for job in ids]
        return resolved

    # ------------------------------------------------------------------ 5. I/O: end older jobs
    def _end_older_jobs(
        self, context: Context, the_plan: Plan, duplicates: list[Any], found: JobRecord | None = None
    ) -> tuple[dict[str, Any], ...]:
        """End every job the record keeps or this decision leaves behind; return what may still run.

        The older jobs are those the record keeps (`JobRecord.unended`), the previous epoch's job when
        the user cleared the task (`Decision.NEW_EPOCH`), duplicates of a crashed try's submission, and,
        without a record, those `_track_found_jobs` found (``found``: the intent that records them).
        A job whose status says it ended is dropped; an active one, or one whose status cannot be read,
        is cancelled and kept until a later try sees it ended (a cancel is a request); one the user asked
        to leave running (``cancel_on_kill=False``) is kept uncancelled; a token is resolved by the lookup
        (`_resolve_tokens`), and one whose job is not found is kept for `airflow-durable orphans`. This try
        read its record just now with its own task-instance id, so it is the owner of the task instance's
        logical job, and these jobs are the record's to end.
        """
        record = the_plan.record
        entries: list[dict[str, Any]] = list(record.unended) if record is not None else []
        if record is None and found is not None:
            entries += found.unended
        if record is not None and the_plan.decision is Decision.NEW_EPOCH and record.state != "done":
            entries += self._left_by_old_epoch(context, record)
        entries += [
            {"external_id": job, "token": record.token if record else None, "why": "duplicate submission"}
            for job in duplicates
        ]
        if not entries:
            return ()
        entries = self._resolve_tokens(context, entries)
        keeping = replace(record, unended=tuple(entries)) if record is not None else found
        kept: list[dict[str, Any]] = []
        for entry in entries:
            job = entry.get("external_id")
            if job is None:
                kept.append(entry)  # a token whose job was not found: kept until it is
                continue
            try:
                status = self.durable_status(job, context)
            except JobNotFoundError:
                continue
            except Exception as err:
                # Unknown is treated as active: a cancel of a job that already ended changes nothing, and
                # a read failure must never leave the old job running beside the new one.
                self.log.warning("task %s: could not read the status of job %s (%s)", self.task_id, job, err)
                status = "unknown: status read failed"
            else:
                if self.durable_phase(status) in (JobPhase.SUCCEEDED, JobPhase.FAILED):
                    continue
            verdict = self._may_cancel(
                job, recorded=True, origin=Origin.TRACKED, knowledge=Knowledge(Read.OK, keeping)
            )
            if verdict.allowed and entry.get("cancel", True):
                self._cancel_quietly(job, f"{entry.get('why') or 'an older job'} ({status})")
            kept.append({**entry, "status": status})
        if len(kept) > UNENDED_LIMIT:
            self.log.error(
                "task %s: %d older jobs may still run; the record keeps the newest %d: %s",
                self.task_id,
                len(kept),
                UNENDED_LIMIT,
                kept[:-UNENDED_LIMIT],
            )
        return tuple(kept[-UNENDED_LIMIT:])

    def _left_by_old_epoch(self, context: Context, record: JobRecord) -> list[dict[str, Any]]:
        """The jobs of the logical job the user ended: its tracked job, or what an interrupted submit made."""
        base: dict[str, Any] = {"token": record.token, "generation": record.generation, "epoch": record.epoch}
        why = "the task was cleared, which starts a new logical job"
        if not getattr(self, "cancel_on_kill", True):
            # The user's kill policy holds for a clear's end of the job too, as on the lookup path.
            why = f"{why}; cancel_on_kill=False leaves it running"
            base["cancel"] = False
        if record.state == "submitted":
            return [{**base, "external_id": record.external_id, "why": why}]
        found = self.durable_find_all(DurableToken(record.token, record.generation), context)
        if found:
            return [{**base, "external_id": job, "why": why} for job in found]
        # Nothing found by the token (or no way to look it up): the older try may still be inside its
        # submit call (a SIGTERM does not stop it), so its job may appear later. The token is kept.
        self.log.warning(
            "task %s: a try of the previous clear epoch was submitting with token %s; if that submission "
            "reached the system, its job is not tracked by id (the record keeps the token)",
            self.task_id,
            record.token,
        )
        return [{**base, "external_id": None, "why": "interrupted while submitting, then cleared"}]

    # ------------------------------------------------------------------ 5. I/O: submit, a generation a step
    def _submit_and_wait(
        self, context: Context, store: StateStore, the_plan: Plan, unended: tuple[dict[str, Any], ...]
    ) -> Any:
        assert the_plan.token is not None
        step: _Generation | JobRecord = _Generation(
            the_plan.decision,
            the_plan.token,
            the_plan.decision is Decision.RESUME_SUBMIT,
            the_plan.record,
            unended,
        )
        while isinstance(step, _Generation):
            step = self._submit_generation(context, store, the_plan.salt, step)
        # A try that adopted another try's job waits like a reconnecting one: it pushed its own job's XComs.
        return self._wait(
            context,
            store,
            step.external_id,
            reconnect=self._durable_origin is Origin.ADOPTED or self._durable_looked_up,
            written=step,
        )

    def _submit_generation(
        self, context: Context, store: StateStore, salt: str, gen: _Generation
    ) -> _Generation | JobRecord:
        """Write the intent, submit, and store the id: the recorded job, or the next generation to submit
        (a resent token answered with a job that already ended)."""
        me = self._me()
        if gen.resumed and gen.prior is not None:
            intent = gen.prior  # the crashed try's intent stands: same token, same intent time
        else:
            intent = self._stamp(
                JobRecord(
                    gen.token.generation,
                    gen.token.text,
                    "submitting",
                    salt=salt,
                    owner_try=me.try_number,
                    intent_at=_iso(_utcnow()),
                    unended=gen.unended,
                ),
                gen.prior,
                gen.decision,
            )
            self._write_record(store, intent, what="the submission intent (nothing was submitted)")
        self._durable_intent_token = gen.token.text
        self._durable_recorded = False
        if self.__dict__.get("_durable_killed"):
            raise DurableError(
                f"task {self.task_id}: the try was told to stop (SIGTERM: marked, cleared or timed out) "
                "before it submitted: not submitting."
            )
        self._durable_sending = gen.token
        try:
            submitted_id, resent = self._submit_or_resend(context, gen)
        except Exception as err:
            if self.__dict__.get("_durable_killed"):
                # Told to stop while the submission was out (its answer lost, or not come yet): no resend,
                # but the submission may have made a job that only its token names.
                self._end_jobs_of_token(gen.token, None, "told to stop while submitting", look_up=True)
            elif gen.resumed and self.durable_token_gone(err):
                # The crashed try's job was deleted and its token is refused for good: that job cannot
                # be reached again, so the logical job goes on under the next generation's token.
                self._durable_sending = None
                generation = gen.token.generation + 1
                self.log.warning(
                    "task %s: the job of token %s was deleted (%s: %s); submitting generation %d",
                    self.task_id,
                    gen.token.text,
                    type(err).__name__,
                    err,
                    generation,
                )
                return _Generation(
                    Decision.TERMINAL_RESUBMIT,
                    me.token(generation, intent.salt or salt),
                    False,
                    intent,
                    gen.unended,
                )
            raise
        self._hold(submitted_id, Origin.RESENT if gen.resumed or resent else Origin.SUBMITTED)
        if self.__dict__.get("_durable_killed"):
            # on_kill ran while the submit (or its resend) was in flight: the task instance was marked,
            # cleared or timed out, so nothing waits on this job. End it, and on a system without an
            # idempotency key whatever else the token names (a lost answer's job), instead of recording it.
            self._end_jobs_of_token(
                gen.token,
                submitted_id,
                "told to stop while submitting",
                look_up=self.durable_converge_after_submit,
            )
            raise DurableError(
                f"task {self.task_id}: the try was told to stop (SIGTERM: marked, cleared or timed out) "
                f"while its submission with token {gen.token.text} was in flight: the job it made is not "
                "waited on."
            )
        try:
            return self._record_submission(context, store, salt, gen, intent, submitted_id)
        except (DurableForeignJobError, DurableStateError):
            raise
        except Exception as err:
            # A read after the submit failed (the token lookup, a status): the try ends, but the job it
            # holds must not be known only to this process.
            self._record_held_job(store, intent, err)
            raise

    def _submit_or_resend(self, context: Context, gen: _Generation) -> tuple[Any, bool]:
        """Submit; if the call fails, send the same token once more before giving up (and whether it did).

        A failed submit may still have created the job (the answer was lost: a 5xx or a timeout after the
        service took it). The record holds only the token, so with no retry left the job would run on
        untracked. Sending the same token again is what a retry would do (the system's idempotency key hands
        back the job that was made; without one, the token is looked up first); doing it now, once, leaves
        the job tracked either way. A try told to stop meanwhile does not send again.
        """
        self._durable_looked_up = False
        try:
            return self.durable_submit(context, gen.token), False
        except DurableError:
            raise
        except Exception as err:
            if self.__dict__.get("_durable_killed") or self.durable_token_gone(err):
                raise  # a deleted job's token is refused again: sending it once more cannot help
            self.log.warning(
                "task %s: submitting with token %s failed (%s: %s); the job may have been created, so "
                "sending the same token once more",
                self.task_id,
                gen.token.text,
                type(err).__name__,
                err,
            )
            first = err
        if self.durable_converge_after_submit:
            # No idempotency key: sending again would start a second job beside the one the lost answer
            # made. Look the token up first and send again only if it names no job; a failed lookup ends
            # the try with the token in the intent, for the retry's lookup.
            try:
                found = self.durable_find_all(gen.token, context)
            except Exception as err:
                raise first from err
            if found:
                self._durable_looked_up = True
                self.log.warning(
                    "task %s: token %s already names %s: not sending it again",
                    self.task_id,
                    gen.token.text,
                    found[0],
                )
                return found[0], True
        try:
            return self.durable_submit(context, gen.token), True
        except Exception as err:
            raise first from err

    def _record_held_job(self, store: StateStore, intent: JobRecord, err: Exception) -> None:
        job = self._durable_external_id
        held = replace(
            intent,
            state="submitted",
            external_id=job,
            owner_try=self._me().try_number,
            submitted_at=_iso(_utcnow()),
            # Without an idempotency key the converging lookup did not end: the token may name another job
            # (a lost answer's, before a resend), which the next try looks up before it reconnects.
            unconverged=self.durable_converge_after_submit,
        )
        try:
            self._record_job(store, held, job)
        except DurableStateError:
            return
        self.log.error(
            "task %s: recorded job %s before failing (%s: %s): the next try reconnects to it%s",
            self.task_id,
            job,
            type(err).__name__,
            err,
            f", after looking token {intent.token} up for other jobs" if held.unconverged else "",
        )

    def _record_submission(
        self,
        context: Context,
        store: StateStore,
        salt: str,
        gen: _Generation,
        intent: JobRecord,
        submitted_id: Any,
    ) -> _Generation | JobRecord:
        """After the submit: refuse a foreign job, converge on the earliest, and store the id."""
        me = self._me()
        self._refuse_foreign(context, submitted_id, intent)
        duplicates: list[Any] = []
        if self.durable_converge_after_submit:
            found = self.durable_find_all(gen.token, context)
            if found:
                earliest = found[0]
                duplicates = [job for job in found[1:] if not _same(job, earliest)]
                if not _same(submitted_id, earliest):
                    if not any(_same(submitted_id, job) for job in duplicates):
                        duplicates.append(submitted_id)
                    self._hold(earliest, Origin.ADOPTED)
                    self.log.info(
                        "task %s: %d jobs carry token %s; adopting the earliest, %s",
                        self.task_id,
                        len(found),
                        gen.token.text,
                        earliest,
                    )
        self._durable_duplicates = tuple(duplicates)
        job = self._durable_external_id
        if gen.resumed:
            # The resent token may hand back a job that already ended (e.g. cancelled because its id could
            # not be stored): go on with the next generation in this same try.
            status, phase = self._classify(job, context)
            if phase is JobPhase.FAILED:
                generation = gen.token.generation + 1
                self.log.info(
                    "task %s: the job %s that token %s returned already ended %s; submitting generation %d",
                    self.task_id,
                    job,
                    gen.token.text,
                    status,
                    generation,
                )
                # The token's other jobs (the resend's among them) must not run beside the next generation's:
                # end them, and let the next intent keep any whose cancel failed.
                left = [
                    {"external_id": other, "token": gen.token.text, "why": "duplicate submission"}
                    for other in duplicates
                    if not self._cancel_quietly(
                        other, f"token {gen.token.text} gives way to generation {generation}"
                    )
                ]
                return _Generation(
                    Decision.TERMINAL_RESUBMIT,
                    me.token(generation, intent.salt or salt),
                    False,
                    replace(intent, state="submitted", external_id=job),
                    (*gen.unended, *left),
                )
        submitted = replace(
            intent,
            state="submitted",
            external_id=job,
            owner_try=me.try_number,
            submitted_at=_iso(_utcnow()),
            deadline=_iso(self._durable_deadline),
            unended=gen.unended,
            # Duplicates to cancel after this write: killed before that, the try leaves them to the retry,
            # which looks the token up again (`unconverged`) and ends them.
            unconverged=bool(duplicates),
        )
        if gen.resumed:
            submitted = self._stamp(submitted, intent, gen.decision)
        try:
            self._record_job(store, submitted, job)
        except DurableStateError as err:
            # No record names this try's duplicates either. Every converging try keeps the token's earliest
            # job, so they are nobody's, even where a newer try may own the job this one holds.
            for duplicate in duplicates:
                self._cancel_quietly(
                    duplicate, f"a later job of token {gen.token.text}, whose id write failed ({err})"
                )
            self._durable_duplicates = ()
            raise
        self.log.info("task %s: submitted job %s", self.task_id, job)
        kept = self._cancel_duplicates(store, submitted, duplicates, own=submitted_id)
        self._durable_duplicates = ()
        return kept

    def _end_jobs_of_token(self, token: DurableToken, held: Any, why: str, *, look_up: bool) -> None:
        """The try was told to stop while its submission with ``token`` was out, before the job's id was
        stored: end ``held`` (what the submit returned, if anything) and, with ``look_up``, every other job
        the token names, where this try may (`may_cancel`). Never raises: the try ends either way."""
        look_up = look_up and self._looks_tokens_up()
        # Nothing lists the token's job, but the system's key hands it back to a resend of the same token.
        resend = held is None and not look_up and self._resends_token()
        if held is None and not look_up and not resend:
            self.log.warning(
                "task %s: %s: a job its submission made is known only by token %s, which %s cannot look up; "
                "the record keeps the token",
                self.task_id,
                why,
                token.text,
                self.durable_system or type(self).__name__,
            )
            return
        knowledge = self._knowledge()
        if knowledge.read is Read.SKIPPED:
            self.log.warning(
                "task %s: %s inside a call to Airflow: cannot check who owns the jobs of token %s; the "
                "record keeps the token",
                self.task_id,
                why,
                token.text,
            )
            return
        if (look_up or resend) and knowledge.read is not Read.OK:
            # No record to read: the verdict on what the lookup finds does not depend on the job. Ask first.
            verdict = self._may_cancel(None, recorded=False, origin=Origin.RESENT, knowledge=knowledge)
            if not verdict.allowed:
                self.log.warning(
                    "task %s: %s: not looking token %s up: %s", self.task_id, why, token.text, verdict.reason
                )
                look_up = resend = False
        jobs: list[Any] = [held] if held is not None else []
        found: list[Any] | None = None
        if look_up:
            found = self._listed_by_token(token, why)
            jobs += [job for job in found if not any(_same(job, known) for known in jobs)]
        if resend:
            jobs += self._resent_for_its_job(token, why)
        if not jobs:
            self.log.info("task %s: %s: no job carries token %s", self.task_id, why, token.text)
        for job in jobs:
            origin = self._durable_origin if _same(job, held) else Origin.RESENT
            verdict = self._may_cancel(job, recorded=False, origin=origin, knowledge=knowledge)
            if (
                not verdict.allowed
                and held is not None
                and _same(job, held)
                and self.durable_converge_after_submit
            ):
                # A newer try may own the token's job, but on a system without an idempotency key every
                # converging try keeps the token's earliest job: a later one this submit made is nobody's.
                found = self._listed_by_token(token, why) if found is None else found
                if found and not _same(found[0], held) and any(_same(held, other) for other in found):
                    self._cancel_quietly(
                        job,
                        f"{why}: an earlier job, {found[0]!r}, carries token {token.text} and is kept",
                    )
                    continue
            if not verdict.allowed:
                self.log.warning(
                    "task %s: %s: not cancelling job %s: %s", self.task_id, why, job, verdict.reason
                )
                continue
            self._cancel_quietly(job, f"{why} ({verdict.reason})")

    def _resends_token(self) -> bool:
        """Whether a resend of a token returns the job it made (a native key: `durable_resend`)."""
        return (
            not self.durable_converge_after_submit
            and type(self).durable_resend is not DurableJobEngine.durable_resend
        )

    def _resent_for_its_job(self, token: DurableToken, why: str) -> list[Any]:
        """The job ``token`` names, as a resend of it answers (`durable_resend`); ``[]`` (logged) if the
        resend fails: the record keeps the token. A resend whose first send never reached the system makes
        the job here, which the caller ends like the one it stands for."""
        try:
            job = self.durable_resend(token)
        except Exception as err:
            self.log.error(
                "task %s: %s: sending token %s again to learn its job failed (%s: %s); a job it made may run "
                "on, named by that token in the record",
                self.task_id,
                why,
                token.text,
                type(err).__name__,
                err,
            )
            return []
        self.log.info("task %s: %s: token %s names job %s (sent again)", self.task_id, why, token.text, job)
        return [job]

    def _listed_by_token(self, token: DurableToken, why: str) -> list[Any]:
        """`_jobs_of_token`, earliest first; ``[]`` (logged) if the lookup fails: the record keeps it."""
        try:
            return self._jobs_of_token(token, self._durable_context or {})
        except Exception as err:
            self.log.error(
                "task %s: %s: looking token %s up failed (%s: %s); a job it made may run on, named by that "
                "token in the record",
                self.task_id,
                why,
                token.text,
                type(err).__name__,
                err,
            )
            return []

    def _cancel_unrecorded(self, external_id: Any, err: Exception) -> None:
        """The id could not be stored: cancel the job if this try may (nobody else tracks it)."""
        verdict = self._may_cancel(external_id, recorded=False)
        if not verdict.allowed:
            self.log.error(
                "task %s: job %s could not be recorded (%s) and is not cancelled: %s",
                self.task_id,
                external_id,
                err,
                verdict.reason,
            )
            return
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

    def _cancel_duplicates(
        self, store: StateStore, submitted: JobRecord, duplicates: list[Any], own: Any
    ) -> JobRecord:
        """Cancel the other jobs carrying this try's token, now that the record proves it owns the job.

        One whose cancel fails is kept in the record (one more write, only then).
        """
        failed: list[dict[str, Any]] = []
        for job in duplicates:
            origin = Origin.SUBMITTED if _same(job, own) else Origin.DUPLICATE
            verdict = self._may_cancel(
                job, recorded=True, origin=origin, knowledge=Knowledge(Read.OK, submitted)
            )
            if not verdict.allowed:
                self.log.warning("task %s: not cancelling job %s: %s", self.task_id, job, verdict.reason)
                continue
            if not self._cancel_quietly(
                job, f"another job with the same token, {submitted.external_id!r}, is kept"
            ):
                failed.append({"external_id": job, "token": submitted.token, "why": "duplicate submission"})
        if not failed:
            return submitted
        keeping = replace(submitted, unended=(*submitted.unended, *failed))
        try:
            self._write_record(store, keeping, what="the duplicates whose cancel failed")
        except DurableStateError as err:
            self.log.error("task %s: %s; duplicates %s may still run", self.task_id, err, failed)
            return submitted
        return keeping

    def _refuse_foreign(self, context: Context, external_id: Any, intent: JobRecord) -> None:
        intent_at = parse_time(intent.intent_at)
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

    def _claim(self, store: StateStore, the_plan: Plan, unended: tuple[dict[str, Any], ...]) -> JobRecord:
        """Make this try the job's owner before waiting: an older try resumed later must not cancel it."""
        record = the_plan.record
        assert record is not None
        claimed = self._stamp(
            replace(
                record,
                state="submitted",
                owner_try=self._me().try_number,
                deadline=_iso(self._durable_deadline),
                salt=record.salt or the_plan.salt,
                unended=unended,
                cleared_while_running=None,  # a kept record carried on after a clear: this epoch's now
            ),
            record,
            the_plan.decision,
        )
        # Held before the write: a kill while the write is in flight (a user's mark) ends the job the try
        # decided to wait on; the record names it either way.
        self._hold(record.external_id, Origin.TRACKED)
        self._durable_recorded = True
        if self.__dict__.get("_durable_killed"):
            # Told to stop (marked, cleared, timed out) while deciding: its on_kill held no job to end. End
            # the one it decided to wait on now, where the ownership rules allow, and do not wait.
            self.on_kill()
            raise DurableError(
                f"task {self.task_id}: the try was told to stop (SIGTERM: marked, cleared or timed out) "
                f"before it reconnected to job {record.external_id!r}: not waiting on it."
            )
        self._write_record(store, claimed, what=f"ownership of job {record.external_id!r}")
        return claimed

    # ------------------------------------------------------------------ 5. I/O: wait and complete
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
        # id, and the store refuses an older try's calls, so what this try wrote still stands.
        held = self._durable_written if written is None else written
        if getattr(self, "deferrable", False):
            self._durable_result = (False, None)
            self.durable_defer(external_id, context, reconnect)
            # No TaskDeferred: the provider completed inline (job already terminal → execute_complete
            # already ran) or does not wait at all (e.g. wait_for_termination=False).
            done, result = self._durable_result
            if done:
                return result
            return self._finish(context, store, external_id, False, held, None, None)
        self.durable_poll(external_id, context, reconnect)
        return self._finish(context, store, external_id, False, held, None, None)

    def _finish(
        self,
        context: Context,
        store: StateStore | None,
        external_id: Any,
        already_succeeded: bool,
        record: JobRecord | None,
        the_plan: Plan | None,
        unended: tuple[dict[str, Any], ...] | None,
    ) -> Any:
        result = self.durable_result(external_id, context, already_succeeded)
        if store is not None:
            self._retire_record(store, external_id, record, the_plan, unended)
        return result

    def _retire_record(
        self,
        store: StateStore,
        external_id: Any,
        record: JobRecord | None,
        the_plan: Plan | None,
        unended: tuple[dict[str, Any], ...] | None,
    ) -> None:
        """Mark the job ``done``: the last step of success."""
        try:
            if record is None:
                # Nothing this try wrote is at hand (e.g. it deferred under an earlier version): read it.
                record = self._read_record(store)
            # An orphaned older try may still be running beside this one; only retire our own job.
            if record is None or record.state == "submitting" or not record.names(external_id):
                return
            if record.state == "done" and the_plan is None:
                return
            done = replace(record, state="done", done_at=_iso(_utcnow()))
            if unended is not None:
                done = replace(done, unended=unended)
            # Stamped even without a decision: a record of an older schema or release read back here is
            # written in the current one, so that the epoch of this success stays known.
            done = self._stamp(done, record, the_plan.decision if the_plan is not None else None)
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

    def _on_deferred_timeout(self, store: StateStore) -> None:
        """The deferral timed out. If that was this try's execution_timeout, its job ends with it."""
        try:
            record = self._read_record(store)
        except DurableStateError as err:
            self.log.error(
                "task %s: the deferral timed out, but the record could not be read (%s): its job is left "
                "running, tracked by the record (a retry reconnects to it; `airflow-durable orphans` "
                "reports it if no try follows)",
                self.task_id,
                err,
            )
            return
        if record is None or record.state != "submitted":
            return
        deadline = parse_time(record.deadline)
        if deadline is None or _utcnow() < deadline - _DEADLINE_SLACK:
            # The provider's own wait limit ran out, not execution_timeout: the job stays tracked.
            self.log.warning(
                "task %s: the trigger's wait limit ran out; job %s is left running and tracked, the next "
                "try reconnects to it",
                self.task_id,
                record.external_id,
            )
            return
        verdict = self._may_cancel(
            record.external_id, recorded=True, origin=Origin.TRACKED, knowledge=Knowledge(Read.OK, record)
        )
        if not verdict.allowed:
            self.log.warning(
                "task %s: execution_timeout ran out while deferred; not cancelling job %s: %s",
                self.task_id,
                record.external_id,
                verdict.reason,
            )
            return
        self.log.error(
            "task %s: execution_timeout %s ran out while deferred; cancelling job %s",
            self.task_id,
            getattr(self, "execution_timeout", None),
            record.external_id,
        )
        self._cancel_quietly(record.external_id, "the task's execution_timeout ran out")

    def _durable_wrap_trigger(self, trigger: Any) -> Any:
        from airflow_durable.triggers.owned import DurableOwnedTrigger

        me = self._me()
        # What the trigger needs to apply the kill policy without the operator: a user who ends the
        # deferred task reaches only the trigger.
        job = {
            "system": self.durable_system,
            "locator": self._locator(),
            "external_id": self._durable_external_id,
            "cancel": bool(getattr(self, "cancel_on_kill", True)),
            # Whether the next try finds the job without its record: then a clear's kill leaves it to
            # that try where Airflow may have kept the record to carry on (3.4's keep_task_state).
            "findable": self._durable_findable(),
        }
        return DurableOwnedTrigger.wrap(
            trigger,
            dag_id=me.dag_id,
            run_id=me.run_id,
            task_id=me.task_id,
            map_index=me.map_index,
            job=job if self._durable_external_id is not None and self.durable_system else None,
        )

    def _locator(self) -> dict[str, Any]:
        locator = {name: getattr(self, name, None) for name in self.durable_locator_fields}
        return {k: v for k, v in locator.items() if isinstance(v, (str, int, float, bool))}

    def _metric_tags(self, context: Context) -> dict[str, str]:
        tags = {"operator": type(self).__name__}
        ti = context.get("ti")
        team = getattr(ti, "stats_tags", {}).get("team_name") if ti is not None else None
        if team:
            tags["team_name"] = team
        return tags
