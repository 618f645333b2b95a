"""BigQuery: ``DurableBigQueryInsertJobOperator`` against the BigQuery jobs API emulator."""

from __future__ import annotations

from typing import Any

from tests.conformance.systems import SystemCase

CONFIGURATION = {
    "query": {
        "query": "SELECT 1 AS x",
        "useLegacySql": False,
        "destinationTable": {"projectId": "emulator-project", "datasetId": "ds", "tableId": "out"},
    }
}


def _bigquery_insert_job(emulator: Any, deferrable: bool, **overrides: Any) -> Any:
    from airflow_durable.operators.bigquery import DurableBigQueryInsertJobOperator

    kwargs: dict[str, Any] = dict(
        task_id="job",
        configuration={"query": dict(CONFIGURATION["query"])},
        deferrable=deferrable,
        poll_interval=0.01,
    )
    kwargs.update(overrides)
    return DurableBigQueryInsertJobOperator(**kwargs)


CASES: list[SystemCase] = [
    SystemCase(
        id="bigquery_insert_job",
        emulator_fixture="bigquery_emulator",
        make=_bigquery_insert_job,
        running="RUNNING",
        succeeded="DONE",
        failed="DONE:FAILED",
        cancelled="DONE:CANCELLED",
        unknown="SUSPENDED",
        status_call=("GET", "/jobs/"),
        # The emulator's injected faults carry a reason the google client does not retry.
        status_errors_to_give_up=1,
        xcoms_sync=frozenset({"bigquery_job_detail", "bigquery_table", "job_id_path"}),
        xcoms_deferrable=frozenset({"bigquery_job_detail", "bigquery_table", "job_id_path"}),
        external_id_key="airflow_durable.bigquery_insert_job",
        xcom_id=lambda xcoms: xcoms["bigquery_job_detail"]["job_id"],
        result_for=lambda job_id: job_id,  # the provider operator returns the job id
        submit_operations=frozenset({"jobs.insert"}),
        cancel_operation="jobs.cancel",
        wrong_type_id=5,
        # BigQueryAsyncHook.get_job_status runs the sync google client in a thread: requests, not aiohttp.
        trigger_transport="sync",
        pre_defer_status_reads=1,  # the provider's job.running() before it defers
        trigger_error_text="injected fault",  # the trigger turns the API error into an error event
        event_id_key="job_id",
        foreign_id="some_other_job_999999",
        success_event=lambda job_id: {"job_id": job_id, "status": "success", "message": "Job completed"},
        error_event_is_wellformed=True,
        # A fixed job id: job_id + a hash of the configuration, the same for every DAG run.
        user_token={
            "job_id": "nightly_load",
            "force_rerun": False,
            "reattach_states": {"PENDING", "RUNNING"},
        },
        # Upstream always sends a (random) job id; ours carry the durable token.
        is_durable_token=lambda token: token is not None and "afd-" in token,
    ),
]
