"""Where a system has no idempotency key, the token travels in text a user also reads.

A dbt Cloud run's ``cause`` and EMR steps' ``Name``: the user's text stays readable (truncated to make
room, never the token), and `airflow_durable.engine.tokens_in` finds the token again. Pure string
functions: no provider import.
"""

from __future__ import annotations

import json
from typing import Any

from airflow_durable.identity_tags import SUBMIT_ONLY, marker

__all__ = ["CAUSE_IDENTITY_KEY", "CAUSE_MODE_KEY", "CAUSE_TOKEN_KEY", "cause_with_token", "marked_name"]

#: The keys the token and the task instance's identity go under when the cause is a JSON object
#: (OpenLineage parent-job injection).
CAUSE_TOKEN_KEY = "airflow_durable_token"
CAUSE_IDENTITY_KEY = "airflow_durable_ti"
#: Set to `SUBMIT_ONLY` when the run's task only submits it.
CAUSE_MODE_KEY = "airflow_durable_mode"


def cause_with_token(
    reason: str | None, token: str, limit: int, identity: str | None = None, submit_only: bool = False
) -> str:
    """The run ``cause`` carrying ``token`` (and ``identity``): at most ``limit`` characters, neither cut.

    A plain reason gets `` [<token>]`` (`` [<identity> <token>]``) appended, truncated with ``...`` to make
    room. A JSON object (what ``openlineage_inject_parent_job_info`` writes) gets them as more keys, so
    consumers can still parse it; if that does not fit, the ``root`` block is dropped (as the provider
    itself does), and failing that the plain form is used.
    """
    text = reason or ""
    try:
        parsed = json.loads(text) if text.lstrip().startswith("{") else None
    except ValueError:
        parsed = None
    if isinstance(parsed, dict):
        for candidate in (parsed, {k: v for k, v in parsed.items() if k != "root"}):
            ours = {CAUSE_TOKEN_KEY: token, **({CAUSE_IDENTITY_KEY: identity} if identity else {})}
            if submit_only:
                ours[CAUSE_MODE_KEY] = SUBMIT_ONLY
            serialized = json.dumps({**candidate, **ours}, separators=(",", ":"))
            if len(serialized) <= limit:
                return serialized
    suffix = f" {marker(identity, token, submit_only)}" if identity else f" [{token}]"
    room = limit - len(suffix)
    if room < 0:
        raise ValueError(f"token {token!r} does not fit in a {limit}-character cause")
    if len(text) > room:
        text = text[: max(room - 3, 0)].rstrip() + "..." if room >= 3 else ""
    return f"{text}{suffix}" if text else token


def marked_name(name: Any, marker: str, limit: int) -> str:
    """``"<name> <marker>"`` in at most ``limit`` characters: the name is cut (``…``), never the marker."""
    text = str(name or "").strip()
    room = limit - len(marker) - 1
    readable = text if len(text) <= room else text[: room - 1] + "…"
    return f"{readable} {marker}" if readable else marker
