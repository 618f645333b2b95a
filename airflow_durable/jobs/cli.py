"""``airflow-durable jobs`` and ``orphans``: registered on the main Typer app by `register`.

Typer and rich are CLI-only dependencies: nothing a worker imports reaches this module.
"""

from __future__ import annotations

import contextvars
import functools
import json
import logging
import sys
from collections.abc import Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any, TextIO

import typer

from airflow_durable.cli import (
    INSTALL_AIRFLOW,
    airflow_installed,
    choose_format,
    command,
    error,
    exit_codes_epilog,
    format_metavar,
    warn,
)

if TYPE_CHECKING:
    from rich.console import Console

    from airflow_durable.jobs.api import AirflowApi
    from airflow_durable.jobs.collect import CancelOutcome, JobCache, JobRow, ScanReport
    from airflow_durable.jobs.systems import Scan

EXIT_OK, EXIT_ORPHANS, EXIT_ERROR = 0, 1, 2

#: Where a command's result goes (`_without_library_chatter`): the process's stdout as it was when the
#: command began, while ``sys.stdout`` itself points at stderr.
_RESULTS: contextvars.ContextVar[TextIO | None] = contextvars.ContextVar("results", default=None)


def _results() -> TextIO:
    return _RESULTS.get() or sys.stdout


def _echo(text: str) -> None:
    typer.echo(text, file=_results())


def _result_console() -> Console:
    from rich.console import Console

    return Console(file=_results(), highlight=False)


FORMATS = ("text", "json")
#: ``--format table`` was the name of ``text`` before every command had one ``--format text|json``.
DEPRECATED_FORMATS = {"table": "text"}

JOBS_EXIT_CODES = {
    EXIT_OK: "the records are listed",
    EXIT_ERROR: "usage error; the API unreachable or refusing (no URL, login, permission); "
    "--live where Airflow is not installed",
}
ORPHANS_EXIT_CODES = {
    EXIT_OK: "no orphan job (or --cancel ended every one)",
    EXIT_ORPHANS: "orphan jobs remain (also when the --cancel prompt is declined), or jobs of a DAG this "
    "user may not read (unknown: never cancelled)",
    EXIT_ERROR: "usage error; the API unreachable or refusing; a system's job list failed (then "
    "--cancel cancels nothing); --cancel without --yes and no terminal; Airflow not installed",
}

Url = Annotated[
    str | None,
    typer.Option(
        "--url",
        metavar="URL",
        envvar="AIRFLOW_DURABLE_API_URL",
        help="Airflow API server, e.g. http://localhost:8080.",
    ),
]
Token = Annotated[
    str | None,
    typer.Option(
        "--token", metavar="TOKEN", envvar="AIRFLOW_DURABLE_API_TOKEN", help="A bearer token (JWT)."
    ),
]
Username = Annotated[
    str | None,
    typer.Option(
        "--username",
        metavar="NAME",
        envvar="AIRFLOW_DURABLE_API_USERNAME",
        help="Log in with POST /auth/token.",
    ),
]
Password = Annotated[
    str | None,
    typer.Option(
        "--password",
        metavar="PASSWORD",
        envvar="AIRFLOW_DURABLE_API_PASSWORD",
        help="The password for --username (prefer the environment variable: a command line is visible "
        "to other users).",
    ),
]
Dag = Annotated[str | None, typer.Option("--dag", metavar="DAG_ID", help="Only this DAG.")]
Systems = Annotated[
    list[str] | None,
    typer.Option("--system", metavar="SYSTEM", help="Only this system, e.g. databricks (repeatable)."),
]
States = Annotated[
    list[str] | None,
    typer.Option(
        "--state", metavar="STATE", help="Only task instances in this state, e.g. failed (repeatable)."
    ),
]
Operators = Annotated[
    list[str] | None,
    typer.Option(
        "--operator",
        metavar="CLASS",
        help="Also list task instances of this operator class (a durable subclass; repeatable).",
    ),
]
Format = Annotated[
    str,
    typer.Option(
        "--format",
        metavar=format_metavar(FORMATS),
        help="text (default): a table; json: one document on stdout. (table: deprecated name of text.)",
    ),
]
CachePath = Annotated[
    Path | None,
    typer.Option(
        "--cache",
        metavar="FILE",
        help="The cache of jobs seen before (finds jobs of deleted DAG runs). "
        "Default: one file per API URL in ~/.cache/airflow-durable/.",
    ),
]
NoCache = Annotated[bool, typer.Option("--no-cache", help="Neither read nor write the cache.")]
Quiet = Annotated[
    bool, typer.Option("--quiet", "-q", help="The result and errors only: no progress bar on stderr.")
]


def _fail(message: str) -> typer.Exit:
    error(message)
    return typer.Exit(EXIT_ERROR)


def _need_airflow(what: str) -> None:
    """Job statuses are read through the provider hooks: without Airflow there are none to ask."""
    if not airflow_installed():
        raise _fail(
            f"{what} reads each job's status through its provider's hook and connection, which needs "
            f"Apache Airflow and the provider of each system; Airflow is not installed here. "
            f"Install: {INSTALL_AIRFLOW}"
        )


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


def _run_with_progress(console: Console, what: str, fn: Any, quiet: bool = False) -> Any:
    """Call ``fn(progress_callback)`` under a rich progress bar on stderr (``fn(None)`` when quiet)."""
    if quiet:
        return fn(None)
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
    live: Annotated[
        bool,
        typer.Option(
            "--live", help="Ask each job's system for its status now (needs Airflow and the provider)."
        ),
    ] = False,
    fmt: Format = "text",
    cache: CachePath = None,
    no_cache: NoCache = False,
    quiet: Quiet = False,
) -> None:
    """List the durable jobs of a deployment: one row per task instance's record, through the REST API.

    Columns: DAG, run, task, map index, try, system, external id, generation, record state, the task
    instance's state and, with --live, the job's status read from its system through the operator's
    own hook and connection.
    """
    from rich.console import Console

    from airflow_durable.jobs.api import ApiError
    from airflow_durable.jobs.collect import collect, probe, update_cache

    fmt = choose_format(fmt, FORMATS, DEPRECATED_FORMATS)
    if live:
        _need_airflow("--live")
    api = _connect(url, token, username, password)
    err = Console(stderr=True, highlight=False)
    try:
        rows = _run_with_progress(
            err, "reading task instances", lambda p: collect(api, dag, operator or (), progress=p), quiet
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
        _run_with_progress(err, "asking the systems", lambda p: probe(rows, p), quiet)
    if fmt == "json":
        _echo(json.dumps([r.to_json() for r in rows], indent=2, default=str))
        return
    _jobs_table(_result_console(), rows, live)


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
    scan: Annotated[
        list[str] | None,
        typer.Option(
            "--scan",
            metavar="SYSTEM[:CONN_ID][:FIELD=VALUE,...]",
            help="Also list this system's jobs that durable operators marked, where no record or cache "
            "names it (a cold start), e.g. databricks:databricks_default, "
            "batch:aws_default:region_name=eu-west-1, emr-steps:aws_default:job_flow_id=j-1ABC "
            "(repeatable).",
        ),
    ] = None,
    no_scan: Annotated[
        bool,
        typer.Option(
            "--no-scan",
            help="List no system's jobs except those --scan names: find jobs through the records and the "
            "cache only.",
        ),
    ] = False,
    scan_limit: Annotated[
        int | None,
        typer.Option(
            "--scan-limit",
            metavar="N",
            min=1,
            help="Read at most N jobs per place a system is listed at (default: the operator's lookup "
            "bound, 500 or 1000); past it a warning says the listing is incomplete.",
        ),
    ] = None,
    fmt: Format = "text",
    cache: CachePath = None,
    no_cache: NoCache = False,
    quiet: Annotated[
        bool,
        typer.Option(
            "--quiet",
            "-q",
            help="The result and errors only: no progress bar, nothing printed when there is no orphan.",
        ),
    ] = False,
) -> None:
    """Find the jobs still running that nothing waits for; exit 1 if any (for monitoring).

    An orphan's task instance ended, was cleared into a new epoch, or its record, task instance or DAG
    run is gone (found through the cache of what earlier runs saw, and on the systems: every durable job
    carries its task instance's identity, and the systems the records, the cache and --scan name are
    listed). --cancel never cancels a job whose task instance is running or deferred (nor, for a job found
    on its system, one whose task instance has not ended), nor a job it cannot judge because its DAG is
    one this user may not read (reported as unknown), and appends what it did to cancellations.jsonl
    beside the cache.
    """
    from rich.console import Console

    from airflow_durable.jobs.api import ApiError
    from airflow_durable.jobs.collect import ScanReport, cancel_orphans, find_orphans

    fmt = choose_format(fmt, FORMATS, DEPRECATED_FORMATS)
    _need_airflow("orphans")
    scans = _parse_scans(scan or ())
    api = _connect(url, token, username, password)
    err = Console(stderr=True, highlight=False)
    job_cache = _cache(api, cache, no_cache)
    report = ScanReport()
    try:
        rows, found = _run_with_progress(
            err,
            "looking for orphans",
            lambda p: find_orphans(
                api,
                dag,
                operator or (),
                cache=job_cache,
                progress=p,
                scans=scans,
                scan_records=not no_scan,
                report=report,
                systems=system or (),
                scan_limit=scan_limit,
            ),
            quiet,
        )
        found = _filter(found, system, None)
        _warn_unread(_filter(rows, system, None))
        _warn_scans(report, quiet)
        _warn_unknown(report.unknown)
        outcomes: list[CancelOutcome] = []
        if report.errors:
            # An incomplete look never acts: the next run, with the list call fixed, can.
            if do_cancel:
                error("a system's job list failed (above): nothing cancelled")
            _print_orphans(fmt, found, [], report, quiet)
            raise typer.Exit(EXIT_ERROR)
        if do_cancel and found:
            if fmt == "text":
                _orphans_table(_result_console(), found, len(report.unknown))
            if not yes:
                if not sys.stdin.isatty():
                    raise _fail("--cancel needs --yes when stdin is not a terminal")
                if not typer.confirm(f"Cancel {len(found)} orphan job(s)?", default=False):
                    raise typer.Exit(EXIT_ORPHANS)
        if do_cancel and (found or report.unknown):
            # The unknown ones go through the cancel only to be refused, each with why, in the audit too.
            outcomes = cancel_orphans(api, [*found, *report.unknown])
            _audit(job_cache, outcomes)
    except ApiError as e:
        raise _fail(str(e)) from None
    finally:
        api.close()

    remaining = [o.row for o in outcomes if not o.cancelled] if outcomes else [*found, *report.unknown]
    _print_orphans(fmt, found, outcomes, report, quiet)
    raise typer.Exit(EXIT_ORPHANS if remaining else EXIT_OK)


def _print_orphans(
    fmt: str, found: Sequence[JobRow], outcomes: Sequence[CancelOutcome], report: ScanReport, quiet: bool
) -> None:
    if fmt == "json":
        _echo(
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
                    "unknown": [r.to_json() for r in report.unknown],
                    "scans": report.to_json(),
                },
                indent=2,
                default=str,
            )
        )
    elif outcomes:
        for o in outcomes:
            mark = "[green]cancelled[/]" if o.cancelled else "[red]kept[/]"
            _result_console().print(
                f"{mark} {o.row.system} {_ext(o.row.external_id)} ({_where(o.row)}): {o.message}"
            )
    elif found or not quiet:
        _orphans_table(_result_console(), found, len(report.unknown))


def _where(row: JobRow) -> str:
    """The task instance a job belongs to, or, for a job no task instance claims, its identity."""
    if row.dag_id:
        return f"{row.dag_id}/{row.run_id}/{row.task_id}"
    return f"{row.identity}, found at {row.found_in}"


def _parse_scans(texts: Sequence[str]) -> list[Scan]:
    from airflow_durable.jobs.systems import parse_scan

    try:
        return [parse_scan(text) for text in texts]
    except ValueError as err:
        raise _fail(str(err)) from None


def _warn_scans(report: ScanReport, quiet: bool) -> None:
    """A failed listing is an error and a bounded one a warning (both even with --quiet: the look was
    incomplete, so "no orphan" is not all clear); a system no list can search is said unless --quiet."""
    for message in report.errors:
        error(message)
    for message in report.truncated:
        warn(message)
    if quiet:
        return
    for message in report.not_scannable:
        warn(message)


def _warn_unknown(rows: Sequence[JobRow]) -> None:
    """A job of a DAG this user may not read is neither an orphan nor fine: say so, even with --quiet."""
    for r in rows:
        warn(
            f"unknown: {r.system} job {_ext(r.external_id)} ({_where(r)}): {r.unknown}; not counted as an "
            "orphan and never cancelled: run orphans as a user who may read every DAG"
        )


def _warn_unread(rows: Sequence[JobRow]) -> None:
    """A job whose status could not be read is not counted as an orphan: say so, even with --quiet."""
    unread = [r for r in rows if r.live is not None and r.live.phase == "error"]
    for r in unread:
        where = f"{r.dag_id}/{r.run_id}/{r.task_id}"
        status = r.live.status if r.live else ""
        warn(
            f"could not read the status of {r.system} job {_ext(r.external_id)} ({where}): {status}; "
            "not counted as an orphan"
        )


def _orphans_table(console: Console, rows: Sequence[JobRow], unknown: int = 0) -> None:
    from rich.table import Table

    if unknown:
        console.print(
            f"{unknown} job(s) this user cannot judge: their DAG may be one it may not read (stderr names "
            "them); not counted as orphans"
        )
    if not rows:
        if not unknown:
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
            r.dag_id or "?",
            r.run_id or (r.identity or "?"),
            r.task_id or "?",
            str(r.map_index),
            r.system,
            _ext(r.external_id),
            str(r.generation or "-"),
            f"{r.orphan or ''} (found at {r.found_in})" if r.found_in else r.orphan or "",
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
                "identity": o.row.identity,
                "found_in": o.row.found_in,
                "cancelled": o.cancelled,
                "message": o.message,
            }
            f.write(json.dumps(entry, default=str) + "\n")


def _without_library_chatter(command_fn: Any) -> Any:
    """Run a command with its result alone on stdout: library output goes to stderr, below WARNING dropped.

    httpx logs every request and the hooks every connection lookup at INFO. Airflow 2's logging writes to
    stdout, and so does Airflow 3's structlog, whose loggers take ``sys.stdout`` when the hook creating them
    is built: both would land in ``--format json`` and ``--quiet`` output. While the command runs,
    ``sys.stdout`` is stderr (whatever a library writes or creates goes there), the result is written to
    the real stdout (`_results`), stdlib records below WARNING are dropped and a root handler writing to
    stdout writes to stderr instead; all of it comes back when the command returns.
    """

    @functools.wraps(command_fn)
    def run(*args: Any, **kwargs: Any) -> Any:
        root = logging.getLogger()
        handlers, threshold = root.handlers[:], logging.root.manager.disable
        root.handlers = [_on_stderr(h) if getattr(h, "stream", None) is sys.stdout else h for h in handlers]
        logging.disable(max(threshold, logging.INFO))
        results = sys.stdout
        mark = _RESULTS.set(results)
        sys.stdout = sys.stderr
        try:
            return command_fn(*args, **kwargs)
        finally:
            sys.stdout = results
            _RESULTS.reset(mark)
            logging.disable(threshold)
            root.handlers = handlers

    return run


def _on_stderr(handler: logging.Handler) -> logging.Handler:
    twin = logging.StreamHandler(sys.stderr)
    twin.setLevel(handler.level)
    twin.setFormatter(handler.formatter)
    return twin


def register(app: typer.Typer) -> None:
    """Add ``jobs`` and ``orphans`` to the ``airflow-durable`` app."""
    command(
        app,
        "jobs",
        "List the durable jobs of a deployment, through Airflow's REST API.",
        exit_codes_epilog(JOBS_EXIT_CODES),
    )(_without_library_chatter(jobs))
    command(
        app,
        "orphans",
        "Find running jobs that no task waits for; exit 1 if any (for monitoring).",
        exit_codes_epilog(ORPHANS_EXIT_CODES),
    )(_without_library_chatter(orphans))
