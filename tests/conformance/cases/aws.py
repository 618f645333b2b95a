"""AWS: Redshift Data (native ``ClientToken``) and Batch (token in a job tag, looked up before submitting)."""

from __future__ import annotations

from typing import Any
from unittest import mock

from tests.aws_support import NO_BOTOCORE_RETRIES as _NO_BOTOCORE_RETRIES
from tests.aws_support import SLOW_CLIENT_BOTOCORE, PromptBatchWaiters
from tests.conformance.systems import SystemCase


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
        slow_client=SLOW_CLIENT_BOTOCORE,
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
        cancel_path="/redshift-data/CancelStatement",
        wrong_type_id=5,
        # The trigger turns a status API error into its own error event; the provider raises on it.
        trigger_error_text="error message",
        event_id_key="statement_id",
        window_closed_by="lookup",
        foreign_id="00000000-0000-4000-8000-000000000000",
        success_event=lambda statement_id: {"status": "success", "statement_id": statement_id},
        is_durable_token=_is_durable_token,
    ),
]


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
        slow_client=SLOW_CLIENT_BOTOCORE,
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
        cancel_path="/batch/TerminateJob",
        wrong_type_id=5,
        # BatchJobTrigger turns a status API error into its error event; the provider raises on it.
        trigger_error_text="Error while running job",
        event_id_key="job_id",
        foreign_id="00000000-0000-4000-8000-000000000000",
        success_event=lambda job_id: {"status": "success", "job_id": job_id},
        window_closed_by="lookup",
    )
)
