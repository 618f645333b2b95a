"""``airflow-durable demo``: registered on the main Typer app by `register`."""

from __future__ import annotations

import sys
from typing import TYPE_CHECKING, Annotated, NoReturn

import typer

if TYPE_CHECKING:
    from rich.console import Console

    from airflow_durable.demo.runner import DemoStepError

EXIT_OK, EXIT_FAILED, EXIT_USAGE = 0, 1, 2


def demo(
    system: Annotated[
        str, typer.Option("--system", help="Which system to run the demo against (see --list).")
    ] = "databricks",
    as_json: Annotated[
        bool, typer.Option("--json", help="Print the result as JSON on stdout, and nothing else there.")
    ] = False,
    keep: Annotated[
        bool, typer.Option("--keep", help="Keep the temporary AIRFLOW_HOME (logs, DB) and print its path.")
    ] = False,
    list_systems: Annotated[bool, typer.Option("--list", help="List the systems and exit.")] = False,
) -> None:
    """Kill a task mid-job on a real Airflow: the upstream operator vs its durable drop-in.

    Runs Airflow's scheduler, dag-processor, triggerer and api-server against an offline emulator,
    SIGKILLs try 1 of each task after it submitted its job, lets Airflow retry, and compares
    submissions, final state, tries and wall time. No credentials, no network: a temporary
    AIRFLOW_HOME with SQLite, created and removed.
    """
    from rich.console import Console

    from airflow_durable.demo import systems

    if list_systems:
        for name in systems.names():
            s = systems.get(name)
            typer.echo(f"{name:<12} {s.upstream.operator} vs {s.durable.operator}")
        raise typer.Exit(EXIT_OK)
    try:
        chosen = systems.get(system)
    except KeyError as err:
        typer.echo(f"airflow-durable: error: {err.args[0]}", err=True)
        raise typer.Exit(EXIT_USAGE) from None

    from airflow_durable.demo import render
    from airflow_durable.demo.runner import DemoStepError, airflow_version, run_demo

    err_console = Console(stderr=True, highlight=False)
    reporter: render.PlainReporter | render.RichReporter
    reporter = (
        render.RichReporter(err_console) if err_console.is_terminal else render.PlainReporter(sys.stderr)
    )
    reporter.note(
        f"airflow-durable demo: {chosen.title} on Airflow {airflow_version()}: "
        f"{chosen.upstream.operator} vs {chosen.durable.operator} ({chosen.operator_args})"
    )
    try:
        result = run_demo(chosen, keep=keep, reporter=reporter)
    except DemoStepError as error:
        _fail(error, chosen.name, as_json, err_console)
    except KeyboardInterrupt:  # run_demo has stopped Airflow and the emulator on its way out
        err_console.print("airflow-durable demo: interrupted; Airflow stopped.", highlight=False)
        raise typer.Exit(130) from None
    if as_json:
        typer.echo(render.result_json(result))
    else:
        out = Console(highlight=False, width=None if sys.stdout.isatty() else render.PLAIN_WIDTH)
        out.print()
        render.print_result(result, out)


def _fail(error: DemoStepError, system: str, as_json: bool, console: Console) -> NoReturn:
    from airflow_durable.demo import render

    render.print_failure(error, console)
    if as_json:
        typer.echo(render.failure_json(error, system))
    raise typer.Exit(EXIT_FAILED)


def register(app: typer.Typer) -> None:
    """Add ``demo`` to the ``airflow-durable`` app."""
    app.command("demo")(demo)


__all__ = ["demo", "register"]
