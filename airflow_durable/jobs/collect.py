"""Collect a deployment's durable jobs through the REST API, probe them, and find the orphans.

An *orphan* is a job that is still active on its system while nothing in Airflow waits for it:

* ``task ended``: the record still tracks the job (``submitted``) but its task instance ended
  (success, failed, skipped, upstream_failed, removed) — a deferred try that hit ``execution_timeout``,
  a task marked failed whose ``on_kill`` cancel failed or never ran;
* ``cleared``: the task was cleared since the record was written (v2 records: the task instance's
  ``max_tries`` rose, the engine's own epoch rule) and no try runs yet: the next try cancels that job and
  starts the next generation, but until it runs (or if it never does) nothing waits for the job;
* ``superseded``: an earlier generation's job named in the record's ``history`` is still running;
* ``unended``: a job the record keeps because its end is not known yet (a clear whose cancel of it
  failed, a duplicate submission whose cancel failed) is still running;
* ``DAG run deleted`` / ``task instance deleted`` / ``record deleted``: the record is gone. Airflow deletes
  a DAG run's task-state-store rows with the run; such a job is found through the local cache of what an
  earlier ``jobs``/``orphans`` run saw (see `JobCache`), and through the systems themselves:
* found on the system (`scan_systems`): every durable job carries its task instance's identity
  (``afd-ti-…``, `airflow_durable.identity_tags`); the systems at the locators the records, the cache and
  ``--scan`` name are listed for their active marked jobs. One that no record names is an orphan when no
  task instance has its identity any more (its run or task instance was deleted) or when its task
  instance has ended.

A job whose task instance is ``running`` or ``deferred`` is never cancelled (`PROTECTED_STATES`); a job
found on a system is never cancelled while its task instance exists and has not ended (any state but
`ENDED_STATES`): that task's next or current try looks its jobs up itself.

A job whose DAG the API user may not read is *unknown* (``JobRow.unknown``, `ScanReport.unknown`), never an
orphan, and never cancelled: its task instance is hidden from that user, so it would look like a deleted
run's. That is a job the cache places in a DAG the API refuses, and, for a user who may not read every DAG
(`AirflowApi.reads_every_dag`), every job that no task instance the user can read claims.
"""

from __future__ import annotations

import hashlib
import json
import os
import warnings
from collections.abc import Callable, Iterable, Sequence
from dataclasses import asdict, dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any
from urllib.parse import quote

from airflow_durable.catalogue import LOOKUPS, OPERATORS
from airflow_durable.identity_tags import task_identity
from airflow_durable.jobs.api import AirflowApi, ApiError, NotFound
from airflow_durable.jobs.records import DURABLE_OPERATORS, KEY_PREFIX, RecordError, parse_record
from airflow_durable.jobs.systems import (
    ListedJob,
    LiveStatus,
    Scan,
    ScanError,
    cancel,
    console_url,
    list_marked,
    live_status,
    not_scannable,
    scan_of,
)

__all__ = [
    "ENDED_STATES",
    "PROTECTED_STATES",
    "CancelOutcome",
    "JobCache",
    "JobRow",
    "ScanReport",
    "cancel_orphans",
    "collect",
    "find_orphans",
    "probe",
]

#: Task-instance states after which nothing will wait for the job again (short of a clear).
ENDED_STATES = frozenset({"success", "failed", "skipped", "upstream_failed", "removed"})
#: A try is (or is about to be) waiting for the job: never cancel it.
PROTECTED_STATES = frozenset({"running", "deferred"})
#: Every task-instance state that is not ended, as the REST API's ``state`` filter names them ("none": no
#: state yet, e.g. just cleared). A task instance in one of them will run a try that looks its jobs up.
NOT_ENDED_STATES = (
    "none",
    "scheduled",
    "queued",
    "running",
    "deferred",
    "up_for_retry",
    "up_for_reschedule",
    "restarting",
)


@dataclass
class JobRow:
    """One durable job as ``jobs`` shows it (JSON-serialisable through `to_json`)."""

    dag_id: str
    run_id: str
    task_id: str
    map_index: int
    system: str
    external_id: Any
    generation: int | None
    record_state: str  # submitting | submitted | done | gone | unreadable
    ti_state: str | None
    try_number: int | None = None
    key: str = ""
    token: str | None = None
    schema: str | None = None
    operator: str | None = None
    locator: dict[str, Any] = field(default_factory=dict)
    started_at: str | None = None
    epoch: int | None = None
    #: The record's ``max_tries`` (v2) and the task instance's now: a user's clear raises the latter.
    record_max_tries: int | None = None
    ti_max_tries: int | None = None
    history: list[dict[str, Any]] = field(default_factory=list)
    #: Older jobs the record keeps until they are known ended.
    unended: list[dict[str, Any]] = field(default_factory=list)
    #: "record" (the record's job), "history" (an earlier generation), "unended" (an older job the record
    #: keeps), "cache" (record gone), "system" (listed on its system by the identity it carries)
    source: str = "record"
    #: The task instance's identity the job carries (``afd-ti-…``), for a job found on its system.
    identity: str | None = None
    #: Where a "system" row was listed: ``kind:conn_id[:field=value,...]`` (the ``--scan`` syntax).
    found_in: str | None = None
    #: For a "history" row: the generation the record tracks now.
    current_generation: int | None = None
    note: str | None = None
    live: LiveStatus | None = None
    orphan: str | None = None  # why it is an orphan, once probed
    ti_url: str | None = None
    #: Why nothing can be said of it: its DAG is one the API user may not read (never an orphan).
    unknown: str | None = None
    #: Its system lists it with the mark of a task that only submits (never an orphan: see `orphan_reason`).
    submit_only: bool = False

    @property
    def ident(self) -> str:
        if self.source == "system":
            return "|".join(("system", self.system, self.identity or "", _ids_text(self.external_id)))
        return "|".join((self.dag_id, self.run_id, self.task_id, str(self.map_index), self.key))

    @property
    def job_url(self) -> str | None:
        if self.live is not None and self.live.url:
            return self.live.url
        return console_url(self.system, self.locator, self.external_id)

    def age_seconds(self, now: datetime | None = None) -> float | None:
        start = _parse_time(self.started_at)
        if start is None:
            return None
        return max(0.0, ((now or datetime.now(UTC)) - start).total_seconds())

    def to_json(self) -> dict[str, Any]:
        out = asdict(self)
        out["live"] = asdict(self.live) if self.live is not None else None
        out["job_url"] = self.job_url
        out["age_seconds"] = self.age_seconds()
        return out

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> JobRow:
        names = set(cls.__dataclass_fields__)
        values = {k: v for k, v in data.items() if k in names and k != "live"}
        return cls(**values)


def _ids_text(value: Any) -> str:
    return ",".join(map(str, value)) if isinstance(value, list) else str(value)


def _ids(value: Any) -> set[str]:
    """A job's ids one by one (an EMR step set is several)."""
    return {str(v) for v in value} if isinstance(value, list) else {str(value)}


def _parse_time(value: Any) -> datetime | None:
    if not isinstance(value, str) or not value:
        return None
    try:
        parsed = datetime.fromisoformat(value.replace("Z", "+00:00"))
    except ValueError:
        return None
    return parsed if parsed.tzinfo else parsed.replace(tzinfo=UTC)


def ti_url(base_url: str, dag_id: str, run_id: str, task_id: str, map_index: int) -> str:
    """The task instance's page in Airflow's UI."""
    url = f"{base_url.rstrip('/')}/dags/{quote(dag_id, safe='')}/runs/{quote(run_id, safe='')}"
    url += f"/tasks/{quote(task_id, safe='')}"
    return f"{url}/mapped/{map_index}" if map_index >= 0 else url


# --------------------------------------------------------------------------- collection
def collect(
    api: AirflowApi,
    dag_id: str | None = None,
    operators: Sequence[str] = (),
    ui_url: str | None = None,
    progress: Callable[[int, int], None] | None = None,
    seen: dict[str, dict[str, Any]] | None = None,
) -> list[JobRow]:
    """One row per durable record of the deployment (or of ``dag_id``); every task instance listed goes
    into ``seen`` by its identity."""
    names = list(dict.fromkeys([*DURABLE_OPERATORS, *operators]))
    tis = list(api.task_instances(dag_id, operators=names))
    if seen is not None:
        seen.update({_identity_of(ti): ti for ti in tis})
    rows: list[JobRow] = []
    for done, ti in enumerate(tis, 1):
        if progress is not None:
            progress(done, len(tis))
        entries = api.state_store(ti["dag_id"], ti["dag_run_id"], ti["task_id"], int(ti["map_index"]))
        for entry in entries:
            key = str(entry.get("key", ""))
            if not key.startswith(KEY_PREFIX):
                continue
            rows.append(_row(ti, key, entry.get("value"), ui_url or api.url))
    return rows


def _identity_of(ti: dict[str, Any]) -> str:
    return task_identity(ti["dag_id"], ti["dag_run_id"], ti["task_id"], int(ti["map_index"]))


def _row(ti: dict[str, Any], key: str, value: Any, ui_url: str) -> JobRow:
    base = {
        "dag_id": ti["dag_id"],
        "run_id": ti["dag_run_id"],
        "task_id": ti["task_id"],
        "map_index": int(ti["map_index"]),
        "ti_state": ti.get("state"),
        "try_number": ti.get("try_number"),
        "key": key,
        "ti_url": ti_url(ui_url, ti["dag_id"], ti["dag_run_id"], ti["task_id"], int(ti["map_index"])),
    }
    try:
        rec = parse_record(key, value)
    except RecordError as err:
        return JobRow(
            system=key.removeprefix(KEY_PREFIX),
            external_id=None,
            generation=None,
            record_state="unreadable",
            note=f"not an airflow-durable record: {err}",
            **base,
        )
    row = JobRow(
        system=rec.system,
        external_id=rec.external_id,
        generation=rec.generation,
        record_state=rec.state,
        token=rec.token,
        schema=rec.schema,
        operator=rec.operator or ti.get("operator"),
        locator=rec.locator,
        started_at=rec.submitted_at or rec.intent_at or ti.get("start_date"),
        epoch=rec.epoch,
        record_max_tries=rec.max_tries,
        ti_max_tries=ti.get("max_tries") if isinstance(ti.get("max_tries"), int) else None,
        history=rec.history,
        unended=rec.unended,
        note="locator assumed: v1 record (default connection)" if rec.locator_assumed else None,
        **base,
    )
    return row


def superseded_rows(rows: Iterable[JobRow]) -> list[JobRow]:
    """The older jobs the records name: those each record keeps until they end, then the earlier
    generations its history names (one row each)."""
    out: list[JobRow] = []
    for row in rows:
        if row.record_state == "unreadable":
            continue
        seen: set[str] = {str(row.external_id)}
        kept = [(entry, "unended") for entry in row.unended]
        for entry, source in [*kept, *((entry, "history") for entry in row.history)]:
            ext = entry.get("external_id")
            if ext is None or str(ext) in seen:
                continue
            seen.add(str(ext))
            out.append(
                JobRow(
                    dag_id=row.dag_id,
                    run_id=row.run_id,
                    task_id=row.task_id,
                    map_index=row.map_index,
                    system=row.system,
                    external_id=ext,
                    generation=entry.get("generation"),
                    record_state="unended" if source == "unended" else "superseded",
                    ti_state=row.ti_state,
                    try_number=row.try_number,
                    key=row.key,
                    token=row.token,
                    schema=row.schema,
                    operator=row.operator,
                    locator=row.locator,
                    started_at=entry.get("at"),
                    source=source,
                    note=entry.get("why") if source == "unended" else None,
                    current_generation=row.generation,
                    ti_url=row.ti_url,
                )
            )
    return out


def probe(rows: Sequence[JobRow], progress: Callable[[int, int], None] | None = None) -> None:
    """Fill ``row.live`` from each job's system (rows without an id are skipped)."""
    for done, row in enumerate(rows, 1):
        if row.external_id is not None and row.record_state != "unreadable":
            with warnings.catch_warnings():  # provider deprecation noise, not the user's concern here
                warnings.simplefilter("ignore")
                row.live = live_status(row.system, row.locator, row.external_id)
        if progress is not None:
            progress(done, len(rows))


def orphan_reason(row: JobRow) -> str | None:
    """Why nothing waits for this (probed) job, or ``None`` if something does or it is not active.

    A job its task only submitted (`JobRow.submit_only`) is that task's finished work, which a task
    downstream or another system waits on: it outlives its task on purpose. Only an older job the engine
    itself set out to end (``history``, ``unended``) is still judged.
    """
    if row.live is None or not row.live.active:
        return None
    if row.submit_only and row.source in ("record", "cache", "system"):
        return None
    if row.source == "system":
        return row.note or "found on its system, no task waits for it"
    if row.source == "cache":
        return row.note or "record gone"
    if row.source == "history":
        return f"superseded by generation {row.current_generation or '?'}"
    if row.source == "unended":
        return f"kept by the record until it ends ({row.note or 'an older job'})"
    if row.record_state != "submitted":
        return None
    if row.ti_state in ENDED_STATES:
        return f"task instance {row.ti_state}"
    if _cleared(row) and row.ti_state not in PROTECTED_STATES:
        return f"task cleared since (max_tries {row.record_max_tries} -> {row.ti_max_tries})"
    return None


def _cleared(row: JobRow) -> bool:
    """The engine's rule (``Epoch.same_as``): a record whose ``max_tries`` differs is of another epoch."""
    return (
        row.record_max_tries is not None
        and row.ti_max_tries is not None
        and (row.record_max_tries != row.ti_max_tries)
    )


def candidates(rows: Sequence[JobRow]) -> list[JobRow]:
    """The rows that may be orphans: worth a live lookup."""
    out = []
    for row in rows:
        if row.record_state != "submitted":
            continue
        if row.ti_state in ENDED_STATES or (_cleared(row) and row.ti_state not in PROTECTED_STATES):
            out.append(row)
    out += superseded_rows(rows)
    return out


# --------------------------------------------------------------------------- cache
class JobCache:
    """What earlier runs saw of jobs whose record tracked them: finds jobs whose record was deleted.

    One JSON file per deployment URL (default ``$XDG_CACHE_HOME/airflow-durable/``). Limits: it only
    knows the jobs an earlier ``jobs``/``orphans`` run (or the UI page) on this machine saw while their
    record existed; a run deleted between two looks, with a job started after the first, is missed.
    """

    def __init__(self, path: Path) -> None:
        self.path = path

    @classmethod
    def for_url(cls, url: str, directory: Path | None = None) -> JobCache:
        base = (
            directory or Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "airflow-durable"
        )
        digest = hashlib.sha256(url.rstrip("/").encode()).hexdigest()[:16]
        return cls(base / f"jobs-{digest}.json")

    def load(self) -> dict[str, dict[str, Any]]:
        try:
            data = json.loads(self.path.read_text())
        except (OSError, ValueError):
            return {}
        return data.get("jobs", {}) if isinstance(data, dict) else {}

    def save(self, jobs: dict[str, dict[str, Any]]) -> None:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        tmp = self.path.with_suffix(".tmp")
        tmp.write_text(json.dumps({"version": 1, "jobs": jobs}, default=str, indent=1))
        tmp.replace(self.path)


def lost_rows(
    api: AirflowApi,
    cache: JobCache,
    rows: Sequence[JobRow],
    in_scope: Callable[[str], bool],
    ui_url: str,
    unknown: list[JobRow] | None = None,
) -> list[JobRow]:
    """Cached jobs (of DAGs ``in_scope``) whose record is no longer there, each with why it is gone.

    An entry whose DAG run or task instance the API refuses (403, or an error) is not judged: it goes to
    ``unknown``, saying which DAG could not be read.
    """
    present = {row.ident for row in rows}
    lost: list[JobRow] = []
    run_gone: dict[tuple[str, str], bool | str] = {}
    for ident, data in cache.load().items():
        if ident in present or not in_scope(str(data.get("dag_id"))):
            continue
        row = JobRow.from_json(data)
        row.source, row.record_state, row.ti_state = "cache", "gone", None
        run = (row.dag_id, row.run_id)
        if run not in run_gone:
            try:
                api.dag_run(*run)
                run_gone[run] = False
            except NotFound:
                run_gone[run] = True
            except ApiError as err:
                run_gone[run] = _unreadable(row.dag_id, err)
        if isinstance(run_gone[run], str):
            _not_judged(row, str(run_gone[run]), ui_url, unknown)
            continue
        if run_gone[run]:
            row.note = "DAG run deleted"
        else:
            try:
                ti = api.task_instance(row.dag_id, row.run_id, row.task_id, row.map_index)
            except NotFound:
                row.note = "task instance deleted"
            except ApiError as err:
                _not_judged(row, _unreadable(row.dag_id, err), ui_url, unknown)
                continue
            else:
                row.ti_state = ti.get("state")
                row.note = "record deleted"
        row.ti_url = ti_url(ui_url, row.dag_id, row.run_id, row.task_id, row.map_index)
        lost.append(row)
    return lost


def _unreadable(dag_id: str, err: ApiError) -> str:
    if err.status in (401, 403):
        return f"cannot read DAG {dag_id}"
    return f"could not read DAG {dag_id}: {err}"


def _not_judged(row: JobRow, why: str, ui_url: str, unknown: list[JobRow] | None) -> None:
    row.unknown = why
    row.ti_url = ti_url(ui_url, row.dag_id, row.run_id, row.task_id, row.map_index)
    if unknown is not None:
        unknown.append(row)


#: What the cache does not keep of a row: derived, or only meaningful at the time of the look.
_NOT_CACHED = (
    "live",
    "orphan",
    "history",
    "job_url",
    "age_seconds",
    "ti_url",
    "note",
    "current_generation",
    "unknown",
)


def _cached(row: JobRow) -> dict[str, Any]:
    data = row.to_json()
    for key in _NOT_CACHED:
        data.pop(key, None)
    data.update(source="record", record_state="submitted", ti_state=row.ti_state)
    return data


def update_cache(cache: JobCache, rows: Sequence[JobRow], lost: Sequence[JobRow] = ()) -> None:
    """Remember every job a record tracks; forget a lost job once its system says it is over.

    Entries this call did not look at (other DAGs, DAGs the caller may not read) stay as they are.
    """
    jobs = cache.load()
    for row in rows:
        if row.source != "record":
            continue
        if row.record_state == "submitted" and row.external_id is not None:
            jobs[row.ident] = _cached(row)
        else:
            jobs.pop(row.ident, None)
    for row in lost:
        if row.live is not None and row.live.phase in ("succeeded", "failed", "not_found"):
            jobs.pop(row.ident, None)
    cache.save(jobs)


# --------------------------------------------------------------------------- systems
@dataclass
class ScanReport:
    """What listing the systems did: where it listed, what failed, what it cannot list."""

    #: Where each listing answered (``kind:conn_id[:field=value,...]``).
    scanned: list[str] = field(default_factory=list)
    #: Each failed listing, saying where, which list call and why. Then nothing may be cancelled.
    errors: list[str] = field(default_factory=list)
    #: Listings that stopped at their bound (older active jobs there were not read).
    truncated: list[str] = field(default_factory=list)
    #: Operators whose jobs no list call finds, with the catalogue's reason.
    not_scannable: list[str] = field(default_factory=list)
    #: Active marked jobs listed, and how many of them no record names.
    listed: int = 0
    unnamed: int = 0
    #: Active jobs nothing can be said of: their DAG is one the API user may not read (``JobRow.unknown``).
    #: Never orphans, never cancelled.
    unknown: list[JobRow] = field(default_factory=list)
    #: Active jobs listed with the mark of a task that only submits (``system:id``): never orphans.
    submit_only: list[str] = field(default_factory=list)
    #: Every active job listed (``system:id``), marked or not.
    listed_jobs: set[str] = field(default_factory=set, repr=False)

    def to_json(self) -> dict[str, Any]:
        """Everything but ``unknown`` (jobs, given on their own by the callers) and ``listed_jobs``."""
        return {
            name: getattr(self, name)
            for name in self.__dataclass_fields__
            if name not in ("unknown", "listed_jobs")
        }


def scans_for(rows: Iterable[JobRow], cached: Iterable[dict[str, Any]], report: ScanReport) -> list[Scan]:
    """The places the records and the cache name, one scan each, and the operators that cannot be scanned."""
    out: dict[Any, Scan] = {}
    for system, key, locator in [
        *((r.system, r.key, r.locator) for r in rows if r.record_state != "unreadable"),
        *((str(c.get("system")), str(c.get("key")), c.get("locator") or {}) for c in cached),
    ]:
        lookup = LOOKUPS.get(key)
        if lookup is not None and not lookup.implemented:
            for cls, why in not_scannable(system):
                note = f"{cls} ({system}): its jobs cannot be listed on the system: {why}"
                if note not in report.not_scannable:
                    report.not_scannable.append(note)
        try:
            scan = scan_of(system, dict(locator))
        except ImportError as err:
            note = f"{system}: not listed: its provider is not installed here ({err.name})"
            if note not in report.not_scannable:
                report.not_scannable.append(note)
            continue
        if scan is not None:
            out.setdefault(scan.key(), scan)
    return list(out.values())


def _named_ids(rows: Iterable[JobRow]) -> dict[str, set[str]]:
    """Per system, every job id a record (current, history, unended) or the cache names."""
    named: dict[str, set[str]] = {}
    for row in rows:
        ids = named.setdefault(row.system, set())
        for ext in [row.external_id, *(e.get("external_id") for e in [*row.history, *row.unended])]:
            if ext is not None:
                ids |= _ids(ext)
    return named


def scan_systems(
    api: AirflowApi,
    scans: Sequence[Scan],
    named_rows: Sequence[JobRow],
    seen: dict[str, dict[str, Any]],
    cached: Iterable[dict[str, Any]],
    in_scope: Callable[[str], bool],
    unattributed_in_scope: bool,
    ui_url: str,
    dag_id: str | None,
    report: ScanReport,
    scan_limit: int | None = None,
) -> list[JobRow]:
    """The active jobs listed at ``scans`` that no record names and whose task instance does not wait.

    ``seen``: the task instances already listed (identity → task instance). An unattributed job (no task
    instance has its identity, and the cache does not know it) is kept only if ``unattributed_in_scope``.
    ``scan_limit``: the jobs each listing reads at most (default: each operator's lookup bound).
    """
    named = _named_ids(named_rows)
    listed: dict[tuple[str, str], tuple[ListedJob, str]] = {}
    for scan in scans:
        try:
            result = list_marked(scan, scan_limit)
        except ScanError as err:
            report.errors.append(str(err))
            continue
        report.scanned.append(scan.where)
        if result.truncated_at is not None:
            report.truncated.append(
                f"{scan.where}: stopped after {result.truncated_at} listed jobs; "
                "older active jobs there were not read"
            )
        for job in result.jobs:
            report.listed += 1
            report.listed_jobs.add(f"{job.system}:{_ids_text(job.external_id)}")
            if job.submit_only:
                # Its task only submitted it: whoever waits on it is not a try of that task.
                where_id = f"{job.system}:{_ids_text(job.external_id)}"
                if where_id not in report.submit_only:
                    report.submit_only.append(where_id)
                continue
            if _ids(job.external_id) & named.get(job.system, set()):
                continue  # a record names it: the record's rules judge it
            listed.setdefault((job.system, _ids_text(job.external_id)), (job, scan.where))
    report.unnamed = len(listed)
    if not listed:
        return []
    # Listed after the systems answered: a task instance that submitted a listed job is in it unless it was
    # deleted (or ended, then the listing by operator above has it).
    live = {_identity_of(ti): ti for ti in api.task_instances(dag_id, states=NOT_ENDED_STATES)}
    by_cache = {
        task_identity(str(c["dag_id"]), str(c["run_id"]), str(c["task_id"]), int(c.get("map_index", -1))): c
        for c in cached
        if c.get("dag_id") and c.get("run_id") and c.get("task_id")
    }
    rows: list[JobRow] = []
    reads_every_dag: bool | None = None  # asked once, for the first job no readable task instance claims
    for job, where in listed.values():
        row = JobRow(
            dag_id="",
            run_id="",
            task_id="",
            map_index=-1,
            system=job.system,
            external_id=job.external_id,
            generation=_generation(job.token),
            record_state="none",
            ti_state=None,
            token=job.token,
            locator=dict(job.locator),
            started_at=job.created_at,
            source="system",
            identity=job.identity,
            found_in=where,
        )
        ti = live.get(job.identity) or seen.get(job.identity)
        place = by_cache.get(job.identity)
        if ti is not None:
            _attribute(row, ti["dag_id"], ti["dag_run_id"], ti["task_id"], int(ti["map_index"]), ui_url)
            row.ti_state, row.try_number = ti.get("state"), ti.get("try_number")
            if row.ti_state not in ENDED_STATES:
                continue  # its own try (this one or the next) looks its jobs up
            row.note = f"task instance {row.ti_state}, and no record names the job"
        elif place is not None:
            _attribute(
                row,
                place["dag_id"],
                place["run_id"],
                place["task_id"],
                int(place.get("map_index", -1)),
                ui_url,
            )
            if not in_scope(row.dag_id):
                continue
            try:
                gone = _gone(api, row)
            except ApiError as err:
                _not_judged(row, _unreadable(row.dag_id, err), ui_url, report.unknown)
                continue
            if gone is None:
                if row.ti_state not in ENDED_STATES:
                    continue
                row.note = f"task instance {row.ti_state}, and no record names the job"
            else:
                row.note = gone
        else:
            if not unattributed_in_scope:
                continue
            if reads_every_dag is None:
                reads_every_dag = api.reads_every_dag()
            if not reads_every_dag:
                # Its task instance may be in a DAG hidden from this user, waiting on the job.
                row.unknown = (
                    "cannot read every DAG: no task instance this user may read has its identity, and its "
                    "DAG may be one this user may not read"
                )
                report.unknown.append(row)
                continue
            row.note = "no task instance has its identity: its DAG run or task instance was deleted"
        if row.dag_id and not in_scope(row.dag_id):
            continue
        rows.append(row)
    return rows


def _generation(token: str | None) -> int | None:
    head, _, gen = (token or "").rpartition("-g")
    return int(gen) if head and gen.isdigit() else None


def _attribute(row: JobRow, dag_id: str, run_id: str, task_id: str, map_index: int, ui_url: str) -> None:
    row.dag_id, row.run_id, row.task_id, row.map_index = dag_id, run_id, task_id, map_index
    row.key = f"system:{row.identity}"
    row.ti_url = ti_url(ui_url, dag_id, run_id, task_id, map_index)


def _gone(api: AirflowApi, row: JobRow) -> str | None:
    """Why a task instance the cache knew is not listed: "DAG run deleted", "task instance deleted", or
    ``None`` with ``row.ti_state`` set (it exists)."""
    try:
        api.dag_run(row.dag_id, row.run_id)
    except NotFound:
        return "DAG run deleted"
    try:
        ti = api.task_instance(row.dag_id, row.run_id, row.task_id, row.map_index)
    except NotFound:
        return "task instance deleted"
    row.ti_state, row.try_number = ti.get("state"), ti.get("try_number")
    return None


def _maybe_submit_only(row: JobRow, listed: set[str]) -> bool:
    """Whether a job only the cache names may be a submit-only task's, with nothing to tell: its task
    succeeded (a waiting task succeeds once its job has), its operator has a wait flag, and no listing read
    the job (a listed job says it by its mark)."""
    if row.source != "cache" or row.note != "record deleted" or row.ti_state != "success":
        return False
    op = next((o for o in OPERATORS if o.key == row.key), None)
    if op is not None and op.no_wait_kwarg is None:
        return False
    return f"{row.system}:{_ids_text(row.external_id)}" not in listed


# --------------------------------------------------------------------------- orphans
def find_orphans(
    api: AirflowApi,
    dag_id: str | None = None,
    operators: Sequence[str] = (),
    cache: JobCache | None = None,
    ui_url: str | None = None,
    progress: Callable[[int, int], None] | None = None,
    rows: list[JobRow] | None = None,
    in_scope: Callable[[str], bool] | None = None,
    scans: Sequence[Scan] = (),
    scan_records: bool = True,
    unattributed_in_scope: bool | None = None,
    report: ScanReport | None = None,
    systems: Sequence[str] = (),
    probed: list[JobRow] | None = None,
    scan_limit: int | None = None,
) -> tuple[list[JobRow], list[JobRow]]:
    """``(rows, orphans)``: every record's row, and the probed jobs nothing waits for.

    The systems are listed at ``scans`` and, with ``scan_records``, at every place the records and the cache
    name (see `scan_systems`); ``report`` receives what that listing did. A job no task instance claims is
    reported only if ``unattributed_in_scope`` (default: no ``dag_id``, every DAG is in scope). ``systems``
    limits the listing of the places the records name to those job kinds. ``probed``, if given, receives
    every job whose status was read (orphan or not, read or failed): the reaper reports a status it could
    not read, whichever row it belongs to.
    """
    seen: dict[str, dict[str, Any]] = {}
    if rows is None:
        rows = collect(api, dag_id, operators, ui_url=ui_url, seen=seen)
    if in_scope is None:
        in_scope = (lambda d: True) if dag_id is None else (lambda d: d == dag_id)
    if unattributed_in_scope is None:
        unattributed_in_scope = dag_id is None
    report = report if report is not None else ScanReport()
    cached = list(cache.load().values()) if cache is not None else []
    lost = (
        lost_rows(api, cache, rows, in_scope, ui_url or api.url, report.unknown) if cache is not None else []
    )
    todo = candidates(rows) + lost
    wanted = list(scans)
    if scan_records:
        wanted += [s for s in scans_for(rows, cached, report) if not systems or s.system in systems]
    unique = list({scan.key(): scan for scan in wanted}.values())
    if unique:
        named = [*rows, *lost, *(JobRow.from_json(c) for c in cached)]
        todo += scan_systems(
            api,
            unique,
            named,
            seen,
            cached,
            in_scope,
            unattributed_in_scope,
            ui_url if ui_url is not None else api.url,
            dag_id,
            report,
            scan_limit,
        )
    handed_over = set(report.submit_only)
    for row in todo:
        row.submit_only = row.submit_only or f"{row.system}:{_ids_text(row.external_id)}" in handed_over
    todo = [row for row in todo if not (row.submit_only and row.source in ("record", "cache"))]
    for row in todo:
        if _maybe_submit_only(row, report.listed_jobs):
            _not_judged(
                row,
                f"its task instance succeeded and its record is gone; a task of {row.operator or row.system} "
                "may only submit its job (its wait flag off), leaving it running on purpose, and the job was "
                "not listed on its system, where a mark would tell",
                ui_url or api.url,
                report.unknown,
            )
    todo = [row for row in todo if not row.unknown]
    probe([*todo, *report.unknown], progress)
    # An unknown job that has ended is no concern; one whose status could not be read still is.
    report.unknown[:] = [r for r in report.unknown if r.live is None or r.live.phase in ("active", "error")]
    for row in todo:
        row.orphan = orphan_reason(row)
    if probed is not None:
        probed.extend(todo)
    if cache is not None:
        update_cache(cache, rows, lost)
    return rows, [row for row in todo if row.orphan]


@dataclass
class CancelOutcome:
    row: JobRow
    cancelled: bool
    message: str


def cancel_orphans(api: AirflowApi, orphans: Sequence[JobRow]) -> list[CancelOutcome]:
    """Cancel each orphan through its system, after re-reading its task instance's state."""
    out: list[CancelOutcome] = []
    waiting: set[str] | None = None  # identities of the task instances not ended, read once, when needed
    for row in orphans:
        if row.unknown:
            out.append(
                CancelOutcome(
                    row,
                    False,
                    f"not cancelled: unknown ({row.unknown}); only a user who may read its DAG can tell "
                    "whether a task waits for it",
                )
            )
            continue
        if row.source == "system":
            if row.dag_id:
                keep = _system_row_waited_for(api, row)
            else:
                if waiting is None:
                    try:
                        waiting = {_identity_of(ti) for ti in api.task_instances(states=NOT_ENDED_STATES)}
                    except ApiError as err:
                        out.append(
                            CancelOutcome(row, False, f"not cancelled: could not list task instances ({err})")
                        )
                        continue
                keep = (
                    "not cancelled: a task instance with its identity exists now; its try looks its jobs up"
                    if row.identity in waiting
                    else None
                )
            if keep is not None:
                out.append(CancelOutcome(row, False, keep))
                continue
        else:
            state = row.ti_state
            if row.note != "DAG run deleted":
                try:
                    state = api.task_instance(row.dag_id, row.run_id, row.task_id, row.map_index).get("state")
                except NotFound:
                    state = None
                except ApiError as err:
                    out.append(
                        CancelOutcome(
                            row, False, f"not cancelled: could not re-read its task instance ({err})"
                        )
                    )
                    continue
            if state in PROTECTED_STATES:
                out.append(CancelOutcome(row, False, f"not cancelled: its task instance is {state}"))
                continue
        try:
            cancel(row.system, row.locator, row.external_id)
        except Exception as err:
            out.append(CancelOutcome(row, False, f"cancel failed: {type(err).__name__}: {str(err)[:200]}"))
            continue
        after = live_status(row.system, row.locator, row.external_id)
        out.append(CancelOutcome(row, True, f"cancel requested; {row.system} now says {after.status}"))
    return out


def _system_row_waited_for(api: AirflowApi, row: JobRow) -> str | None:
    """Why a job found on its system must not be cancelled now (``None``: nothing waits for it)."""
    try:
        ti = api.task_instance(row.dag_id, row.run_id, row.task_id, row.map_index)
    except NotFound:
        return None
    except ApiError as err:
        return f"not cancelled: could not re-read its task instance ({err})"
    state = ti.get("state")
    if state not in ENDED_STATES:
        return f"not cancelled: its task instance is {state or 'none'}; its try looks its jobs up"
    return None
