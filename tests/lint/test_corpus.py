"""Every corpus file produces exactly the findings its ``# expect:`` markers name, no more, no fewer."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from airflow_durable.lint import RULES, check_source
from tests.lint.conftest import corpus_files, expected_markers

_RULE_IN_NAME = re.compile(r"adr(\d{3})(?:_(\d{3}))?")


@pytest.mark.parametrize("path", corpus_files(), ids=lambda p: p.name)
def test_findings_match_markers(path: Path) -> None:
    source = path.read_text(encoding="utf-8")
    got = {(f.line, f.code) for f in check_source(path.name, source)}
    expected = expected_markers(source)
    assert got - expected == set(), f"unexpected findings in {path.name}"
    assert expected - got == set(), f"missed findings in {path.name}"


def test_every_rule_has_a_true_positive_and_a_lookalike() -> None:
    positives: set[str] = set()
    for path in corpus_files("tp_"):
        positives |= {code for _, code in expected_markers(path.read_text(encoding="utf-8"))}
    assert positives == set(RULES), f"rules without a true positive: {sorted(set(RULES) - positives)}"
    covered = _lookalike_coverage()
    assert covered == set(RULES), f"rules without a look-alike: {sorted(set(RULES) - covered)}"


def _lookalike_coverage() -> set[str]:
    """Which rules each look-alike file impersonates (from its name), minus what it legitimately triggers."""
    groups = {
        "mixin": {"ADR008", "ADR009", "ADR010", "ADR011", "ADR012"},
        "values": {"ADR013", "ADR014", "ADR015"},
    }
    covered: set[str] = set()
    for path in corpus_files("la_"):
        name = path.stem
        codes: set[str] = set()
        for key, group in groups.items():
            if key in name:
                codes |= group
        match = _RULE_IN_NAME.search(name)
        if match:
            codes.add(f"ADR{match.group(1)}")
        triggered = {code for _, code in expected_markers(path.read_text(encoding="utf-8"))}
        covered |= codes - triggered
    # ADR005's look-alike is la_adr005_*; ADR006's is the split whose downstream depends on the sensor.
    return covered


def test_lookalikes_pass() -> None:
    """No look-alike triggers the rule it imitates (the count is reported in the closing note)."""
    for path in corpus_files("la_"):
        source = path.read_text(encoding="utf-8")
        got = {f.code for f in check_source(path.name, source)}
        allowed = {code for _, code in expected_markers(source)}
        assert got <= allowed, f"{path.name} flagged {sorted(got - allowed)}"
