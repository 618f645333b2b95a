"""The ``check`` and ``migrate`` commands, registered on the main ``airflow-durable`` Typer app."""

from __future__ import annotations

import dataclasses
import enum
import sys
from pathlib import Path
from typing import Annotated

import libcst as cst
import typer

from airflow_durable.lint.findings import RULES, Severity

EXIT_OK, EXIT_FINDINGS, EXIT_USAGE = 0, 1, 2


class OutputFormat(enum.StrEnum):
    """``--format``: a choice, so a typo is a usage error listing the formats."""

    text = "text"
    json = "json"
    sarif = "sarif"
    github = "github"


def _usage_error(message: str) -> typer.Exit:
    typer.echo(f"airflow-durable: error: {message}", err=True)
    return typer.Exit(EXIT_USAGE)


def _split_codes(values: list[str] | None) -> list[str] | None:
    if not values:
        return None
    return [code for value in values for code in value.replace(",", " ").split()]


def _existing(paths: list[Path]) -> list[Path]:
    missing = [str(p) for p in paths if not p.exists()]
    if missing:
        raise _usage_error(f"no such file or directory: {', '.join(missing)}")
    return paths


def check(
    paths: Annotated[list[Path], typer.Argument(help="DAG files or directories (searched for *.py).")],
    output_format: Annotated[
        OutputFormat, typer.Option("--format", help="Report format.", case_sensitive=False)
    ] = OutputFormat.text,
    select: Annotated[
        list[str] | None, typer.Option(help="Only these codes or prefixes (ADR001,ADR01).")
    ] = None,
    ignore: Annotated[list[str] | None, typer.Option(help="Skip these codes or prefixes.")] = None,
    fail_on: Annotated[
        str | None,
        typer.Option(
            help="Exit 1 when a finding at or above this severity remains: info, warning (default), error."
        ),
    ] = None,
    isolated: Annotated[
        # Escaped: rich would read [tool.airflow-durable] as markup and print nothing.
        bool, typer.Option(help=r"Ignore \[tool.airflow-durable] in pyproject.toml.")
    ] = False,
    output: Annotated[Path | None, typer.Option("--output", "-o", help="Write the report to a file.")] = None,
) -> None:
    """Check DAG files for retry anti-patterns (static analysis: the files are never imported)."""
    from airflow_durable.lint import output as out
    from airflow_durable.lint.config import ConfigError, load
    from airflow_durable.lint.engine import check_paths

    output_format = OutputFormat(output_format).value  # type: ignore[assignment]
    paths = _existing(paths)
    try:
        config = load(
            paths[0],
            select=_split_codes(select),
            ignore=_split_codes(ignore),
            fail_on=fail_on,
            use_pyproject=not isolated,
        )
    except ConfigError as exc:
        raise _usage_error(str(exc)) from None
    report = check_paths(paths, config)
    if output is not None:
        output.write_text(out.render(report, output_format), encoding="utf-8")
    elif output_format == "text" and sys.stdout.isatty():
        from rich.console import Console

        Console(highlight=False, soft_wrap=True).print(out.render_text(report, colour=True), end="")
    else:
        typer.echo(out.render(report, output_format), nl=False)
    if output_format != "text":
        for error in report.errors:  # machine formats carry them too; people watching CI see them here
            typer.echo(f"error: {error.message}", err=True)
    failing = [f for f in report.findings if f.severity >= config.fail_on]
    raise typer.Exit(EXIT_FINDINGS if failing or report.errors else EXIT_OK)


def migrate(
    paths: Annotated[list[Path], typer.Argument(help="DAG files or directories (searched for *.py).")],
    write: Annotated[
        bool, typer.Option("--write", help="Rewrite the files in place (default: show a diff).")
    ] = False,
    check_only: Annotated[
        bool,
        typer.Option(
            "--check", help="Change nothing, print nothing on stdout; exit 1 when a file would change."
        ),
    ] = False,
) -> None:
    """Swap provider operators for their durable drop-ins: imports and names only, nothing else."""
    from airflow_durable.lint.engine import iter_python_files, parse_error_message, read_source
    from airflow_durable.lint.migrate import migrate_source

    if write and check_only:
        raise _usage_error("--write and --check exclude each other")
    paths = _existing(paths)
    failed = changed = 0
    for file in iter_python_files(paths):
        name = file.as_posix()
        source = None
        try:
            # Bytes in, bytes out: line endings, encoding and the trailing newline stay as they were.
            source, encoding = read_source(file)
            result = migrate_source(name, source)
        except (cst.ParserSyntaxError, OSError, UnicodeDecodeError, SyntaxError, LookupError) as exc:
            failed += 1
            message = parse_error_message(name, exc, source).replace("not checked", "left untouched")
            typer.echo(f"error: {message}", err=True)
            continue
        for note in result.notes:
            typer.echo(f"{name}: note: {note}", err=True)
        for suggestion in result.split_suggestions:
            typer.echo(suggestion, err=True)
        if not result.changed:
            continue
        changed += 1
        if check_only:
            typer.echo(f"would rewrite {name}: {', '.join(result.swapped)}", err=True)
        elif write:
            file.write_bytes(result.migrated.encode(encoding))
            typer.echo(f"rewrote {name}: {', '.join(result.swapped)}", err=True)
        else:
            sys.stdout.flush()
            if encoding == "utf-8-sig":  # the BOM belongs to the file's first line, not to the diff
                bom = "\ufeff"
                result = dataclasses.replace(result, original=bom + source, migrated=bom + result.migrated)
                encoding = "utf-8"
            sys.stdout.buffer.write(result.diff().encode(encoding))
            sys.stdout.buffer.flush()
    verb = "rewritten" if write else "would be rewritten"
    typer.echo(f"{changed} file(s) {verb}" + (f", {failed} could not be parsed" if failed else ""), err=True)
    raise typer.Exit(EXIT_FINDINGS if failed or (check_only and changed) else EXIT_OK)


def rules_help() -> str:
    return "\n".join(f"{code} ({RULES[code].severity}) {RULES[code].summary}" for code in sorted(RULES))


def register(app: typer.Typer) -> None:
    """Add ``check`` and ``migrate`` to the ``airflow-durable`` app."""
    app.command("check", epilog="Rules:\n\n" + "\n\n".join(rules_help().splitlines()))(check)
    app.command("migrate")(migrate)


__all__ = ["register", "check", "migrate", "Severity"]
