"""Durable dbt Cloud operator: a drop-in replacement for the provider's ``DbtCloudRunJobOperator``.

How dbt Cloud submits, reports, classifies, defers and returns — the durable logic is in
:mod:`airflow_durable.engine`.

* The v2 API has no idempotency key, so the token travels in the run's ``cause``: the user's
  ``trigger_reason`` (truncated if needed, never the token) plus `` [afd-…-g<n>]``, at most 255
  characters. When a try died inside the submit→persist window, the retry lists the job's newest runs
  (``get_job_runs`` with ``include_related=["trigger"]``) and adopts only a run whose cause carries
  exactly this token; no run of anyone else is ever adopted.
* Status is the run's ``status`` from ``GET runs/{id}/`` (QUEUED, STARTING, RUNNING, SUCCESS, ERROR,
  CANCELLED); a 404 means the run is gone.
* Waiting reuses the provider hook's ``wait_for_job_run_status`` (``deferrable=False``) or defers to the
  provider's ``DbtCloudRunJobTrigger`` (``deferrable=True``) with ``end_time`` = now + ``timeout``, on a
  reconnect too.
* Result and XComs are the provider's: ``job_run_url`` and ``job_run_id`` on every path, return value
  the run id.
"""

from __future__ import annotations

import json
import re
import time
import warnings
from typing import TYPE_CHECKING, Any, ClassVar

from airflow.providers.dbt.cloud.hooks.dbt import (
    DBT_CAUSE_MAX_LENGTH,
    DbtCloudJobRunException,
    DbtCloudJobRunStatus,
    validate_execute_complete_event,
)
from airflow.providers.dbt.cloud.operators import dbt as provider
from airflow.providers.dbt.cloud.triggers.dbt import DbtCloudRunJobTrigger
from airflow.providers.dbt.cloud.utils.openlineage import inject_parent_job_information_into_dbt_cloud_cause

from airflow_durable.engine import DurableJobEngine, JobNotFoundError, JobPhase

if TYPE_CHECKING:
    from collections.abc import Mapping

    from airflow_durable.engine import DurableToken

__all__ = ["DurableDbtCloudRunJobOperator", "cause_with_token"]

_NAMES = {status.value: status.name for status in DbtCloudJobRunStatus if isinstance(status.value, int)}
_ACTIVE = frozenset({"QUEUED", "STARTING", "RUNNING"})
_FAILED = frozenset({"ERROR", "CANCELLED"})
_TOKEN_RE = re.compile(r"afd-[0-9a-f]{40}-g[0-9]+")
#: The key the token goes under when the cause is a JSON object (OpenLineage parent-job injection).
CAUSE_TOKEN_KEY = "airflow_durable_token"


def cause_with_token(reason: str | None, token: str, limit: int = DBT_CAUSE_MAX_LENGTH) -> str:
    """The run ``cause`` carrying ``token``: at most ``limit`` characters, the token never cut.

    A plain reason gets `` [<token>]`` appended, truncated with ``...`` to make room. A JSON object
    (what ``openlineage_inject_parent_job_info`` writes) gets the token as one more key, so consumers can
    still parse it; if that does not fit, the ``root`` block is dropped (as the provider itself does),
    and failing that the plain form is used.
    """
    text = reason or ""
    try:
        parsed = json.loads(text) if text.lstrip().startswith("{") else None
    except ValueError:
        parsed = None
    if isinstance(parsed, dict):
        for candidate in (parsed, {k: v for k, v in parsed.items() if k != "root"}):
            serialized = json.dumps({**candidate, CAUSE_TOKEN_KEY: token}, separators=(",", ":"))
            if len(serialized) <= limit:
                return serialized
    suffix = f" [{token}]"
    room = limit - len(suffix)
    if room < 0:
        raise ValueError(f"token {token!r} does not fit in a {limit}-character cause")
    if len(text) > room:
        text = text[: max(room - 3, 0)].rstrip() + "..." if room >= 3 else ""
    return f"{text}{suffix}" if text else token


def tokens_in(cause: str | None) -> set[str]:
    """Every airflow-durable token in a run's cause (whole tokens: ``-g1`` never matches ``-g12``)."""
    return set(_TOKEN_RE.findall(cause or ""))


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

    external_id_key = "airflow_durable.dbt_cloud_run_job"
    durable_system = "dbt-cloud"
    durable_locator_fields = ("dbt_cloud_conn_id", "account_id")
    #: How many of the job's newest runs the token lookup reads (pages of 100) before giving up.
    durable_lookup_runs: ClassVar[int] = 500

    @property
    def _durable_hrefs(self) -> dict[int, str | None]:
        """Run id → ``href`` as the API last reported it (saves a read for the ``job_run_url`` XCom)."""
        return self.__dict__.setdefault("_durable_href_cache", {})

    # ------------------------------------------------------------------ what upstream's execute does first
    def _durable_prepare(self, context: Mapping[str, Any]) -> None:
        """The default cause, the OpenLineage injection and the job id, exactly as upstream's ``execute``."""
        if self.__dict__.get("_durable_prepared"):
            return
        if self.trigger_reason is None:
            self.trigger_reason = (
                f"Triggered via Apache Airflow by task {self.task_id!r} in the {self.dag.dag_id} DAG."
            )
        if self.openlineage_inject_parent_job_info:
            self.log.info("Replacing dbt Cloud run cause with OpenLineage parent job information.")
            self.trigger_reason = inject_parent_job_information_into_dbt_cloud_cause(
                self.trigger_reason, context["ti"]
            )
        self.job_id = self._resolve_job_id()
        self.__dict__["_durable_prepared"] = True

    def _push_run_xcoms(self, context: Mapping[str, Any], run_id: int, job_run_url: str | None) -> None:
        # Upstream pushes both unconditionally (the extra link reads job_run_url), whatever happens next.
        context["ti"].xcom_push(key="job_run_url", value=job_run_url)
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
    def durable_submit(self, context: Mapping[str, Any], token: DurableToken | None) -> int:
        self._durable_prepare(context)
        reason = self.trigger_reason
        if token is not None:
            self.trigger_reason = cause_with_token(reason, token.text)
        try:
            # Upstream's own path: reuse_existing_run, retry_from_failure (/rerun/ on try > 1), /run/.
            self.run_id, job_run_url = self._get_or_trigger_run(context)  # type: ignore[arg-type]
        finally:
            self.trigger_reason = reason
        self._durable_hrefs[self.run_id] = job_run_url
        self._push_run_xcoms(context, self.run_id, job_run_url)
        return self.run_id

    def durable_find(self, token: DurableToken, context: Mapping[str, Any]) -> int | None:
        self._durable_prepare(context)
        page, offset = 100, 0
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
                    self.log.info("task %s: run %s carries token %s", self.task_id, run_id, token.text)
                    return run_id
            if len(runs) < page:
                break
            offset += page
        return None

    def durable_parse_id(self, value: Any) -> int:
        if isinstance(value, bool) or not isinstance(value, int) or value <= 0:
            raise ValueError(f"a dbt Cloud run id is a positive integer, got {value!r}")
        return value

    def durable_status(self, external_id: int, context: Mapping[str, Any]) -> str:
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

    def durable_phase(self, status: str) -> JobPhase | None:
        if status in _ACTIVE:
            return JobPhase.ACTIVE
        if status == "SUCCESS":
            return JobPhase.SUCCEEDED
        if status in _FAILED:
            return JobPhase.FAILED
        return None

    def durable_cancel(self, external_id: int) -> None:
        self.hook.cancel_job_run(run_id=external_id, account_id=self.account_id)

    def durable_poll(self, external_id: int, context: Mapping[str, Any], reconnect: bool) -> None:
        self.run_id = external_id
        if reconnect:
            self._push_run_xcoms(context, external_id, self._href(external_id))
        if not self.wait_for_termination:
            return
        # Upstream's sync wait; its timeout is measured from now, on a reconnect too.
        self.log.info("Waiting for job run %s to terminate.", external_id)
        if self.hook.wait_for_job_run_status(
            run_id=external_id,
            account_id=self.account_id,
            expected_statuses=DbtCloudJobRunStatus.SUCCESS.value,
            check_interval=self.check_interval,
            timeout=self.timeout,
        ):
            self.log.info("Job run %s has completed successfully.", external_id)
        else:
            raise DbtCloudJobRunException(f"Job run {external_id} has failed or has been cancelled.")

    def durable_defer(self, external_id: int, context: Mapping[str, Any], reconnect: bool) -> None:
        self.run_id = external_id
        if reconnect:
            self._push_run_xcoms(context, external_id, self._href(external_id))
        if not self.wait_for_termination:
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
        if DbtCloudJobRunStatus.is_terminal(status):
            self._handle_terminal_status(status)  # returns on success, raises on failure (as upstream)
            return
        self.defer(
            timeout=None,
            trigger=DbtCloudRunJobTrigger(
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
        if not isinstance(event, dict):
            raise ValueError(f"expected a dict event, got {type(event).__name__}")
        validate_execute_complete_event(event)
        return self.durable_parse_id(event.get("run_id"))

    def durable_result(self, external_id: int, context: Mapping[str, Any], already_succeeded: bool) -> int:
        self.run_id = external_id
        if already_succeeded:
            # No submit, poll or deferral ran in this try: push what they would have.
            self._push_run_xcoms(context, external_id, self._href(external_id))
        return external_id
