"""Durable BigQuery: a drop-in replacement for the google provider's ``BigQueryInsertJobOperator``.

How BigQuery submits, reports, classifies, defers and returns — the durable logic is in
`airflow_durable.engine`.

* Submission uses a caller-chosen job id derived from the task instance and generation
  (``{job_id or airflow_<dag>_<task>}_<token>``). BigQuery answers ``409 Already Exists`` to a second
  ``jobs.insert`` with that id, and the retry adopts the job the crashed try started: the
  submit→persist window is closed. This replaces the provider's random suffix of
  ``force_rerun=True`` (the default). With ``force_rerun=False`` the provider's own config-hash id and
  its ``reattach_states`` rules apply unchanged (see ``docs/systems/bigquery.md``).
* Status is the provider's ``get_job_status`` (``PENDING`` / ``RUNNING`` / ``success`` / ``error``);
  a 404 means the job is unknown to BigQuery.
* Waiting reuses the provider's ``job.result()`` loop (``deferrable=False``) or defers to the
  provider's ``BigQueryInsertJobTrigger`` (``deferrable=True``), completing inline when the job is
  already done, as upstream.
* Result and XComs are the provider's: the return value is the job id; the ``bigquery_job_detail``
  and ``bigquery_table`` link XComs and the deprecated ``job_id_path`` are pushed on every path.
"""

from __future__ import annotations

import datetime as dt
import re
from typing import TYPE_CHECKING, Any

from airflow_durable.engine import DurableJobEngine, JobNotFoundError
from airflow_durable.operators import provider_required

with provider_required(__name__):
    # The hook, trigger and exceptions are reached through the provider operator module's names at call
    # time, as upstream does: a test that patches
    # ``airflow.providers.google.cloud.operators.bigquery.BigQueryHook`` patches ours too.
    from airflow.providers.google.cloud.operators import bigquery as provider

if TYPE_CHECKING:
    from airflow.providers.google.cloud.hooks.bigquery import BigQueryHook
    from airflow.sdk import Context

    from airflow_durable.engine import DurableToken

__all__ = ["DurableBigQueryInsertJobOperator", "durable_job_id"]

#: BigQuery job ids: letters, digits, underscores and dashes, at most 1024 characters.
_JOB_ID = re.compile(r"^[A-Za-z0-9_-]{1,1024}$")
_NOT_JOB_ID_CHARS = re.compile(r"[^A-Za-z0-9_-]")


def durable_job_id(configured_job_id: str | None, dag_id: str, task_id: str, token: DurableToken) -> str:
    """The job id of one logical job: the same for every try of a generation, new for the next.

    A ``job_id`` the user configured stays the prefix (as upstream, where it is suffixed); without
    one, the prefix is ``airflow_<dag_id>_<task_id>`` with characters BigQuery refuses replaced by ``_``.
    """
    prefix = configured_job_id or _NOT_JOB_ID_CHARS.sub("_", f"airflow_{dag_id}_{task_id}")
    return f"{prefix}_{token.text}"


class DurableBigQueryInsertJobOperator(DurableJobEngine, provider.BigQueryInsertJobOperator):
    """``BigQueryInsertJobOperator`` whose retries reconnect to the job instead of submitting another.

    Same arguments, templated fields, XComs, extra links and return value (the job id) as the
    provider operator, plus ``durable`` (default: durable wherever Airflow has a task state store,
    i.e. 3.3+). With ``durable=False`` or below Airflow 3.3 it is exactly the provider operator.

    Stored under the task-state-store key ``airflow_durable.bigquery_insert_job`` (fixed).
    """

    durable_locator_fields = ("gcp_conn_id", "project_id", "location")
    # Raw statuses of the provider's get_job_status: job.state while not DONE, then success / error
    # (failed, or cancelled: errorResult.reason "stopped").
    durable_active_statuses = frozenset({"PENDING", "RUNNING"})
    durable_succeeded_statuses = frozenset({"success"})
    durable_failed_statuses = frozenset({"error"})
    durable_event_id_key = "job_id"
    # The provider's error events name no job: they are about the tracked one.
    durable_event_statuses, durable_anonymous_event_statuses = frozenset({"success"}), frozenset({"error"})

    def execute(self, context: Context, **runner_kwargs: Any) -> Any:
        # As upstream: remember the job_id the user configured before anything overwrites self.job_id
        # (the decision step's status read does, through the provider's link bookkeeping).
        self._configured_job_id = self.job_id
        return super().execute(context, **runner_kwargs)

    def _durable_hook(self) -> BigQueryHook:
        if self.hook is None:
            self.hook = provider.BigQueryHook(
                gcp_conn_id=self.gcp_conn_id, impersonation_chain=self.impersonation_chain
            )
        if self.project_id is None:
            self.project_id = self.hook.project_id
        return self.hook

    # ------------------------------------------------------------------ the adapter contract
    def durable_submit(self, context: Context, token: DurableToken | None) -> str:
        if token is None or not self.force_rerun:
            # Degraded path, or force_rerun=False: the provider's own id and 409/reattach_states rules.
            return self.submit_job(context)
        hook = self._durable_hook()
        self._add_job_labels(hook)
        self.job_id = durable_job_id(self._configured_job_id, self.dag_id, self.task_id, token)
        self.log.info("Executing: %s", self.configuration)
        if self.sql:
            self.log.info("SQL query:\n%s", self.sql)
        job: Any  # insert_job's QueryJob, or get_job's (which may be an UnknownJob)
        try:
            job = self._submit_job(hook, self.job_id)
        except provider.Conflict:
            # The id is unique to this task instance and generation: only an earlier try of it (or the
            # client's own retry of a lost response) can have created the job. Adopt it, whatever its state.
            job = hook.get_job(project_id=self.project_id, location=self.location, job_id=self.job_id)
            self.log.info(
                "Job %s already exists (state %s): it was submitted by an earlier try of this task "
                "instance; adopting it instead of submitting another",
                self.job_id,
                job.state,
            )
        self._job = job
        self._persist_job_links(job, context)
        return job.job_id

    def durable_created_at(self, external_id: str, context: Context) -> dt.datetime | None:
        # The job the submit answered with (jobs.insert, or jobs.get after its 409): statistics.creationTime.
        # Only for an id that is not derived from our token (force_rerun=False: the provider's id, the same
        # for every DAG run with this configuration, or your own job_id): ours is unique to the run
        # incarnation, clear and generation, so the job it returns is this logical job's, however old.
        if self.force_rerun:
            return None
        job = getattr(self, "_job", None)
        if job is None or job.job_id != external_id:
            return None
        created: dt.datetime | None = job.created
        return created

    def durable_parse_id(self, value: Any) -> str:
        if not isinstance(value, str) or not _JOB_ID.match(value):  # stricter than the default
            raise ValueError(f"a BigQuery job id is a string of [A-Za-z0-9_-] (1-1024 chars), got {value!r}")
        return value

    def durable_status(self, external_id: str, context: Context) -> str:
        self._durable_hook()
        # Also keeps the provider's link XComs and self._job for the poll / defer that follows.
        status = self.get_job_status(external_id, context)
        if status == "not_found":
            raise JobNotFoundError(external_id)
        return status

    def durable_cancel(self, external_id: str) -> None:
        self._durable_hook().cancel_job(
            job_id=external_id, project_id=self.project_id, location=self.location
        )

    def durable_poll(self, external_id: str, context: Context, reconnect: bool) -> None:
        self.job_id = external_id
        self.poll_until_complete(external_id, context)

    def durable_defer(self, external_id: str, context: Context, reconnect: bool) -> None:
        # The provider's deferrable execute after its submit: defer while the job runs, otherwise
        # complete inline (raising if it failed).
        self.job_id = external_id
        job = self._job
        if job.running():
            self.defer(
                timeout=self.execution_timeout,
                trigger=provider.BigQueryInsertJobTrigger(
                    conn_id=self.gcp_conn_id,
                    job_id=self.job_id,
                    project_id=self.project_id,
                    location=self.location or self._durable_hook().location,
                    poll_interval=self.poll_interval,
                    impersonation_chain=self.impersonation_chain,
                    cancel_on_kill=self.cancel_on_kill,
                ),
                method_name="execute_complete",
            )
        self.log.info("Current state of job %s is %s", job.job_id, job.state)
        self._handle_job_error(job)

    def durable_result(self, external_id: str, context: Context, already_succeeded: bool) -> str:
        job = getattr(self, "_job", None)
        if already_succeeded and (job is None or job.job_id != external_id):
            # No submit or status read ran in this try: push the link XComs they would have pushed.
            hook = self._durable_hook()
            job = hook.get_job(project_id=self.project_id, location=self.location, job_id=external_id)
            self._job = job
            self._persist_job_links(job, context)
        self.job_id = external_id
        return external_id
