"""Live status and cancel of one durable job from its record alone: ``(system, locator, external_id)``.

Each system is reached through its provider hook and the connection the operator used (the record's
``locator``), exactly as the operator reaches it; provider packages are imported only when a job of that
system is looked at. Status strings are classified as the operators classify them (``active``,
``succeeded``, ``failed``), plus ``not_found`` (the system forgot the job) and ``unknown``.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable, Set
from dataclasses import dataclass
from typing import Any

from airflow_durable import catalogue

__all__ = ["SYSTEMS", "LiveStatus", "UnsupportedSystem", "cancel", "console_url", "live_status"]

ACTIVE, SUCCEEDED, FAILED, NOT_FOUND, UNKNOWN = "active", "succeeded", "failed", "not_found", "unknown"


class UnsupportedSystem(ValueError):
    """A record names a system this version does not know."""


@dataclass(frozen=True)
class LiveStatus:
    """What the system says about a job now."""

    phase: str  # active | succeeded | failed | not_found | unknown | error
    status: str  # the system's own status string (or the error)
    url: str | None = None

    @property
    def active(self) -> bool:
        return self.phase == ACTIVE


def _phase(status: str, active: Set[str], succeeded: Set[str], failed: Set[str]) -> str:
    if status in active:
        return ACTIVE
    if status in succeeded:
        return SUCCEEDED
    if status in failed:
        return FAILED
    return UNKNOWN


def _declared_phase(kind: str, status: str) -> str:
    """``status`` classified by the status sets the job kind's durable operator declares: one list of a
    system's statuses for the operators and for this view (the operator module imports only its provider)."""
    op = catalogue.operators_of(kind)[0]
    cls = getattr(importlib.import_module(op.durable_module), op.durable_class)
    return _phase(
        status, cls.durable_active_statuses, cls.durable_succeeded_statuses, cls.durable_failed_statuses
    )


def _not_found(err: BaseException) -> bool:
    """A 404 / ResourceNotFound from any of the hooks, by what they carry."""
    code = getattr(getattr(err, "response", None), "status_code", None)
    if code == 404:
        return True
    error = getattr(err, "response", None)
    if isinstance(error, dict):
        if error.get("Error", {}).get("Code") in ("ResourceNotFoundException", "JobNotFound"):
            return True
    text = str(err)
    return text.startswith("404") or "RESOURCE_DOES_NOT_EXIST" in text or "Not found" in text


def _aws_console(region: str | None, path: str) -> str | None:
    return f"https://console.aws.amazon.com/{path}".format(region_name=region) if region else None


# --------------------------------------------------------------------------- Databricks
def _databricks_hook(locator: dict[str, Any]) -> Any:
    from airflow.providers.databricks.hooks.databricks import DatabricksHook

    # No retries of our own beyond one: a monitoring command must answer, not wait minutes.
    return DatabricksHook(
        databricks_conn_id=locator.get("databricks_conn_id", "databricks_default"), retry_limit=1
    )


def _databricks_status(locator: dict[str, Any], ext: Any) -> LiveStatus:
    run = _databricks_hook(locator).get_run(int(ext))
    state = run.get("state") or {}
    life, result = state.get("life_cycle_state", ""), state.get("result_state", "")
    status = f"{life}:{result}" if result else life
    # Composite, as the operator reads it: only TERMINATED:SUCCESS succeeded, else the life cycle decides.
    phase = _declared_phase("databricks", f"{life}:{result}")
    if phase == UNKNOWN:
        phase = _declared_phase("databricks", life)
    return LiveStatus(phase, status, run.get("run_page_url"))


def _databricks_cancel(locator: dict[str, Any], ext: Any) -> None:
    _databricks_hook(locator).cancel_run(int(ext))


# --------------------------------------------------------------------------- Snowflake SQL API
def _snowflake_hook(locator: dict[str, Any]) -> Any:
    from airflow.providers.snowflake.hooks.sql_api import SnowflakeSqlApiHook

    return SnowflakeSqlApiHook(snowflake_conn_id=locator.get("snowflake_conn_id", "snowflake_default"))


def _handles(ext: Any) -> list[str]:
    return [str(h) for h in ext] if isinstance(ext, list) else [str(ext)]


def _snowflake_status(locator: dict[str, Any], ext: Any) -> LiveStatus:
    hook = _snowflake_hook(locator)
    statuses = [str(hook.get_sql_api_query_status(h).get("status")) for h in _handles(ext)]
    phases = {_declared_phase("snowflake", s) for s in statuses}
    phase = next((p for p in (UNKNOWN, ACTIVE, FAILED) if p in phases), SUCCEEDED)
    return LiveStatus(phase, ",".join(statuses))


def _snowflake_cancel(locator: dict[str, Any], ext: Any) -> None:
    _snowflake_hook(locator).cancel_queries(_handles(ext))


# --------------------------------------------------------------------------- BigQuery
def _bigquery_hook(locator: dict[str, Any]) -> Any:
    from airflow.providers.google.cloud.hooks.bigquery import BigQueryHook

    return BigQueryHook(
        gcp_conn_id=locator.get("gcp_conn_id", "google_cloud_default"), location=locator.get("location")
    )


def _bigquery_url(locator: dict[str, Any], ext: Any, project_id: str | None) -> str | None:
    from airflow.providers.google.cloud.links.bigquery import BIGQUERY_JOB_DETAIL_LINK

    if not project_id:
        return None
    return BIGQUERY_JOB_DETAIL_LINK.format(
        project_id=project_id, job_id=ext, location=locator.get("location") or "US"
    )


def _bigquery_status(locator: dict[str, Any], ext: Any) -> LiveStatus:
    hook = _bigquery_hook(locator)
    project_id = locator.get("project_id") or hook.project_id
    job = hook.get_job(job_id=str(ext), project_id=project_id, location=locator.get("location"))
    state = str(job.state)
    if state in ("PENDING", "RUNNING"):
        phase = ACTIVE
    elif state == "DONE":
        phase = FAILED if job.error_result else SUCCEEDED
    else:
        phase = UNKNOWN
    return LiveStatus(phase, state, _bigquery_url(locator, ext, project_id))


def _bigquery_cancel(locator: dict[str, Any], ext: Any) -> None:
    hook = _bigquery_hook(locator)
    hook.cancel_job(
        job_id=str(ext),
        project_id=locator.get("project_id") or hook.project_id,
        location=locator.get("location"),
    )


# --------------------------------------------------------------------------- dbt Cloud
_DBT_STATUS = {1: "QUEUED", 2: "STARTING", 3: "RUNNING", 10: "SUCCESS", 20: "ERROR", 30: "CANCELLED"}


def _dbt_hook(locator: dict[str, Any]) -> Any:
    from airflow.providers.dbt.cloud.hooks.dbt import DbtCloudHook

    return DbtCloudHook(dbt_cloud_conn_id=locator.get("dbt_cloud_conn_id", "dbt_cloud_default"))


def _dbt_status(locator: dict[str, Any], ext: Any) -> LiveStatus:
    data = _dbt_hook(locator).get_job_run(run_id=int(ext), account_id=locator.get("account_id")).json()
    data = data["data"]
    status = _DBT_STATUS.get(data.get("status"), str(data.get("status")))
    phase = _declared_phase("dbt-cloud", status)
    return LiveStatus(phase, status, data.get("href"))


def _dbt_cancel(locator: dict[str, Any], ext: Any) -> None:
    _dbt_hook(locator).cancel_job_run(run_id=int(ext), account_id=locator.get("account_id"))


# --------------------------------------------------------------------------- AWS
def _aws(hook_cls_path: str, locator: dict[str, Any], **extra: Any) -> Any:
    module, _, name = hook_cls_path.rpartition(".")
    import importlib

    cls = getattr(importlib.import_module(module), name)
    kwargs: dict[str, Any] = {"aws_conn_id": locator.get("aws_conn_id", "aws_default"), **extra}
    if locator.get("region_name"):
        kwargs["region_name"] = locator["region_name"]
    return cls(**kwargs)


def _redshift_hook(locator: dict[str, Any]) -> Any:
    return _aws("airflow.providers.amazon.aws.hooks.redshift_data.RedshiftDataHook", locator)


def _redshift_status(locator: dict[str, Any], ext: Any) -> LiveStatus:
    status = str(_redshift_hook(locator).conn.describe_statement(Id=str(ext))["Status"])
    return LiveStatus(_declared_phase("redshift", status), status)


def _redshift_cancel(locator: dict[str, Any], ext: Any) -> None:
    _redshift_hook(locator).conn.cancel_statement(Id=str(ext))


def _batch_hook(locator: dict[str, Any]) -> Any:
    return _aws("airflow.providers.amazon.aws.hooks.batch_client.BatchClientHook", locator)


def _batch_status(locator: dict[str, Any], ext: Any) -> LiveStatus:
    hook = _batch_hook(locator)
    jobs = hook.client.describe_jobs(jobs=[str(ext)]).get("jobs") or []
    job = next((j for j in jobs if j.get("jobId") == str(ext)), None)
    if job is None:
        return LiveStatus(NOT_FOUND, "NOT_FOUND")
    status = str(job.get("status"))
    url = _aws_console(hook.conn_region_name, f"batch/home?region={{region_name}}#jobs/detail/{ext}")
    return LiveStatus(_declared_phase("batch", status), status, url)


def _batch_cancel(locator: dict[str, Any], ext: Any) -> None:
    _batch_hook(locator).client.terminate_job(jobId=str(ext), reason="airflow-durable orphans --cancel")


def _emr_hook(locator: dict[str, Any]) -> Any:
    return _aws("airflow.providers.amazon.aws.hooks.emr.EmrHook", locator)


def _emr_steps_status(locator: dict[str, Any], ext: Any) -> LiveStatus:
    hook = _emr_hook(locator)
    cluster = locator.get("job_flow_id")
    ids = _handles(ext)
    steps = hook.conn.list_steps(ClusterId=cluster, StepIds=ids[:10]).get("Steps") or []
    statuses = [str(s["Status"]["State"]) for s in steps]
    if not statuses:
        return LiveStatus(NOT_FOUND, "NOT_FOUND")
    phases = {_declared_phase("emr-steps", s) for s in statuses}
    phase = next((p for p in (UNKNOWN, ACTIVE, FAILED) if p in phases), SUCCEEDED)
    url = _aws_console(hook.conn_region_name, f"emr/home?region={{region_name}}#/clusterDetails/{cluster}")
    return LiveStatus(phase, ",".join(statuses), url)


def _emr_steps_cancel(locator: dict[str, Any], ext: Any) -> None:
    _emr_hook(locator).conn.cancel_steps(
        ClusterId=locator.get("job_flow_id"), StepIds=_handles(ext), StepCancellationOption="SEND_INTERRUPT"
    )


def _serverless_hook(locator: dict[str, Any]) -> Any:
    return _aws("airflow.providers.amazon.aws.hooks.emr.EmrServerlessHook", locator)


def _serverless_status(locator: dict[str, Any], ext: Any) -> LiveStatus:
    hook = _serverless_hook(locator)
    run = hook.conn.get_job_run(applicationId=locator.get("application_id"), jobRunId=str(ext))["jobRun"]
    status = str(run["state"])
    return LiveStatus(_declared_phase("emr-serverless", status), status)


def _serverless_cancel(locator: dict[str, Any], ext: Any) -> None:
    _serverless_hook(locator).conn.cancel_job_run(
        applicationId=locator.get("application_id"), jobRunId=str(ext)
    )


def _container_hook(locator: dict[str, Any]) -> Any:
    return _aws(
        "airflow.providers.amazon.aws.hooks.emr.EmrContainerHook",
        locator,
        virtual_cluster_id=locator.get("virtual_cluster_id"),
    )


def _container_status(locator: dict[str, Any], ext: Any) -> LiveStatus:
    hook = _container_hook(locator)
    run = hook.conn.describe_job_run(virtualClusterId=locator.get("virtual_cluster_id"), id=str(ext))
    status = str(run["jobRun"]["state"])
    return LiveStatus(_declared_phase("emr-eks", status), status)


def _container_cancel(locator: dict[str, Any], ext: Any) -> None:
    _container_hook(locator).stop_query(str(ext))


# --------------------------------------------------------------------------- registry
@dataclass(frozen=True)
class System:
    name: str
    title: str
    status: Callable[[dict[str, Any], Any], LiveStatus]
    cancel: Callable[[dict[str, Any], Any], None]


_HANDLERS: dict[
    str, tuple[Callable[[dict[str, Any], Any], LiveStatus], Callable[[dict[str, Any], Any], None]]
]
_HANDLERS = {
    "databricks": (_databricks_status, _databricks_cancel),
    "snowflake": (_snowflake_status, _snowflake_cancel),
    "bigquery": (_bigquery_status, _bigquery_cancel),
    "dbt-cloud": (_dbt_status, _dbt_cancel),
    "redshift": (_redshift_status, _redshift_cancel),
    "batch": (_batch_status, _batch_cancel),
    "emr-steps": (_emr_steps_status, _emr_steps_cancel),
    "emr-serverless": (_serverless_status, _serverless_cancel),
    "emr-eks": (_container_status, _container_cancel),
}
if set(_HANDLERS) != set(catalogue.SYSTEM_NAMES):  # a new job kind in the catalogue needs its handlers here
    raise RuntimeError(f"jobs handlers {sorted(_HANDLERS)} != catalogue job kinds {catalogue.SYSTEM_NAMES}")

#: Every job kind of the catalogue, in its order, with its status and cancel calls.
SYSTEMS: dict[str, System] = {
    name: System(name, catalogue.kind_title(name), *_HANDLERS[name]) for name in catalogue.SYSTEM_NAMES
}


def _system(name: str) -> System:
    try:
        return SYSTEMS[name]
    except KeyError:
        raise UnsupportedSystem(f"unknown system {name!r}; known: {', '.join(SYSTEMS)}") from None


def live_status(system: str, locator: dict[str, Any], external_id: Any) -> LiveStatus:
    """Ask the system; never raises for a reachable-or-not job: errors come back as phase ``error``."""
    try:
        return _system(system).status(locator, external_id)
    except UnsupportedSystem as err:
        return LiveStatus("error", str(err))
    except ImportError as err:
        return LiveStatus("error", f"provider for {system} not installed ({err.name})")
    except Exception as err:
        if _not_found(err):
            return LiveStatus(NOT_FOUND, "NOT_FOUND")
        return LiveStatus("error", f"{type(err).__name__}: {str(err)[:200]}")


def cancel(system: str, locator: dict[str, Any], external_id: Any) -> None:
    """The system's own cancel call; raises whatever the hook raises."""
    _system(system).cancel(locator, external_id)


def console_url(system: str, locator: dict[str, Any], external_id: Any) -> str | None:
    """The job's page in its system's console when it can be built without a call (else ``None``)."""
    try:
        if system == "bigquery":
            return _bigquery_url(locator, external_id, locator.get("project_id"))
    except ImportError:
        return None
    return None
