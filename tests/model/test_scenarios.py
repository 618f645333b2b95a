"""The findings of issue 22 as explicit paths through the model (``tests/model/scenarios.py``): regression
tests for the fixes.

Each scenario returns the violation it showed on the engine of ``59ecc40``. It must now show no violation
outside ``tests/model/known.py``; and while the key it returns is listed there (a fix not landed yet, or a
limit of the next issue), the scenario must still show it (so the model demonstrably sees the finding, and
an entry nobody needs any more is noticed: remove it once the fix lands).
"""

from __future__ import annotations

from typing import Any

import pytest

from tests.harness import DURABLE

if not DURABLE:  # before hypothesis and the model import Airflow 3.3 only modules
    pytest.skip("Airflow < 3.3: no task_state_store, nothing to model", allow_module_level=True)
pytest.importorskip("hypothesis", reason="the model runs in the main env (requirements/runtime.in)")


from tests.model.known import explain, gated
from tests.model.runtime import quiet_logs
from tests.model.scenarios import SCENARIOS
from tests.model.systems import FAMILIES, EmulatorHost, cases_of
from tests.model.world import World

#: Families the scenarios run on: one with native idempotency, one with a lookup (no idempotency key).
SCENARIO_FAMILIES = ("databricks", "batch")


@pytest.fixture(scope="module", params=SCENARIO_FAMILIES)
def host(request: pytest.FixtureRequest) -> Any:
    cases = cases_of(request.param)
    host = EmulatorHost(cases[0].emulator_fixture)
    with host.running():
        yield host


def run_scenario(host: EmulatorHost, name: str, deferrable: bool) -> tuple[World, str | None]:
    scenario, needs = SCENARIOS[name]
    host.reset()
    case = next(c for f, ids in FAMILIES.items() for c in cases_of(f) if c.emulator_fixture == host.fixture)
    settings = {"retries": 1, "trigger_ids": "sqlite", **needs}
    settings.pop("deferrable", None)
    with quiet_logs(), World(host, case, deferrable=deferrable, **settings) as world:
        expected = scenario(world)
        world.check()
    return world, expected


def _paths(name: str) -> list[Any]:
    needs = SCENARIOS[name][1]
    if "deferrable" in needs:
        return [pytest.param(needs["deferrable"], id="deferrable" if needs["deferrable"] else "sync")]
    return [pytest.param(False, id="sync"), pytest.param(True, id="deferrable")]


@pytest.mark.parametrize(
    ("name", "deferrable"),
    [pytest.param(n, *p.values, id=f"{n}-{p.id}") for n in SCENARIOS for p in _paths(n)],
)
def test_scenario(host: EmulatorHost, name: str, deferrable: bool) -> None:
    world, expected = run_scenario(host, name, deferrable)
    log = "\n".join(world.log)
    keys = {v.key for v in world.violations}
    new = sorted(k for k in keys if not gated(k))
    assert not new, f"violations not listed in tests/model/known.py: {new}\n{log}"
    if expected is not None and gated(expected):
        assert expected in keys, (
            f"{expected} is listed ({explain(expected)}) but this scenario no longer shows it: if its fix "
            f"landed, remove the entry from tests/model/known.py\n{log}"
        )


# ---------------------------------------------------------------------------- indistinguishable situations
def _second_try_view(host: EmulatorHost, name: str) -> dict[str, Any]:
    from tests.model.scenarios import second_try_view

    world, _ = run_scenario(host, name, deferrable=False)
    return second_try_view(world)


def test_a_clear_of_a_running_task_with_a_dead_worker_differs_from_a_retry_by_the_listener_mark(host):
    """What try 2 learns (runtime task instance, TIRunContext, the DAG, the store, task states, the
    system), relative to try 1: after a clear of the running task whose worker died, and after a plain
    retry that followed a clear of another task, everything is the same except ``ti.context_carrier``,
    which ``clear_task_instances`` renews for the task instances it clears (and only those), and the
    fields of the record: the clear listener (airflow_durable/plugins/listener.py) marked it
    ``cleared_while_running`` when the heartbeat timeout failed the restarting task instance."""
    cleared = _second_try_view(host, "clear_of_running_with_dead_worker")
    retried = _second_try_view(host, "retry_after_other_clear_with_dead_worker")
    differ = sorted(k for k in cleared if cleared[k] != retried.get(k))
    assert differ == ["task_state_store.fields", "ti.context_carrier"], (cleared, retried)
    assert cleared["ti.context_carrier"] == "changed" and retried["ti.context_carrier"] == "unchanged"
    assert "cleared_while_running" in cleared["task_state_store.fields"]
    assert "cleared_while_running" not in retried["task_state_store.fields"]


def test_a_clear_without_run_reset_of_a_running_task_with_a_dead_worker_differs_only_by_the_listener_mark(
    host,
):
    """With ``reset_dag_runs=false`` (no new run carrier, no ``clear_number``) Airflow shows try 2 exactly
    what a plain retry sees; only the listener's mark in the record tells the clear apart."""
    cleared = _second_try_view(host, "clear_of_running_with_dead_worker_no_reset")
    retried = _second_try_view(host, "plain_retry_with_dead_worker")
    differ = sorted(k for k in cleared if cleared[k] != retried.get(k))
    assert differ == ["task_state_store.fields"], (cleared, retried)
    assert "cleared_while_running" in cleared["task_state_store.fields"]


@pytest.mark.parametrize("family", sorted(FAMILIES))
def test_a_deferral_timeout_then_the_retry_on_every_family(family: str) -> None:
    """The deferral timeout scenario on every family's deferrable path (the scenarios above run on two).
    Every family's deferral times out: the engine caps it at the try's execution deadline. Where the
    provider's own wait limit ran out first, the timed-out trigger, cancelled by the triggerer, ends nothing
    and try 2 reconnects to job 1 (EMR Serverless' provider trigger cancelled it here before the owned trigger
    handed it Airflow's user-action message); where the execution deadline did, the resumed try ended job 1
    and try 2 runs a job of its own."""
    cases = cases_of(family)
    host = EmulatorHost(cases[0].emulator_fixture)
    with host.running():
        world, _ = run_scenario(host, "deferral_timeout_then_retry", deferrable=True)
    log = "\n".join(world.log)
    assert "the deferral timed out" in log, log
    assert not world.violations, f"{[v.key for v in world.violations]}\n{log}"
    first, *later = sorted(world.jobs.values(), key=lambda j: j.step)
    if world.notes["deferral_timeout"] == "provider":
        assert not later and world.active(first), f"job {first.ledger_id} was ended under the retry\n{log}"
    else:
        assert not world.active(first), f"the execution deadline passed, job {first.ledger_id} runs on\n{log}"
        assert [world.active(j) for j in later] == [True], f"try 2 runs no job of its own\n{log}"
