"""The reaper: a maintenance DAG that ends, within minutes, the jobs no process will ever end.

A user who marks a deferred task before any triggerer picked its trigger up, or a task that is
``up_for_retry`` or ``queued``, leaves its job running with no try and no trigger to cancel it: the record
keeps tracking it and ``airflow-durable orphans`` reports it. The reaper runs the ``orphans`` rules on a
schedule and cancels those jobs, with stricter safety than ``orphans --cancel``:

* it cancels a job only if its task instance, re-read right before the cancel, has *ended* (success,
  failed, skipped, upstream_failed, removed) or is gone (its DAG run or task instance deleted), and has
  not been cleared or retried since it was looked at. A task instance that is running, deferred,
  queued, scheduled, up_for_retry, up_for_reschedule, restarting or cleared (no state yet) keeps its jobs:
  a try waits on them or is about to, and a cleared task's next try ends an older epoch's job itself;
* a status or an Airflow read that fails cancels nothing for that job and fails the run (after every
  other job was handled), so the usual alerting on failed tasks sees it;
* ``dry_run`` logs what it would cancel and cancels nothing.

Why a DAG and not a timer in the api-server: the cancel goes through each system's provider hook and the
connection the operator used, which exist where the durable tasks run (the workers), not necessarily in
the api-server; a DAG is opt-in per deployment, pausable, has its logs and its failures in the UI, and
``max_active_runs=1`` keeps two reapers from overlapping. An Airflow 3 task cannot read the metadata
database, so, like ``airflow-durable orphans``, it reads Airflow through the public REST API, with the
credentials of an Airflow connection (`api_from_connection`).
"""

from __future__ import annotations

import importlib
import logging
import os
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

from airflow_durable.jobs.api import ENV_URL, AirflowApi, ApiError, NotFound
from airflow_durable.jobs.collect import ENDED_STATES, JobCache, JobRow, ScanReport, find_orphans
from airflow_durable.jobs.systems import cancel, live_status

__all__ = [
    "DEFAULT_CONN_ID",
    "DEFAULT_DAG_ID",
    "Outcome",
    "ReapReport",
    "ReaperError",
    "api_from_connection",
    "decide",
    "durable_reaper_dag",
    "reap",
]

log = logging.getLogger(__name__)

DEFAULT_DAG_ID = "airflow_durable_reaper"
#: The Airflow connection naming the REST API and its credentials (`api_from_connection`).
DEFAULT_CONN_ID = "airflow_durable_api"

CANCELLED, WOULD_CANCEL, KEPT, ERROR = "cancelled", "would cancel", "kept", "error"


class ReaperError(RuntimeError):
    """The run could not look, or could not end every job it should have: the message says which."""


@dataclass(frozen=True)
class Outcome:
    """What the reaper did with one job, and why."""

    row: JobRow
    action: str  # cancelled | would cancel | kept | error
    reason: str

    def describe(self) -> str:
        r = self.row
        where = f"{r.dag_id}/{r.run_id}/{r.task_id}" + (f"[{r.map_index}]" if r.map_index >= 0 else "")
        return f"{self.action.upper()} {r.system} job {r.external_id} of {where}: {self.reason}"

    def to_json(self) -> dict[str, Any]:
        r = self.row
        return {
            "dag_id": r.dag_id,
            "run_id": r.run_id,
            "task_id": r.task_id,
            "map_index": r.map_index,
            "system": r.system,
            "external_id": r.external_id,
            "orphan": r.orphan,
            "action": self.action,
            "reason": self.reason,
        }


@dataclass
class ReapReport:
    """One run: how many records it looked at, and every decision with its reason."""

    dry_run: bool
    records: int = 0
    outcomes: list[Outcome] = field(default_factory=list)

    def of(self, action: str) -> list[Outcome]:
        return [o for o in self.outcomes if o.action == action]

    def to_json(self) -> dict[str, Any]:
        return {
            "dry_run": self.dry_run,
            "records": self.records,
            **{key: [o.to_json() for o in self.of(a)] for key, a in _KEYS.items()},
        }


_KEYS = {"cancelled": CANCELLED, "would_cancel": WOULD_CANCEL, "kept": KEPT, "errors": ERROR}


# --------------------------------------------------------------------------- the rule
def decide(row: JobRow, now: dict[str, Any] | None) -> tuple[bool, str]:
    """May the reaper cancel this orphan, given its task instance as re-read just now (``None``: gone)?

    Returns ``(cancel, reason)``. Pure: the tests call it on every state a task instance can have.
    """
    why = row.orphan or "nothing waits for it"
    if row.submit_only:
        return False, "its task only submits: the job is that task's finished work, which others wait on"
    if now is None:
        return True, f"{why}; its task instance is gone"
    state = now.get("state")
    if state not in ENDED_STATES:
        if state is None:
            return False, (
                f"its task instance was cleared and no try runs yet: its next try ends this job ({why})"
            )
        return False, f"its task instance is {state}: a try waits on this job or is about to ({why})"
    if row.source != "cache":
        changes = [
            f"{name} {before} -> {now.get(name)}"
            for name, before in (("try_number", row.try_number), ("max_tries", row.ti_max_tries))
            if before is not None and now.get(name) is not None and now.get(name) != before
        ]
        if changes:
            changed = ", ".join(changes)
            return (
                False,
                f"its task instance changed since it was looked at ({changed}): left to the next run",
            )
    return True, f"{why}; its task instance is {state}"


# --------------------------------------------------------------------------- one run
def reap(
    api: AirflowApi,
    *,
    dry_run: bool = False,
    dag_ids: Sequence[str] = (),
    systems: Sequence[str] = (),
    operators: Sequence[str] = (),
    cache: JobCache | None = None,
    logger: logging.Logger | None = None,
) -> ReapReport:
    """Find the orphans as ``airflow-durable orphans`` does and cancel those `decide` allows.

    Raises `ReaperError` when Airflow cannot be read at all (nothing is cancelled then); a failure about
    one job is an ``error`` outcome and the others are still handled.
    """
    logger = logger or log
    report = ReapReport(dry_run=dry_run)
    wanted = set(dag_ids)
    in_scope: Callable[[str], bool] = (lambda d: d in wanted) if wanted else (lambda d: True)

    def mine(row: JobRow) -> bool:
        return in_scope(row.dag_id) and (not systems or row.system in systems)

    probed: list[JobRow] = []
    listing = ScanReport()
    try:
        rows, orphans = find_orphans(
            api,
            dag_ids[0] if len(wanted) == 1 else None,
            operators,
            cache=cache,
            in_scope=in_scope,
            probed=probed,
            report=listing,
        )
    except ApiError as err:
        raise ReaperError(f"could not read the deployment's durable jobs; nothing cancelled: {err}") from None
    if listing.errors:
        # As `orphans --cancel`: a system that could not be listed may hide what a cancel would touch.
        raise ReaperError(
            "could not list the systems' jobs (" + "; ".join(listing.errors) + "); nothing cancelled"
        )
    report.records = sum(1 for r in rows if mine(r))
    logger.info(
        "airflow-durable reaper%s: %d durable record(s), %d job(s) probed, %d orphan(s)",
        " (dry run)" if dry_run else "",
        report.records,
        sum(1 for r in probed if mine(r)),
        sum(1 for r in orphans if mine(r)),
    )
    for row in probed:
        if mine(row) and row.live is not None and row.live.phase == "error":
            report.outcomes.append(Outcome(row, ERROR, f"could not read its status: {row.live.status}"))
    for row in orphans:
        if mine(row):
            report.outcomes.append(_handle(api, row, dry_run))
    # A job of a DAG this API user may not read is never judged: someone who can read it must look.
    unjudged = [Outcome(row, KEPT, f"not judged: {row.unknown}") for row in listing.unknown if mine(row)]
    report.outcomes += unjudged
    for outcome in report.outcomes:
        level = logging.ERROR if outcome.action == ERROR else logging.INFO
        logger.log(logging.WARNING if outcome in unjudged else level, "%s", outcome.describe())
    return report


def _handle(api: AirflowApi, row: JobRow, dry_run: bool) -> Outcome:
    # Re-read right before the cancel: the task may have been cleared, retried or re-run meanwhile.
    try:
        now: dict[str, Any] | None = api.task_instance(row.dag_id, row.run_id, row.task_id, row.map_index)
    except NotFound:
        now = None
    except ApiError as err:
        return Outcome(row, ERROR, f"not cancelled: could not re-read its task instance ({err})")
    allowed, reason = decide(row, now)
    if not allowed:
        return Outcome(row, KEPT, reason)
    if dry_run:
        return Outcome(row, WOULD_CANCEL, reason)
    try:
        cancel(row.system, row.locator, row.external_id)
    except Exception as err:
        return Outcome(row, ERROR, f"cancel failed: {type(err).__name__}: {str(err)[:300]} ({reason})")
    after = live_status(row.system, row.locator, row.external_id)
    return Outcome(row, CANCELLED, f"{reason}; {row.system} now says {after.status}")


# --------------------------------------------------------------------------- Airflow's API from a task
def _connection(conn_id: str) -> Any:
    """The connection, or ``None`` where it is not defined."""
    from airflow.exceptions import AirflowNotFoundException

    try:  # the Task SDK's (Airflow 3); airflow.hooks.base on Airflow 2
        from airflow.sdk import BaseHook

        hook: Any = BaseHook
    except ImportError:
        hook = importlib.import_module("airflow.hooks.base").BaseHook
    try:
        return hook.get_connection(conn_id)
    except AirflowNotFoundException:
        return None


def _connection_url(conn: Any) -> str | None:
    host = (conn.host or "").strip()
    if not host:
        return None
    if "://" in host:
        parts = urlsplit(host)
        netloc = parts.netloc if parts.port or not conn.port else f"{parts.netloc}:{conn.port}"
        return f"{parts.scheme}://{netloc}{parts.path}".rstrip("/")
    schema = (conn.schema or "").strip("/")
    scheme = schema if schema in ("http", "https") else ("https" if conn.conn_type == "https" else "http")
    path = f"/{schema}" if schema and schema not in ("http", "https") else ""
    port = f":{conn.port}" if conn.port else ""
    return f"{scheme}://{host}{port}{path}"


def _execution_api_origin() -> str | None:
    """Where a worker reaches the api-server: ``[core] execution_api_server_url`` without its path."""
    from airflow.configuration import conf

    url = conf.get("core", "execution_api_server_url", fallback=None)
    if not url:
        return None
    parts = urlsplit(url)
    return f"{parts.scheme}://{parts.netloc}" + parts.path.removesuffix("/").removesuffix("/execution")


def api_from_connection(conn_id: str = DEFAULT_CONN_ID, timeout: float = 30.0) -> AirflowApi:
    """A REST API client from an Airflow connection: URL in ``host`` (``http://api-server:8080``, or host,
    port and ``schema`` http/https), a user in ``login``/``password`` (``POST /auth/token``) or a bearer
    token in the extra ``token``. Without the connection: the ``AIRFLOW_DURABLE_API_*`` environment
    variables, as the CLI reads them. Without a URL anywhere: the api-server this worker's tasks talk to
    (``[core] execution_api_server_url``), which suits a deployment whose API admits every request.
    """
    conn = _connection(conn_id)
    if conn is None:
        url = os.environ.get(ENV_URL) or _execution_api_origin()
        if not url:
            raise ReaperError(
                f"no Airflow API to talk to: define the connection {conn_id!r} or set {ENV_URL}"
            )
        return AirflowApi.connect(url, timeout=timeout)
    url = _connection_url(conn) or os.environ.get(ENV_URL) or _execution_api_origin()
    if not url:
        raise ReaperError(f"the connection {conn_id!r} names no host (the Airflow API URL)")
    token = (conn.extra_dejson or {}).get("token")
    return AirflowApi.connect(
        url, token=token, username=conn.login or None, password=conn.password or None, timeout=timeout
    )


# --------------------------------------------------------------------------- the DAG
def _run(
    conn_id: str,
    dry_run: bool,
    dag_ids: Sequence[str],
    systems: Sequence[str],
    operators: Sequence[str],
    cache: str | None,
) -> dict[str, Any]:
    """The reaper task's body: one run, its report as the return value (XCom), a failure if any error."""
    try:
        api = api_from_connection(conn_id)
    except ApiError as err:
        raise ReaperError(f"could not reach Airflow's REST API; nothing cancelled: {err}") from None
    with api:
        report = reap(
            api,
            dry_run=dry_run,
            dag_ids=dag_ids,
            systems=systems,
            operators=operators,
            cache=JobCache(Path(cache)) if cache else None,
        )
    errors = report.of(ERROR)
    if errors:
        raise ReaperError(
            f"{len(errors)} job(s) not handled (nothing cancelled for them; the next run tries again): "
            + "; ".join(o.describe() for o in errors)
        )
    return report.to_json()


def _dag_api() -> tuple[Any, Any, Any]:
    """``DAG``, ``Param``, ``task``: the Task SDK's (Airflow 3), else Airflow 2's (where no durable record
    exists: the DAG finds nothing, but a DAG file that uses it still imports)."""
    try:
        from airflow.sdk import DAG, Param, task

        return DAG, Param, task
    except ImportError:
        return (
            importlib.import_module("airflow").DAG,
            importlib.import_module("airflow.models.param").Param,
            importlib.import_module("airflow.decorators").task,
        )


def durable_reaper_dag(
    dag_id: str = DEFAULT_DAG_ID,
    *,
    schedule: timedelta | str = timedelta(minutes=5),
    start_date: datetime = datetime(2026, 1, 1, tzinfo=UTC),
    api_conn_id: str = DEFAULT_CONN_ID,
    dry_run: bool = False,
    dag_ids: Sequence[str] = (),
    systems: Sequence[str] = (),
    operators: Sequence[str] = (),
    cache: str | os.PathLike[str] | None = None,
    execution_timeout: timedelta = timedelta(minutes=10),
    tags: Sequence[str] = ("airflow-durable", "maintenance"),
    **dag_kwargs: Any,
) -> Any:
    """The reaper as a DAG: put ``dag = durable_reaper_dag()`` in a DAG file.

    One task, ``reap``, every ``schedule``; ``max_active_runs=1``, no catchup, no retries (the next run
    is the retry). ``dry_run`` is also a DAG param: trigger with ``{"dry_run": true}`` to see what a run
    would cancel. ``dag_ids`` / ``systems`` limit it to those DAGs / systems; ``operators`` adds your
    subclasses of the durable operators (class names) to what it lists; ``cache`` is the file of jobs seen
    before (finds jobs whose DAG run was deleted; keep it on storage every worker shares). Other keyword
    arguments go to the ``DAG``.
    """
    dag_cls, param_cls, task_decorator = _dag_api()

    scope = {"dag_ids": list(dag_ids), "systems": list(systems), "operators": list(operators)}
    cache_path = os.fspath(cache) if cache is not None else None
    defaults = {
        "schedule": schedule,
        "start_date": start_date,
        "catchup": False,
        "max_active_runs": 1,
        "tags": list(tags),
        "doc_md": (__doc__ or "").split("\n\n", 1)[0],
        "params": {
            "dry_run": param_cls(
                dry_run, type="boolean", description="Log what would be cancelled; cancel nothing."
            )
        },
    }
    with dag_cls(dag_id=dag_id, **{**defaults, **dag_kwargs}) as dag:

        @task_decorator(
            task_id="reap", retries=0, execution_timeout=execution_timeout, multiple_outputs=False
        )
        def reap_orphans(params: dict[str, Any] | None = None) -> dict[str, Any]:
            chosen = (params or {}).get("dry_run", dry_run)
            return _run(api_conn_id, bool(chosen), cache=cache_path, **scope)

        reap_orphans()
    return dag
