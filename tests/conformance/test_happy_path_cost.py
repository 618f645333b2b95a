"""The happy path costs what the provider operator's costs: the same API calls, one more at most.

Ours and the provider operator it replaces run the same job on the same emulator, one try each, and the
requests that reached the emulator are compared. The one call ours may add is the convergence lookup of
an operator whose system has no idempotent submit (``durable_converge_after_submit``): it finds the jobs
carrying the try's token, adopts the earliest and cancels the others (a submit the provider's hook resent
after losing its answer, or tries that submitted at the same instant).
"""

from __future__ import annotations

from collections import Counter
from typing import Any

import pytest

from bench.scenarios import factory
from tests.conformance.systems import SystemCase
from tests.harness import DURABLE, TaskRunner

pytestmark = pytest.mark.skipif(not DURABLE, reason="Airflow < 3.3: ours runs the provider's path as is")

PATHS = [pytest.param(False, id="sync"), pytest.param(True, id="deferrable")]


def _requests(case: SystemCase, emulator: Any, deferrable: bool, side: str) -> Counter[str]:
    emulator.lifecycle = case.lifecycle(active_reads=8)
    start = len(emulator.server.log)
    outcome = TaskRunner(factory(case, emulator, deferrable, side)).run()
    assert outcome.state == "success", outcome.error
    return Counter(f"{r.method} {r.path.split('?')[0]}" for r in emulator.server.log[start:])


@pytest.mark.parametrize("deferrable", PATHS)
def test_the_happy_path_makes_the_provider_operators_api_calls(case, emulator, deferrable):
    upstream = _requests(case, emulator, deferrable, "upstream")
    ours = _requests(case, emulator, deferrable, "ours")

    # Job ids differ between the two runs: compare the calls by endpoint, ids masked.
    def shape(calls: Counter[str]) -> Counter[str]:
        return Counter(_mask(call) for call, times in calls.items() for _ in range(times))

    extra = shape(ours) - shape(upstream)
    missing = shape(upstream) - shape(ours)
    converges = bool(getattr(type(case.make(emulator, deferrable)), "durable_converge_after_submit", False))
    assert not missing, f"ours skipped provider calls: {dict(missing)}"
    assert sum(extra.values()) <= (1 if converges else 0), f"ours added calls: {dict(extra)}"


def _mask(call: str) -> str:
    return "/".join("{id}" if part.isdigit() or len(part) >= 20 else part for part in call.split("/"))
