"""Section "triggerer": scale on one real ``airflow triggerer`` (see docs/benchmarks.md)."""

from __future__ import annotations

from typing import Any


def run(settings: dict[str, Any], env: dict[str, str]) -> list[dict[str, Any]]:
    return [{"section": "triggerer", "ran": False, "reason": "not implemented yet"}]
