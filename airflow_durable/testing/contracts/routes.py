"""Placeholder: filled in below."""

from __future__ import annotations


def declared(system: str) -> frozenset[str] | None:
    return None
