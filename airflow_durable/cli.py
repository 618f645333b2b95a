"""The ``airflow-durable`` command line: ``demo``, ``check``, ``migrate``, ``jobs`` and ``orphans``.

Conventions every subcommand follows (tests/test_cli_conventions.py checks them):

* ``-h``/``--help``, ``--version`` on the top-level command;
* one ``--format`` option: ``text`` (default) or ``json``; ``check`` adds ``sarif`` and ``github``;
* ``-q``/``--quiet``: the result and errors only, no progress, notes or summary lines;
* exit codes listed in each command's help (`exit_codes_epilog`) and in its docs page;
* help that names values (``PATH...``, ``--select CODES``), never Python types.

Only typer is imported here: each subcommand module is imported when the command line is built, and none
of them imports Airflow at import time, so ``check`` and ``migrate`` run where Airflow is not installed.
"""

from __future__ import annotations

import importlib.util
import re
from collections.abc import Iterable, Mapping, Sequence
from typing import Annotated, Any

import typer
from typer.core import TyperCommand, TyperGroup

import airflow_durable

PROG = "airflow-durable"
CONTEXT_SETTINGS: dict[str, Any] = {"help_option_names": ["-h", "--help"], "max_content_width": 100}

#: Exit codes of ``airflow-durable`` itself (each subcommand lists its own).
EXIT_CODES: Mapping[int, str] = {
    0: "--help or --version",
    2: "usage error: no or unknown command, unknown option",
}

#: ``pip install`` hint for what needs Airflow: any system's extra brings Airflow with its provider.
INSTALL_AIRFLOW = (
    'pip install "airflow-durable[databricks]" '
    "(or the extra of your system: [snowflake], [google], [amazon], [dbt-cloud], [all])"
)


def airflow_installed() -> bool:
    """Whether Apache Airflow can be imported here (asked without importing it)."""
    try:
        return importlib.util.find_spec("airflow") is not None
    except (ImportError, ValueError):  # a broken or half-removed installation
        return False


def error(message: str) -> None:
    """``airflow-durable: error: ...`` on stderr (errors are printed even with ``--quiet``)."""
    typer.echo(f"{PROG}: error: {message}", err=True)


def warn(message: str) -> None:
    typer.echo(f"{PROG}: warning: {message}", err=True)


def choose_format(value: str, choices: Sequence[str], deprecated: Mapping[str, str] | None = None) -> str:
    """The ``--format`` value, case-insensitive; a deprecated alias warns and maps to its replacement."""
    chosen = value.strip().lower()
    if deprecated and chosen in deprecated:
        warn(f"--format {chosen} is deprecated; use --format {deprecated[chosen]}")
        return deprecated[chosen]
    if chosen not in choices:
        raise typer.BadParameter(f"{value!r} is not one of {', '.join(choices)}", param_hint="'--format'")
    return chosen


def format_metavar(choices: Iterable[str]) -> str:
    return "[" + "|".join(choices) + "]"


def exit_codes_epilog(codes: Mapping[int, str], *sections: tuple[str, Mapping[str, str]]) -> str:
    """A command's epilog: extra sections (heading, term → text), then its exit codes.

    The layout is the one `_ConventionalHelp` reads back: a ``Heading:`` line, then one ``term  text`` line
    per row (two spaces apart), blocks separated by a blank line.
    """
    blocks = [(heading, dict(rows)) for heading, rows in sections]
    blocks.append(("Exit codes", {str(code): text for code, text in sorted(codes.items())}))
    return "\n\n".join(
        f"{heading}:\n" + "\n".join(f"  {term}  {text}" for term, text in rows.items())
        for heading, rows in blocks
    )


def _argument_usage(param: Any) -> str:
    name = param.metavar or param.name.upper()
    if param.nargs != 1 and not name.endswith("..."):
        name += "..."
    return name if param.required else f"[{name}]"


class _ConventionalHelp:
    """Help in the usual plain layout, with the value names we choose and no Python type names.

    Typer's own help shows ``<list[Path]>``, ``<bool>``, ``<str>`` beside every parameter (and differs
    between its releases); this renders usage, arguments, options and the epilog from click's parameter
    attributes alone (``opts``, ``metavar``, ``help``, ``envvar``), which every typer release has.
    """

    def collect_usage_pieces(self, ctx: Any) -> list[str]:
        pieces = [self.options_metavar] if self.options_metavar else []  # type: ignore[attr-defined]
        pieces += [
            _argument_usage(p)
            for p in self.get_params(ctx)  # type: ignore[attr-defined]
            if p.param_type_name == "argument"
        ]
        if getattr(self, "subcommand_metavar", None):
            pieces.append(self.subcommand_metavar)  # type: ignore[attr-defined]
        return pieces

    def format_help(self, ctx: Any, formatter: Any) -> None:
        self.format_usage(ctx, formatter)  # type: ignore[attr-defined]
        self.format_help_text(ctx, formatter)  # type: ignore[attr-defined]
        arguments: list[tuple[str, str]] = []
        options: list[tuple[str, str]] = []
        for param in self.get_params(ctx):  # type: ignore[attr-defined]
            if getattr(param, "hidden", False):
                continue
            text = getattr(param, "help", None) or ""
            if param.param_type_name == "argument":
                arguments.append((_argument_usage(param).strip("[]"), text))
                continue
            names = sorted(param.opts, key=lambda o: (o.startswith("--"), o)) + list(param.secondary_opts)
            label = ", ".join(names)
            if not param.is_flag:
                label += " " + (param.metavar or param.name.upper())
            if isinstance(param.envvar, str):
                text += f" [env: {param.envvar}]"
            options.append((label, text))
        for heading, rows in (("Arguments", arguments), ("Options", options)):
            if rows:
                with formatter.section(heading):
                    formatter.write_dl(rows)
        if hasattr(self, "format_commands"):
            self.format_commands(ctx, formatter)
        for heading, rows in _epilog_sections(self.epilog or ""):  # type: ignore[attr-defined]
            with formatter.section(heading):
                formatter.write_dl(rows)


def _epilog_sections(epilog: str) -> list[tuple[str, list[tuple[str, str]]]]:
    sections = []
    for block in filter(None, (b.strip("\n") for b in epilog.split("\n\n"))):
        heading, *lines = block.splitlines()
        rows = [tuple(re.split(r"\s{2,}", line.strip(), maxsplit=1)) for line in lines]
        sections.append((heading.rstrip(":"), [(r[0], r[1] if len(r) > 1 else "") for r in rows]))
    return sections


class Command(_ConventionalHelp, TyperCommand):
    """A subcommand: ``app.command(name, cls=Command, context_settings=CONTEXT_SETTINGS, epilog=...)``."""


class Group(_ConventionalHelp, TyperGroup):
    """The top-level ``airflow-durable`` command."""


def command(app: typer.Typer, name: str, short_help: str, epilog: str) -> Any:
    """``app.command`` with our help layout, ``-h``, the line ``airflow-durable -h`` lists and the epilog
    (exit codes): what every module registers its commands with."""
    return app.command(
        name, cls=Command, context_settings=CONTEXT_SETTINGS, short_help=short_help, epilog=epilog
    )


def _print_version(value: bool) -> None:
    if value:
        typer.echo(f"{PROG} {airflow_durable.__version__}")
        raise typer.Exit(0)


def _root(
    version: Annotated[
        bool,
        typer.Option("--version", is_eager=True, callback=_print_version, help="Print the version and exit."),
    ] = False,
) -> None:
    """Crash-safe Airflow operators: check DAGs for retry anti-patterns, migrate imports, list durable
    jobs and orphans, run the demo.

    check and migrate need no Airflow. jobs lists records through Airflow's REST API; jobs --live,
    orphans and demo need Airflow and the provider of each system they reach. Run
    'airflow-durable COMMAND -h' for a command's options and exit codes.
    """


def build_app() -> typer.Typer:
    """The ``airflow-durable`` command with every subcommand (a new app on each call)."""
    # Each feature module owns its commands; none of them imports Airflow at import time.
    from airflow_durable.demo.cli import register as register_demo
    from airflow_durable.jobs.cli import register as register_jobs
    from airflow_durable.lint.cli import register as register_lint

    app = typer.Typer(
        name=PROG,
        no_args_is_help=True,
        add_completion=False,
        cls=Group,
        context_settings=CONTEXT_SETTINGS,
        rich_markup_mode=None,
        epilog=exit_codes_epilog(EXIT_CODES),
    )
    app.callback()(_root)
    register_lint(app)
    register_jobs(app)
    register_demo(app)
    return app


def main() -> None:
    build_app()(prog_name=PROG)


if __name__ == "__main__":
    main()
