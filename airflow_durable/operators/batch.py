"""Durable AWS Batch operator: a drop-in replacement for the provider's ``BatchOperator``.

How Batch submits, reports, classifies, defers and returns — the durable logic is in
:mod:`airflow_durable.engine`.

* ``SubmitJob`` has no idempotency token, so the task instance's token travels in the job tag
  ``airflow-durable-token``. When a previous try died between submitting and recording the job id,
  the retry looks the job up before submitting again: ``ListJobs`` on the job queue filtered by the
  job name (``JOB_NAME``, all statuses, newest first), then ``DescribeJobs`` for the tags
  (:meth:`DurableBatchOperator.durable_find`). The upstream ``job_id=`` argument stays ignored, as
  upstream ("submit_job overwrites it").
* Status is ``DescribeJobs``' ``status``; a job ``DescribeJobs`` no longer returns has expired.
* Waiting reuses the provider's ``monitor_job`` (``deferrable=False``; custom ``waiters`` and
  ``awslogs_enabled`` as upstream) or defers to the provider's ``BatchJobTrigger`` (``deferrable=True``).
* Result and XComs are the provider's: the job id as return value, the Batch job details / job
  definition / job queue / CloudWatch links — also on a retry that reconnects or finds the job
  already succeeded. ``array_properties`` jobs are tracked by their parent job id.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from airflow.providers.amazon.aws.links.batch import BatchJobDetailsLink
from airflow.providers.amazon.aws.operators import batch as provider
from airflow.providers.amazon.aws.triggers.batch import BatchJobTrigger

from airflow_durable.engine import DurableJobEngine, JobNotFoundError, JobPhase

if TYPE_CHECKING:
    from collections.abc import Mapping

    from airflow_durable.engine import DurableToken

__all__ = ["TOKEN_TAG", "DurableBatchOperator"]

#: The job tag that carries the durable token (Batch tag keys: up to 128 characters).
TOKEN_TAG = "airflow-durable-token"
# Batch job statuses (botocore JobStatus; hooks/batch_client.py).
_ACTIVE = frozenset({"SUBMITTED", "PENDING", "RUNNABLE", "STARTING", "RUNNING"})


class DurableBatchOperator(DurableJobEngine, provider.BatchOperator):
    """``BatchOperator`` whose retries reconnect to the Batch job instead of submitting another.

    Same arguments, templated fields, XComs, extra links and return value as the provider operator,
    plus ``durable`` (default: durable wherever Airflow has a task state store, i.e. 3.3+). The job
    additionally carries the tag ``airflow-durable-token`` when durable.

    Stored under the task-state-store key ``airflow_durable.batch`` (fixed).
    """

    external_id_key = "airflow_durable.batch"
    durable_system = "batch"
    durable_locator_fields = ("aws_conn_id", "region_name")

    def durable_submit(self, context: Mapping[str, Any], token: DurableToken | None) -> str:
        user_tags = self.tags
        if token is not None:
            self.tags = {**(user_tags or {}), TOKEN_TAG: token.text}
        try:
            # Sets job_id (what on_kill terminates) and the job details link, as the provider does.
            self.submit_job(context)
        finally:
            self.tags = user_tags
        return str(self.job_id)

    def durable_find(self, token: DurableToken, context: Mapping[str, Any]) -> str | None:
        """The job a previous try submitted with ``token``, or ``None``.

        ``ListJobs`` takes one filter; with ``JOB_NAME`` it returns every status, newest first. Job
        summaries carry no tags, so the candidates are described in batches of 100.
        """
        client = self.hook.client
        kwargs: dict[str, Any] = {
            "jobQueue": self.job_queue,
            "filters": [{"name": "JOB_NAME", "values": [self.job_name]}],
        }
        while True:
            page = client.list_jobs(**kwargs)
            ids = [summary["jobId"] for summary in page.get("jobSummaryList", [])]
            for start in range(0, len(ids), 100):
                for job in client.describe_jobs(jobs=ids[start : start + 100]).get("jobs", []):
                    if (job.get("tags") or {}).get(TOKEN_TAG) == token.text:
                        self.log.info(
                            "task %s: found job %s submitted by an earlier try (tag %s=%s)",
                            self.task_id,
                            job["jobId"],
                            TOKEN_TAG,
                            token.text,
                        )
                        return str(job["jobId"])
            if not page.get("nextToken"):
                return None
            kwargs["nextToken"] = page["nextToken"]

    def durable_parse_id(self, value: Any) -> str:
        if not isinstance(value, str) or not value.strip():
            raise ValueError(f"an AWS Batch job id is a non-empty string, got {value!r}")
        return value

    def durable_status(self, external_id: str, context: Mapping[str, Any]) -> str:
        # Not hook.get_job_description: it retries a missing job status_retries times with back-off.
        jobs = self.hook.client.describe_jobs(jobs=[external_id]).get("jobs") or []
        for job in jobs:
            if job.get("jobId") == external_id:
                return str(job.get("status"))
        raise JobNotFoundError(external_id)

    def durable_phase(self, status: str) -> JobPhase | None:
        if status in _ACTIVE:
            return JobPhase.ACTIVE
        if status == "SUCCEEDED":
            return JobPhase.SUCCEEDED
        if status == "FAILED":
            return JobPhase.FAILED
        return None

    def durable_cancel(self, external_id: str) -> None:
        self.hook.client.terminate_job(jobId=external_id, reason="Task killed by the user")

    def durable_poll(self, external_id: str, context: Mapping[str, Any], reconnect: bool) -> None:
        self.job_id = external_id
        if reconnect:
            self._persist_job_details_link(context)
        if self.wait_for_completion:
            # Links, the wait (hook polling or custom waiters, CloudWatch logs), check_job_success.
            self.monitor_job(context)

    def durable_defer(self, external_id: str, context: Mapping[str, Any], reconnect: bool) -> None:
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
            trigger=BatchJobTrigger(
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

    def durable_event_id(self, event: Any) -> str:
        if not isinstance(event, dict):
            raise ValueError(f"expected a dict event, got {type(event).__name__}")
        if event.get("status") not in ("success", "error"):
            raise ValueError(f"event status must be 'success' or 'error', got {event.get('status')!r}")
        return self.durable_parse_id(event.get("job_id"))

    def durable_result(self, external_id: str, context: Mapping[str, Any], already_succeeded: bool) -> str:
        self.job_id = external_id
        if already_succeeded:
            # No submit, wait or deferral ran in this try: persist the links they would have.
            self._persist_job_details_link(context)
            self._persist_links(context)
            self._persist_cloudwatch_link(context)
        return external_id

    def _persist_job_details_link(self, context: Mapping[str, Any]) -> None:
        BatchJobDetailsLink.persist(
            context=context,
            operator=self,
            region_name=self.hook.conn_region_name,
            aws_partition=self.hook.conn_partition,
            job_id=self.job_id,
        )
