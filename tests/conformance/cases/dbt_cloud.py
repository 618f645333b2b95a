"""dbt Cloud: ``DurableDbtCloudRunJobOperator`` against the dbt Cloud emulator (HTTPS on loopback)."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from tests.conformance.systems import SystemCase

JOB_ID = 42


def conformance_dag() -> Any:
    try:
        from airflow.sdk import DAG
    except ImportError:  # Airflow 2.x
        from airflow import DAG

    return DAG(dag_id="conformance", schedule=None, start_date=datetime(2026, 1, 1))


def _dbt_cloud_run_job(emulator: Any, deferrable: bool, **overrides: Any) -> Any:
    from airflow_durable.operators.dbt_cloud import DurableDbtCloudRunJobOperator

    if JOB_ID not in emulator.jobs:
        emulator.add_job(job_id=JOB_ID, name="nightly")
    kwargs: dict[str, Any] = dict(
        task_id="job",
        job_id=JOB_ID,
        deferrable=deferrable,
        check_interval=0,
        timeout=60,
        dag=conformance_dag(),  # the provider's default trigger_reason names the DAG
    )
    kwargs.update(overrides)
    return DurableDbtCloudRunJobOperator(**kwargs)


CASES: list[SystemCase] = [
    SystemCase(
        id="dbt_cloud_run_job",
        # The sync hook ignores timeout_seconds (its get_conn drops the request options): retries only.
        slow_client={"hook_params": {"timeout_seconds": 1, "retry_limit": 3, "retry_delay": 0.1}},
        slow_client_times_out=False,
        emulator_fixture="dbt_cloud_emulator",
        make=_dbt_cloud_run_job,
        initial="QUEUED",
        running="RUNNING",
        succeeded="SUCCESS",
        failed="ERROR",
        cancelled="CANCELLED",
        unknown="42",
        # GET runs/{id}/ (run ids start at 300001); the trailing digits keep the runs list out of it.
        status_call=("GET", "/runs/300"),
        status_errors_to_give_up=1,  # DbtCloudHook's default retry_limit=1: the first error is final
        xcoms_sync=frozenset({"job_run_url", "job_run_id"}),
        xcoms_deferrable=frozenset({"job_run_url", "job_run_id"}),
        external_id_key="airflow_durable.dbt_cloud_run_job",
        xcom_id=lambda xcoms: xcoms["job_run_id"],
        result_for=lambda run_id: run_id,  # the provider operator returns the run id
        submit_operations=frozenset({"jobs/run", "jobs/rerun"}),
        window_closed_by="lookup",
        # The provider trigger turns a status error into an "error" event; execute_complete raises.
        trigger_error_text="has failed",
        success_event=lambda run_id: {
            "status": "success",
            "message": f"Job run {run_id} has completed successfully.",
            "run_id": run_id,
        },
    ),
]
