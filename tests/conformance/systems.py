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
from typing import TYPE_CHECKING, Any

import pytest

if TYPE_CHECKING:
    from tests.harness import TaskRunner


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
    #: Operator arguments that make the idempotency token the user's own (``None``: the provider operator
    #: takes none), e.g. a fixed Databricks ``idempotency_token`` that every DAG run sends again.
    user_token: dict[str, Any] | None = None
    #: Why the installed *provider* operator itself cannot run here (then every cell is skipped, saying so).
    upstream_broken: Callable[[], str | None] = lambda: None
    # Optional vocabulary of systems that are not shaped like Databricks (the defaults are Databricks').
    #: The state a new job starts in (first state of :meth:`lifecycle`).
    initial: str = "PENDING"
    #: The job id as the provider's XComs carry it.
    xcom_id: Callable[[dict[str, Any]], Any] = lambda xcoms: xcoms["run_id"]
    #: The provider operator's return value for a job id.
    result_for: Callable[[Any], Any] = lambda external_id: None
    #: Ledger operations that submit a job (idempotent replays included), and the one that cancels it.
    submit_operations: frozenset[str] = frozenset({"runs/submit", "run-now"})
    cancel_operation: str = "runs/cancel"
    #: What the path of the cancel request contains (to fail it with a fault).
    cancel_path: str = "cancel"
    #: How the submit→persist window is closed: ``"idempotency"`` (the system dedupes a resubmission
    #: with the same token) or ``"lookup"`` (the retry finds the job by its token and does not submit).
    window_closed_by: str = "idempotency"
    #: ``reported_id(outcome)`` → the job id as the finished try reports it (default: ``xcom_id`` of its
    #: XComs), for systems whose id is not in an XCom (EMR steps: the return value).
    reported_id: Callable[[Any], Any] | None = None
    #: The external id as the task state store holds it, for the ledger's id (EMR steps: a list).
    stored_id: Callable[[Any], Any] = lambda external_id: external_id
    #: The provider's *sync* wait may read another endpoint than the trigger, and give up after another
    #: count of errors (``None``: the same as ``status_call`` / ``status_errors_to_give_up``).
    status_call_sync: tuple[str, str] | None = None
    status_errors_to_give_up_sync: int | None = None
    #: A stored id of the wrong type for this system.
    wrong_type_id: Any = "x"
    #: The HTTP status the "status API fails past the provider's retries" cells inject.
    transient_status: int = 503
    #: Transport of the trigger's status polls, and how many status reads the operator itself makes
    #: between submitting and deferring (a trigger fault must skip them).
    trigger_transport: str = "async"
    pre_defer_status_reads: int = 0
    #: What the failed try's error says when the trigger met a status API error.
    trigger_error_text: str = "trigger failed"
    #: Replacements for the malformed-event cells, by cell id (a shape that is valid for this system).
    malformed_events: dict[str, Any] = field(default_factory=dict)
    #: Trigger event key of the job id, and ``success_event(id)``: the event of a succeeded job.
    event_id_key: str = "run_id"
    foreign_id: Any = 999_999
    #: ``foreign_event(real_event)`` → ``(event about another job, text naming that job)``, for events
    #: whose id is nested (default: ``event_id_key`` set to ``foreign_id``).
    foreign_event: Callable[[Any], tuple[Any, str]] | None = None
    success_event: Callable[[Any], dict[str, Any]] = lambda external_id: {
        "run_id": external_id,
        "run_page_url": "x",
        "run_state": '{"life_cycle_state": "TERMINATED", "result_state": "SUCCESS", "state_message": ""}',
        "repair_run": False,
        "errors": [],
    }
    #: True where ``{"status": "error", "message": ...}`` is the provider trigger's own failure event.
    error_event_is_wellformed: bool = False
    #: Whether a request to the submit call is a lookup, not a submission (``None``: none is).
    is_lookup: Callable[[Any], bool] | None = None
    #: Operator arguments that turn the client's own retries on and, where the client applies one, make it
    #: stop reading an answer after 1 s (``{}``: the case declares none, and the lost-answer cells skip it).
    slow_client: dict[str, Any] = field(default_factory=dict)
    #: Whether ``slow_client`` makes the client stop reading after 1 s (False: it retries, never times out).
    slow_client_times_out: bool = True
    #: Whether a ledger token is one of our durable tokens (degraded runs must send none).
    is_durable_token: Callable[[Any], bool] = lambda token: token is not None and "afd-" in str(token)

    def lifecycle(self, ending: str | None = None, active_reads: int = 6) -> list[str]:
        """A job that stays active for ``active_reads`` status reads, then ends (``succeeded`` by default).

        Status reads include the provider's own pre-deferral checks, so keep a few to spare.
        """
        return [self.initial] + [self.running] * active_reads + [ending or self.succeeded]

    def submissions(self, emulator: Any) -> list[Any]:
        return emulator.ledger.submissions()

    def tokens(self, emulator: Any) -> list[str]:
        return [entry.token for entry in self.submissions(emulator)]

    def submit_calls(self, emulator: Any) -> list[Any]:
        """Every submit call, idempotent replays included."""
        return [e for e in emulator.ledger.entries if e.operation in self.submit_operations]

    def reported(self, outcome: Any) -> Any:
        """The job id the finished try reports."""
        return self.reported_id(outcome) if self.reported_id is not None else self.xcom_id(outcome.xcoms)

    def about_another_job(self, real_event: Any) -> tuple[Any, str]:
        """A well-formed trigger event about a job that is not the tracked one, and that job's id as text."""
        if self.foreign_event is not None:
            return self.foreign_event(real_event)
        return {**real_event, self.event_id_key: self.foreign_id}, str(self.foreign_id)

    def is_submit(self, request: Any) -> bool:
        """Whether ``request`` (as the emulator's fault plan sees it) is a submission of a job."""
        path = str(request.path)
        if request.method != "POST" or "cancel" in path.lower():
            return False
        if self.is_lookup is not None and self.is_lookup(request):
            return False  # a lookup sent through the submit call (Snowflake's QUERY_HISTORY statement)
        if self.cancel_operation[:1].isupper():  # the AWS services: one path per operation
            return any(path.endswith(f"/{op}") for op in self.submit_operations)
        markers = {
            "runs/submit": "runs/submit",
            "run-now": "run-now",
            "statements": "/statements",
            "jobs.insert": "/jobs",
            "jobs/run": "/run",
            "jobs/rerun": "/rerun",
        }
        return any(markers.get(op, op) in path for op in self.submit_operations)

    def lose_submit_answers(self, emulator: Any, times: int = 1) -> Any:
        """The next ``times`` submissions take effect, but their answers are lost (a 5xx after the service
        created the job); return the fault."""
        return emulator.faults.add(
            status=self.transient_status, times=times, after=True, predicate=self.is_submit
        )

    def add_sync_status_fault(self, emulator: Any, status: int) -> Any:
        """Make the provider's sync wait fail on the status API until it gives up; return the fault."""
        method, path = self.status_call_sync or self.status_call
        times = self.status_errors_to_give_up_sync or self.status_errors_to_give_up
        return emulator.faults.add(
            method=method, path_contains=path, status=status, times=times, transport="sync"
        )

    def fail_cancels(self, emulator: Any) -> Any:
        """Make every cancel request fail (HTTP 500, past the hook's own retries); return the fault."""
        return emulator.faults.add(path_contains=self.cancel_path, status=500, times=None)

    def add_trigger_fault(self, emulator: Any, status: int, times: int) -> Any:
        """Make the trigger's status polls fail ``times`` times (not the operator's own reads)."""
        method, path = self.status_call
        seen = [0]

        def after_operator_reads(request: Any) -> bool:
            seen[0] += 1
            return seen[0] > self.pre_defer_status_reads

        return emulator.faults.add(
            method=method,
            path_contains=path,
            status=status,
            times=times,
            transport=self.trigger_transport,
            predicate=after_operator_reads if self.pre_defer_status_reads else None,
        )


#: Both of an operator's paths, for ``@pytest.mark.parametrize("deferrable", PATHS)``.
PATHS = [pytest.param(False, id="sync"), pytest.param(True, id="deferrable")]


def runner_for(case: SystemCase, emulator: Any, deferrable: bool, **overrides: Any) -> TaskRunner:
    """A task runner whose tries build ``case``'s operator against ``emulator``."""
    from tests.harness import TaskRunner  # the harness imports Airflow; the case registry does not

    return TaskRunner(lambda: case.make(emulator, deferrable, **overrides))


def job_ids(case: SystemCase, emulator: Any) -> list[Any]:
    """Every job the system created (idempotent replays that returned an existing job excluded)."""
    return [entry.external_id for entry in case.submissions(emulator)]


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
