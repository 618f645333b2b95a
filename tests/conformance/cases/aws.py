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
