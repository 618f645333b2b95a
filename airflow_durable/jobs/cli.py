"""``airflow-durable jobs`` and ``orphans``: registered on the main Typer app by `register`.

Typer and rich are CLI-only dependencies: nothing a worker imports reaches this module.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer

if TYPE_CHECKING:
    from rich.console import Console

    from airflow_durable.jobs.api import AirflowApi
    from airflow_durable.jobs.collect import CancelOutcome, JobCache, JobRow

EXIT_OK, EXIT_ORPHANS, EXIT_ERROR = 0, 1, 2

Url = Annotated[
    str | None,
    typer.Option(
        "--url", envvar="AIRFLOW_DURABLE_API_URL", help="Airflow API server, e.g. http://localhost:8080"
    ),
]
Token = Annotated[
    str | None, typer.Option("--token", envvar="AIRFLOW_DURABLE_API_TOKEN", help="A bearer token (JWT).")
]
Username = Annotated[
    str | None,
    typer.Option("--username", envvar="AIRFLOW_DURABLE_API_USERNAME", help="Log in with POST /auth/token."),
]
Password = Annotated[str | None, typer.Option("--password", envvar="AIRFLOW_DURABLE_API_PASSWORD")]
Dag = Annotated[str | None, typer.Option("--dag", help="Only this DAG.")]
Systems = Annotated[list[str] | None, typer.Option("--system", help="Only these systems (repeatable).")]
States = Annotated[
    list[str] | None, typer.Option("--state", help="Only task instances in these states (repeatable).")
]
Operators = Annotated[
    list[str] | None,
    typer.Option("--operator", help="Also list task instances of this operator class (a durable subclass)."),
]
Format = Annotated[str, typer.Option("--format", help="table or json.")]
CachePath = Annotated[
    Path | None,
    typer.Option(
        "--cache",
        help="The cache of jobs seen before (finds jobs of deleted DAG runs). "
        "Default: ~/.cache/airflow-durable/jobs-<url hash>.json",
    ),
]
NoCache = Annotated[bool, typer.Option("--no-cache", help="Neither read nor write the cache.")]


def _fail(message: str) -> typer.Exit:
    typer.echo(f"airflow-durable: error: {message}", err=True)
    return typer.Exit(EXIT_ERROR)


def _connect(url: str | None, token: str | None, username: str | None, password: str | None) -> AirflowApi:
    from airflow_durable.jobs.api import AirflowApi, ApiError

    try:
        return AirflowApi.connect(url, token, username, password)
    except ApiError as err:
        raise _fail(str(err)) from None


def _cache(api: AirflowApi, path: Path | None, disabled: bool) -> JobCache | None:
    from airflow_durable.jobs.collect import JobCache

    if disabled:
        return None
    return JobCache(path) if path is not None else JobCache.for_url(api.url)


def _filter(
    rows: Sequence[JobRow], systems: Sequence[str] | None, states: Sequence[str] | None
) -> list[JobRow]:
    wanted_states = {s.lower() for s in states or ()}
    return [
        r
        for r in rows
        if (not systems or r.system in systems)
        and (not wanted_states or (r.ti_state or "none") in wanted_states)
    ]


def _age(seconds: float | None) -> str:
    if seconds is None:
        return "-"
    seconds = int(seconds)
    if seconds < 120:
        return f"{seconds}s"
    if seconds < 7200:
        return f"{seconds // 60}m{seconds % 60:02d}s"
    return f"{seconds // 3600}h{seconds % 3600 // 60:02d}m"


def _ext(value: Any) -> str:
    return ",".join(map(str, value)) if isinstance(value, list) else ("-" if value is None else str(value))


def _progress(console: Console, what: str) -> Any:
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

    return Progress(
        TextColumn(what),
        BarColumn(),
        MofNCompleteColumn(),
        TimeElapsedColumn(),
        console=console,
        transient=True,
    )


def _run_with_progress(console: Console, what: str, fn: Any) -> Any:
    """Call ``fn(progress_callback)`` under a rich progress bar on stderr."""
    with _progress(console, what) as bar:
        task = bar.add_task(what, total=None)

        def advance(done: int, total: int) -> None:
            bar.update(task, completed=done, total=total)

        return fn(advance)


# --------------------------------------------------------------------------- jobs
def jobs(
    url: Url = None,
    token: Token = None,
    username: Username = None,
    password: Password = None,
    dag: Dag = None,
    system: Systems = None,
    state: States = None,
    operator: Operators = None,
    live: Annotated[bool, typer.Option("--live", help="Ask each job's system for its status now.")] = False,
    fmt: Format = "table",
    cache: CachePath = None,
    no_cache: NoCache = False,
) -> None:
    """List the durable jobs of a deployment: one row per task instance's record, through the REST API.

    Columns: DAG, run, task, map index, try, system, external id, generation, record state, the task
    instance's state and, with --live, the job's status read from its system through the operator's
    own hook and connection.
    """
    from rich.console import Console

    from airflow_durable.jobs.api import ApiError
    from airflow_durable.jobs.collect import collect, probe, update_cache

    if fmt not in ("table", "json"):
        raise _fail(f"--format must be table or json, not {fmt!r}")
    api = _connect(url, token, username, password)
    err = Console(stderr=True, highlight=False)
    try:
        rows = _run_with_progress(
            err, "reading task instances", lambda p: collect(api, dag, operator or (), progress=p)
        )
        job_cache = _cache(api, cache, no_cache)
        if job_cache is not None:
            update_cache(job_cache, rows)
    except ApiError as e:
        raise _fail(str(e)) from None
    finally:
        api.close()
    rows = _filter(rows, system, state)
    if live:
        _run_with_progress(err, "asking the systems", lambda p: probe(rows, p))
    if fmt == "json":
        typer.echo(json.dumps([r.to_json() for r in rows], indent=2, default=str))
        return
    _jobs_table(Console(highlight=False), rows, live)


def _jobs_table(console: Console, rows: Sequence[JobRow], live: bool) -> None:
    from rich.table import Table

    from airflow_durable.jobs.collect import ENDED_STATES

    table = Table(title=f"{len(rows)} durable job record(s)", title_justify="left")
    for name in ("DAG", "run", "task", "map", "try", "system", "external id", "gen", "record", "task state"):
        table.add_column(name, no_wrap=name in ("external id", "record", "task state"))
    if live:
        table.add_column("job status")
    for r in rows:
        suspicious = r.record_state == "submitted" and r.ti_state in ENDED_STATES
        cells = [
            r.dag_id,
            r.run_id,
            r.task_id,
            str(r.map_index),
            str(r.try_number or "-"),
            r.system,
            _ext(r.external_id),
            str(r.generation or "-"),
            r.record_state,
            f"[bold red]{r.ti_state}[/]" if suspicious else str(r.ti_state),
        ]
        if live:
            cells.append("-" if r.live is None else r.live.status)
        table.add_row(*cells)
    console.print(table)


# --------------------------------------------------------------------------- orphans
def orphans(
    url: Url = None,
    token: Token = None,
    username: Username = None,
    password: Password = None,
    dag: Dag = None,
    system: Systems = None,
    operator: Operators = None,
    do_cancel: Annotated[
        bool, typer.Option("--cancel", help="Cancel them through each system's cancel call (asks first).")
    ] = False,
    yes: Annotated[bool, typer.Option("--yes", "-y", help="Do not ask before cancelling.")] = False,
    fmt: Format = "table",
    cache: CachePath = None,
    no_cache: NoCache = False,
) -> None:
    """Find the jobs still running that nothing waits for; exit 1 if any (for monitoring).

    An orphan's task instance ended, was cleared into a new epoch, or its record, task instance or DAG
    run is gone (found through the cache of what earlier runs saw). --cancel never cancels a job whose
    task instance is running or deferred, and appends what it did to cancellations.jsonl beside the cache.
    """
    from rich.console import Console

    from airflow_durable.jobs.api import ApiError
    from airflow_durable.jobs.collect import cancel_orphans, find_orphans

    if fmt not in ("table", "json"):
        raise _fail(f"--format must be table or json, not {fmt!r}")
    api = _connect(url, token, username, password)
    err = Console(stderr=True, highlight=False)
    job_cache = _cache(api, cache, no_cache)
    try:
        _, found = _run_with_progress(
            err,
            "looking for orphans",
            lambda p: find_orphans(api, dag, operator or (), cache=job_cache, progress=p),
        )
        found = _filter(found, system, None)
        outcomes: list[CancelOutcome] = []
        if do_cancel and found:
            if fmt == "table":
                _orphans_table(Console(highlight=False), found)
            if not yes:
                if not sys.stdin.isatty():
                    raise _fail("--cancel needs --yes when stdin is not a terminal")
                if not typer.confirm(f"Cancel {len(found)} orphan job(s)?", default=False):
                    raise typer.Exit(EXIT_ORPHANS)
            outcomes = cancel_orphans(api, found)
            _audit(job_cache, outcomes)
    except ApiError as e:
        raise _fail(str(e)) from None
    finally:
        api.close()

    remaining = [o.row for o in outcomes if not o.cancelled] if outcomes else found
    if fmt == "json":
        typer.echo(
            json.dumps(
                {
                    "orphans": [r.to_json() for r in found],
                    "cancelled": [
                        {
                            "external_id": o.row.external_id,
                            "system": o.row.system,
                            "cancelled": o.cancelled,
                            "message": o.message,
                        }
                        for o in outcomes
                    ],
                },
                indent=2,
                default=str,
            )
        )
    elif outcomes:
        for o in outcomes:
            mark = "[green]cancelled[/]" if o.cancelled else "[red]kept[/]"
            Console(highlight=False).print(
                f"{mark} {o.row.system} {_ext(o.row.external_id)} ({o.row.dag_id}/{o.row.run_id}/"
                f"{o.row.task_id}): {o.message}"
            )
    else:
        _orphans_table(Console(highlight=False), found)
    raise typer.Exit(EXIT_ORPHANS if remaining else EXIT_OK)


def _orphans_table(console: Console, rows: Sequence[JobRow]) -> None:
    from rich.table import Table

    if not rows:
        console.print("No orphan jobs: every running durable job has a task instance waiting for it.")
        return
    table = Table(
        title=f"{len(rows)} orphan job(s): running, and no task waits for them", title_justify="left"
    )
    for name in (
        "DAG",
        "run",
        "task",
        "map",
        "system",
        "external id",
        "gen",
        "why",
        "status",
        "running",
        "job",
    ):
        table.add_column(name, overflow="fold")
    for r in rows:
        table.add_row(
            r.dag_id,
            r.run_id,
            r.task_id,
            str(r.map_index),
            r.system,
            _ext(r.external_id),
            str(r.generation or "-"),
            r.orphan or "",
            r.live.status if r.live else "-",
            _age(r.age_seconds()),
            r.job_url or "-",
        )
    console.print(table)


def _audit(job_cache: JobCache | None, outcomes: Sequence[CancelOutcome]) -> None:
    """Append what --cancel did to ``cancellations.jsonl`` beside the cache (or in ~/.cache)."""
    from airflow_durable.jobs.collect import JobCache

    directory = (job_cache or JobCache.for_url("none")).path.parent
    directory.mkdir(parents=True, exist_ok=True)
    now = datetime.now(UTC).isoformat()
    with open(directory / "cancellations.jsonl", "a") as f:
        for o in outcomes:
            entry = {
                "at": now,
                "dag_id": o.row.dag_id,
                "run_id": o.row.run_id,
                "task_id": o.row.task_id,
                "map_index": o.row.map_index,
                "system": o.row.system,
                "external_id": o.row.external_id,
                "why": o.row.orphan,
                "cancelled": o.cancelled,
                "message": o.message,
            }
            f.write(json.dumps(entry, default=str) + "\n")


def register(app: typer.Typer) -> None:
    app.command("jobs")(jobs)
    app.command("orphans")(orphans)
