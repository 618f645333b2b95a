"""Run the rules over files: parse, analyse, filter by selection and ``# noqa``, never import the DAG."""

from __future__ import annotations

import ast
import io
import tokenize
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path

import libcst as cst

from airflow_durable.lint.config import Config
from airflow_durable.lint.context import FileContext
from airflow_durable.lint.findings import Finding
from airflow_durable.lint.noqa import is_suppressed, suppressions
from airflow_durable.lint.rules import CHECKERS


@dataclass
class FileError:
    path: str
    message: str


@dataclass
class Report:
    findings: list[Finding] = field(default_factory=list)
    errors: list[FileError] = field(default_factory=list)
    files_checked: int = 0


def iter_python_files(paths: Iterable[Path], exclude: Iterable[str] = ()) -> Iterator[Path]:
    patterns = list(exclude)
    for path in paths:
        if path.is_dir():
            candidates: Iterable[Path] = sorted(p for p in path.rglob("*.py") if p.is_file())
        else:
            candidates = [path]
        for candidate in candidates:
            if not any(candidate.match(p) or p in candidate.parts for p in patterns):
                yield candidate


def check_source(path: str, source: str, config: Config | None = None) -> list[Finding]:
    """All findings for one file's source. Raises ``libcst.ParserSyntaxError`` when it does not parse."""
    config = config or Config()
    ctx = FileContext(path, source)
    noqa = suppressions(source)
    found: set[Finding] = set()
    for checker in CHECKERS:
        for finding in checker(ctx):
            if config.enabled(finding.code) and not is_suppressed(noqa, finding.line, finding.code):
                found.add(finding)
    return sorted(found)


def parse_error_message(path: str, exc: Exception, source: str | None = None) -> str:
    if isinstance(exc, cst.ParserSyntaxError):
        line, column, message = exc.raw_line, exc.raw_column + 1, exc.message
        if source is not None:
            # libcst's parser reports the token where it gave up, often a line later; CPython's own
            # parser names the line and column a person has to fix.
            try:
                compile(source, path, "exec", flags=ast.PyCF_ONLY_AST, dont_inherit=True)
            except SyntaxError as syntax:
                if syntax.lineno:
                    line, column, message = syntax.lineno, syntax.offset or 1, syntax.msg
        return f"{path}:{line}:{column}: cannot parse this file, not checked: {message}"
    return f"{path}: cannot read this file, not checked: {exc}"


def read_source(file: Path) -> tuple[str, str]:
    """A file's text exactly as written (line endings kept) and the encoding it is in (PEP 263)."""
    raw = file.read_bytes()
    encoding, _ = tokenize.detect_encoding(io.BytesIO(raw).readline)
    return raw.decode(encoding), encoding


def check_paths(paths: Iterable[Path], config: Config | None = None) -> Report:
    config = config or Config()
    report = Report()
    for file in iter_python_files(paths, config.exclude):
        name = file.as_posix()
        source = None
        try:
            source, _ = read_source(file)
            report.findings.extend(check_source(name, source, config))
        except (cst.ParserSyntaxError, OSError, UnicodeDecodeError, SyntaxError, LookupError) as exc:
            report.errors.append(FileError(name, parse_error_message(name, exc, source)))
            continue
        report.files_checked += 1
    report.findings.sort()
    return report
