"""AWS: Redshift Data (native ``ClientToken``) and Batch (token in a job tag, looked up before submitting)."""

from __future__ import annotations

from typing import Any
from unittest import mock

from tests.conformance.systems import SystemCase

#: One botocore attempt per call, so a status fault reaches the operator / trigger at once (the default
#: legacy retries would back off for seconds per cell).
_NO_BOTOCORE_RETRIES = {"retries": {"mode": "standard", "total_max_attempts": 1}}


def _redshift_data(emulator: Any, deferrable: bool, **overrides: Any) -> Any:
    from airflow_durable.operators.redshift import DurableRedshiftDataOperator

    kwargs: dict[str, Any] = dict(
        task_id="job",
        sql="insert into sales select * from staging_sales",
        database="dev",
        cluster_identifier="analytics",
        session_keep_alive_seconds=60,  # a session: its id is an XCom to keep on every path
        deferrable=deferrable,
        poll_interval=0.01,
        botocore_config=_NO_BOTOCORE_RETRIES,
    )
    kwargs.update(overrides)
    return DurableRedshiftDataOperator(**kwargs)


def _is_durable_token(token: Any) -> bool:
    # botocore fills a random uuid4 ClientToken into every call that has none: only ours are durable.
    return isinstance(token, str) and token.startswith("afd-")


CASES: list[SystemCase] = [
    SystemCase(
        id="redshift_data",
        emulator_fixture="redshift_data_emulator",
        make=_redshift_data,
        running="STARTED",
        succeeded="FINISHED",
        failed="FAILED",
        cancelled="ABORTED",
        unknown="HIBERNATING",
        initial="SUBMITTED",
        status_call=("POST", "/redshift-data/DescribeStatement"),
        status_errors_to_give_up=1,
        xcoms_sync=frozenset({"session_id"}),
        xcoms_deferrable=frozenset({"session_id"}),
        external_id_key="airflow_durable.redshift_data",
        # No XCom carries the statement id; the return value does (checked through result_for).
        xcom_id=lambda xcoms: mock.ANY,
        result_for=lambda statement_id: [statement_id],
        submit_operations=frozenset({"ExecuteStatement", "BatchExecuteStatement"}),
        cancel_operation="CancelStatement",
        wrong_type_id=5,
        # The trigger turns a status API error into its own error event; the provider raises on it.
        trigger_error_text="error message",
        event_id_key="statement_id",
        foreign_id="00000000-0000-4000-8000-000000000000",
        success_event=lambda statement_id: {"status": "success", "statement_id": statement_id},
        is_durable_token=_is_durable_token,
    ),
]


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

    return Config(**_NO_BOTOCORE_RETRIES)


def _batch(emulator: Any, deferrable: bool, **overrides: Any) -> Any:
    from airflow_durable.operators.batch import DurableBatchOperator

    kwargs: dict[str, Any] = dict(
        task_id="job",
        job_name="nightly-etl",
        job_queue=emulator.job_queue,
        job_definition=emulator.job_definition,
        container_overrides={"command": ["python", "etl.py"]},
        tags={"team": "data"},
        deferrable=deferrable,
        poll_interval=0,
        max_retries=1000,
        waiters=PromptBatchWaiters(),
        botocore_config=_NO_BOTOCORE_RETRIES,
    )
    kwargs.update(overrides)
    return DurableBatchOperator(**kwargs)


CASES.append(
    SystemCase(
        id="batch",
        emulator_fixture="batch_emulator",
        make=_batch,
        running="RUNNING",
        succeeded="SUCCEEDED",
        failed="FAILED",
        cancelled="FAILED",  # Batch has no cancelled state: a terminated job ends FAILED
        unknown="HIBERNATING",
        initial="SUBMITTED",
        status_call=("POST", "/batch/DescribeJobs"),
        status_errors_to_give_up=1,
        xcoms_sync=frozenset({"batch_job_details", "batch_job_definition", "batch_job_queue"}),
        xcoms_deferrable=frozenset({"batch_job_details", "batch_job_definition", "batch_job_queue"}),
        external_id_key="airflow_durable.batch",
        xcom_id=lambda xcoms: xcoms["batch_job_details"]["job_id"],
        result_for=lambda job_id: job_id,
        submit_operations=frozenset({"SubmitJob"}),
        cancel_operation="TerminateJob",
        wrong_type_id=5,
        # BatchJobTrigger turns a status API error into its error event; the provider raises on it.
        trigger_error_text="Error while running job",
        event_id_key="job_id",
        foreign_id="00000000-0000-4000-8000-000000000000",
        success_event=lambda job_id: {"status": "success", "job_id": job_id},
        window_closed_by="lookup",
        notimpl={
            "two_tries_at_once": "SubmitJob has no idempotency token: two tries deciding at the same "
            "instant both submit (the tag lookup closes the window for a retry after a crash, not for "
            "two concurrent tries)",
        },
    )
)
