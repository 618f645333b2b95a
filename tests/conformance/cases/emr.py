"""EMR: steps on a cluster, EMR Serverless and EMR on EKS, each against its moto-backed emulator.

The provider's waits are made fast (zero delays) and botocore's own retries are switched off
(``total_max_attempts=1``), so one injected status error reaches the provider's wait loop, which
gives up on it (the error codes of a 5xx are not among its retriable ones).
"""

from __future__ import annotations

from typing import Any

from tests.aws_support import SLOW_CLIENT_BOTOCORE
from tests.conformance.systems import SystemCase

_NO_BOTOCORE_RETRIES = {"retries": {"total_max_attempts": 1}}
_ROLE = "arn:aws:iam::123456789012:role/emr-job"
# Enough polls for the longest scripted life cycle (the triggerer-killed cell: 30 active reads).
_MAX_POLLS = 40


def _emr_add_steps(emulator: Any, deferrable: bool, **overrides: Any) -> Any:
    from airflow_durable.operators.emr import DurableEmrAddStepsOperator

    kwargs: dict[str, Any] = dict(
        task_id="job",
        job_flow_id=emulator.cluster_id,
        steps=[
            {
                "Name": "nightly-etl",
                "ActionOnFailure": "CONTINUE",
                "HadoopJarStep": {"Jar": "command-runner.jar", "Args": ["spark-submit", "s3://jobs/etl.py"]},
            }
        ],
        wait_for_completion=True,
        # Not 0: EmrHook.add_job_flow_steps (whose wait loop the sync path reuses) turns 0 into 30 s.
        waiter_delay=0.01,
        waiter_max_attempts=_MAX_POLLS,
        deferrable=deferrable,
        botocore_config=_NO_BOTOCORE_RETRIES,
    )
    kwargs.update(overrides)
    return DurableEmrAddStepsOperator(**kwargs)


def _emr_serverless(emulator: Any, deferrable: bool, **overrides: Any) -> Any:
    from airflow_durable.operators.emr import DurableEmrServerlessStartJobOperator

    kwargs: dict[str, Any] = dict(
        task_id="job",
        application_id=emulator.application_id,
        execution_role_arn=_ROLE,
        job_driver={"sparkSubmit": {"entryPoint": "s3://jobs/etl.py"}},
        enable_application_ui_links=True,  # so the links (XComs) are checked on every path
        waiter_delay=0,
        waiter_max_attempts=_MAX_POLLS,
        deferrable=deferrable,
        botocore_config=_NO_BOTOCORE_RETRIES,
    )
    kwargs.update(overrides)
    return DurableEmrServerlessStartJobOperator(**kwargs)


def _emr_container(emulator: Any, deferrable: bool, **overrides: Any) -> Any:
    from airflow_durable.operators.emr import DurableEmrContainerOperator

    kwargs: dict[str, Any] = dict(
        task_id="job",
        name="nightly-etl",
        virtual_cluster_id=emulator.virtual_cluster_id,
        execution_role_arn=_ROLE,
        release_label="emr-7.1.0-latest",
        job_driver={"sparkSubmitJobDriver": {"entryPoint": "s3://jobs/etl.py"}},
        poll_interval=0,
        max_polling_attempts=_MAX_POLLS,
        deferrable=deferrable,
        botocore_config=_NO_BOTOCORE_RETRIES,
    )
    kwargs.update(overrides)
    return DurableEmrContainerOperator(**kwargs)


def _steps_event(external_id: str, status: str = "success") -> dict[str, Any]:
    return {"status": status, "value": external_id.split(",")}


CASES: list[SystemCase] = [
    SystemCase(
        id="emr_add_steps",
        slow_client=SLOW_CLIENT_BOTOCORE,
        emulator_fixture="emr_emulator",
        make=_emr_add_steps,
        external_id_key="airflow_durable.emr_add_steps",
        running="RUNNING",
        succeeded="COMPLETED",
        failed="FAILED",
        cancelled="CANCELLED",
        unknown="HIBERNATING",
        # The trigger and the decision read ListSteps; the provider's sync wait reads DescribeStep.
        status_call=("POST", "/elasticmapreduce/ListSteps"),
        status_call_sync=("POST", "/elasticmapreduce/DescribeStep"),
        status_errors_to_give_up=1,
        xcoms_sync=frozenset({"job_flow_id", "emr_cluster", "emr_logs"}),
        xcoms_deferrable=frozenset({"job_flow_id", "emr_cluster", "emr_logs"}),
        submit_operations=frozenset({"AddJobFlowSteps"}),
        cancel_operation="CancelSteps",
        cancel_path="/elasticmapreduce/CancelSteps",
        window_closed_by="lookup",
        reported_id=lambda outcome: ",".join(outcome.result),
        result_for=lambda external_id: external_id.split(","),
        stored_id=lambda external_id: external_id.split(","),
        success_event=_steps_event,
        foreign_event=lambda real: ({**real, "value": ["s-FOREIGNSTEP01"]}, "s-FOREIGNSTEP01"),
        trigger_error_text="Error while running steps",
    ),
    SystemCase(
        id="emr_serverless_start_job",
        slow_client=SLOW_CLIENT_BOTOCORE,
        emulator_fixture="emr_serverless_emulator",
        make=_emr_serverless,
        external_id_key="airflow_durable.emr_serverless_start_job",
        running="RUNNING",
        succeeded="SUCCESS",
        failed="FAILED",
        cancelled="CANCELLED",
        unknown="HIBERNATING",
        status_call=("GET", "/emr-serverless/GetJobRun"),
        status_errors_to_give_up=1,
        xcoms_sync=frozenset({"emr_serverless_dashboard", "emr_serverless_logs"}),
        xcoms_deferrable=frozenset({"emr_serverless_dashboard", "emr_serverless_logs"}),
        submit_operations=frozenset({"StartJobRun"}),
        window_closed_by="lookup",
        cancel_operation="CancelJobRun",
        cancel_path="/emr-serverless/CancelJobRun",
        reported_id=lambda outcome: outcome.result,
        result_for=lambda external_id: external_id,
        success_event=lambda external_id: {
            "status": "success",
            "job_details": {"application_id": "app", "job_id": external_id},
        },
        foreign_event=lambda real: (
            {**real, "job_details": {**real.get("job_details", {}), "job_id": "00foreignjobrun1"}},
            "00foreignjobrun1",
        ),
        trigger_error_text="Not cancelled",
        wrong_type_id=7,
        user_token={"client_request_token": "nightly-etl"},
        notimpl={
            "free_check_of_users_token": "StartJobRun answers no creation time and nothing reads the job "
            "run before the wait: checking a clientToken you set yourself costs one GetJobRun",
        },
    ),
    SystemCase(
        id="emr_container",
        slow_client=SLOW_CLIENT_BOTOCORE,
        emulator_fixture="emr_containers_emulator",
        make=_emr_container,
        external_id_key="airflow_durable.emr_container",
        running="RUNNING",
        succeeded="COMPLETED",
        failed="FAILED",
        cancelled="CANCELLED",
        unknown="HIBERNATING",
        status_call=("GET", "/emr-containers/DescribeJobRun"),
        status_errors_to_give_up=1,
        # The provider's sync poll (EmrContainerHook.poll_query_status) swallows status errors and polls
        # on: the try fails only once max_polling_attempts polls in a row have failed.
        status_errors_to_give_up_sync=_MAX_POLLS,
        xcoms_sync=frozenset(),
        xcoms_deferrable=frozenset(),
        submit_operations=frozenset({"StartJobRun"}),
        cancel_operation="CancelJobRun",
        cancel_path="/emr-containers/CancelJobRun",
        window_closed_by="lookup",
        reported_id=lambda outcome: outcome.result,
        result_for=lambda external_id: external_id,
        success_event=lambda external_id: {"status": "success", "job_id": external_id},
        foreign_event=lambda real: ({**real, "job_id": "foreignjobrun000001"}, "foreignjobrun000001"),
        trigger_error_text="Error while running job",
        wrong_type_id=7,
        user_token={"client_request_token": "nightly-etl"},
    ),
]
