"""``airflow-durable demo``: registered on the main Typer app by `register`."""

from __future__ import annotations

import json
import sys
from typing import TYPE_CHECKING, Annotated, NoReturn

import typer

from airflow_durable.cli import (
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

    from airflow_durable.demo.runner import DemoStepError

EXIT_OK, EXIT_FAILED, EXIT_USAGE, EXIT_INTERRUPTED = 0, 1, 2, 130
FORMATS = ("text", "json")

EXIT_CODES = {
    EXIT_OK: "the demo ran and printed its result (as_expected in the JSON says whether it showed the "
    "difference); --list",
    EXIT_FAILED: "a step failed (named, with the logs' tails on stderr), or Airflow or the system's "
    "provider is not installed",
    EXIT_USAGE: "usage error: unknown option, format or system",
    EXIT_INTERRUPTED: "interrupted (Ctrl-C); Airflow and the emulator are stopped",
}


def demo(
    system: Annotated[
        str,
        typer.Option(
            "--system",
            metavar="SYSTEM",
            help="Which system to run the demo against (default databricks; see --list).",
        ),
    ] = "databricks",
    output_format: Annotated[
        str,
        typer.Option(
            "--format",
            metavar=format_metavar(FORMATS),
            help="text (default): a table; json: the result as one JSON document on stdout, nothing else "
            "there.",
        ),
    ] = "text",
    keep: Annotated[
        bool, typer.Option("--keep", help="Keep the temporary AIRFLOW_HOME (logs, DB) and print its path.")
    ] = False,
    list_systems: Annotated[bool, typer.Option("--list", help="List the systems and exit.")] = False,
    quiet: Annotated[
        bool, typer.Option("--quiet", "-q", help="The result and errors only: no progress on stderr.")
    ] = False,
    as_json: Annotated[bool, typer.Option("--json", hidden=True, help="Deprecated: --format json.")] = False,
) -> None:
    """Kill a task mid-job on a real Airflow: the upstream operator vs its durable drop-in.

    Runs Airflow's scheduler, dag-processor, triggerer and api-server against an offline emulator,
    SIGKILLs try 1 of each task after it submitted its job, lets Airflow retry, and compares
    submissions, final state, tries and wall time. No credentials, no network: a temporary
    AIRFLOW_HOME with SQLite, created and removed.
    """
    from rich.console import Console

    from airflow_durable.demo import systems

    fmt = choose_format(output_format, FORMATS)
    if as_json:
        warn("--json is deprecated; use --format json")
        fmt = "json"
    if list_systems:
        if fmt == "json":
            typer.echo(json.dumps([_system_json(name) for name in systems.names()], indent=2))
        else:
            for name in systems.names():
                s = systems.get(name)
                typer.echo(f"{name:<15} {s.upstream.operator} vs {s.durable.operator}")
        raise typer.Exit(EXIT_OK)
    try:
        chosen = systems.get(system)
    except KeyError as err:
        error(err.args[0])
        raise typer.Exit(EXIT_USAGE) from None
    if not airflow_installed():
        # Checked here, before a temporary AIRFLOW_HOME exists: the runner's own installation check
        # runs inside the deployment it starts.
        reason = (
            "the demo runs a real Airflow deployment (api-server, scheduler, dag-processor, triggerer), "
            f"and Apache Airflow is not installed here. Install Airflow 3 with the system's provider: "
            f'pip install "airflow-durable[{chosen.extra}]" "apache-airflow>=3.0"'
        )
        error(reason)
        if fmt == "json":
            payload = {"ok": False, "system": chosen.name, "step": "check the installation", "error": reason}
            typer.echo(json.dumps(payload, indent=2))
        raise typer.Exit(EXIT_FAILED)

    from airflow_durable.demo import render
    from airflow_durable.demo.runner import DemoStepError, airflow_version, run_demo

    err_console = Console(stderr=True, highlight=False)
    reporter: render.PlainReporter | render.RichReporter | None = None
    if not quiet:
        reporter = (
            render.RichReporter(err_console) if err_console.is_terminal else render.PlainReporter(sys.stderr)
        )
        reporter.note(
            f"airflow-durable demo: {chosen.title} on Airflow {airflow_version()}: "
            f"{chosen.upstream.operator} vs {chosen.durable.operator} ({chosen.operator_args})"
        )
    try:
        result = run_demo(chosen, keep=keep, reporter=reporter)
    except DemoStepError as failure:
        _fail(failure, chosen.name, fmt == "json", err_console)
    except KeyboardInterrupt:  # run_demo has stopped Airflow and the emulator on its way out
        err_console.print("airflow-durable demo: interrupted; Airflow stopped.", highlight=False)
        raise typer.Exit(EXIT_INTERRUPTED) from None
    if fmt == "json":
        typer.echo(render.result_json(result))
    else:
        out = Console(highlight=False, width=None if sys.stdout.isatty() else render.PLAIN_WIDTH)
        out.print()
        render.print_result(result, out)


def _system_json(name: str) -> dict[str, str]:
    from airflow_durable.demo import systems

    s = systems.get(name)
    return {
        "system": name,
        "upstream": s.upstream.operator,
        "durable": s.durable.operator,
        "extra": s.extra,
    }


def _fail(failure: DemoStepError, system: str, as_json: bool, console: Console) -> NoReturn:
    from airflow_durable.demo import render

    render.print_failure(failure, console)
    if as_json:
        typer.echo(render.failure_json(failure, system))
    raise typer.Exit(EXIT_FAILED)


def register(app: typer.Typer) -> None:
    """Add ``demo`` to the ``airflow-durable`` app."""
    command(
        app,
        "demo",
        "Kill a task mid-job on a real Airflow: upstream operator vs durable drop-in.",
        exit_codes_epilog(EXIT_CODES),
    )(demo)


__all__ = ["demo", "register"]
