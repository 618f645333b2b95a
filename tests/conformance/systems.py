"""The registry of durable operators the conformance suite runs against.

Each system registers its operators in a module of its own, ``tests/conformance/cases/<system>.py``,
as a list ``CASES`` of ``SystemCase``: how to build the operator, how to read its emulator's ledger
and drive its job lifecycle. The cells themselves live once, in ``test_failure_model.py``.
"""

from __future__ import annotations

import importlib
import pkgutil
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any


@dataclass(frozen=True)
class SystemCase:
    id: str
    emulator_fixture: str
    #: ``make(emulator, deferrable, **overrides)`` → a fresh operator (one per try, like a fresh parse).
    make: Callable[..., Any]
    #: Raw states in the emulator's vocabulary.
    running: str
    succeeded: str
    failed: str
    cancelled: str
    unknown: str
    #: ``(method, path_contains)`` of the status call; the trigger's polls use the same endpoint.
    status_call: tuple[str, str]
    #: How many status errors in a row the provider's retries give up after, with ``make``'s settings.
    status_errors_to_give_up: int
    #: XCom keys the provider operator pushes on success, per path.
    xcoms_sync: frozenset[str]
    xcoms_deferrable: frozenset[str]
    #: The task-state-store key (part of the public API: fixed forever).
    external_id_key: str
    #: Cells this operator cannot meet: ``{cell: reason}``; the suite asserts the documented gap instead.
    notimpl: dict[str, str] = field(default_factory=dict)
    #: Why the installed *provider* operator itself cannot run here (then every cell is skipped, saying so).
    upstream_broken: Callable[[], str | None] = lambda: None

    def lifecycle(self, ending: str | None = None, active_reads: int = 6) -> list[str]:
        """A job that stays active for ``active_reads`` status reads, then ends (``succeeded`` by default).

        Status reads include the provider's own pre-deferral checks, so keep a few to spare.
        """
        return ["PENDING"] + [self.running] * active_reads + [ending or self.succeeded]

    def submissions(self, emulator: Any) -> list[Any]:
        return emulator.ledger.submissions()

    def tokens(self, emulator: Any) -> list[str]:
        return [entry.token for entry in self.submissions(emulator)]



def _collect() -> list[SystemCase]:
    from tests.conformance import cases

    found: list[SystemCase] = []
    for module in sorted(pkgutil.iter_modules(cases.__path__), key=lambda m: m.name):
        found.extend(importlib.import_module(f"{cases.__name__}.{module.name}").CASES)
    ids = [case.id for case in found]
    if len(ids) != len(set(ids)):
        raise RuntimeError(f"duplicate conformance case ids: {sorted(ids)}")
    return found


SYSTEMS: list[SystemCase] = _collect()
