"""What the AWS conformance cases and end-to-end DAGs share (kept apart from the case registry)."""

from __future__ import annotations

from typing import Any

#: One botocore attempt per call, so a status fault reaches the operator / trigger at once (the default
#: legacy retries would back off for seconds per cell).
NO_BOTOCORE_RETRIES: dict[str, Any] = {"retries": {"mode": "standard", "total_max_attempts": 1}}


class PromptBatchWaiters:
    """A user-supplied ``waiters`` object for ``BatchOperator`` (its documented extension point) that
    polls ``DescribeJobs`` without sleeping.

    The provider's default sync wait sleeps a random 1–10 s three times per job (``BatchClientHook.delay``
    with no delay given, as ``monitor_job`` calls it), which would cost minutes across the suite. The
    operator's own path is unchanged: ``monitor_job`` → ``waiters.wait_for_job`` → ``check_job_success``.
    """

    def wait_for_job(self, job_id: str, delay: Any = None, get_batch_log_fetcher: Any = None) -> None:
        from airflow.providers.amazon.aws.hooks.batch_client import BatchClientHook
        from airflow.providers.common.compat.sdk import AirflowException

        client = BatchClientHook(aws_conn_id="aws_default", config=_botocore_config()).client
        for _ in range(10_000):
            jobs = client.describe_jobs(jobs=[job_id])["jobs"]
            if not jobs:
                raise AirflowException(f"AWS Batch job ({job_id}) not found")
            if jobs[0]["status"] in ("SUCCEEDED", "FAILED"):
                return
        raise AirflowException(f"AWS Batch job ({job_id}) did not finish")

    def get_waiter(self, name: str) -> Any:  # pragma: no cover - part of the waiters protocol only
        raise NotImplementedError(name)


def _botocore_config() -> Any:
    from botocore.config import Config

    return Config(**NO_BOTOCORE_RETRIES)


#: botocore reads an answer for 1 s (its default: 60 s) and resends as it does by default (3 attempts).
SLOW_CLIENT_BOTOCORE = {
    "botocore_config": {"read_timeout": 1, "retries": {"mode": "standard", "max_attempts": 3}}
}
