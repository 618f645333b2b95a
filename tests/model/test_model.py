"""The model that searches (issue 22, item 2), bounded for ``make test``: a few examples per family.

``make explore`` runs the same machines for many more steps and prints what it found
(``python -m tests.model.explore``); docs/dev/model.md describes the transitions and invariants.
"""

from __future__ import annotations

import os

import pytest

from tests.harness import DURABLE

if not DURABLE:  # before hypothesis and the model import Airflow 3.3 only modules
    pytest.skip("Airflow < 3.3: no task_state_store, nothing to model", allow_module_level=True)
pytest.importorskip("hypothesis", reason="the model runs in the main env (requirements/runtime.in)")

from hypothesis import HealthCheck, settings
from hypothesis.stateful import run_state_machine_as_test

from tests.model.machine import machine_for
from tests.model.runtime import hypothesis_storage, quiet_logs
from tests.model.systems import FAMILIES, EmulatorHost, cases_of

#: Examples per family, and rules per example, in ``make test`` (AFD_MODEL_EXAMPLES overrides).
EXAMPLES = int(os.environ.get("AFD_MODEL_EXAMPLES", "6"))
STEPS_PER_EXAMPLE = 30


@pytest.mark.parametrize("family", list(FAMILIES))
def test_the_model_finds_no_violation(family: str) -> None:
    cases = cases_of(family)
    if not cases:
        pytest.skip(f"no operator of {family} can run with the installed provider")
    host = EmulatorHost(cases[0].emulator_fixture)
    with host.running(), quiet_logs(), hypothesis_storage():
        run_state_machine_as_test(
            machine_for(family, host),
            settings=settings(
                max_examples=EXAMPLES,
                stateful_step_count=STEPS_PER_EXAMPLE,
                deadline=None,
                database=None,
                derandomize=True,
                suppress_health_check=list(HealthCheck),
                report_multiple_bugs=False,
            ),
        )
