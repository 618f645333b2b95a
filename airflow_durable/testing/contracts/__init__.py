"""The services' own published contracts, checked on every request an emulator serves.

An emulator that answers differently from the real service lets every test pass while users meet the
difference in production. So each emulator validates, in its request path, what it receives and what it
answers against a contract the service's owner publishes, never against our own reading of it:

* AWS (Batch, EMR, EMR Serverless, EMR on EKS, Redshift Data, and whatever passes through to moto):
  botocore's service model of the operation, with botocore's own ``ParamValidator`` and response parser;
* Databricks: the Databricks-maintained SDK's Jobs API classes (``databricks.sdk.service.jobs``);
* BigQuery: the BigQuery v2 discovery document that google-api-python-client ships;
* Snowflake SQL API and dbt Cloud, which publish no machine-readable contract: the documented shapes,
  written down once in ``snowflake_sql_api_v2.json`` / ``dbt_cloud_v2.json`` beside this module, every
  field with the documentation page it comes from.

Modes (environment variable ``AIRFLOW_DURABLE_EMULATOR_CONTRACTS``):

``off``
    no checks.
``record`` (default)
    every violation is kept in `violations` and on the emulator's ``contract_violations``; a request
    the service would reject (a missing required member, a constraint such as a token's length or
    characters) is answered with the service's own validation error, as the service does.
``strict`` (this project's test suite)
    as ``record``, and an answer that breaks the contract is replaced by a 500 naming the violation;
    the pytest plugin fails the test that caused any violation (`expect_violations` marks deliberate
    ones). A route the emulator serves without declaring it in `airflow_durable.testing.contracts.routes`
    is a violation too, so the fidelity page (``docs/dev/emulator-fidelity.md``) stays complete.

The libraries a contract needs (``pip install "airflow-durable[testing]"``) are loaded once per process, on
first use. Where one is missing (`Contract.available` says which), strict mode fails: starting the
emulator raises `ContractViolation`, and a request it serves is answered with a 500 naming the library
and recorded as a violation. Record mode serves such an emulator unchecked and warns once per system
(`ContractUnavailableWarning`). This package imports nothing from Airflow.
"""

from __future__ import annotations

import contextlib
import os
import threading
import warnings
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import ClassVar, Literal

from airflow_durable.testing._core import Request, Response

__all__ = [
    "ENV",
    "Contract",
    "ContractGuard",
    "ContractUnavailableWarning",
    "ContractViolation",
    "Problem",
    "Violation",
    "expect_violations",
    "mode",
    "seen_operations",
    "violations",
]

#: The environment variable that sets the mode: ``off``, ``record`` (default) or ``strict``.
ENV = "AIRFLOW_DURABLE_EMULATOR_CONTRACTS"
MODES = ("off", "record", "strict")
Direction = Literal["request", "response", "route"]


def mode() -> str:
    """The mode in force (read at every request, so a test may change it with ``monkeypatch.setenv``)."""
    value = os.environ.get(ENV, "record").strip().lower() or "record"
    if value not in MODES:
        raise ValueError(f"{ENV}={value!r}: use one of {', '.join(MODES)}")
    return value


class ContractViolation(AssertionError):
    """An emulator broke its service's published contract (or was sent a request the service rejects)."""


class ContractUnavailableWarning(UserWarning):
    """Record mode: an emulator serves unchecked because its contract's library is not installed."""


#: What installs every contract's library (the emulators' own needs too).
INSTALL_HINT = 'pip install "airflow-durable[testing]"'


@dataclass(frozen=True)
class Problem:
    """One finding: where in the message (``path``), what is wrong, and whether the service rejects it."""

    path: str
    message: str
    #: For a request: the service answers a validation error (400) instead of acting on it.
    rejects: bool = True

    def __str__(self) -> str:
        return f"{self.path or '<body>'}: {self.message}"


@dataclass(frozen=True)
class Violation:
    """The problems of one message an emulator received or sent."""

    system: str
    operation: str
    direction: Direction
    problems: tuple[Problem, ...]
    #: What it was checked against (``Contract.source``).
    source: str
    expected: bool = False

    def __str__(self) -> str:
        listed = "; ".join(str(p) for p in self.problems)
        return f"{self.system} {self.operation} {self.direction} breaks {self.source}: {listed}"


_lock = threading.Lock()
_violations: list[Violation] = []
_expecting = 0
_answering = 0
#: ``(system, operation) -> what it was validated against`` for every call served since the process began.
_seen: dict[tuple[str, str], str] = {}
#: Systems whose missing contract library record mode already warned about (once per process).
_warned_unavailable: set[str] = set()


def violations() -> list[Violation]:
    """Every violation recorded in this process, oldest first (a snapshot)."""
    with _lock:
        return list(_violations)


def seen_operations() -> dict[tuple[str, str], str]:
    """Every ``(system, operation)`` an emulator served in this process, and what checked it."""
    with _lock:
        return dict(_seen)


@contextlib.contextmanager
def expect_violations(answer: bool = False) -> Iterator[list[Violation]]:
    """Mark the violations recorded inside the block as deliberate (a negative test); yields them.

    ``answer``: let a deliberately broken answer through even in strict mode (a test that scripts what
    the contract does not allow, e.g. a status outside the documented enum, to see how the operator
    copes), instead of the 500 that names it.
    """
    global _expecting, _answering
    with _lock:
        start = len(_violations)
        _expecting += 1
        _answering += 1 if answer else 0
    found: list[Violation] = []
    try:
        yield found
    finally:
        with _lock:
            _expecting -= 1
            _answering -= 1 if answer else 0
            found.extend(_violations[start:])


def _record(violation: Violation) -> Violation:
    with _lock:
        if _expecting:
            violation = Violation(**{**violation.__dict__, "expected": True})
        _violations.append(violation)
    return violation


# --------------------------------------------------------------------------- what a contract is
class Contract:
    """What one service publishes about its API, and how to check a message against it.

    A subclass names each call (`operation`) and checks requests and answers; it reports problems, it
    never raises for them. ``unvalidated`` lists operations (or parts of them) it cannot check, with why.
    """

    system: ClassVar[str] = ""

    @property
    def source(self) -> str:
        """What the checks are made against, with its version (for messages and the fidelity page)."""
        raise NotImplementedError

    @property
    def available(self) -> str | None:
        """``None`` when the contract can be checked here, else why not (a library is missing)."""
        return None

    def operation(self, request: Request) -> str | None:
        """The operation a request calls (``None``: not one this contract knows)."""
        raise NotImplementedError

    def check_request(self, operation: str, request: Request) -> list[Problem]:
        return []

    def check_response(self, operation: str, request: Request, response: Response) -> list[Problem]:
        """Problems of an answer (every status: a contract that documents no error body ignores >= 300)."""
        return []


@dataclass
class ContractGuard:
    """One emulator's checkpoint: validates each served request and answer against ``contract``.

    Args:
        contract: the service's contract.
        reject: ``(status, message) -> Response`` in the service's error shape, for a rejected request.
        declared: the operations this emulator declares it serves (`routes`); ``None``: do not check.
    """

    contract: Contract
    reject: Callable[[int, str], Response]
    declared: frozenset[str] | None = None
    violations: list[Violation] = field(default_factory=list)

    def __post_init__(self) -> None:
        # Strict mode promises that every answer was checked: an emulator that could check nothing must
        # not start, rather than pass every test unchecked.
        missing = self.contract.available
        if missing is not None and mode() == "strict":
            raise ContractViolation(self._unavailable_message(missing))

    def _unavailable_message(self, missing: str) -> str:
        return (
            f"{ENV}=strict, but the {self.contract.system} emulator cannot check its service's contract: "
            f"{missing}. Install it ({INSTALL_HINT}), or set {ENV}=record to serve unchecked"
        )

    def _unavailable(self, missing: str, request: Request) -> Response | None:
        """A request to an emulator whose contract cannot be checked: strict fails it, record warns once."""
        if mode() != "strict":
            with _lock:
                first = self.contract.system not in _warned_unavailable
                _warned_unavailable.add(self.contract.system)
            if first:
                warnings.warn(
                    f"the {self.contract.system} emulator serves without checking its service's contract: "
                    f"{missing} ({INSTALL_HINT})",
                    ContractUnavailableWarning,
                    stacklevel=2,
                )
            return None
        # The mode was switched to strict after the emulator started: fail this call and the test.
        message = self._unavailable_message(missing)
        violation = self._violation(
            f"{request.method} {request.path}", "request", [Problem("", message, rejects=False)]
        )
        return self.reject(500, str(violation))

    def _violation(self, operation: str, direction: Direction, problems: list[Problem]) -> Violation:
        found = _record(
            Violation(
                self.contract.system, operation, direction, tuple(problems), source=self.contract.source
            )
        )
        self.violations.append(found)
        return found

    @staticmethod
    def _checked(check: Callable[..., list[Problem]], *args: object) -> list[Problem]:
        # A bug in a check must neither drop the connection nor pass silently: it is a violation too.
        try:
            return check(*args)
        except Exception as err:
            return [Problem("", f"the check itself failed: {type(err).__name__}: {err}", rejects=False)]

    def before(self, request: Request) -> Response | None:
        """Check a request before the emulator handles it; an answer here replaces the handler's."""
        if mode() == "off":
            return None
        missing = self.contract.available
        if missing is not None:
            return self._unavailable(missing, request)
        operation = self.contract.operation(request)
        if operation is None:
            return None
        with _lock:
            _seen[(self.contract.system, operation)] = self.contract.source
        own = ":" not in operation  # "<service>:<Operation>": another AWS service, forwarded to moto
        if self.declared is not None and own and operation not in self.declared and mode() == "strict":
            self._violation(
                operation,
                "route",
                [
                    Problem(
                        "",
                        "this route is not declared in airflow_durable.testing.contracts.routes (nor on "
                        "docs/dev/emulator-fidelity.md): declare who calls it and what validates it",
                        rejects=False,
                    )
                ],
            )
        problems = self._checked(self.contract.check_request, operation, request)
        if not problems:
            return None
        violation = self._violation(operation, "request", problems)
        rejected = [p for p in problems if p.rejects]
        if rejected:
            return self.reject(400, f"request rejected by the service's contract: {violation}")
        return None

    def after(self, request: Request, response: Response | None) -> Response | None:
        """Check an answer; in strict mode one that breaks the contract becomes a 500 naming it."""
        if response is None or mode() == "off" or self.contract.available is not None:
            return response
        operation = self.contract.operation(request)
        if operation is None:
            return response
        problems = self._checked(self.contract.check_response, operation, request, response)
        if not problems:
            return response
        violation = self._violation(operation, "response", problems)
        if mode() == "strict" and not (violation.expected and _answering):
            return self.reject(500, f"emulator answer breaks the service's contract: {violation}")
        return response


def strict_failures(since: int = 0) -> list[Violation]:
    """Unexpected violations recorded since index ``since`` of `violations` (what fails a strict test)."""
    with _lock:
        return [v for v in _violations[since:] if not v.expected]


def recorded_count() -> int:
    with _lock:
        return len(_violations)
