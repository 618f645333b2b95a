"""Helpers shared by the emulator tests."""

from __future__ import annotations

import re


def api_status(error: BaseException) -> int | None:
    """The HTTP status a Databricks hook error reports: an attribute from provider 7.17, else the message."""
    status = getattr(error, "http_status_code", None)
    if status is None and (found := re.search(r"Status Code: (\d+)", str(error))):
        status = int(found.group(1))
    return status
