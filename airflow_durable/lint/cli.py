"""The ``check`` and ``migrate`` commands, registered on the main ``airflow-durable`` Typer app.

Neither needs Airflow: the DAG files are parsed with libcst, never imported.
"""

from __future__ import annotations

import dataclasses
import json
import sys
from pathlib import Path
from typing import Annotated, Any

import libcst as cst
import typer

from airflow_durable.cli import choose_format, command, error, exit_codes_epilog, format_metavar
from airflow_durable.lint.findings import RULES, Severity

EXIT_OK, EXIT_FINDINGS, EXIT_USAGE = 0, 1, 2

CHECK_FORMATS = ("text", "json", "sarif", "github")
MIGRATE_FORMATS = ("text", "json")

CHECK_EXIT_CODES = {
    EXIT_OK: "no finding at or above --fail-on",
    EXIT_FINDINGS: "findings at or above --fail-on remain, or a file could not be parsed",
    EXIT_USAGE: "usage error: unknown option, format, rule code, severity or setting; missing path",
}
MIGRATE_EXIT_CODES = {
    EXIT_OK: "done: nothing to change, the diff printed, or the files rewritten",
    EXIT_FINDINGS: "a file could not be parsed (left untouched), or --check and a file would change",
    EXIT_USAGE: "usage error: unknown option or format, --write with --check, missing path, bad setting",
}

Paths = Annotated[
    list[Path], typer.Argument(metavar="PATH", help="DAG files or directories (searched for *.py).")
]
Exclude = Annotated[
    list[str] | None,
    typer.Option(
        "--exclude",
        metavar="PATTERN",
        help="Skip files matching this glob or having this directory name (repeatable; added to "
        "exclude in [tool.airflow-durable]).",
    ),
]
Isolated = Annotated[
    bool, typer.Option("--isolated", help="Ignore [tool.airflow-durable] in pyproject.toml.")
]


def _usage_error(message: str) -> typer.Exit:
    error(message)
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


def _config(paths: list[Path], isolated: bool, **settings: Any) -> Any:
    from airflow_durable.lint.config import ConfigError, load

    try:
        return load(paths[0], use_pyproject=not isolated, **settings)
    except ConfigError as exc:
        raise _usage_error(str(exc)) from None


def check(
    paths: Paths,
    output_format: Annotated[
        str,
        typer.Option(
            "--format",
            metavar=format_metavar(CHECK_FORMATS),
            help="text (default): file:line:col CODE message; json; sarif (SARIF 2.1.0, code scanning); "
            "github (workflow annotations).",
        ),
    ] = "text",
    select: Annotated[
        list[str] | None,
        typer.Option(metavar="CODES", help="Only these codes or prefixes (ADR001,ADR01; repeatable)."),
    ] = None,
    ignore: Annotated[
        list[str] | None, typer.Option(metavar="CODES", help="Skip these codes or prefixes (repeatable).")
    ] = None,
    exclude: Exclude = None,
    fail_on: Annotated[
        str | None,
        typer.Option(
            metavar="LEVEL",
            help="Exit 1 when a finding at or above this severity remains: info, warning (default), error.",
        ),
    ] = None,
    isolated: Isolated = False,
    output: Annotated[
        Path | None, typer.Option("--output", "-o", metavar="FILE", help="Write the report to FILE.")
    ] = None,
    quiet: Annotated[
        bool,
        typer.Option("--quiet", "-q", help="Findings and errors only: no summary line (text format)."),
    ] = False,
) -> None:
    """Check DAG files for retry anti-patterns (static analysis: the files are never imported)."""
    from airflow_durable.lint import output as out
    from airflow_durable.lint.engine import check_paths

    fmt = choose_format(output_format, CHECK_FORMATS)
    paths = _existing(paths)
    config = _config(
        paths,
        isolated,
        select=_split_codes(select),
        ignore=_split_codes(ignore),
        fail_on=fail_on,
        exclude=exclude,
    )
    report = check_paths(paths, config)
    summary = not quiet
    if output is not None:
        output.write_text(out.render(report, fmt, summary=summary), encoding="utf-8")
    elif fmt == "text" and sys.stdout.isatty():
        from rich.console import Console

        Console(highlight=False, soft_wrap=True).print(
            out.render_text(report, colour=True, summary=summary), end=""
        )
    else:
        typer.echo(out.render(report, fmt, summary=summary), nl=False)
    if fmt != "text":
        for file_error in report.errors:  # machine formats carry them too; people watching CI see them here
            typer.echo(f"error: {file_error.message}", err=True)
    failing = [f for f in report.findings if f.severity >= config.fail_on]
    raise typer.Exit(EXIT_FINDINGS if failing or report.errors else EXIT_OK)


def migrate(
    paths: Paths,
    write: Annotated[
        bool, typer.Option("--write", help="Rewrite the files in place (default: print a diff).")
    ] = False,
    check_only: Annotated[
        bool,
        typer.Option("--check", help="Change nothing, print no diff; exit 1 when a file would change."),
    ] = False,
    output_format: Annotated[
        str,
        typer.Option(
            "--format",
            metavar=format_metavar(MIGRATE_FORMATS),
            help="text (default): the diff on stdout, messages on stderr; json: one document on stdout "
            "with each file's changes, diff, notes and errors.",
        ),
    ] = "text",
    exclude: Exclude = None,
    isolated: Isolated = False,
    quiet: Annotated[
        bool,
        typer.Option(
            "--quiet",
            "-q",
            help="The result and errors only: no notes, split suggestions or summary line.",
        ),
    ] = False,
) -> None:
    """Swap provider operators for their durable drop-ins: imports and names only, nothing else."""
    from airflow_durable.lint.engine import iter_python_files, parse_error_message, read_source
    from airflow_durable.lint.migrate import migrate_source

    fmt = choose_format(output_format, MIGRATE_FORMATS)
    if write and check_only:
        raise _usage_error("--write and --check exclude each other")
    paths = _existing(paths)
    config = _config(paths, isolated, exclude=exclude)
    as_json = fmt == "json"

    def say(text: str, chatter: bool = False) -> None:
        # Text format only: the JSON document carries the same on stdout.
        if not as_json and not (chatter and quiet):
            typer.echo(text, err=True)

    files: list[dict[str, Any]] = []
    errors: list[dict[str, str]] = []
    seen = changed = 0
    for file in iter_python_files(paths, config.exclude):
        name = file.as_posix()
        seen += 1
        source = None
        try:
            # Bytes in, bytes out: line endings, encoding and the trailing newline stay as they were.
            source, encoding = read_source(file)
            result = migrate_source(name, source)
        except (cst.ParserSyntaxError, OSError, UnicodeDecodeError, SyntaxError, LookupError) as exc:
            message = parse_error_message(name, exc, source).replace("not checked", "left untouched")
            errors.append({"path": name, "message": message})
            typer.echo(f"error: {message}", err=True)  # errors are never quiet, in any format
            continue
        for note in result.notes:
            say(f"{name}: note: {note}", chatter=True)
        for suggestion in result.split_suggestions:
            say(suggestion, chatter=True)
        if result.changed or result.notes or result.split_suggestions:
            files.append(
                {
                    "path": name,
                    "changed": result.changed,
                    "swapped": result.swapped,
                    "notes": result.notes,
                    "split_suggestions": result.split_suggestions,
                    "diff": result.diff() if result.changed else "",
                }
            )
        if not result.changed:
            continue
        changed += 1
        if check_only:
            say(f"would rewrite {name}: {', '.join(result.swapped)}")
        elif write:
            file.write_bytes(result.migrated.encode(encoding))
            say(f"rewrote {name}: {', '.join(result.swapped)}")
        elif not as_json:
            sys.stdout.flush()
            if encoding == "utf-8-sig":  # the BOM belongs to the file's first line, not to the diff
                bom = "\ufeff"
                result = dataclasses.replace(result, original=bom + source, migrated=bom + result.migrated)
                encoding = "utf-8"
            sys.stdout.buffer.write(result.diff().encode(encoding))
            sys.stdout.buffer.flush()
    verb = "rewritten" if write else "would be rewritten"
    say(
        f"{changed} file(s) {verb}" + (f", {len(errors)} could not be parsed" if errors else ""), chatter=True
    )
    if as_json:
        mode = "write" if write else "check" if check_only else "diff"
        document = {
            "version": 1,
            "mode": mode,
            "files_seen": seen,
            "files_changed": changed,
            "files": files,
            "errors": errors,
        }
        typer.echo(json.dumps(document, indent=2))
    raise typer.Exit(EXIT_FINDINGS if errors or (check_only and changed) else EXIT_OK)


def register(app: typer.Typer) -> None:
    """Add ``check`` and ``migrate`` to the ``airflow-durable`` app."""
    rules = {code: f"({RULES[code].severity}) {RULES[code].summary}" for code in sorted(RULES)}
    command(
        app,
        "check",
        "Find retry anti-patterns in DAG files (static analysis; needs no Airflow).",
        exit_codes_epilog(CHECK_EXIT_CODES, ("Rules", rules)),
    )(check)
    command(
        app,
        "migrate",
        "Swap provider operators for their durable drop-ins (imports and names only).",
        exit_codes_epilog(MIGRATE_EXIT_CODES),
    )(migrate)


__all__ = ["register", "check", "migrate", "Severity"]
