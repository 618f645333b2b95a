"""``check`` on the real-DAG corpus (tests/lint/real/): per-rule precision and recall against the
``# expect:`` markers written before the checker ever ran on those files.

The table and the time the whole corpus took are printed at the end of the test run (tests/reporting.py);
the time is reported, never asserted. ``python -m tests.lint.test_real_corpus`` prints the same table.
"""

from __future__ import annotations

import json
import time
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

from airflow_durable.lint import RULES, Severity, check_source
from tests.lint.conftest import HERE, expected_markers

REAL = HERE / "real"
# Informational, fires on every catalogue operator: measured by the drop-in tests, not marked here.
UNMARKED = {"ADR007"}
PRECISION_TARGET, RECALL_TARGET = 0.95, 0.90


@dataclass
class Score:
    tp: Counter[str] = field(default_factory=Counter)
    fp: Counter[str] = field(default_factory=Counter)
    fn: Counter[str] = field(default_factory=Counter)
    wrong: list[str] = field(default_factory=list)  # "file:line CODE (unexpected|missed)"
    flagged_clean: list[str] = field(default_factory=list)
    files: int = 0
    seconds: float = 0.0
    cpu_seconds: float = 0.0  # wall time on a shared machine says little; CPU time is the cost


def real_files() -> list[Path]:
    return sorted(REAL.glob("*.py"))


def score() -> Score:
    result = Score()
    started, cpu = time.perf_counter(), time.process_time()
    got_by_file = {}
    for path in real_files():
        source = path.read_text(encoding="utf-8")
        got_by_file[path] = (source, check_source(path.name, source))
    result.seconds = time.perf_counter() - started
    result.cpu_seconds = time.process_time() - cpu
    for path, (source, findings) in got_by_file.items():
        result.files += 1
        got = {(f.line, f.code) for f in findings if f.code not in UNMARKED}
        expected = expected_markers(source)
        for _line, code in got & expected:
            result.tp[code] += 1
        for line, code in sorted(got - expected):
            result.fp[code] += 1
            result.wrong.append(f"{path.name}:{line} {code} unexpected")
        for line, code in sorted(expected - got):
            result.fn[code] += 1
            result.wrong.append(f"{path.name}:{line} {code} missed")
        if not expected and got:
            result.flagged_clean.append(path.name)
    return result


def _ratio(num: int, den: int) -> float | None:
    return num / den if den else None


def table(result: Score) -> list[str]:
    lines = [f"{'rule':<7} {'sev':<7} {'TP':>3} {'FP':>3} {'FN':>3} {'precision':>9} {'recall':>7}"]
    codes = sorted((set(result.tp) | set(result.fp) | set(result.fn)) - UNMARKED)
    for code in codes:
        tp, fp, fn = result.tp[code], result.fp[code], result.fn[code]
        p, r = _ratio(tp, tp + fp), _ratio(tp, tp + fn)
        lines.append(
            f"{code:<7} {str(RULES[code].severity):<7} {tp:>3} {fp:>3} {fn:>3} "
            f"{'-' if p is None else f'{p:.2f}':>9} {'-' if r is None else f'{r:.2f}':>7}"
        )
    return lines


def test_real_corpus_precision_and_recall() -> None:
    from tests.reporting import record

    result = score()
    assert result.files >= 60
    section = "airflow-durable check on the real-DAG corpus (tests/lint/real)"
    # Lines are printed sorted: the numeric prefixes keep the table in order.
    for index, line in enumerate(table(result)):
        record(section, f"{index:02d} {line}")
    record(
        section,
        f"99 {result.files} files checked in {result.seconds:.2f}s wall, {result.cpu_seconds:.2f}s CPU; "
        f"{len(result.flagged_clean)} clean file(s) flagged",
    )
    assert result.flagged_clean == [], f"findings on clean files: {result.flagged_clean}"
    failing = []
    for code in sorted(set(result.tp) | set(result.fp) | set(result.fn)):
        if RULES[code].severity < Severity.WARNING:
            continue
        tp, fp, fn = result.tp[code], result.fp[code], result.fn[code]
        if tp + fp and tp / (tp + fp) < PRECISION_TARGET or tp + fn and tp / (tp + fn) < RECALL_TARGET:
            failing.append(code)
    assert not failing, f"rules under target: {failing}; differences: {result.wrong}"


def test_manifest_names_every_file() -> None:
    manifest = json.loads((REAL / "MANIFEST.json").read_text(encoding="utf-8"))
    assert sorted(entry["file"] for entry in manifest) == [p.name for p in real_files()]
    for entry in manifest:
        if entry["origin"] == "reduced":
            assert entry["repository"] and entry["path"] and entry["license"] == "Apache-2.0", entry


if __name__ == "__main__":  # pragma: no cover - a developer's view of the same numbers
    outcome = score()
    print("\n".join(table(outcome)))
    print(f"{outcome.files} files in {outcome.seconds:.2f}s wall, {outcome.cpu_seconds:.2f}s CPU")
    print(f"clean files flagged: {outcome.flagged_clean}")
    print("\n".join(outcome.wrong))
