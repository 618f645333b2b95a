"""Everything a durable operator sends that the provider operator does not is listed on docs/differences.md.

For every registered operator, ours and the provider operator it replaces submit the same job, built by
the same case with the same arguments, to the same emulator; the submit request each one sent (as the
emulator's ledger recorded its body) is flattened into fields and compared. Every field that differs must
be a row of the page's table of what the submitted job carries, and every row must be a field that
differs: a marker added without its row, or a row left behind by a marker removed, fails here. Each
operator submits three ways: waiting (both paths) and, where it can, submit-only (its jobs then carry
the submit-only mark).
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest

from airflow_durable import catalogue
from bench.scenarios import factory
from tests.conformance.systems import SystemCase
from tests.harness import DURABLE, TaskRunner

pytestmark = pytest.mark.skipif(
    not DURABLE, reason="Airflow < 3.3: ours sends exactly the provider's request"
)

PAGE = Path(__file__).resolve().parents[2] / "docs" / "differences.md"
#: The comment that opens the table the test reads (the rows up to the first line that is not a row).
TABLE_MARK = "<!-- visible-differences -->"
_ROW = re.compile(r"^\|(?P<operators>[^|]*)\|\s*`(?P<field>[^`]+)`\s*\|")


def documented() -> dict[str, set[str]]:
    """Durable class name → the request fields its row(s) in the page's table name."""
    lines = PAGE.read_text(encoding="utf-8").splitlines()
    if TABLE_MARK not in lines:
        raise AssertionError(f"{PAGE.name} has no line {TABLE_MARK!r} before the table of what jobs carry")
    rows: dict[str, set[str]] = {}
    body = lines[lines.index(TABLE_MARK) + 1 :]
    for line in body[2:]:  # the header and its rule
        if not line.startswith("|"):
            break
        match = _ROW.match(line)
        if match is None:
            raise AssertionError(f"{PAGE.name}: a row without a `field` in its second cell: {line}")
        for name in re.findall(r"`(Durable\w+)`", match["operators"]):
            rows.setdefault(name, set()).add(match["field"])
    return rows


def flatten(value: Any, path: str = "") -> dict[str, Any]:
    """``{"a": {"b": 1}, "Steps": [{"Name": "x"}]}`` → ``{"a.b": 1, "Steps[].Name": "x"}`` (a list of
    objects is walked item by item, its items named alike; any other list is one value)."""
    if isinstance(value, dict):
        flat: dict[str, Any] = {}
        for key, item in value.items():
            flat.update(flatten(item, f"{path}.{key}" if path else str(key)))
        return flat
    if isinstance(value, list) and value and all(isinstance(item, dict) for item in value):
        flat = {}
        for index, item in enumerate(value):
            for key, leaf in flatten(item, f"{path}[{index}]").items():
                flat[key] = leaf
        return flat
    return {path: value}


def _field(indexed: str) -> str:
    return re.sub(r"\[\d+\]", "[]", indexed)


def _submitted(case: SystemCase, emulator: Any, side: str, deferrable: bool, **overrides: Any) -> dict:
    emulator.lifecycle = case.lifecycle(active_reads=3)
    start = len(emulator.ledger.entries)
    outcome = TaskRunner(factory(case, emulator, deferrable, side, **overrides)).run()
    assert outcome.state == "success", f"{side}: {outcome.error}"
    submits = [e for e in emulator.ledger.entries[start:] if e.operation in case.submit_operations]
    assert len(submits) == 1, f"{side} sent {len(submits)} submissions"
    return submits[0].payload


def differing_fields(case: SystemCase, emulator: Any, deferrable: bool, **overrides: Any) -> set[str]:
    theirs = flatten(_submitted(case, emulator, "upstream", deferrable, **overrides))
    ours = flatten(_submitted(case, emulator, "ours", deferrable, **overrides))
    missing = object()
    return {
        _field(path)
        for path in theirs.keys() | ours.keys()
        if theirs.get(path, missing) != ours.get(path, missing)
    }


def test_the_page_table_is_found_and_names_only_durable_operators() -> None:
    rows = documented()
    known = {op.durable_class for op in catalogue.OPERATORS}
    assert rows and set(rows) <= known, sorted(set(rows) - known)


def test_every_field_a_durable_submission_changes_is_listed_and_nothing_else(case, emulator) -> None:
    durable_class = type(case.make(emulator, False)).__name__
    modes: list[tuple[bool, dict[str, Any]]] = [(False, {}), (True, {})]
    no_wait = catalogue.operator(durable_class).no_wait_kwarg
    if no_wait is not None:
        modes.append((False, {no_wait: False}))  # submit-only: its jobs carry the submit-only mark
    seen: dict[str, str] = {}
    for deferrable, overrides in modes:
        label = f"{'deferrable' if deferrable else 'sync'}{' ' + str(overrides) if overrides else ''}"
        for field in differing_fields(case, emulator, deferrable, **overrides):
            seen.setdefault(field, label)
    listed = documented().get(durable_class, set())
    unlisted = {field: mode for field, mode in seen.items() if field not in listed}
    assert not unlisted, (
        f"{durable_class} sends fields {PAGE.name} does not list (field: first seen): {unlisted}"
    )
    stale = listed - set(seen)
    assert not stale, f"{PAGE.name} lists fields {durable_class} no longer changes: {sorted(stale)}"
