"""Shared helpers for the lint tests: the corpus location and its ``# expect:`` markers."""

from __future__ import annotations

import io
import tokenize
from pathlib import Path

import pytest

HERE = Path(__file__).parent
CORPUS = HERE / "corpus"
GOLDEN = HERE / "golden"
MIGRATE = HERE / "migrate_cases"


def expected_markers(source: str) -> set[tuple[int, str]]:
    """(line, code) for every ``# expect: CODE [CODE...]`` comment in a corpus file."""
    out: set[tuple[int, str]] = set()
    for tok in tokenize.generate_tokens(io.StringIO(source).readline):
        if tok.type != tokenize.COMMENT:
            continue
        for chunk in tok.string.split("#"):
            chunk = chunk.strip()
            if chunk.startswith("expect:"):
                out |= {(tok.start[0], code) for code in chunk[len("expect:") :].split()}
    return out


def corpus_files(prefix: str = "") -> list[Path]:
    return sorted(p for p in CORPUS.glob(f"{prefix}*.py"))


@pytest.fixture
def corpus_dir() -> Path:
    return CORPUS


# The real-DAG corpus is data for the checker, never a test module.
collect_ignore_glob = ["real/*.py"]
