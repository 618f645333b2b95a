"""`airflow-durable check` on the example DAGs: "before" files show their anti-patterns, the rest is clean.

The before/after pairs are the patterns the docs teach (docs/examples.md); the findings here are the
same ones a user gets on their own DAGs, so the examples and the linter cannot drift apart.
"""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from tests.examples.registry import EXAMPLE_DAGS, ROOT

#: before file → (its fixed version, the rule codes the before file must trigger).
PAIRS = {
    "before_variable_retry_state.py": ("after_task_state_store.py", {"ADR001", "ADR003", "ADR004"}),
    "before_submit_and_sensor.py": ("after_one_durable_task.py", {"ADR005", "ADR006", "ADR007"}),
}


def check(*paths: str) -> tuple[int, dict]:
    done = subprocess.run(
        [sys.executable, "-m", "airflow_durable.cli", "check", "--isolated", "--format", "json",
         "--fail-on", "info", *paths],
        capture_output=True, text=True, timeout=120, cwd=ROOT,
    )  # fmt: skip
    assert done.returncode in (0, 1), done.stderr
    return done.returncode, json.loads(done.stdout)


def test_every_before_file_has_a_pair_and_expected_findings():
    befores = sorted(p.name for p in EXAMPLE_DAGS.glob("before_*.py"))
    assert befores == sorted(PAIRS)
    for after, _ in PAIRS.values():
        assert (EXAMPLE_DAGS / after).is_file(), after


@pytest.mark.parametrize("before", sorted(PAIRS))
def test_before_file_shows_its_anti_patterns(before):
    rc, report = check(f"example_dags/{before}")
    assert rc == 1
    assert report["errors"] == []
    assert {f["code"] for f in report["findings"]} == PAIRS[before][1]


def test_every_other_example_dag_is_clean():
    others = sorted(
        f"example_dags/{p.name}" for p in EXAMPLE_DAGS.glob("*.py") if not p.name.startswith("before_")
    )
    assert any("after_" in p for p in others) and any("durable_" in p for p in others)
    rc, report = check(*others)
    assert (rc, report["findings"], report["errors"]) == (0, [], [])
    assert report["files_checked"] == len(others)
