"""Live status and cancel of one durable job from its record alone: ``(system, locator, external_id)``,
and the listing of a system's active jobs that carry a task instance's identity (`list_marked`).

Each system is reached through its provider hook and the connection the operator used (the record's
``locator``), exactly as the operator reaches it; provider packages are imported only when a job of that
system is looked at. Status strings are classified as the operators classify them (``active``,
``succeeded``, ``failed``), plus ``not_found`` (the system forgot the job) and ``unknown``.
"""

from __future__ import annotations

import datetime as dt
import importlib
import re
from collections.abc import Callable, Iterator, Set
from dataclasses import dataclass, field
from typing import Any

from airflow_durable import catalogue
from airflow_durable.identity_tags import (
    IDENTITY_LABEL,
    IDENTITY_TAG,
    SUBMIT_ONLY_TAG,
    TOKEN_LABEL,
    TOKEN_TAG,
    identities_in,
    marked_jobs,
    submit_only_in,
)

__all__ = [
    "SYSTEMS",
    "ListedJob",
    "LiveStatus",
    "Scan",
    "ScanError",
    "UnsupportedSystem",
    "cancel",
    "console_url",
    "list_marked",
    "live_status",
    "not_scannable",
    "parse_scan",
    "scan_of",
]

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


# --------------------------------------------------------------------------- listing marked jobs
# Each lister answers the jobs at one locator that carry a task instance's identity and that the system
# does not already call ended (a server-side filter where the list call has one). The answer's status is
# only the listing's: the caller reads each job's live status as it reads a record's job.
def _operator_class(key: str) -> Any:
    """The durable operator class of a catalogue key (imports its module, and so its provider)."""
    op = next(o for o in catalogue.OPERATORS if o.key == key)
    return getattr(importlib.import_module(op.durable_module), op.durable_class)


def _ms(value: Any) -> str | None:
    if isinstance(value, (int, float)) and not isinstance(value, bool) and value > 0:
        return dt.datetime.fromtimestamp(value / 1000, dt.UTC).isoformat()
    return _iso(value)


def _iso(value: Any) -> str | None:
    if isinstance(value, dt.datetime):
        return (value if value.tzinfo else value.replace(tzinfo=dt.UTC)).isoformat()
    return value if isinstance(value, str) and value else None


def _marks(text: str | None) -> list[tuple[str, str]]:
    """The ``(identity, token)`` markers of a name or cause; a Redshift statement name leads with them
    unbracketed (``<identity> <token> ...``), read by the same pattern once bracketed."""
    return marked_jobs(text) or marked_jobs(f"[{text or ''}]")


def _databricks_list(locator: dict[str, Any], limit: int) -> Iterator[ListedJob]:
    module = importlib.import_module("airflow_durable.operators.databricks")
    hook = _databricks_hook(locator)
    # The submit-run operator's list call (run-now runs carry no identity: catalogue notimpl).
    # Pages no larger than the bound: the listing reads ``limit`` runs, not a page more.
    size = min(module._LIST_LIMIT, limit)
    params: dict[str, Any] = {"run_type": "SUBMIT_RUN", "active_only": "true", "limit": size}
    read = 0
    while True:
        page = hook._do_api_call(module._LIST_RUNS_ENDPOINT, dict(params))
        runs = page.get("runs") or []
        for run in runs:
            for identity, token in _marks(run.get("run_name"))[:1]:
                state = run.get("state") or {}
                yield ListedJob(
                    "databricks",
                    locator,
                    int(run["run_id"]),
                    identity,
                    token,
                    str(state.get("life_cycle_state")),
                    _ms(run.get("start_time")),
                    run.get("run_page_url"),
                    submit_only=submit_only_in(run.get("run_name")),
                )
        read += len(runs)
        if not page.get("has_more"):
            return
        if not page.get("next_page_token"):
            raise RuntimeError(f"runs/list answered has_more without a next_page_token after {read} runs")
        if read >= limit:
            raise _Truncated(read)
        params["page_token"] = page["next_page_token"]


def _bigquery_list(locator: dict[str, Any], limit: int) -> Iterator[ListedJob]:
    hook = _bigquery_hook(locator)
    project_id = locator.get("project_id") or hook.project_id
    client = hook.get_client(project_id=project_id, location=locator.get("location"))
    active = _operator_class("airflow_durable.bigquery_insert_job").durable_active_statuses
    read = 0
    for state in sorted(active):
        for job in client.list_jobs(project=project_id, state_filter=state.lower(), max_results=limit):
            read += 1
            labels = getattr(job, "labels", None) or {}
            identity = labels.get(IDENTITY_LABEL)
            if identity:
                yield ListedJob(
                    "bigquery",
                    locator,
                    job.job_id,
                    identity,
                    labels.get(TOKEN_LABEL),
                    str(job.state),
                    _iso(job.created),
                    _bigquery_url(locator, job.job_id, project_id),
                )
        if read >= limit:
            raise _Truncated(read)


def _dbt_list(locator: dict[str, Any], limit: int) -> Iterator[ListedJob]:
    hook = _dbt_hook(locator)
    active = _operator_class("airflow_durable.dbt_cloud_run_job").durable_active_statuses
    codes = sorted(code for code, name in _DBT_STATUS.items() if name in active)
    page, offset = min(100, limit), 0
    while True:
        runs = (
            hook.get_job_runs(
                account_id=locator.get("account_id"),
                payload={
                    "status__in": "[" + ",".join(map(str, codes)) + "]",  # the API's form: [1,2,3]
                    "order_by": "-created_at",
                    "limit": page,
                    "offset": offset,
                    "include_related": ["trigger"],
                },
            ).json()["data"]
            or []
        )
        for run in runs:
            for identity, token in _marks((run.get("trigger") or {}).get("cause"))[:1]:
                yield ListedJob(
                    "dbt-cloud",
                    locator,
                    int(run["id"]),
                    identity,
                    token,
                    _DBT_STATUS.get(run.get("status"), str(run.get("status"))),
                    _iso(run.get("created_at")),
                    run.get("href"),
                    submit_only=submit_only_in((run.get("trigger") or {}).get("cause")),
                )
        if len(runs) < page:
            return
        offset += page
        if offset >= limit:
            raise _Truncated(offset)


def _redshift_list(locator: dict[str, Any], limit: int) -> Iterator[ListedJob]:
    conn = _redshift_hook(locator).conn
    active = _operator_class("airflow_durable.redshift_data").durable_active_statuses
    read = 0
    for status in sorted(active):
        # One listing per status: the bound counts across them, so a listing left unread is said (its status
        # may hold statements) and no page reads past the bound.
        if read >= limit:
            raise _Truncated(read)
        # A prefix match: every name the operator gives leads with the identity.
        kwargs: dict[str, Any] = {"StatementName": "afd-ti-", "Status": status}
        while True:
            kwargs["MaxResults"] = min(100, limit - read)
            page = conn.list_statements(**kwargs)
            for statement in page.get("Statements", []):
                read += 1
                for identity, token in _marks(statement.get("StatementName"))[:1]:
                    yield ListedJob(
                        "redshift",
                        locator,
                        statement["Id"],
                        identity,
                        token,
                        str(statement.get("Status")),
                        _iso(statement.get("CreatedAt")),
                        submit_only=submit_only_in(statement.get("StatementName")),
                    )
            if not page.get("NextToken"):
                break
            if read >= limit:
                raise _Truncated(read)
            kwargs["NextToken"] = page["NextToken"]


def _snowflake_list(locator: dict[str, Any], limit: int) -> Iterator[ListedJob]:
    module = importlib.import_module("airflow_durable.operators.snowflake")
    compat = importlib.import_module("airflow_durable.shims.snowflake")

    # One QUERY_HISTORY_BY_USER statement on the connection's warehouse, the identity prefix matched in SQL;
    # RESULT_LIMIT is the bound (running statements come first, so a cut leaves out only ended ones, unless
    # the running ones alone fill it).
    listing = compat.query_history(
        _snowflake_hook(locator), "afd-ti-", limit=min(limit, compat.HISTORY_LIMIT_MAX)
    )
    if listing.unended_cut:
        # The running statements alone fill RESULT_LIMIT: a request's statements may be listed in part, and
        # a part is not a job to cancel. Nothing is listed, and the listing says it stopped.
        raise _Truncated(listing.listed)
    for identity, job in module.find_in_history(listing, None):
        if job.status == "running":
            yield ListedJob(
                "snowflake", locator, job.id, identity, job.token, job.status, _iso(job.created_at)
            )


_STEP_INDEX = re.compile(r" step (\d+)/\d+\]$")


def _emr_steps_list(locator: dict[str, Any], limit: int) -> Iterator[ListedJob]:
    hook = _emr_hook(locator)
    cluster = locator["job_flow_id"]
    active = _operator_class("airflow_durable.emr_add_steps").durable_active_statuses
    # One job is the set of steps one AddJobFlowSteps added: the steps that share a token, in step order.
    sets: dict[tuple[str, str], list[tuple[int, dict[str, Any]]]] = {}
    page: dict[str, Any] = {}
    read, truncated = 0, 0
    while True:
        marker = {"Marker": page["Marker"]} if page.get("Marker") else {}
        page = hook.conn.list_steps(ClusterId=cluster, StepStates=sorted(active), **marker)
        for step in page.get("Steps", []):
            read += 1
            for identity, token in _marks(step.get("Name"))[:1]:
                index = _STEP_INDEX.search(step.get("Name") or "")
                sets.setdefault((identity, token), []).append((int(index.group(1)) if index else 0, step))
        if not page.get("Marker"):
            break
        if read >= limit:
            truncated = read
            break
    url = _aws_console(hook.conn_region_name, f"emr/home?region={{region_name}}#/clusterDetails/{cluster}")
    for (identity, token), steps in sets.items():
        steps.sort(key=lambda pair: pair[0])
        first = steps[0][1].get("Status") or {}
        yield ListedJob(
            "emr-steps",
            locator,
            [step["Id"] for _, step in steps],
            identity,
            token,
            ",".join(str((step.get("Status") or {}).get("State")) for _, step in steps),
            _iso((first.get("Timeline") or {}).get("CreationDateTime")),
            url,
            submit_only=any(submit_only_in(step.get("Name")) for _, step in steps),
        )
    if truncated:
        raise _Truncated(truncated)


def _aws_pages(
    call: Callable[..., dict[str, Any]], kwargs: dict[str, Any], items: str, limit: int
) -> Iterator[dict[str, Any]]:
    """Every item of an AWS list call paged by ``nextToken``; `_Truncated` once ``limit`` items were read
    and more pages remain."""
    read = 0
    while True:
        page = call(**kwargs)
        for item in page.get(items, []):
            read += 1
            yield item
        if not page.get("nextToken"):
            return
        if read >= limit:
            raise _Truncated(read)
        kwargs["nextToken"] = page["nextToken"]


def _serverless_list(locator: dict[str, Any], limit: int) -> Iterator[ListedJob]:
    conn = _serverless_hook(locator).conn
    active = _operator_class("airflow_durable.emr_serverless_start_job").durable_active_statuses
    # Active states matched client-side: one request lists them all (the ``states`` filter is applied
    # here as the service would, so a list that serves it and one that does not answer alike).
    kwargs: dict[str, Any] = {"applicationId": locator["application_id"], "maxResults": min(50, limit)}
    for run in _aws_pages(conn.list_job_runs, kwargs, "jobRuns", limit):
        if str(run.get("state")) not in active:
            continue
        # The identity ends the job run's name; the token travels in its tags only (not listed).
        for identity in sorted(identities_in(run.get("name")))[:1]:
            yield ListedJob(
                "emr-serverless",
                locator,
                run["id"],
                identity,
                None,
                str(run.get("state")),
                _iso(run.get("createdAt")),
                submit_only=submit_only_in(run.get("name")),
            )


def _container_list(locator: dict[str, Any], limit: int) -> Iterator[ListedJob]:
    conn = _container_hook(locator).conn
    active = _operator_class("airflow_durable.emr_container").durable_active_statuses
    kwargs: dict[str, Any] = {"virtualClusterId": locator["virtual_cluster_id"], "maxResults": min(50, limit)}
    for run in _aws_pages(conn.list_job_runs, kwargs, "jobRuns", limit):
        tags = run.get("tags") or {}
        if tags.get(IDENTITY_TAG) and str(run.get("state")) in active:
            yield ListedJob(
                "emr-eks",
                locator,
                run["id"],
                str(tags[IDENTITY_TAG]),
                tags.get(TOKEN_TAG),
                str(run.get("state")),
                _iso(run.get("createdAt")),
                submit_only=tags.get(SUBMIT_ONLY_TAG) == "true",
            )


def _batch_list(locator: dict[str, Any], limit: int) -> Iterator[ListedJob]:
    hook = _batch_hook(locator)
    client: Any = hook.client
    active = _operator_class("airflow_durable.batch").durable_active_statuses
    queues = [locator["job_queue"]] if locator.get("job_queue") else _batch_queues(client)
    read = 0
    for queue in queues:
        for status in sorted(active):
            # One listing per queue and status: the bound counts across them, so a listing left unread is
            # said (its status may hold jobs) and no page reads past the bound.
            if read >= limit:
                raise _Truncated(read)
            kwargs: dict[str, Any] = {"jobQueue": queue, "jobStatus": status}
            while True:
                kwargs["maxResults"] = min(100, limit - read)
                page = client.list_jobs(**kwargs)
                ids = [summary["jobId"] for summary in page.get("jobSummaryList", [])]
                read += len(ids)
                # Job summaries carry no tags: DescribeJobs (100 at a time) does.
                for start in range(0, len(ids), 100):
                    for job in client.describe_jobs(jobs=ids[start : start + 100]).get("jobs", []):
                        tags = job.get("tags") or {}
                        if not tags.get(IDENTITY_TAG):
                            continue
                        yield ListedJob(
                            "batch",
                            locator,
                            str(job["jobId"]),
                            str(tags[IDENTITY_TAG]),
                            tags.get(TOKEN_TAG),
                            str(job.get("status")),
                            _ms(job.get("createdAt")),
                            _aws_console(
                                hook.conn_region_name,
                                f"batch/home?region={{region_name}}#jobs/detail/{job['jobId']}",
                            ),
                            submit_only=tags.get(SUBMIT_ONLY_TAG) == "true",
                        )
                if not page.get("nextToken"):
                    break
                if read >= limit:
                    raise _Truncated(read)
                kwargs["nextToken"] = page["nextToken"]


def _batch_queues(client: Any) -> list[str]:
    queues: list[str] = []
    kwargs: dict[str, Any] = {}
    while True:
        page = client.describe_job_queues(**kwargs)
        queues += [q["jobQueueName"] for q in page.get("jobQueues", [])]
        if not page.get("nextToken"):
            return queues
        kwargs["nextToken"] = page["nextToken"]


class _Truncated(Exception):
    def __init__(self, read: int) -> None:
        super().__init__(read)
        self.read = read


# --------------------------------------------------------------------------- scans
@dataclass(frozen=True)
class ListedJob:
    """One active job a system listed that carries a task instance's identity."""

    system: str
    locator: dict[str, Any]
    external_id: Any
    identity: str
    token: str | None
    status: str  # the listing's status (the caller reads the live one)
    created_at: str | None = None
    url: str | None = None
    #: It carries `airflow_durable.identity_tags.SUBMIT_ONLY`: its task only submitted it, and something
    #: other than that task waits on it. Never an orphan.
    submit_only: bool = False


class ScanError(RuntimeError):
    """A system's list call failed, or a scan cannot be made as asked; the message says which and why."""


@dataclass(frozen=True)
class _Lister:
    list: Callable[[dict[str, Any], int], Iterator[ListedJob]]
    #: Locator fields a scan takes beyond the operators' `durable_locator_fields` (narrowing the listing).
    extra_fields: tuple[str, ...] = ()
    #: The locator field the list call cannot do without.
    required: str | None = None


_AWS_REGION = ("region_name",)
_LISTERS: dict[str, _Lister] = {
    "databricks": _Lister(_databricks_list),
    "snowflake": _Lister(_snowflake_list),
    "bigquery": _Lister(_bigquery_list),
    "dbt-cloud": _Lister(_dbt_list),
    "redshift": _Lister(_redshift_list),
    "batch": _Lister(_batch_list, ("job_queue",)),
    "emr-steps": _Lister(_emr_steps_list, _AWS_REGION, "job_flow_id"),
    "emr-serverless": _Lister(_serverless_list, _AWS_REGION, "application_id"),
    "emr-eks": _Lister(_container_list, _AWS_REGION, "virtual_cluster_id"),
}
#: Reads at most this many listed jobs per scan where the operator declares no bound of its own.
SCAN_LIMIT = 1000


def _lookups(kind: str) -> list[tuple[catalogue.Operator, catalogue.Lookup]]:
    return [(op, op.lookup) for op in catalogue.operators_of(kind)]


def not_scannable(kind: str) -> list[tuple[str, str]]:
    """``(durable class, the catalogue's reason)`` of each operator of ``kind`` whose jobs no list finds."""
    return [(op.durable_class, lookup.reason) for op, lookup in _lookups(kind) if not lookup.implemented]


def _scanned_operator(kind: str) -> catalogue.Operator | None:
    return next((op for op, lookup in _lookups(kind) if lookup.implemented), None)


def _list_call(kind: str) -> str:
    op = _scanned_operator(kind)
    named = re.search(r"`([^`]+)`", op.lookup.list_call) if op is not None else None
    return named.group(1) if named else "its list call"


def _conn_field(kind: str) -> str:
    from airflow_durable.jobs.records import default_locator

    return next(iter(default_locator(kind)))


@dataclass(frozen=True)
class Scan:
    """Where to list one system's marked jobs: a job kind and a locator (connection id, region, ...)."""

    system: str
    locator: dict[str, Any] = field(default_factory=dict)

    @property
    def where(self) -> str:
        """``kind:conn_id[:field=value,...]``, the `parse_scan` syntax."""
        conn = _conn_field(self.system)
        text = f"{self.system}:{self.locator.get(conn, '')}"
        rest = ",".join(f"{k}={v}" for k, v in self.locator.items() if k != conn)
        return f"{text}:{rest}" if rest else text

    def key(self) -> tuple[str, tuple[tuple[str, str], ...]]:
        return self.system, tuple(sorted((k, str(v)) for k, v in self.locator.items()))


def _scan_fields(kind: str) -> tuple[str, ...]:
    """The locator fields a scan of ``kind`` reads: the scanned operator's own, then the lister's extras."""
    op = _scanned_operator(kind)
    own = _operator_class(op.key).durable_locator_fields if op is not None else ()
    return tuple(dict.fromkeys([*own, *_LISTERS[kind].extra_fields]))


def scan_of(system: str, locator: dict[str, Any]) -> Scan | None:
    """The scan that covers a record's job (its locator cut to what the list call reads), or ``None``
    where the job kind has no lookup or the locator lacks what the list call needs."""
    if system not in _LISTERS or _scanned_operator(system) is None:
        return None
    fields = _scan_fields(system)
    conn = _conn_field(system)
    kept = {conn: locator.get(conn) or _default_conn(system)}
    kept.update({k: locator[k] for k in fields if k != conn and locator.get(k) not in (None, "")})
    required = _LISTERS[system].required
    if required and not kept.get(required):
        return None
    return Scan(system, kept)


def _default_conn(kind: str) -> str:
    from airflow_durable.jobs.records import default_locator

    return str(next(iter(default_locator(kind).values())))


def parse_scan(text: str) -> Scan:
    """``KIND[:CONN_ID][:FIELD=VALUE[,FIELD=VALUE...]]`` (e.g. ``batch:aws_default:region_name=eu-west-1``);
    ``ValueError`` saying what is wrong. Imports the kind's operator module (its provider) to read its
    locator fields."""
    kind, _, rest = text.strip().partition(":")
    conn_id, _, pairs = rest.partition(":")
    if kind not in SYSTEMS:
        raise ValueError(f"--scan {text!r}: unknown system {kind!r}; known: {', '.join(SYSTEMS)}")
    if _scanned_operator(kind) is None:
        reasons = "; ".join(f"{cls}: {why}" for cls, why in not_scannable(kind))
        raise ValueError(f"--scan {text!r}: {kind} jobs cannot be listed ({reasons})")
    try:
        fields = _scan_fields(kind)
    except ImportError as err:
        raise ValueError(f"--scan {text!r}: the provider for {kind} is not installed ({err.name})") from None
    conn = _conn_field(kind)
    locator: dict[str, Any] = {conn: conn_id or _default_conn(kind)}
    for pair in filter(None, pairs.split(",")):
        name, eq, value = pair.partition("=")
        if not eq or not value:
            raise ValueError(f"--scan {text!r}: expected FIELD=VALUE, got {pair!r}")
        if name not in fields or name == conn:
            allowed = ", ".join(f for f in fields if f != conn) or "none"
            raise ValueError(f"--scan {text!r}: {kind} takes no field {name!r} (fields: {allowed})")
        locator[name] = value
    required = _LISTERS[kind].required
    if required and not locator.get(required):
        raise ValueError(
            f"--scan {text!r}: listing {kind} jobs needs {required} "
            f"(e.g. {kind}:{locator[conn]}:{required}=...)"
        )
    return Scan(kind, locator)


@dataclass
class ScanResult:
    scan: Scan
    jobs: list[ListedJob]
    #: Set when the listing stopped at its bound: how many jobs it read.
    truncated_at: int | None = None


def list_marked(scan: Scan, limit: int | None = None) -> ScanResult:
    """The active jobs at ``scan``'s locator that carry a task instance's identity; `ScanError` naming the
    system, the locator and the list call when the listing fails. Reads about ``limit`` listed jobs at most
    (default: the operator's lookup bound, else `SCAN_LIMIT`); past it the result is ``truncated_at``."""
    if limit is not None and limit < 1:
        raise ValueError(f"a listing reads at least one job (limit {limit})")
    op = _scanned_operator(scan.system)
    if op is None:
        raise ScanError(f"{scan.system} jobs cannot be listed: {not_scannable(scan.system)}")
    try:
        cls = _operator_class(op.key)
        if limit is None:
            limit = int(
                getattr(cls, "durable_lookup_runs", 0) or getattr(cls, "durable_lookup_jobs", 0) or SCAN_LIMIT
            )
        jobs: list[ListedJob] = []
        try:
            for job in _LISTERS[scan.system].list(dict(scan.locator), limit):
                jobs.append(job)
        except _Truncated as stop:
            return ScanResult(scan, jobs, stop.read)
        return ScanResult(scan, jobs)
    except ImportError as err:
        raise ScanError(f"could not list {scan.where}: the provider is not installed ({err.name})") from None
    except Exception as err:
        raise ScanError(
            f"could not list {kind_title(scan.system)} jobs at {scan.where} ({_list_call(scan.system)}): "
            f"{type(err).__name__}: {str(err)[:300]}"
        ) from None


def kind_title(kind: str) -> str:
    return SYSTEMS[kind].title if kind in SYSTEMS else kind
