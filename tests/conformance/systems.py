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
    #: Ledger operations that submit a job / cancel one.
    submit_operations: frozenset[str] = frozenset({"runs/submit", "run-now"})
    cancel_operation: str = "runs/cancel"
    #: True where a retry after a crash inside the submit call finds the job by a lookup (``durable_find``)
    #: instead of resubmitting its token: one submit call instead of two.
    finds_interrupted_submit: bool = False
    #: The external id (as the ledger names it) that a successful try reports, and the return value expected.
    reported_id: Callable[[Any], Any] = lambda outcome: outcome.xcoms["run_id"]
    expected_result: Callable[[Any], Any] = lambda external_id: None
    #: The id as the task state store holds it, for the ledger's ``external_id``.
    stored_id: Callable[[Any], Any] = lambda external_id: external_id
    #: A valid success event of the provider trigger about ``external_id`` (the ledger's id).
    success_event: Callable[[Any], Any] = lambda external_id: {
        "run_id": external_id,
        "run_page_url": "x",
        "run_state": '{"life_cycle_state": "TERMINATED", "result_state": "SUCCESS", "state_message": ""}',
        "repair_run": False,
        "errors": [],
    }
    #: ``real_event`` rewritten to be about another job, and how the error names that job.
    foreign_event: Callable[[Any], tuple[Any, str]] = lambda real_event: (
        {**real_event, "run_id": 999_999},
        "999999",
    )
    #: What the failed try's error says when the trigger gives up on status errors.
    trigger_error_text: str = "trigger failed"
    #: A stored external id of the wrong type for this system.
    malformed_id: Any = "x"
    #: Where the synchronous wait reads status, when it is not ``status_call`` (e.g. another API call).
    status_call_sync: tuple[str, str] | None = None
    #: How many status errors the synchronous wait gives up after, when not ``status_errors_to_give_up``.
    status_errors_to_give_up_sync: int | None = None

    def status_fault(self, emulator: Any, transport: str, status: int) -> Any:
        """Inject status-API errors on ``transport`` until the provider's wait gives up; return the fault."""
        method, path = (
            (self.status_call_sync or self.status_call) if transport == "sync" else self.status_call
        )
        times = self.status_errors_to_give_up
        if transport == "sync" and self.status_errors_to_give_up_sync is not None:
            times = self.status_errors_to_give_up_sync
        return emulator.faults.add(
            method=method, path_contains=path, status=status, times=times, transport=transport
        )

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
