"""Durable Databricks operators: drop-in replacements for the provider's submit-run and run-now.

How Databricks submits, reports, classifies, defers and returns — the durable logic is in
`airflow_durable.engine`.

* Submission carries Databricks' native ``idempotency_token`` (derived from the task instance and
  generation), so a retry after a crash between submit and persist gets the run it already started.
  A token you set yourself (``idempotency_token=`` or ``json["idempotency_token"]``) wins; then a
  retry after a *failed* run gets that same failed run back from Databricks, as upstream.
* Status is ``LIFE_CYCLE:RESULT`` from ``runs/get``; a 404 means the run history expired.
* Waiting reuses the provider's own poll loop (``deferrable=False``) or defers to the provider's
  ``DatabricksExecutionTrigger`` (``deferrable=True``).
* Result and XComs are the provider's: ``run_id``, ``run_page_url`` (and ``job_id`` when deferrable),
  return value ``None``.
"""

from __future__ import annotations

import contextlib
import datetime as dt
from typing import TYPE_CHECKING, Any, ClassVar

from airflow_durable import catalogue
from airflow_durable.engine import (
    DurableJobEngine,
    DurableLookupError,
    JobNotFoundError,
    JobPhase,
    earliest_first,
)
from airflow_durable.identity_tags import FoundJob, identity_of, marked_jobs, marker
from airflow_durable.operators import provider_required

with provider_required(__name__):
    # The hook (the provider's own ``_hook``), trigger and helpers are reached through the provider
    # operator module's names at call time, as upstream does: a test that patches
    # ``airflow.providers.databricks.operators.databricks.DatabricksHook`` patches ours too.
    from airflow.providers.databricks.operators import databricks as provider

    from airflow_durable.shims import databricks as compat

if TYPE_CHECKING:
    from collections.abc import Iterator

    from airflow.sdk import Context

    from airflow_durable.engine import DurableToken

__all__ = ["DurableDatabricksRunNowOperator", "DurableDatabricksSubmitRunOperator"]

#: runs/list: "limit ... must be greater than 0 and less than 25" (databricks-sdk JobsAPI.list_runs).
_LIST_LIMIT = 24
_LIST_RUNS_ENDPOINT = ("GET", "2.2/jobs/runs/list")

#: The provider's ``runs/get`` reads, and the field of the run each returns (``None``: the whole run).
_RUN_READS = {"get_run": None, "get_job_id": "job_id", "get_run_page_url": "run_page_url"}


#: Databricks removes a run 60 days after it started (runs/get): without a task context, the lookup reads
#: back that far.
_RUN_RETENTION = dt.timedelta(days=60)
#: Airflow's clock and Databricks' are not the same clock: the listing reads this much further back.
_CLOCK_MARGIN = dt.timedelta(minutes=10)


def _earliest_start(context: Context | None) -> tuple[dt.datetime, str]:
    """The earliest start time a run of the task instance in ``context`` can have, and what says so.

    A DAG run's ``run_after`` is set when it is created and never changed (not by a clear, a mark or a
    state change), and the scheduler starts no task of a run before it (``DagRun.run_after <= now`` in
    the queries that queue and examine runs). Its ``start_date`` is later, except where a clear of the
    finished run reset it (``clear_task_instances``), so the earlier of the two stands; ``dag.test()``
    may set a future ``run_after`` and starts at once. Less `_CLOCK_MARGIN`. Without a DAG run in
    ``context``: Databricks' retention.
    """
    dag_run = None if context is None else context.get("dag_run")
    known = []
    for name in ("run_after", "start_date"):
        value = getattr(dag_run, name, None)
        if isinstance(value, dt.datetime):
            known.append((value if value.tzinfo else value.replace(tzinfo=dt.UTC), name))
    if not known:
        return dt.datetime.now(dt.UTC) - _RUN_RETENTION, "no DAG run: Databricks keeps runs 60 days"
    moment, name = min(known)
    return moment - _CLOCK_MARGIN, f"the DAG run's {name} {moment.isoformat()} less {_CLOCK_MARGIN}"


def _when(start_time: Any) -> str:
    if isinstance(start_time, int) and not isinstance(start_time, bool) and start_time > 0:
        return dt.datetime.fromtimestamp(start_time / 1000, dt.UTC).isoformat()
    return "an unknown start time"


def _found(run: dict[str, Any], token: str) -> FoundJob:
    state = run.get("state") or {}
    started = run.get("start_time")
    return FoundJob(
        id=int(run["run_id"]),
        status=f"{state.get('life_cycle_state')}:{state.get('result_state') or ''}",
        created_at=dt.datetime.fromtimestamp(started / 1000, dt.UTC)
        if isinstance(started, int) and not isinstance(started, bool) and started > 0
        else None,
        token=token,
    )


class _DatabricksRunAdapter(DurableJobEngine):
    """What both Databricks operators share: a run id, ``runs/get``, ``runs/cancel``, the trigger."""

    durable_abstract = True
    # Run life cycle states (hooks/databricks.py RunState.RUN_LIFE_CYCLE_STATES); the status is
    # ``LIFE_CYCLE:RESULT`` and only ``TERMINATED:SUCCESS`` succeeded.
    durable_active_statuses = frozenset(
        {"PENDING", "QUEUED", "RUNNING", "TERMINATING", "BLOCKED", "WAITING_FOR_RETRY"}
    )
    durable_succeeded_statuses = frozenset({"TERMINATED:SUCCESS"})
    durable_failed_statuses = frozenset({"TERMINATED", "SKIPPED", "INTERNAL_ERROR"})
    durable_locator_fields = ("databricks_conn_id",)
    durable_id_type, durable_id_name = int, "Databricks run id"
    durable_event_id_key, durable_event_statuses = "run_id", None

    run_id: int | None
    _hook: Any

    def _payload(self, context: Context) -> dict[str, Any]:
        raise NotImplementedError

    def _start_run(self, payload: dict[str, Any]) -> int:
        raise NotImplementedError

    def _mark(self, payload: dict[str, Any], context: Context, token: DurableToken) -> None:
        """Make the run findable by its task instance (`durable_find`); run-now has no field for it."""

    def durable_submit(self, context: Context, token: DurableToken | None) -> int:
        payload = self._payload(context)
        if token is not None:
            payload.setdefault("idempotency_token", token.text)
            self._mark(payload, context, token)
        # A token of the user's own (idempotency_token= or json) is sent again by every DAG run.
        self.__dict__["_durable_users_token"] = token is not None and payload.get(
            "idempotency_token"
        ) not in (
            None,
            token.text,
        )
        # What went out, for durable_resend (built once: building runs cancel_previous_runs).
        self.__dict__["_durable_sent"] = (token.text if token is not None else None, dict(payload))
        # Set run_id the moment the run exists, as the provider does, so on_kill can cancel it.
        self.run_id = self._start_run(payload)
        return self.run_id

    def durable_resend(self, token: DurableToken) -> int:
        sent: tuple[str | None, dict[str, Any]] = self.__dict__.get("_durable_sent") or (None, {})
        sent_token, payload = sent
        # Only a run the engine's own token names: a token of the user's own may name another DAG run's.
        if sent_token != token.text or payload.get("idempotency_token") != token.text:
            raise NotImplementedError(f"task {self.task_id} sent no run-now with token {token.text}")
        return self._start_run(dict(payload))

    def durable_status(self, external_id: int, context: Context) -> str:
        try:
            run_info = self._hook.get_run(external_id)
        except Exception as err:
            if compat.is_not_found(err):
                raise JobNotFoundError(external_id) from err
            raise
        # The provider's wait and result read the run again at once (job id, page URL, state): they get
        # this answer instead, once each (see _known_run).
        self.__dict__["_durable_run_info"] = (external_id, run_info, tuple(_RUN_READS))
        state = run_info.get("state") or {}
        life_cycle = state.get("life_cycle_state")
        result = state.get("result_state") or ""
        return f"{life_cycle}:{result}"

    def durable_created_at(self, external_id: int, context: Context) -> dt.datetime | None:
        # runs/submit and run-now answer with the run id alone: reading start_time puts a runs/get between
        # the submit and the run id being stored, worth it only for a token of the user's own (ours is
        # unique to the task instance, DAG run and generation). That read is the one the provider makes
        # next, for its page URL, which it then answers (see _known_run): no extra call.
        if not self.__dict__.get("_durable_users_token"):
            return None
        run_info = self._hook.get_run(external_id)
        self.__dict__["_durable_run_info"] = (external_id, run_info, ("get_run_page_url",))
        started = run_info.get("start_time")
        if not isinstance(started, int) or isinstance(started, bool) or started <= 0:
            return None
        return dt.datetime.fromtimestamp(started / 1000, dt.UTC)

    def durable_status_text(self, status: str) -> str:
        # The composite "<life cycle>:<result>" of a run with no result yet is its life cycle alone.
        return status.removesuffix(":")

    def durable_phase(self, status: str) -> JobPhase | None:
        # Composite: the whole status where it succeeded, otherwise its life cycle state decides.
        succeeded = status in self.durable_succeeded_statuses
        return super().durable_phase(status if succeeded else status.partition(":")[0])

    def durable_cancel(self, external_id: int) -> None:
        self._hook.cancel_run(external_id)

    def durable_token_gone(self, error: Exception) -> bool:
        # A resent token whose run was deleted is refused on every later submit: the run is gone.
        return compat.is_deleted_token(error)

    def durable_find(self, identity: str, context: Context | None = None) -> list[FoundJob]:
        """This task instance's runs of every generation and clear epoch, newest first (`FoundJob`s)."""
        raise NotImplementedError(f"{type(self).__name__}: {catalogue.LOOKUPS[self.external_id_key].reason}")

    @contextlib.contextmanager
    def _known_run(self, run_id: int) -> Iterator[None]:
        """While the provider's handler runs, its first ``runs/get`` reads of ``run_id`` (``get_job_id``,
        ``get_run_page_url``, ``get_run``: one call each, or those the read was made for) are answered with
        what the decision or the creation check just read."""
        known = self.__dict__.pop("_durable_run_info", None)
        if known is None or known[0] != run_id:
            yield
            return
        run, reads, hook = known[1], known[2], self._hook
        answers = {
            name: run if key is None else run[key]
            for name, key in _RUN_READS.items()
            if name in reads and (key is None or key in run)
        }
        saved = {name: vars(hook).get(name) for name in answers}

        def once(name: str, real: Any) -> Any:
            def answer(*args: Any, **kwargs: Any) -> Any:
                if args == (run_id,) and not kwargs and name in answers:
                    return answers.pop(name)
                return real(*args, **kwargs)

            return answer

        for name in answers:
            setattr(hook, name, once(name, getattr(hook, name)))
        try:
            yield
        finally:
            for name, value in saved.items():
                if value is None:
                    vars(hook).pop(name, None)
                else:
                    setattr(hook, name, value)

    def durable_poll(self, external_id: int, context: Context, reconnect: bool) -> None:
        self.run_id = external_id
        with self._known_run(external_id):
            provider._handle_databricks_operator_execution(self, self._hook, self.log, context)

    def durable_defer(self, external_id: int, context: Context, reconnect: bool) -> None:
        self.run_id = external_id
        # Pushes job_id / run_id / run_page_url, then defers to DatabricksExecutionTrigger — or calls
        # execute_complete inline when the run is already terminal.
        with self._known_run(external_id):
            provider._handle_deferrable_databricks_operator_execution(self, self._hook, self.log, context)

    def durable_event_id(self, event: Any) -> int:
        if isinstance(event, dict):
            provider.validate_trigger_event(event)
            provider.RunState.from_json(event["run_state"])
        return super().durable_event_id(event)

    def durable_result(self, external_id: int, context: Context, already_succeeded: bool) -> None:
        self.run_id = external_id
        if already_succeeded and self.do_xcom_push:
            # No poll or deferral ran in this try: push what the provider's path would have pushed.
            ti = context["ti"]
            with self._known_run(external_id):  # the decision just read the run
                if self.deferrable:
                    ti.xcom_push(key=provider.XCOM_JOB_ID_KEY, value=self._hook.get_job_id(external_id))
                ti.xcom_push(key=provider.XCOM_RUN_ID_KEY, value=external_id)
                ti.xcom_push(
                    key=provider.XCOM_RUN_PAGE_URL_KEY, value=self._hook.get_run_page_url(external_id)
                )
        return None


class DurableDatabricksSubmitRunOperator(_DatabricksRunAdapter, provider.DatabricksSubmitRunOperator):
    """``DatabricksSubmitRunOperator`` whose retries reconnect to the run instead of submitting another.

    Same arguments, templated fields, XComs, extra links and return value as the provider operator,
    plus ``durable`` (default: durable wherever Airflow has a task state store, i.e. 3.3+).

    Stored under the task-state-store key ``airflow_durable.databricks_submit_run`` (fixed).
    """

    def _payload(self, context: Context) -> dict[str, Any]:
        return compat.submit_payload(self, context)

    #: How many one-time runs a lookup reads at most (pages of 24), newest first back to the logical job's
    #: earliest possible start (`_earliest_start`); a listing with more left there fails the try
    #: (`DurableLookupError`) instead of answering with what it read.
    durable_lookup_runs: ClassVar[int] = 2400

    def durable_find(self, identity: str, context: Context | None = None) -> list[FoundJob]:
        """This task instance's runs of every generation and clear epoch, newest first.

        ``runs/list`` filters no names: the workspace's one-time runs that started since the earliest start
        a run of this task instance can have are read newest first and matched on the ``[<identity>
        <token>]`` marker in their name. More than ``durable_lookup_runs`` there: `DurableLookupError`.
        """
        return [job for marked, job in self._marked_runs(context) if marked == identity]

    def durable_find_all(self, token: DurableToken, context: Context) -> list[int]:
        """The runs carrying ``token``, earliest first: a crash-window retry asks before resending it, since
        a token Databricks no longer deduplicates (its run deleted or gone) would start a second run."""
        runs = self._marked_runs(context)
        return earliest_first({int(job.id): job.created_at for _, job in runs if job.token == token.text})

    def _marked_runs(self, context: Context | None) -> list[tuple[str, FoundJob]]:
        """``(identity, run)`` of every marked one-time run started since `_earliest_start`, newest first."""
        since, why = _earliest_start(context)
        params: dict[str, Any] = {
            "run_type": "SUBMIT_RUN",
            "limit": _LIST_LIMIT,
            "start_time_from": int(since.timestamp() * 1000),
        }
        found: list[tuple[str, FoundJob]] = []
        read = pages = 0
        oldest: Any = None
        while True:
            page = self._hook._do_api_call(_LIST_RUNS_ENDPOINT, dict(params))
            runs = page.get("runs") or []
            pages += 1
            read += len(runs)
            for run in runs:
                oldest = run.get("start_time", oldest)
                for identity, token in marked_jobs(run.get("run_name"))[:1]:
                    found.append((identity, _found(run, token)))
            if not page.get("has_more"):
                return found
            cut = None
            if not page.get("next_page_token"):
                cut = "runs/list answered has_more without a next_page_token"
            elif pages * _LIST_LIMIT >= self.durable_lookup_runs:
                cut = f"the lookup's bound (durable_lookup_runs={self.durable_lookup_runs}) was reached"
            if cut is not None:
                raise DurableLookupError(
                    f"task {self.task_id}: looking up this task instance's runs, {read} one-time runs that "
                    f"started since {since.isoformat()} ({why}) were read, newest first back to "
                    f"{_when(oldest)}, and more remain: {cut}. The runs that started between those two times "
                    "were not looked at, so a run an earlier try left going may be among them. Raise "
                    "durable_lookup_runs on the operator class to read further."
                )
            params["page_token"] = page["next_page_token"]

    def _mark(self, payload: dict[str, Any], context: Context, token: DurableToken) -> None:
        # runs/submit takes no tags: the run name you set stays, the marker follows it.
        name = str(payload.get("run_name") or "").strip()
        mark = marker(identity_of(context), token.text, submit_only=not self.durable_waits())
        payload["run_name"] = f"{name} {mark}".lstrip()

    def _start_run(self, payload: dict[str, Any]) -> int:
        return self._hook.submit_run(payload)


class DurableDatabricksRunNowOperator(_DatabricksRunAdapter, provider.DatabricksRunNowOperator):
    """``DatabricksRunNowOperator`` whose retries reconnect to the run instead of starting another.

    ``cancel_previous_runs=True`` still cancels the job's other runs before a *new* run is started,
    but never the run a retry reconnects to. ``repair_run`` works on both paths as upstream.

    Stored under the task-state-store key ``airflow_durable.databricks_run_now`` (fixed).
    """

    def _payload(self, context: Context) -> dict[str, Any]:
        return compat.run_now_payload(self, context)

    def _start_run(self, payload: dict[str, Any]) -> int:
        return self._hook.run_now(payload)

    def durable_poll(self, external_id: int, context: Context, reconnect: bool) -> None:
        # The provider's repair path reads the merged payload; on reconnect no submit built it, and
        # rebuilding it must not re-run cancel_previous_runs (that would cancel the run we rejoin).
        compat.prepare_run_now_reconnect(self, context)
        super().durable_poll(external_id, context, reconnect)
