"""``[tool.airflow-durable]`` in the nearest pyproject.toml, merged under the command line."""

from __future__ import annotations

import tomllib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from airflow_durable.lint.findings import RULES, Severity


class ConfigError(ValueError):
    """A bad setting: reported as a usage error (exit 2)."""


@dataclass
class Config:
    select: set[str] = field(default_factory=lambda: set(RULES))
    ignore: set[str] = field(default_factory=set)
    fail_on: Severity = Severity.WARNING
    exclude: list[str] = field(default_factory=list)
    source: Path | None = None  # the pyproject.toml it came from

    def enabled(self, code: str) -> bool:
        return code in self.select and code not in self.ignore


def find_pyproject(start: Path) -> Path | None:
    start = start.resolve()
    for directory in [start, *start.parents] if start.is_dir() else [start.parent, *start.parent.parents]:
        candidate = directory / "pyproject.toml"
        if candidate.is_file():
            return candidate
    return None


def expand_codes(values: list[str] | str | None, what: str) -> set[str] | None:
    """``ADR0`` selects ADR001..ADR009 (prefix match, as ruff does); unknown codes are usage errors."""
    if values is None:
        return None
    if isinstance(values, str):
        values = [v for v in values.replace(",", " ").split()]
    out: set[str] = set()
    for value in values:
        value = value.strip().upper()
        if value in ("ALL", "ADR"):
            out |= set(RULES)
            continue
        matched = {code for code in RULES if code.startswith(value)}
        if not matched:
            raise ConfigError(f"{what}: unknown rule code {value!r} (known: {', '.join(sorted(RULES))})")
        out |= matched
    return out


def load(
    start: Path,
    *,
    select: list[str] | None = None,
    ignore: list[str] | None = None,
    fail_on: str | None = None,
    exclude: list[str] | None = None,
    use_pyproject: bool = True,
) -> Config:
    """The settings of ``[tool.airflow-durable]`` near ``start``, under the command line's.

    ``select`` replaces the file's, ``ignore`` and ``exclude`` add to it, ``fail_on`` overrides it.
    """
    config = Config()
    table: dict[str, Any] = {}
    if use_pyproject:
        pyproject = find_pyproject(start)
        if pyproject is not None:
            try:
                data = tomllib.loads(pyproject.read_text(encoding="utf-8"))
            except (OSError, tomllib.TOMLDecodeError) as exc:
                raise ConfigError(f"{pyproject}: cannot read [tool.airflow-durable]: {exc}") from exc
            table = data.get("tool", {}).get("airflow-durable", {})
            config.source = pyproject if table else None
    unknown = set(table) - {"select", "ignore", "fail-on", "exclude"}
    if unknown:
        raise ConfigError(f"[tool.airflow-durable]: unknown setting(s) {', '.join(sorted(unknown))}")
    chosen = expand_codes(select, "--select") or expand_codes(table.get("select"), "select")
    if chosen is not None:
        config.select = chosen
    config.ignore = (expand_codes(table.get("ignore"), "ignore") or set()) | (
        expand_codes(ignore, "--ignore") or set()
    )
    level = fail_on or table.get("fail-on")
    if level is not None:
        try:
            config.fail_on = Severity.parse(str(level))
        except ValueError as exc:
            raise ConfigError(str(exc)) from exc
    table_exclude = table.get("exclude", [])
    if not isinstance(table_exclude, list):
        raise ConfigError("[tool.airflow-durable] exclude must be a list of glob patterns")
    config.exclude = [str(e) for e in table_exclude] + list(exclude or ())
    return config
