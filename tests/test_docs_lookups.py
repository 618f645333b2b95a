"""The user pages on lookups say what the catalogue says: the permission each system's lookup needs, and
`DurableLookupError` (what it means, when it is raised, what to do) where users look for errors."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from airflow_durable import catalogue
from airflow_durable.engine import DurableLookupError

DOCS = Path(__file__).resolve().parents[1] / "docs"
TABLE_MARK = "<!-- lookup-permissions -->"


def expected_cell(op: catalogue.Operator) -> str:
    """What the page's row of ``op`` says its connection needs (the catalogue's words)."""
    lookup = catalogue.LOOKUPS[op.key]
    return lookup.permission if lookup.implemented else f"nothing (no lookup): {lookup.reason}"


def documented_permissions() -> dict[str, str]:
    lines = (DOCS / "differences.md").read_text(encoding="utf-8").splitlines()
    assert TABLE_MARK in lines, f"differences.md has no line {TABLE_MARK!r} before the permission table"
    rows: dict[str, str] = {}
    for line in lines[lines.index(TABLE_MARK) + 3 :]:  # the mark, the header and its rule
        if not line.startswith("|"):
            break
        cells = [cell.strip() for cell in line.strip().strip("|").split("|")]
        (name,) = re.findall(r"`(Durable\w+)`", cells[0])
        rows[name] = "|".join(cells[1:])
    return rows


def test_the_permission_table_is_the_catalogues_one_row_per_operator() -> None:
    expected = {op.durable_class: expected_cell(op) for op in catalogue.OPERATORS}
    assert documented_permissions() == expected


def test_every_operator_with_a_lookup_has_a_permission_in_the_catalogue() -> None:
    missing = [
        op.durable_class
        for op in catalogue.OPERATORS
        if catalogue.LOOKUPS[op.key].implemented and not catalogue.LOOKUPS[op.key].permission
    ]
    assert not missing


@pytest.mark.parametrize("page", ["troubleshooting.md", "differences.md"])
def test_durable_lookup_error_is_explained_where_users_look_for_errors(page: str) -> None:
    text = (DOCS / page).read_text(encoding="utf-8")
    assert DurableLookupError.__name__ in text
    if page == "troubleshooting.md":
        # Its own heading under Errors, as every other error, and the way to the permission table.
        errors = text.split("## Errors", 1)[1].split("\n## ", 1)[0]
        assert f"### `{DurableLookupError.__name__}`" in errors
        assert "differences.md#lookups-and-the-permission-each-needs" in errors
