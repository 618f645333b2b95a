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
    # Optional fields for systems that differ from Databricks (their defaults are Databricks').
    #: The state a new job starts in (first state of :meth:`lifecycle`).
    initial: str = "PENDING"
    #: The XCom key that holds the external id.
    id_xcom: str = "run_id"
    #: The provider operator's return value for a successful job with this id.
    expected_result: Callable[[Any], Any] = lambda external_id: None
    #: Ledger operations that are submit calls (created or idempotent replays).
    submit_operations: frozenset[str] = frozenset({"runs/submit", "run-now"})
    #: How the submit→persist window is closed: ``"idempotency"`` (the system dedupes a resubmission
    #: with the same token) or ``"lookup"`` (the retry finds the job by its token and does not submit).
    window_closed_by: str = "idempotency"
    #: Text the failed try's error contains when the trigger gives up on status errors.
    trigger_error_match: str = "trigger failed"
    #: ``success_event(external_id)`` → the provider trigger's success event for that job.
    success_event: Callable[[Any], dict[str, Any]] = lambda external_id: {
        "run_id": external_id,
        "run_page_url": "x",
        "run_state": '{"life_cycle_state": "TERMINATED", "result_state": "SUCCESS", "state_message": ""}',
        "repair_run": False,
        "errors": [],
    }

    def lifecycle(self, ending: str | None = None, active_reads: int = 6) -> list[str]:
        """A job that stays active for ``active_reads`` status reads, then ends (``succeeded`` by default).

        Status reads include the provider's own pre-deferral checks, so keep a few to spare.
        """
        return [self.initial] + [self.running] * active_reads + [ending or self.succeeded]

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
