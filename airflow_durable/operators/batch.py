"""Durable AWS Batch operator: a drop-in replacement for the provider's ``BatchOperator``.

How Batch submits, reports, classifies, defers and returns — the durable logic is in
`airflow_durable.engine`.

* ``SubmitJob`` has no idempotency token, so the task instance's token travels in the job tag
  ``airflow-durable-token``. The jobs carrying it are found by ``ListJobs`` on the job queue filtered
  by the job name (``JOB_NAME``, all statuses), then ``DescribeJobs`` for the tags and creation times
  (`DurableBatchOperator.durable_find_all`): a retry after a crash between submitting and
  recording the job id adopts the job instead of submitting again, and two tries that submitted at the
  same instant both adopt the earliest job and terminate the other. The upstream ``job_id=`` argument
  stays ignored, as upstream ("submit_job overwrites it").
* Status is ``DescribeJobs``' ``status``; a job ``DescribeJobs`` no longer returns has expired.
* Waiting reuses the provider's ``monitor_job`` (``deferrable=False``; custom ``waiters`` and
  ``awslogs_enabled`` as upstream) or defers to the provider's ``BatchJobTrigger`` (``deferrable=True``).
* Result and XComs are the provider's: the job id as return value, the Batch job details / job
  definition / job queue / CloudWatch links — also on a retry that reconnects or finds the job
  already succeeded. ``array_properties`` jobs are tracked by their parent job id.
"""

from __future__ import annotations

import datetime as dt
from contextlib import nullcontext
from typing import TYPE_CHECKING, Any, ClassVar

from airflow_durable.engine import DurableJobEngine, JobNotFoundError
from airflow_durable.identity_tags import IDENTITY_TAG, SUBMIT_ONLY_TAG, FoundJob, identity_of
from airflow_durable.operators import provider_required
from airflow_durable.shims.aws import sent_once

with provider_required(__name__):
    from airflow.providers.amazon.aws.operators import batch as provider

if TYPE_CHECKING:
    from airflow.sdk import Context

    from airflow_durable.engine import DurableToken

__all__ = ["TOKEN_TAG", "DurableBatchOperator"]

#: The job tag that carries the durable token (Batch tag keys: up to 128 characters).
TOKEN_TAG = "airflow-durable-token"


class DurableBatchOperator(DurableJobEngine, provider.BatchOperator):
    """``BatchOperator`` whose retries reconnect to the Batch job instead of submitting another.

    Same arguments, templated fields, XComs, extra links and return value as the provider operator,
    plus ``durable`` (default: durable wherever Airflow has a task state store, i.e. 3.3+). The job
    additionally carries the tag ``airflow-durable-token`` when durable.

    Stored under the task-state-store key ``airflow_durable.batch`` (fixed).
    """

    durable_locator_fields = ("aws_conn_id", "region_name")
    # Batch job statuses (botocore JobStatus; hooks/batch_client.py).
    durable_active_statuses = frozenset({"SUBMITTED", "PENDING", "RUNNABLE", "STARTING", "RUNNING"})
    durable_succeeded_statuses = frozenset({"SUCCEEDED"})
    durable_failed_statuses = frozenset({"FAILED"})
    durable_id_name = "AWS Batch job id"
    durable_event_id_key = "job_id"
    #: The provider's deferrable path defers whatever ``wait_for_completion`` says.
    durable_deferrable_waits = True
    #: SubmitJob has no idempotency key: after submitting, every try adopts the earliest tagged job.
    durable_converge_after_submit: ClassVar[bool] = True

    def durable_submit(self, context: Context, token: DurableToken | None) -> str:
        tags = (
            {
                **(self.tags or {}),
                TOKEN_TAG: token.text,
                IDENTITY_TAG: identity_of(context),
                **({} if self.durable_waits() else {SUBMIT_ONLY_TAG: "true"}),
            }
            if token is not None
            else self.tags
        )
        # Sets job_id (what on_kill terminates) and the job details link, as the provider does.
        # SubmitJob has no idempotency key: a durable submit is not resent blind by the SDK.
        once = sent_once(self.hook.client, ("SubmitJob",)) if token is not None else nullcontext()
        with once, self.durable_overriding(tags=tags):
            self.submit_job(context)
        if not self.job_id:
            # Upstream fails here too (before deferring or polling); never track the string "None".
            raise ValueError("AWS Batch job - job_id was not found")
        return str(self.job_id)

    def durable_find_all(self, token: DurableToken, context: Context) -> list[str]:
        """Every job submitted with ``token``, earliest created first (ties: by job id); ``[]`` if none.

        ``ListJobs`` takes one filter; with ``JOB_NAME`` it returns every status. Job summaries carry no
        tags, so the candidates are described in batches of 100 (``DescribeJobs``' limit).
        """
        client: Any = self.hook.client  # typed as the provider's BatchProtocol, which lacks list_jobs
        kwargs: dict[str, Any] = {
            "jobQueue": self.job_queue,
            "filters": [{"name": "JOB_NAME", "values": [self.job_name]}],
        }
        found: dict[str, int] = {}
        while True:
            page = client.list_jobs(**kwargs)
            ids = [summary["jobId"] for summary in page.get("jobSummaryList", [])]
            for start in range(0, len(ids), 100):
                for job in client.describe_jobs(jobs=ids[start : start + 100]).get("jobs", []):
                    if (job.get("tags") or {}).get(TOKEN_TAG) == token.text:
                        found[str(job["jobId"])] = int(job.get("createdAt") or 0)
            if not page.get("nextToken"):
                break
            kwargs["nextToken"] = page["nextToken"]
        jobs = sorted(found, key=lambda job_id: (found[job_id], job_id))
        if jobs:
            self.log.info("task %s: jobs carrying token %s: %s", self.task_id, token.text, jobs)
        return jobs

    def durable_find(self, identity: str, context: Context | None = None) -> list[FoundJob]:
        """This task instance's jobs of every generation and clear epoch, earliest first.

        ``ListJobs`` by the job name (every status) on the job queue, then ``DescribeJobs`` (100 at a time)
        for the identity tag: job summaries carry no tags.
        """
        client: Any = self.hook.client
        kwargs: dict[str, Any] = {
            "jobQueue": self.job_queue,
            "filters": [{"name": "JOB_NAME", "values": [self.job_name]}],
        }
        found: list[FoundJob] = []
        while True:
            page = client.list_jobs(**kwargs)
            ids = [summary["jobId"] for summary in page.get("jobSummaryList", [])]
            for start in range(0, len(ids), 100):
                for job in client.describe_jobs(jobs=ids[start : start + 100]).get("jobs", []):
                    tags = job.get("tags") or {}
                    if tags.get(IDENTITY_TAG) != identity:
                        continue
                    created = job.get("createdAt")
                    when = dt.datetime.fromtimestamp(created / 1000, dt.UTC) if created else None
                    found.append(
                        FoundJob(str(job["jobId"]), str(job.get("status")), when, tags.get(TOKEN_TAG))
                    )
            if not page.get("nextToken"):
                break
            kwargs["nextToken"] = page["nextToken"]
        return sorted(
            found, key=lambda job: (job.created_at or dt.datetime.max.replace(tzinfo=dt.UTC), job.id)
        )

    def durable_status(self, external_id: str, context: Context) -> str:
        # Not hook.get_job_description: it retries a missing job status_retries times with back-off.
        jobs = self.hook.client.describe_jobs(jobs=[external_id]).get("jobs") or []
        for job in jobs:
            if job.get("jobId") == external_id:
                return str(job.get("status"))
        raise JobNotFoundError(external_id)

    def durable_cancel(self, external_id: str) -> None:
        self.hook.client.terminate_job(jobId=external_id, reason="Task killed by the user")

    def durable_poll(self, external_id: str, context: Context, reconnect: bool) -> None:
        self.job_id = external_id
        if reconnect:
            self._persist_job_details_link(context)
        if self.durable_waits():
            # Links, the wait (hook polling or custom waiters, CloudWatch logs), check_job_success.
            self.monitor_job(context)

    def durable_defer(self, external_id: str, context: Context, reconnect: bool) -> None:
        self.job_id = external_id
        if reconnect:
            self._persist_job_details_link(context)
        # The provider's deferrable branch of execute(), after its submit_job.
        job = self._persist_links(context)
        status = job.get("status")
        if status == self.hook.SUCCESS_STATE:
            self._persist_cloudwatch_link(context)
            return
        if status == self.hook.FAILURE_STATE:
            self._persist_cloudwatch_link(context)
            raise provider.AirflowException(f"Error while running job: {self.job_id} is in {status} state")
        if status not in self.hook.INTERMEDIATE_STATES:
            raise provider.AirflowException(f"Unexpected status: {status}")
        self.defer(
            timeout=self.execution_timeout,
            # Through the provider module's name, so a test patching it there patches ours too.
            trigger=provider.BatchJobTrigger(
                job_id=self.job_id,
                waiter_max_attempts=self.max_retries,
                aws_conn_id=self.aws_conn_id,
                region_name=self.region_name,
                waiter_delay=self.poll_interval,
                verify=self.verify,
                botocore_config=self.botocore_config,
            ),
            method_name="execute_complete",
        )

    def durable_result(self, external_id: str, context: Context, already_succeeded: bool) -> str:
        self.job_id = external_id
        if already_succeeded:
            # No submit, wait or deferral ran in this try: persist the links they would have.
            self._persist_job_details_link(context)
            self._persist_links(context)
            self._persist_cloudwatch_link(context)
        return external_id

    def _persist_job_details_link(self, context: Context) -> None:
        provider.BatchJobDetailsLink.persist(
            context=context,
            operator=self,
            region_name=self.hook.conn_region_name,
            aws_partition=self.hook.conn_partition,
            job_id=self.job_id,
        )
