"""For every registered durable operator: its jobs carry their task instance's identity, and ``durable_find``
finds them again from the system alone (issue 23), as the catalogue's `Lookup` declares.

The job is submitted through the real operator and found through its ``durable_find`` against the emulator's
list call: jobs of two generations, not a job of another task instance, and, where the list lags, only
after the lag. An operator whose system offers no way (the catalogue says ``notimpl``) raises
``NotImplementedError`` with the catalogue's reason instead; the gap is asserted, never skipped.
"""

from __future__ import annotations

import datetime as dt
from typing import Any

import pytest

from airflow_durable import catalogue
from airflow_durable.engine import DurableToken
from airflow_durable.identity_tags import task_identity
from tests.conformance.systems import SystemCase, job_ids, runner_for
from tests.harness import DURABLE, TaskRunner

pytestmark = pytest.mark.skipif(not DURABLE, reason="Airflow < 3.3: no durable submit, no identity carried")


def _lookup(case: SystemCase) -> catalogue.Lookup:
    return catalogue.LOOKUPS[case.external_id_key]


def _identity(runner: TaskRunner) -> str:
    ti = runner.ti
    return task_identity(ti.dag_id, ti.run_id, ti.task_id, ti.map_index)


def _find(case: SystemCase, emulator: Any, identity: str) -> list[Any]:
    return case.make(emulator, False).durable_find(identity)


def _implemented(case: SystemCase) -> None:
    if not _lookup(case).implemented:
        pytest.skip(f"{case.id}: no lookup (asserted in test_a_system_without_a_lookup_says_why)")


def _tokens(case: SystemCase, emulator: Any) -> dict[str, str]:
    """Job id (as text) → the token its submission carried, as the emulator's ledger saw it."""
    return {str(case.stored_id(entry.external_id)): str(entry.token) for entry in case.submissions(emulator)}


def _carries_its_token(case: SystemCase, emulator: Any, found: Any) -> bool:
    # BigQuery's ledger token is the job id, which ends with the token; Snowflake's is the requestId, the
    # token as a UUID.
    if found.token is None:
        return False
    sent = _tokens(case, emulator)[str(found.id)]
    return found.token in sent or DurableToken(found.token, 0).uuid == sent


def test_a_system_without_a_lookup_says_why(case, emulator):
    """``notimpl`` in the catalogue: ``durable_find`` raises with the catalogue's reason (and the job is
    still submitted, with whatever identity the system can carry)."""
    lookup = _lookup(case)
    if lookup.implemented:
        assert lookup.list_call and lookup.carrier != "none", "an implemented lookup names its list call"
        return
    assert lookup.reason, "a notimpl lookup says why"
    runner = runner_for(case, emulator, False)
    assert runner.run().state == "success"
    with pytest.raises(NotImplementedError, match="no|not"):
        _find(case, emulator, _identity(runner))
    with pytest.raises(NotImplementedError) as raised:
        _find(case, emulator, _identity(runner))
    assert lookup.reason in str(raised.value)


def test_the_job_is_found_by_its_task_instance_identity(case, emulator):
    _implemented(case)
    runner = runner_for(case, emulator, False)
    outcome = runner.run()
    assert outcome.state == "success", outcome.error
    (job,) = job_ids(case, emulator)
    found = _find(case, emulator, _identity(runner))
    assert [f.id for f in found] == [case.stored_id(job)]
    (one,) = found
    assert isinstance(one.status, str) and one.status
    assert one.created_at is None or isinstance(one.created_at, dt.datetime)
    assert _carries_its_token(case, emulator, one)
    # The same identity, another task instance: nothing.
    assert _find(case, emulator, task_identity("conformance", "other_run", "job")) == []


def test_jobs_of_two_generations_are_found_and_another_task_instances_is_not(case, emulator):
    _implemented(case)
    other = runner_for(case, emulator, False)
    other.ti.run_id = "manual__2026-12-01"  # the same DAG and task, another DAG run
    assert other.run().state == "success"
    (others_job,) = job_ids(case, emulator)

    runner = runner_for(case, emulator, False)
    emulator.queue_lifecycles(case.lifecycle(case.failed), case.lifecycle())
    outcome = runner.run()
    assert outcome.state == "success", outcome.error
    first, second = job_ids(case, emulator)[1:]
    found = _find(case, emulator, _identity(runner))
    assert sorted(map(str, (f.id for f in found))) == sorted(
        map(str, (case.stored_id(first), case.stored_id(second)))
    )
    assert all(_carries_its_token(case, emulator, f) for f in found)
    assert len({f.token for f in found}) == 2, "each generation carries its own token"
    assert [f.id for f in _find(case, emulator, _identity(other))] == [case.stored_id(others_job)]


def test_a_lagging_list_finds_the_job_only_after_the_lag(case, emulator):
    _implemented(case)
    runner = runner_for(case, emulator, False)
    assert runner.run().state == "success"
    (job,) = job_ids(case, emulator)
    emulator.list_lag_seconds = 60.0  # an eventually consistent list: a job shows a minute after creation
    assert _find(case, emulator, _identity(runner)) == []
    emulator.backdate(job, 61)  # ... a minute later
    assert [f.id for f in _find(case, emulator, _identity(runner))] == [case.stored_id(job)]
