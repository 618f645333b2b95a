"""``make bench-quick`` keeps working: the smallest benchmark run writes a report, its JSON and charts.

No timing is asserted (benchmarks report numbers, they do not judge them); the test checks that the
command runs, measures both operators, and finds what the harness must find: the durable reconnect submits
nothing where the upstream deferrable operator resubmits. Main env only (matplotlib is in its lock).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from airflow_durable import shims

ROOT = Path(__file__).resolve().parents[1]

pytestmark = [
    pytest.mark.skipif(
        not shims.DURABLE_RUNTIME, reason="the benchmarks compare durable runs: Airflow >= 3.3"
    ),
]


def _tracked_files() -> dict[str, tuple[int, int]]:
    """Every tracked file's (mtime, size): a run that writes one changes its mtime even with equal text."""
    names = subprocess.run(
        ["git", "ls-files", "-z"], cwd=ROOT, capture_output=True, text=True, check=True
    ).stdout.split("\0")
    out = {}
    for name in filter(None, names):
        try:
            st = (ROOT / name).stat()
        except FileNotFoundError:  # deleted in the working tree
            continue
        out[name] = (st.st_mtime_ns, st.st_size)
    return out


@pytest.fixture(autouse=True)
def _no_tracked_file_written() -> Iterator[None]:
    """The tests' bench runs write to temporary directories only, never over a tracked file (the
    published report included)."""
    if not (ROOT / ".git").exists():
        yield
        return
    before = _tracked_files()
    yield
    after = _tracked_files()
    changed = sorted(n for n in before.keys() | after.keys() if before.get(n) != after.get(n))
    assert not changed, f"a bench run in the tests wrote tracked files: {changed}"


def test_bench_tiny_writes_the_report(tmp_path: Path) -> None:
    pytest.importorskip("matplotlib", reason="the bench extra (matplotlib) is locked into the main env only")
    md, js, charts = tmp_path / "benchmarks.md", tmp_path / "benchmarks.json", tmp_path / "img"
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PYTEST_", "AIRFLOW__"))}
    env.pop("AIRFLOW_HOME", None)
    env["TMPDIR"] = str(tmp_path)  # everything the run creates lands here, and goes with it
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "bench",
            "--tiny",
            "--md",
            str(md),
            "--json",
            str(js),
            "--charts",
            str(charts),
        ],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=600,  # a hang guard only: the run takes ~35 CPU-seconds, minutes on a loaded machine
    )
    assert proc.returncode == 0, proc.stderr[-4000:]
    document = json.loads(js.read_text())
    assert document["failures"] == []
    calls = {(r["path"], r["scenario"], r["side"]): r for r in document["records"] if r["section"] == "calls"}
    # Both operators ran every scenario of both paths.
    assert {side for (_, _, side) in calls} == {"upstream", "ours"}
    # The machine is shared: every figure says what load it was measured under.
    assert all(isinstance(r.get("load"), float) for r in document["records"] if r["section"] == "calls")
    retry = calls[("deferrable", "kill-before-defer", "ours")]["tries"][1]
    assert retry["state"] == "success" and retry["total"]["submit"] == 0
    assert retry["before_wait"]["store_get"] >= 1 and retry["before_wait"]["status"] >= 1
    upstream_retry = calls[("deferrable", "kill-before-defer", "upstream")]["tries"][1]
    assert upstream_retry["total"]["submit"] == 1  # the provider's deferrable path resubmits
    text = md.read_text()
    for heading in (
        "## API calls and state-store operations per task",
        "## Duplicate job-minutes",
        "## Worker-slot seconds",
        "## DAG-parse cost",
        "Why each of our store operations exists",
    ):
        assert heading in text
    assert (charts / "duplicates.svg").exists() and (charts / "slots.svg").exists()
    assert not [p for p in tmp_path.iterdir() if p.name.startswith("bench-")]  # temp homes removed


def test_merged_report_names_the_commit_each_section_ran_on() -> None:
    """Re-merging a report with a new section's run keeps the commits the report named for its others."""
    from bench.__main__ import _merge

    def document(commit: str, sections: list[str]) -> dict:
        return {
            "meta": {"commit": commit, "dirty": False, "duration_s": 1},
            "settings": {"sections": sections, "command": f"run at {commit}"},
            "failures": [],
            "records": [{"section": s} for s in sections],
        }

    earlier = _merge([document("aaa", ["calls"]), document("bbb", ["slots"])])
    assert earlier["meta"]["section_commits"] == {"calls": "aaa", "slots": "bbb"}
    again = _merge([earlier, document("ccc", ["dagtest"])])
    assert again["meta"]["section_commits"] == {"calls": "aaa", "slots": "bbb", "dagtest": "ccc"}
    assert again["settings"]["command"] == "run at aaa + run at bbb + run at ccc"
