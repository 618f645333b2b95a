"""Durable dbt Cloud operator: a drop-in replacement for the provider's ``DbtCloudRunJobOperator``.

How dbt Cloud submits, reports, classifies, defers and returns; the durable logic is in
`airflow_durable.engine` (details: ``docs/systems/dbt-cloud.md``).

* The v2 API has no idempotency key: the token travels in the run's ``cause`` (`cause_with_token`), and
  a retry after a crash in the submit→persist window, or a try that triggered at the same instant as
  another, adopts the earliest run of the job whose cause carries exactly this token
  (`DurableDbtCloudRunJobOperator.durable_find_all`); no run of anyone else is ever adopted.
* Status is the run's ``status`` from ``GET runs/{id}/``; a 404 means the run is gone.
* Waiting is the provider hook's ``wait_for_job_run_status`` or its ``DbtCloudRunJobTrigger``, with
  ``end_time`` = now + ``timeout`` on a reconnect too. XComs (``job_run_url``, ``job_run_id``) and the
  return value (the run id) are the provider's, on every path.
"""

from __future__ import annotations

import contextlib
import time
import warnings
from collections.abc import Iterator
from typing import TYPE_CHECKING, Any, ClassVar

from airflow_durable.engine import DurableJobEngine, JobNotFoundError, earliest_first, tokens_in
from airflow_durable.engine.identity import parse_time
from airflow_durable.identity_tags import FoundJob, identities_in, identity_of
from airflow_durable.operators import _text, provider_required
from airflow_durable.operators._text import CAUSE_TOKEN_KEY

with provider_required(__name__):
    # The hook, trigger and helpers are reached through the provider operator module's names at call time,
    # as upstream does: a test that patches e.g. ``DbtCloudRunJobTrigger`` in
    # ``airflow.providers.dbt.cloud.operators.dbt`` patches ours too.
    from airflow.providers.dbt.cloud.hooks.dbt import DBT_CAUSE_MAX_LENGTH
    from airflow.providers.dbt.cloud.operators import dbt as provider

if TYPE_CHECKING:
    from airflow.sdk import Context

    from airflow_durable.engine import DurableToken

__all__ = ["CAUSE_TOKEN_KEY", "DurableDbtCloudRunJobOperator", "cause_with_token", "tokens_in"]

_NAMES = {
    status.value: status.name for status in provider.DbtCloudJobRunStatus if isinstance(status.value, int)
}


def cause_with_token(
    reason: str | None,
    token: str,
    limit: int = DBT_CAUSE_MAX_LENGTH,
    identity: str | None = None,
    submit_only: bool = False,
) -> str:
    """The run ``cause`` carrying ``token`` (and the task instance's ``identity``, and whether its task only
    submits), at most ``limit`` characters (see `_text.cause_with_token`)."""
    return _text.cause_with_token(reason, token, limit, identity, submit_only)


@contextlib.contextmanager
def _posts_sent_once(hook: Any, durable: bool) -> Iterator[None]:
    """While active, the hook resends a POST (a run's trigger, which has no idempotency key) only when the
    failed attempt cannot have started a run: a connection never made, or a 429. The hook's retries are
    off by default (``retry_limit=1``); a user who turns them on must not get a second run that nothing
    tracks: the engine looks the run up before it triggers again."""
    if not durable or not isinstance(getattr(hook, "retry_args", None), dict):
        yield
        return
    from requests.exceptions import ConnectTimeout, RequestException
    from tenacity import retry_if_exception

    def never_started(error: BaseException) -> bool:
        if getattr(hook, "method", "POST") != "POST" or isinstance(error, ConnectTimeout):
            return True
        response = error.response if isinstance(error, RequestException) else None
        return response is not None and response.status_code == 429

    original = hook.retry_args
    hook.retry_args = {**original, "retry": original["retry"] & retry_if_exception(never_started)}
    try:
        yield
    finally:
        hook.retry_args = original


class DurableDbtCloudRunJobOperator(DurableJobEngine, provider.DbtCloudRunJobOperator):
    """``DbtCloudRunJobOperator`` whose retries reconnect to the run instead of triggering another.

    Same arguments, templated fields, XComs (``job_run_url``, ``job_run_id``), extra link and return
    value (the run id) as the provider operator, plus ``durable`` (default: durable wherever Airflow has
    a task state store, i.e. 3.3+).

    ``reuse_existing_run`` and ``retry_from_failure`` work as upstream documents them, but only when the
    engine decided to start a run (never instead of reconnecting). ``retry_from_failure`` uses the
    ``/rerun/`` endpoint, which takes no ``cause``: a rerun carries no token, so a crash between the
    rerun call and persisting its id is not closed by the lookup (see the docs page).

    Stored under the task-state-store key ``airflow_durable.dbt_cloud_run_job`` (fixed).
    """

    durable_locator_fields = ("dbt_cloud_conn_id", "account_id")
    durable_active_statuses = frozenset({"QUEUED", "STARTING", "RUNNING"})
    durable_succeeded_statuses = frozenset({"SUCCESS"})
    durable_failed_statuses = frozenset({"ERROR", "CANCELLED"})
    durable_id_type, durable_id_name = int, "dbt Cloud run id"
    durable_event_id_key, durable_event_statuses = "run_id", None
    #: How many of the job's newest runs the token lookup reads (pages of 100) before giving up.
    durable_lookup_runs: ClassVar[int] = 500
    #: The v2 API has no idempotency key: after triggering, every try adopts the earliest run carrying
    #: the token and cancels the others.
    durable_converge_after_submit: ClassVar[bool] = True

    @property
    def _durable_hrefs(self) -> dict[int, str | None]:
        """Run id → ``href`` as the API last reported it (saves a read for the ``job_run_url`` XCom)."""
        return self.__dict__.setdefault("_durable_href_cache", {})

    # ------------------------------------------------------------------ what upstream's execute does first
    def _durable_prepare(self, context: Context) -> None:
        """The default cause, the OpenLineage injection and the job id, exactly as upstream's ``execute``."""
        if self.__dict__.get("_durable_prepared"):
            return
        if self.trigger_reason is None:
            self.trigger_reason = (
                f"Triggered via Apache Airflow by task {self.task_id!r} in the {self.dag.dag_id} DAG."
            )
        if self.openlineage_inject_parent_job_info:
            self.log.info("Replacing dbt Cloud run cause with OpenLineage parent job information.")
            self.trigger_reason = provider.inject_parent_job_information_into_dbt_cloud_cause(
                self.trigger_reason, context["ti"]
            )
        self.job_id = self._resolve_job_id()
        self.__dict__["_durable_prepared"] = True

    def _push_run_xcoms(self, context: Context, run_id: int) -> None:
        # Upstream pushes both unconditionally (the extra link reads job_run_url), whatever happens next.
        context["ti"].xcom_push(key="job_run_url", value=self._href(run_id))
        context["ti"].xcom_push(key="job_run_id", value=run_id)

    def _href(self, run_id: int) -> str | None:
        if run_id not in self._durable_hrefs:
            try:
                data = self.hook.get_job_run(run_id=run_id, account_id=self.account_id).json()["data"]
            except Exception as err:
                if not str(err).startswith("404"):
                    raise  # transient: fail the try, the next one asks again
                # The run's history is gone: the run id is still the result, the link has nothing to show.
                self.log.warning(
                    "task %s: run %s is no longer known to dbt Cloud; no job_run_url", self.task_id, run_id
                )
                data = {}
            self._durable_hrefs[run_id] = data.get("href")
        return self._durable_hrefs[run_id]

    # ------------------------------------------------------------------ the adapter contract
    def durable_submit(self, context: Context, token: DurableToken | None) -> int:
        self._durable_prepare(context)
        reason = self.trigger_reason
        cause = (
            cause_with_token(
                reason, token.text, identity=identity_of(context), submit_only=not self.durable_waits()
            )
            if token is not None
            else reason
        )
        # Upstream's own path: reuse_existing_run, retry_from_failure (/rerun/ on try > 1), /run/.
        with self.durable_overriding(trigger_reason=cause), _posts_sent_once(self.hook, token is not None):
            self.run_id, job_run_url = self._get_or_trigger_run(context)
        self._durable_hrefs[self.run_id] = job_run_url
        self._push_run_xcoms(context, self.run_id)
        return self.run_id

    def durable_find_all(self, token: DurableToken, context: Context) -> list[int]:
        """Every run of the job whose cause carries ``token``, earliest created first (ties: by run id).

        Reads the job's newest ``durable_lookup_runs`` runs, newest first; a run created while paging
        can shift a page, so runs are collected by id.
        """
        self._durable_prepare(context)
        page, offset = 100, 0
        found: dict[int, Any] = {}
        while offset < self.durable_lookup_runs:
            runs = (
                self.hook.get_job_runs(
                    account_id=self.account_id,
                    payload={
                        "job_definition_id": self.job_id,
                        "order_by": "-created_at",
                        "limit": page,
                        "offset": offset,
                        "include_related": ["trigger"],
                    },
                ).json()["data"]
                or []
            )
            for run in runs:
                if token.text in tokens_in((run.get("trigger") or {}).get("cause")):
                    run_id = self.durable_parse_id(run.get("id"))
                    self._durable_hrefs[run_id] = run.get("href")
                    found[run_id] = run.get("created_at")
            if len(runs) < page:
                break
            offset += page
        run_ids = earliest_first(found)
        if run_ids:
            self.log.info("task %s: runs carrying token %s: %s", self.task_id, token.text, run_ids)
        return run_ids

    def durable_find(self, identity: str, context: Context | None = None) -> list[FoundJob]:
        """This task instance's runs of every generation and clear epoch, newest first.

        Reads the job's newest ``durable_lookup_runs`` runs (pages of 100) and matches the identity in their
        cause (``List Runs`` filters no cause).
        """
        job_id = self.job_id if self.job_id is not None else self._resolve_job_id()
        page, offset = 100, 0
        found: dict[int, FoundJob] = {}
        while offset < self.durable_lookup_runs:
            runs = (
                self.hook.get_job_runs(
                    account_id=self.account_id,
                    payload={
                        "job_definition_id": job_id,
                        "order_by": "-created_at",
                        "limit": page,
                        "offset": offset,
                        "include_related": ["trigger"],
                    },
                ).json()["data"]
                or []
            )
            for run in runs:
                cause = (run.get("trigger") or {}).get("cause")
                if identity not in identities_in(cause):
                    continue
                run_id = self.durable_parse_id(run.get("id"))
                tokens = sorted(tokens_in(cause))
                status = run.get("status")
                found.setdefault(
                    run_id,
                    FoundJob(
                        run_id,
                        _NAMES.get(status, str(status)),
                        parse_time(run.get("created_at")),
                        tokens[0] if tokens else None,
                    ),
                )
            if len(runs) < page:
                break
            offset += page
        return list(found.values())

    def durable_status(self, external_id: int, context: Context) -> str:
        try:
            data = self.hook.get_job_run(run_id=external_id, account_id=self.account_id).json()["data"]
        except Exception as err:
            # The sync hook raises AirflowException("404:Not Found") for an unknown run.
            if str(err).startswith("404"):
                raise JobNotFoundError(external_id) from err
            raise
        self._durable_hrefs[external_id] = data.get("href")
        status = data.get("status")
        return _NAMES.get(status, str(status))

    def durable_cancel(self, external_id: int) -> None:
        self.hook.cancel_job_run(run_id=external_id, account_id=self.account_id)

    def durable_poll(self, external_id: int, context: Context, reconnect: bool) -> None:
        self.run_id = external_id
        if reconnect:
            self._push_run_xcoms(context, external_id)
        if not self.durable_waits():
            return
        # Upstream's sync wait; its timeout is measured from now, on a reconnect too.
        self.log.info("Waiting for job run %s to terminate.", external_id)
        if self.hook.wait_for_job_run_status(
            run_id=external_id,
            account_id=self.account_id,
            expected_statuses=provider.DbtCloudJobRunStatus.SUCCESS.value,
            check_interval=self.check_interval,
            timeout=self.timeout,
        ):
            self.log.info("Job run %s has completed successfully.", external_id)
        else:
            raise provider.DbtCloudJobRunException(f"Job run {external_id} has failed or has been cancelled.")

    def durable_defer(self, external_id: int, context: Context, reconnect: bool) -> None:
        self.run_id = external_id
        if reconnect:
            self._push_run_xcoms(context, external_id)
        if not self.durable_waits():
            if self.deferrable is True:
                warnings.warn(
                    "Argument `wait_for_termination` is False and `deferrable` is True , hence "
                    "`deferrable` parameter doesn't have any effect",
                    UserWarning,
                    stacklevel=2,
                )
            return
        # Deadlines from now, as upstream computes them in the try that defers: a reconnecting try gets
        # the whole ``timeout`` again rather than what was left of the first try's.
        end_time = time.time() + self.timeout
        execution_deadline = None
        if self.execution_timeout is not None:
            execution_deadline = time.time() + self.execution_timeout.total_seconds()
        status = self.hook.get_job_run_status(run_id=external_id, account_id=self.account_id)
        if provider.DbtCloudJobRunStatus.is_terminal(status):
            self._handle_terminal_status(status)  # returns on success, raises on failure (as upstream)
            return
        self.defer(
            timeout=None,
            trigger=provider.DbtCloudRunJobTrigger(
                conn_id=self.dbt_cloud_conn_id,
                run_id=external_id,
                end_time=end_time,
                execution_deadline=execution_deadline,
                account_id=self.account_id,
                poll_interval=self.check_interval,
                hook_params=self.hook_params,
            ),
            method_name="execute_complete",
        )

    def durable_event_id(self, event: Any) -> int:
        if isinstance(event, dict):
            provider.validate_execute_complete_event(event)
        return super().durable_event_id(event)

    def durable_result(self, external_id: int, context: Context, already_succeeded: bool) -> int:
        self.run_id = external_id
        if already_succeeded:
            # No submit, poll or deferral ran in this try: push what they would have.
            self._push_run_xcoms(context, external_id)
        return external_id
