"""The durable engine: decide, submit and persist, wait (deferred or polling), complete.

Every durable operator is ``class DurableX(DurableJobEngine, ProviderX)``: the engine owns
``execute``, ``execute_complete`` and ``on_kill``; the provider operator keeps its constructor,
templated fields, XComs and links. An operator module only declares the system-specific
``durable_*`` methods listed under "adapter contract" below.

What is stored
--------------
One JSON record per task instance under the operator's ``external_id_key`` in Airflow's
``task_state_store`` (shared by all tries of the task instance)::

    {"schema": "airflow-durable/1", "generation": 2, "token": "afd-…-g2",
     "state": "submitting" | "submitted" | "done", "external_id": <id or null>}

* ``submitting`` is written *before* the external call, so a crash inside the submit→persist window
  leaves the token behind and the retry resubmits with the same token (the system deduplicates) or
  looks the job up by it.
* ``submitted`` carries the external id and is written *before* deferring or polling.
* ``done`` replaces it as the last step of success, stamped with the task instance's ``max_tries``
  (its "clear epoch": Airflow raises ``max_tries`` whenever a user clears the task). A retry in the same
  epoch — the worker died after the job succeeded but before Airflow recorded success — returns the
  result without submitting; a user's clear starts a new epoch and runs the job again, as a new
  generation with a new token.
"""

from __future__ import annotations

import enum
import hashlib
import logging
import uuid
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any, ClassVar

from airflow.exceptions import AirflowException

from airflow_durable import shims

if TYPE_CHECKING:
    from collections.abc import Mapping

    from airflow_durable.shims import StateStore

log = logging.getLogger(__name__)

RECORD_SCHEMA = "airflow-durable/1"
_TOKEN_NAMESPACE = uuid.UUID("6f1f3b8e-4c8a-5d2e-9a57-0c1d2b3a4f5e")


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


class DurableError(AirflowException):
    """Base class of the engine's errors; each message names the task and the external id."""


class DurableStateError(DurableError):
    """The task state store could not be read or written, or holds a value the engine did not write."""


class DurableStatusError(DurableError):
    """The external system reported a status the operator does not know."""


class DurableEventError(DurableError):
    """A trigger event is malformed or belongs to another job."""


class JobNotFoundError(Exception):
    """Raised by an adapter's ``durable_status`` when the system no longer knows the id (404, expired)."""


@dataclass(frozen=True)
class DurableToken:
    """The idempotency token of one logical job: task instance identity plus generation.

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
        cls, dag_id: str, run_id: str, task_id: str, map_index: int, generation: int
    ) -> DurableToken:
        identity = "\x1f".join((dag_id, run_id, task_id, str(map_index)))
        digest = hashlib.sha256(identity.encode()).hexdigest()[:40]
        return cls(text=f"afd-{digest}-g{generation}", generation=generation)


@dataclass(frozen=True)
class JobRecord:
    """The engine's record in the task state store (see the module docstring)."""

    generation: int
    token: str
    state: str  # "submitting" | "submitted" | "done"
    external_id: Any = None
    epoch: int | None = None  # the task instance's max_tries when the job completed ("done" only)

    def to_json(self) -> dict[str, Any]:
        value: dict[str, Any] = {
            "schema": RECORD_SCHEMA,
            "generation": self.generation,
            "token": self.token,
            "state": self.state,
            "external_id": self.external_id,
        }
        if self.epoch is not None:
            value["epoch"] = self.epoch
        return value


@dataclass(frozen=True)
class Plan:
    """The outcome of the decision step."""

    decision: Decision
    generation: int
    token: DurableToken | None
    external_id: Any = None
    prior_status: str | None = None


class DurableJobEngine:
    """Mixin that makes a provider operator's submit-and-wait crash-safe. See the module docstring.

    Adapter contract (what an operator module declares):

    * ``external_id_key`` — the task-state-store key. Fixed forever once released.
    * ``durable_submit(context, token)`` — submit one job carrying ``token`` (``None`` when not durable)
      as the system's idempotency key / tag; return its external id. Must set whatever attribute the
      provider's own ``on_kill`` uses, as the provider does.
    * ``durable_status(external_id, context)`` — raw status string; raise ``JobNotFoundError`` when
      the system no longer knows the id.
    * ``durable_phase(status)`` — ``JobPhase`` for a raw status, ``None`` for one it does not know.
    * ``durable_cancel(external_id)`` — best-effort cancel.
    * ``durable_poll(external_id, context, reconnect)`` — the provider's synchronous wait; raises on
      job failure.
    * ``durable_defer(external_id, context, reconnect)`` — hand the id to the provider's own trigger
      (``self.defer(..., method_name="execute_complete")``) or complete inline as the provider does.
    * ``durable_event_id(event)`` — validate a trigger event and return the id it is about, or ``None``
      for a well-formed event that names no job (e.g. Snowflake's and BigQuery's error events): it
      concerns the tracked job.
    * ``durable_result(external_id, context, already_succeeded)`` — the provider's return value and
      XComs; ``already_succeeded`` means no poll/defer ran in this try, so push what they would have.
    * optional ``durable_find(token, context)`` — look a job up by its token, for systems without
      native idempotency; return its id or ``None``.
    * optional ``durable_parse_id(value)`` — validate a stored id; raise ``ValueError`` if malformed.
    """

    external_id_key: ClassVar[str]
    #: False for systems whose submit call cannot carry an idempotency key *and* have no lookup.
    durable_window_closed: ClassVar[bool] = True

    @shims.apply_defaults
    def __init__(self, *, durable: bool | None = None, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        # Set after the provider's __init__: on Airflow 3.3 its ResumableJobMixin sets ``durable`` too,
        # and ours must win so behaviour does not depend on the provider version.
        self.durable = shims.resolve_durable(durable, type(self).__name__)
        self._durable_external_id: Any = None
        self._durable_result: tuple[bool, Any] = (False, None)

    # ------------------------------------------------------------------ the adapter contract
    def durable_submit(self, context: Mapping[str, Any], token: DurableToken | None) -> Any:
        raise NotImplementedError

    def durable_status(self, external_id: Any, context: Mapping[str, Any]) -> str:
        raise NotImplementedError

    def durable_phase(self, status: str) -> JobPhase | None:
        raise NotImplementedError

    def durable_cancel(self, external_id: Any) -> None:
        raise NotImplementedError

    def durable_poll(self, external_id: Any, context: Mapping[str, Any], reconnect: bool) -> None:
        raise NotImplementedError

    def durable_defer(self, external_id: Any, context: Mapping[str, Any], reconnect: bool) -> None:
        raise NotImplementedError

    def durable_event_id(self, event: Any) -> Any:
        raise NotImplementedError

    def durable_result(self, external_id: Any, context: Mapping[str, Any], already_succeeded: bool) -> Any:
        raise NotImplementedError

    def durable_find(self, token: DurableToken, context: Mapping[str, Any]) -> Any:
        return None

    def durable_parse_id(self, value: Any) -> Any:
        if value is None or value == "" or isinstance(value, (bool, dict, list)):
            raise ValueError(f"not a job id: {value!r}")
        return value

    # ------------------------------------------------------------------ entry points
    def execute(self, context: Mapping[str, Any], **_runner_kwargs: Any) -> Any:
        # Airflow 2's task runner passes an ExecutorSafeguard sentinel keyword; it means nothing here.
        store = shims.get_task_state_store(context) if self.durable else None
        if self.durable and store is None:
            self.log.warning(
                "task %s: task_state_store not available in the context; submitting a fresh job",
                self.task_id,
            )
        if store is None:
            self.log.info(
                "task %s [not_durable]: durable=False or Airflow < 3.3; submitting a fresh job", self.task_id
            )
            return self._submit_and_wait(context, None, None, generation=0)

        plan = self._decide(context, store)
        if plan.decision is Decision.RECONNECT:
            return self._wait(context, store, plan.external_id, reconnect=True)
        if plan.decision is Decision.ALREADY_SUCCEEDED:
            self._durable_external_id = plan.external_id
            return self._finish(context, store, plan.external_id, already_succeeded=True)
        return self._submit_and_wait(context, store, plan.token, generation=plan.generation)

    def execute_complete(self, context: Mapping[str, Any], event: Any = None) -> Any:
        store = shims.get_task_state_store(context) if self.durable else None
        record = self._read_record(store) if store is not None else None
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
        result = self._finish(context, store, external_id, already_succeeded=False)
        self._durable_result = (True, result)
        return result

    def on_kill(self) -> None:
        # Cancel like the provider would; the record stays, so a retry sees "cancelled" and submits fresh.
        if self._durable_external_id is not None:
            self.log.info("task %s: cancelling job %s on kill", self.task_id, self._durable_external_id)
            self.durable_cancel(self._durable_external_id)
        else:
            super().on_kill()  # type: ignore[misc]

    # ------------------------------------------------------------------ the decision
    def _decide(self, context: Mapping[str, Any], store: StateStore) -> Plan:
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

    def _plan(self, context: Mapping[str, Any], store: StateStore, tags: dict[str, str]) -> Plan:
        record = self._read_record(store)
        if record is not None and record.state == "done":
            if record.epoch is not None and record.epoch == _clear_epoch(context):
                # Same epoch: this try follows a crash after success, not a user's clear.
                shims.incr_metric("resumable_job.already_succeeded", tags)
                return Plan(Decision.ALREADY_SUCCEEDED, record.generation, None, record.external_id, "done")
            record_generation = record.generation
            record = None
        else:
            record_generation = 0
        if record is None:
            generation = record_generation + 1
            shims.incr_metric("resumable_job.fresh_submit", tags)
            return Plan(Decision.SUBMIT, generation, self._token(context, generation))

        if record.state == "submitting":
            # A previous try died inside the submit→persist window: same generation, same token.
            token = DurableToken(record.token, record.generation)
            found = self.durable_find(token, context)
            if found is None:
                shims.incr_metric("resumable_job.fresh_submit", tags)
                return Plan(Decision.RESUME_SUBMIT, record.generation, token)
            record = replace(record, state="submitted", external_id=found)
            self._write_record(store, record, what=f"job {found!r} found by its token")

        shims.incr_metric("resumable_job.reconnect_attempt", tags)
        try:
            status = self.durable_status(record.external_id, context)
        except JobNotFoundError:
            status = "NOT_FOUND"
            phase = JobPhase.FAILED
        else:
            phase = self.durable_phase(status)
        if phase is None:
            raise DurableStatusError(
                f"task {self.task_id}: job {record.external_id!r} reports status {status!r}, which "
                f"{type(self).__name__} does not know. Not submitting, since the job may still be running; "
                "the next try checks again."
            )
        if phase is JobPhase.ACTIVE:
            shims.incr_metric("resumable_job.reconnect_success", tags)
            return Plan(Decision.RECONNECT, record.generation, None, record.external_id, status)
        if phase is JobPhase.SUCCEEDED:
            shims.incr_metric("resumable_job.already_succeeded", tags)
            return Plan(Decision.ALREADY_SUCCEEDED, record.generation, None, record.external_id, status)
        shims.incr_metric("resumable_job.terminal_resubmit", tags)
        generation = record.generation + 1
        return Plan(
            Decision.TERMINAL_RESUBMIT,
            generation,
            self._token(context, generation),
            record.external_id,
            status,
        )

    _DECISION_MESSAGES: ClassVar[dict[Decision, str]] = {
        Decision.SUBMIT: "no tracked job; submitting generation {gen} (token {token})",
        Decision.RESUME_SUBMIT: "a previous try was interrupted while submitting; resubmitting generation "
        "{gen} with the same token {token} so the system returns the job it already started",
        Decision.RECONNECT: "job {id} is still {status}; reconnecting without submitting",
        Decision.ALREADY_SUCCEEDED: "job {id} already succeeded ({status}); returning its result without "
        "submitting",
        Decision.TERMINAL_RESUBMIT: "job {id} ended {status}; submitting generation {gen} (token {token})",
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
        context: Mapping[str, Any],
        store: StateStore | None,
        token: DurableToken | None,
        generation: int,
    ) -> Any:
        if store is not None and token is not None:
            intent = JobRecord(generation=generation, token=token.text, state="submitting")
            self._write_record(store, intent, what="the submission intent (nothing was submitted)")
        external_id = self.durable_submit(context, token)
        self._durable_external_id = external_id
        if store is not None and token is not None:
            record = JobRecord(generation, token.text, "submitted", external_id)
            try:
                self._write_record(store, record, what=f"job id {external_id!r}")
            except DurableStateError as err:
                self._cancel_untracked(external_id, err)
                raise
        self.log.info("task %s: submitted job %s", self.task_id, external_id)
        return self._wait(context, store, external_id, reconnect=False)

    def _wait(
        self, context: Mapping[str, Any], store: StateStore | None, external_id: Any, reconnect: bool
    ) -> Any:
        self._durable_external_id = external_id
        if getattr(self, "deferrable", False):
            self._durable_result = (False, None)
            self.durable_defer(external_id, context, reconnect)
            # No TaskDeferred: the provider completed inline (job already terminal → execute_complete
            # already ran) or does not wait at all (e.g. wait_for_termination=False).
            done, result = self._durable_result
            if done:
                return result
            return self._finish(context, store, external_id, already_succeeded=False)
        self.durable_poll(external_id, context, reconnect)
        return self._finish(context, store, external_id, already_succeeded=False)

    def _finish(
        self, context: Mapping[str, Any], store: StateStore | None, external_id: Any, already_succeeded: bool
    ) -> Any:
        result = self.durable_result(external_id, context, already_succeeded)
        if store is not None:
            self._retire_record(context, store, external_id)
        return result

    def _retire_record(self, context: Mapping[str, Any], store: StateStore, external_id: Any) -> None:
        """Mark the job ``done`` in this clear epoch: the last step of success."""
        try:
            record = self._read_record(store)
            # An orphaned older try may still be running beside this one; only retire our own job.
            if record is None or record.state != "submitted" or str(record.external_id) != str(external_id):
                return
            done = replace(record, state="done", epoch=_clear_epoch(context))
            self._write_record(store, done, what="completion")
        except DurableStateError as err:
            # The job succeeded; failing the task now would only make a retry find it succeeded again.
            self.log.error(
                "task %s: job %s succeeded but the completion could not be recorded (%s); a later clear "
                "of this task will find the job already succeeded instead of running it again",
                self.task_id,
                external_id,
                err,
            )

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
            return self._parse_record(raw)
        except (ValueError, TypeError, KeyError) as err:
            raise DurableStateError(
                f"task {self.task_id}: task_state_store key {self.external_id_key!r} holds {raw!r}, which "
                f"is not an airflow-durable record ({err}). Not submitting, because a job may already be "
                "running for this task: check the external system, then delete the key "
                "(e.g. `context['task_state_store'].delete(key)` or clear the task's state store) and retry."
            ) from err

    def _parse_record(self, raw: Any) -> JobRecord:
        if not isinstance(raw, dict) or raw.get("schema") != RECORD_SCHEMA:
            raise ValueError(f"expected a dict with schema {RECORD_SCHEMA!r}")
        generation, token, state = raw["generation"], raw["token"], raw["state"]
        if not isinstance(generation, int) or isinstance(generation, bool) or generation < 1:
            raise ValueError(f"bad generation {generation!r}")
        if not isinstance(token, str) or not token:
            raise ValueError(f"bad token {token!r}")
        if state not in ("submitting", "submitted", "done"):
            raise ValueError(f"bad state {state!r}")
        external_id = raw.get("external_id")
        if state == "submitted" or (state == "done" and external_id is not None):
            external_id = self.durable_parse_id(external_id)
        epoch = raw.get("epoch")
        if epoch is not None and (not isinstance(epoch, int) or isinstance(epoch, bool)):
            raise ValueError(f"bad epoch {epoch!r}")
        return JobRecord(generation, token, state, external_id, epoch)

    def _write_record(self, store: StateStore, record: JobRecord, what: str) -> None:
        try:
            store.set(self.external_id_key, record.to_json())
        except Exception as err:
            raise DurableStateError(
                f"task {self.task_id}: could not write {what} to task_state_store key "
                f"{self.external_id_key!r} ({type(err).__name__}: {err})"
            ) from err

    # ------------------------------------------------------------------ helpers
    def _token(self, context: Mapping[str, Any], generation: int) -> DurableToken:
        ti = context["ti"]
        map_index = getattr(ti, "map_index", -1)
        return DurableToken.for_task_instance(
            ti.dag_id, ti.run_id, ti.task_id, -1 if map_index is None else map_index, generation
        )

    def _metric_tags(self, context: Mapping[str, Any]) -> dict[str, str]:
        tags = {"operator": type(self).__name__}
        ti = context.get("ti")
        team = getattr(ti, "stats_tags", {}).get("team_name") if ti is not None else None
        if team:
            tags["team_name"] = team
        return tags


def _clear_epoch(context: Mapping[str, Any]) -> int | None:
    """The task instance's ``max_tries``: constant across retries, raised by every user clear."""
    max_tries = getattr(context.get("ti"), "max_tries", None)
    return max_tries if isinstance(max_tries, int) and not isinstance(max_tries, bool) else None
