"""Only ``make bench`` writes the published benchmark report; every other run writes under build/.

``make bench-quick`` once overwrote docs/benchmarks.md, its JSON and its charts with a one-operator run.
These checks read the Makefile's own recipes (``make -n``), so a recipe that points a quick run back at
docs/ fails here, and they run in well under a second (no benchmark runs).
"""

from __future__ import annotations

import os
import shlex
import shutil
import subprocess
from pathlib import Path

import pytest

from bench.__main__ import PARTIAL_OUT, PUBLISHED, QUICK_OUT, outputs, parse_args

ROOT = Path(__file__).resolve().parents[1]


def _bench_args(target: str) -> list[str]:
    """The arguments the Makefile's ``target`` passes to ``python -m bench`` (from its dry run)."""
    if shutil.which("make") is None:
        pytest.skip("make is not installed")
    # An outer make (``make test``) must not hand this dry run its flags or jobserver.
    env = {k: v for k, v in os.environ.items() if k not in ("MAKEFLAGS", "MFLAGS", "MAKELEVEL", "BENCH_ARGS")}
    proc = subprocess.run(
        ["make", "-n", "--no-print-directory", target],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    )
    lines = [line for line in proc.stdout.splitlines() if " -m bench" in line]
    assert len(lines) == 1, f"`make -n {target}` should run `python -m bench` once:\n{proc.stdout}"
    words = shlex.split(lines[0])
    return words[words.index("bench") + 1 :]


def _resolved(args: list[str]) -> list[Path]:
    # make runs its recipes in the repository's root: relative paths are relative to it.
    return [(p if p.is_absolute() else ROOT / p).resolve() for p in outputs(parse_args(args))]


def _tracked(paths: list[Path]) -> list[str]:
    rel = [str(p.relative_to(ROOT)) for p in paths if p.is_relative_to(ROOT)]
    return subprocess.run(
        ["git", "ls-files", "--", *rel], cwd=ROOT, capture_output=True, text=True, check=True
    ).stdout.split()


def test_bench_quick_writes_under_build_only() -> None:
    paths = _resolved(_bench_args("bench-quick"))
    build = (ROOT / "build").resolve()
    assert all(p.is_relative_to(build) for p in paths), f"make bench-quick writes outside build/: {paths}"
    assert not _tracked(paths), f"make bench-quick overwrites tracked files: {_tracked(paths)}"
    assert "build/" in (ROOT / ".gitignore").read_text().replace("/build/", "build/")


def test_make_bench_writes_the_published_report() -> None:
    """The one target that publishes: docs/benchmarks.{md,json} and docs/img/benchmarks/."""
    assert _resolved(_bench_args("bench")) == [p.resolve() for p in PUBLISHED.values()]


@pytest.mark.parametrize(
    ("argv", "where"),
    [
        (["--quick"], QUICK_OUT),
        (["--tiny"], QUICK_OUT),
        (["--sections", "calls"], PARTIAL_OUT),
        (["--cases", "batch"], PARTIAL_OUT),
        (["--storm", "0"], PARTIAL_OUT),
        (["--report-only", "a.json", "b.json"], PARTIAL_OUT),
    ],
)
def test_partial_runs_default_to_build(argv: list[str], where: Path) -> None:
    """A run of fewer sections, operators or no storm is not the published report: not even by default."""
    md, js, charts = outputs(parse_args(argv))
    assert (md, js, charts) == (where / "benchmarks.md", where / "benchmarks.json", where / "img")


def test_explicit_paths_win() -> None:
    md, js, charts = outputs(parse_args(["--out", "x", "--md", "y.md"]))
    assert (md, js, charts) == (Path("y.md"), Path("x/benchmarks.json"), Path("x/img"))


#: The published evidence: only ``make bench`` and ``make reliability`` write it.
PUBLISHED_FILES = ("docs/benchmarks.md", "docs/benchmarks.json", "docs/img/benchmarks", "docs/reliability.")
#: Targets that write tracked files on purpose: the publishers, and generators that rewrite what is
#: generated from a source of truth (at a consistent commit they change nothing: tests/test_catalogue.py
#: fails when the tables are stale; `make lock` keeps every pin unless an .in file changed).
WRITERS = {"bench", "reliability", "catalogue-docs", "lock", "lock-upgrade"}


def test_no_other_make_target_writes_the_published_evidence() -> None:
    """Every other target's recipe (its dry run, prerequisites included) leaves the published pages alone:
    a quick or CI run that pointed at them would fail here."""
    if shutil.which("make") is None:
        pytest.skip("make is not installed")
    env = {k: v for k, v in os.environ.items() if k not in ("MAKEFLAGS", "MFLAGS", "MAKELEVEL")}
    database = subprocess.run(
        ["make", "-qp"], cwd=ROOT, env=env, capture_output=True, text=True, timeout=60, check=False
    ).stdout
    targets = {
        line.split(":", 1)[0]
        for line in database.splitlines()
        if line and line[0].isalnum() and ":" in line and "=" not in line.split(":", 1)[0]
    }
    targets = {
        t for t in targets if (ROOT / "Makefile").read_text().count(t) and "/" not in t and "%" not in t
    }
    assert {"bench-quick", "runtime-tier", "test", "demo", "docs"} <= targets, sorted(targets)
    for target in sorted(targets - WRITERS):
        recipe = subprocess.run(
            ["make", "-n", "--no-print-directory", target],
            cwd=ROOT,
            env=env,
            capture_output=True,
            text=True,
            timeout=60,
            check=False,
        ).stdout
        named = [p for p in PUBLISHED_FILES if p in recipe]
        assert not named, f"`make {target}` names published files {named}:\n{recipe[-2000:]}"
        for line in recipe.splitlines():
            words = shlex.split(line) if " -m bench" in line or "reliability_report" in line else []
            if "bench" in words and "-m" in words:  # a benchmark run: where do its defaults write?
                published = {p.resolve() for p in PUBLISHED.values()}
                outs = _resolved(words[words.index("bench") + 1 :])
                assert not published & set(outs), f"`make {target}` runs a bench that publishes: {line}"
            if "reliability_report" in line:
                assert "--check" in words, f"`make {target}` rewrites the reliability page: {line}"
