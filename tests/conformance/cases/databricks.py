"""Databricks: both operators share one emulator and one vocabulary."""

from __future__ import annotations

from typing import Any

from tests.conformance.systems import SystemCase


def _databricks_submit(emulator: Any, deferrable: bool, **overrides: Any) -> Any:
    from airflow_durable.operators.databricks import DurableDatabricksSubmitRunOperator

    kwargs: dict[str, Any] = dict(
        task_id="job",
        json={
            "new_cluster": {"spark_version": "15.4.x-scala2.12", "num_workers": 1},
            "notebook_task": {"notebook_path": "/Shared/etl"},
        },
        deferrable=deferrable,
        polling_period_seconds=0,
        databricks_retry_limit=2,
        databricks_retry_delay=0.01,
    )
    kwargs.update(overrides)
    return DurableDatabricksSubmitRunOperator(**kwargs)


def _databricks_run_now(emulator: Any, deferrable: bool, **overrides: Any) -> Any:
    from airflow_durable.operators.databricks import DurableDatabricksRunNowOperator

    emulator.add_job(job_id=42, name="nightly-etl")
    kwargs: dict[str, Any] = dict(
        task_id="job",
        job_id=42,
        notebook_params={"date": "2026-12-02"},
        deferrable=deferrable,
        polling_period_seconds=0,
        databricks_retry_limit=2,
        databricks_retry_delay=0.01,
    )
    kwargs.update(overrides)
    return DurableDatabricksRunNowOperator(**kwargs)


def upstream_run_now_broken() -> str | None:
    """Provider <= 7.16 on Airflow 3.3: the SDK re-sets templated ``json`` after ``__init__``, dropping
    the job_id/params the operator merged into it, so the upstream operator itself cannot submit."""
    from airflow.providers.databricks.operators.databricks import DatabricksRunNowOperator

    probe = DatabricksRunNowOperator(task_id="probe", job_id=1)
    if getattr(probe, "_prepare_run_now_json", None) is None and not probe.json:
        return (
            "the installed provider's DatabricksRunNowOperator loses its merged json on this Airflow "
            "(upstream bug of provider <= 7.16 on Airflow 3.3): nothing to make durable"
        )
    return None


_DATABRICKS_COMMON: dict[str, Any] = dict(
    emulator_fixture="databricks_emulator",
    running="RUNNING",
    succeeded="TERMINATED:SUCCESS",
    failed="TERMINATED:FAILED",
    cancelled="TERMINATED:CANCELED",
    unknown="HIBERNATING",
    status_call=("GET", "jobs/runs/get"),
    status_errors_to_give_up=2,  # databricks_retry_limit=2: two failed attempts and the hook gives up
    xcoms_sync=frozenset({"run_id", "run_page_url"}),
    xcoms_deferrable=frozenset({"run_id", "run_page_url", "job_id"}),
    user_token={"idempotency_token": "nightly-etl"},
)

CASES: list[SystemCase] = [
    SystemCase(
        id="databricks_submit_run",
        make=_databricks_submit,
        external_id_key="airflow_durable.databricks_submit_run",
        # Both: the token, and a crash-window retry first looks the token up in its run's name.
        window_closed_by="lookup",
        **_DATABRICKS_COMMON,
    ),
    SystemCase(
        id="databricks_run_now",
        make=_databricks_run_now,
        external_id_key="airflow_durable.databricks_run_now",
        upstream_broken=upstream_run_now_broken,
        **_DATABRICKS_COMMON,
    ),
]
