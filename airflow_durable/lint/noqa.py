"""Inline suppressions: ``# noqa: ADR001`` (or ``# noqa: ADR001, ADR005``) on the reported line.

Comments are read with the tokenizer, so a ``# noqa`` inside a string literal does not count. A bare
``# noqa`` suppresses every code on its line, as flake8 and ruff do.
"""

from __future__ import annotations

import io
import tokenize

ALL = frozenset({"*"})


def parse_comment(comment: str) -> frozenset[str] | None:
    """The codes a comment suppresses, ``ALL`` for a bare noqa, None when it is not a noqa comment."""
    body = comment.lstrip("#").strip()
    for chunk in body.split("#"):
        chunk = chunk.strip()
        if not chunk.lower().startswith("noqa"):
            continue
        rest = chunk[4:].strip()
        if not rest.startswith(":"):
            return ALL
        codes = {c.strip().upper() for c in rest[1:].replace(",", " ").split()}
        return frozenset(c for c in codes if c)
    return None


def suppressions(source: str) -> dict[int, frozenset[str]]:
    out: dict[int, frozenset[str]] = {}
    try:
        tokens = list(tokenize.generate_tokens(io.StringIO(source).readline))
    except (tokenize.TokenError, IndentationError, SyntaxError):
        return out
    for tok in tokens:
        if tok.type == tokenize.COMMENT:
            codes = parse_comment(tok.string)
            if codes is not None:
                out[tok.start[0]] = codes
    return out


def is_suppressed(table: dict[int, frozenset[str]], line: int, code: str) -> bool:
    codes = table.get(line)
    return codes is not None and (codes is ALL or "*" in codes or code in codes)
