"""Fixtures of the conformance suite: one parametrized ``case`` per registered operator, and its emulator."""

from __future__ import annotations

from typing import Any

import pytest

from tests.conformance.systems import SYSTEMS, SystemCase


def case_param(case: SystemCase) -> Any:
    """``case`` as a pytest param, skipped (saying why) where the installed provider operator cannot run."""
    reason = case.upstream_broken()
    return pytest.param(case, id=case.id, marks=pytest.mark.skipif(reason is not None, reason=reason or ""))


@pytest.fixture(params=[case_param(case) for case in SYSTEMS])
def case(request: pytest.FixtureRequest) -> SystemCase:
    return request.param


@pytest.fixture
def emulator(case: SystemCase, request: pytest.FixtureRequest) -> Any:
    emulator = request.getfixturevalue(case.emulator_fixture)
    emulator.lifecycle = case.lifecycle()
    return emulator


@pytest.fixture(autouse=True)
def airflow_answers_task_states() -> Any:
    """The engine asks Airflow for a task instance's state where its record is unreadable: the harness's
    Airflow answers (``tests/harness.py``), as the supervisor channel would."""
    from tests.harness import answering_task_states

    with answering_task_states():
        yield


@pytest.fixture
def task_logs(caplog: pytest.LogCaptureFixture, capsys: pytest.CaptureFixture[str]) -> Any:
    """Everything the task logged: Airflow 3 routes operator logs through structlog to stdout."""

    def read() -> str:
        captured = capsys.readouterr()
        return "\n".join([caplog.text, captured.out, captured.err])

    return read
