"""Report formats: text (people), json (scripts), sarif (code scanning), github (workflow annotations)."""

from __future__ import annotations

import json
from typing import Any

from airflow_durable.lint.engine import Report
from airflow_durable.lint.findings import RULES, Severity

FORMATS = ("text", "json", "sarif", "github")
TOOL_NAME = "airflow-durable"
INFORMATION_URI = "https://airflow-durable.readthedocs.io/"
_SARIF_LEVEL = {Severity.ERROR: "error", Severity.WARNING: "warning", Severity.INFO: "note"}
_GITHUB_LEVEL = {Severity.ERROR: "error", Severity.WARNING: "warning", Severity.INFO: "notice"}
_COLOURS = {Severity.ERROR: "red", Severity.WARNING: "yellow", Severity.INFO: "cyan"}


def _version() -> str:
    try:
        from importlib.metadata import version

        return version("airflow-durable")
    except Exception:  # not installed (running from a checkout)
        return "0.0.0"


def render_text(report: Report, colour: bool = False, summary: bool = True) -> str:
    """``file:line:col CODE message`` per finding, ``error: ...`` per unparsable file, then a summary line
    (``summary=False``: ``--quiet``)."""
    lines = []
    for f in report.findings:
        location = f"{f.path}:{f.line}:{f.column}"
        if colour:
            style = _COLOURS[f.severity]
            lines.append(f"[bold]{_esc(location)}[/bold] [{style}]{f.code}[/{style}] {_esc(f.message)}")
        else:
            lines.append(f"{location} {f.code} {f.message}")
    for e in report.errors:
        lines.append(f"[red]error[/red]: {_esc(e.message)}" if colour else f"error: {e.message}")
    if not summary:
        return "".join(line + "\n" for line in lines)
    counts = {s: sum(1 for f in report.findings if f.severity is s) for s in Severity}
    totals = (
        f"{len(report.findings)} finding(s) in {report.files_checked} file(s) checked "
        f"({counts[Severity.ERROR]} error, {counts[Severity.WARNING]} warning, {counts[Severity.INFO]} info)"
    )
    if report.errors:
        totals += f"; {len(report.errors)} file(s) could not be parsed"
    lines.append(totals)
    return "\n".join(lines) + "\n"


def _esc(text: str) -> str:
    from rich.markup import escape

    return escape(text)


def render_json(report: Report) -> str:
    data = {
        "version": 1,
        "findings": [f.as_dict() for f in report.findings],
        "errors": [{"path": e.path, "message": e.message} for e in report.errors],
        "files_checked": report.files_checked,
    }
    return json.dumps(data, indent=2) + "\n"


def sarif_log(report: Report) -> dict[str, Any]:
    codes = sorted(RULES)
    rules = [
        {
            "id": code,
            "name": RULES[code].name,
            "shortDescription": {"text": RULES[code].summary},
            "helpUri": f"{INFORMATION_URI}check/#{code.lower()}",
            "defaultConfiguration": {"level": _SARIF_LEVEL[RULES[code].severity]},
        }
        for code in codes
    ]
    results = [
        {
            "ruleId": f.code,
            "ruleIndex": codes.index(f.code),
            "level": _SARIF_LEVEL[f.severity],
            "message": {"text": f.message},
            "locations": [
                {
                    "physicalLocation": {
                        "artifactLocation": {"uri": f.path, "uriBaseId": "%SRCROOT%"},
                        "region": {"startLine": f.line, "startColumn": f.column},
                    }
                }
            ],
        }
        for f in report.findings
    ]
    notifications = [
        {
            "level": "error",
            "message": {"text": e.message},
            "locations": [
                {"physicalLocation": {"artifactLocation": {"uri": e.path, "uriBaseId": "%SRCROOT%"}}}
            ],
        }
        for e in report.errors
    ]
    return {
        "$schema": "https://json.schemastore.org/sarif-2.1.0.json",
        "version": "2.1.0",
        "runs": [
            {
                "tool": {
                    "driver": {
                        "name": TOOL_NAME,
                        "version": _version(),
                        "informationUri": INFORMATION_URI,
                        "rules": rules,
                    }
                },
                "invocations": [
                    {"executionSuccessful": not report.errors, "toolExecutionNotifications": notifications}
                ],
                "results": results,
            }
        ],
    }


def render_sarif(report: Report) -> str:
    return json.dumps(sarif_log(report), indent=2) + "\n"


def _gh_escape(text: str, prop: bool = False) -> str:
    # GitHub workflow-command escaping; properties additionally escape ':' and ','.
    text = text.replace("%", "%25").replace("\r", "%0D").replace("\n", "%0A")
    if prop:
        text = text.replace(":", "%3A").replace(",", "%2C")
    return text


def render_github(report: Report) -> str:
    lines = []
    for f in report.findings:
        lines.append(
            f"::{_GITHUB_LEVEL[f.severity]} file={_gh_escape(f.path, True)},line={f.line},col={f.column},"
            f"title={_gh_escape(f.code + ' ' + RULES[f.code].name, True)}::{_gh_escape(f.message)}"
        )
    for e in report.errors:
        lines.append(f"::error file={_gh_escape(e.path, True)},title=parse error::{_gh_escape(e.message)}")
    return "\n".join(lines) + ("\n" if lines else "")


def render(report: Report, fmt: str, colour: bool = False, summary: bool = True) -> str:
    if fmt == "text":
        return render_text(report, colour, summary)
    if fmt == "json":
        return render_json(report)
    if fmt == "sarif":
        return render_sarif(report)
    if fmt == "github":
        return render_github(report)
    raise ValueError(f"unknown format {fmt!r}")
