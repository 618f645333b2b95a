"""The version shim: what it detects on the installed Airflow, and the degraded `durable` handling."""

from __future__ import annotations

import importlib.util
import json
import os
import subprocess
import sys
import warnings
from pathlib import Path

import pytest

from airflow_durable import shims


def test_detection_matches_the_installed_airflow_api():
    try:
        has_store_api = importlib.util.find_spec("airflow.sdk.bases.resumablejobmixin") is not None
    except ModuleNotFoundError:  # Airflow 2.x: no airflow.sdk at all
        has_store_api = False
    assert shims.DURABLE_RUNTIME is has_store_api


def test_store_comes_from_the_context_only_on_a_durable_runtime():
    store = object()
    got = shims.get_task_state_store({"task_state_store": store})
    assert got is (store if shims.DURABLE_RUNTIME else None)
    assert shims.get_task_state_store({}) is None


def _off_warnings(caught: list[warnings.WarningMessage]) -> list[str]:
    return [str(w.message) for w in caught if str(w.message).startswith(shims.DURABILITY_OFF)]


@pytest.mark.skipif(shims.DURABLE_RUNTIME, reason="durability is off only below Airflow 3.3")
def test_below_3_3_durability_off_is_said_once_per_process(monkeypatch):
    monkeypatch.setattr(shims, "_warned_noop", set())
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        assert shims.resolve_durable(False, "Opted") is False  # the user's own choice: nothing to say
        assert _off_warnings(caught) == []
        assert shims.resolve_durable(None, "First") is False  # durable= not passed: still said
        assert shims.resolve_durable(True, "Second") is False  # another class, explicit: not again
        assert shims.resolve_durable(None, "First") is False
    said = _off_warnings(caught)
    assert len(said) == 1, said
    assert "First" in said[0] and "has no effect on Airflow versions below 3.3" in said[0]


@pytest.mark.skipif(not shims.DURABLE_RUNTIME, reason="Airflow 3.3+: durable, nothing to say")
def test_on_3_3_nothing_is_said(monkeypatch):
    monkeypatch.setattr(shims, "_warned_noop", set())
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        for durable in (None, True, False):
            shims.resolve_durable(durable, "Probe")
    assert _off_warnings(caught) == []


# A fresh interpreter, as a DAG-parsing or task process is: the real operators, constructed the way a DAG
# file does. Prints how many "durability is off" warnings each construction emitted.
# Imported before recording: importing Airflow routes warnings to logging (logging.captureWarnings).
_CONSTRUCT = """
import json, warnings
from airflow_durable.operators.databricks import (
    DurableDatabricksRunNowOperator, DurableDatabricksSubmitRunOperator,
)
counts = []
with warnings.catch_warnings(record=True) as caught:
    warnings.simplefilter("always")
    ops = [
        lambda: DurableDatabricksSubmitRunOperator(task_id="a", json={"run_name": "a"}),
        lambda: DurableDatabricksSubmitRunOperator(task_id="b", json={"run_name": "b"}, durable=True),
        lambda: DurableDatabricksRunNowOperator(task_id="c", job_id=1),
    ]
    for make in ops:
        before = len(caught)
        make()
        counts.append(sum(1 for w in caught[before:] if str(w.message).startswith(%r)))
print(json.dumps(counts))
"""


def test_the_first_durable_operator_of_a_process_says_whether_durability_is_off():
    """Below 3.3: the first operator (``durable=`` not passed) warns, no later one; 3.3+: none."""
    pytest.importorskip("airflow.providers.databricks", reason="the Databricks provider is not installed")
    done = subprocess.run(
        [sys.executable, "-c", _CONSTRUCT % shims.DURABILITY_OFF],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    counts = json.loads(done.stdout.strip().splitlines()[-1])
    assert counts == ([0, 0, 0] if shims.DURABLE_RUNTIME else [1, 0, 0]), done.stderr[-3000:]


@pytest.mark.skipif(not shims.DURABLE_RUNTIME, reason="durable resolution on Airflow >= 3.3")
def test_durable_by_default_on_3_3():
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert shims.resolve_durable(None, "ProbeOperator") is True
        assert shims.resolve_durable(True, "ProbeOperator") is True
    assert shims.resolve_durable(False, "ProbeOperator") is False


def test_no_module_outside_shims_looks_at_versions():
    root = Path(shims.__file__).parent.parent
    offenders = []
    for path in root.rglob("*.py"):
        if "shims" in path.parts:
            continue
        text = path.read_text()
        for needle in ("__version__ <", "__version__ >", "AIRFLOW_V_", "packaging.version", "version.parse("):
            if needle in text:
                offenders.append(f"{path.relative_to(root)}: {needle}")
    assert offenders == []


def test_metrics_and_spans_work_here():
    shims.incr_metric("resumable_job.fresh_submit", {"operator": "Probe"})
    with shims.durable_span("resumable_job.resume_decision") as span:
        span.set_attribute("operator", "Probe")


def test_airflow_3_3s_clear_keeps_task_state():
    """The installed Airflow (3.3) keeps a task's state on every clear: no keep_task_state anywhere."""
    pytest.importorskip("airflow.api_fastapi.core_api.datamodels.task_instances")
    assert shims.clear_discards_task_state() is False


def test_3_4s_clear_is_told_by_the_body_field_not_the_version():
    """A 3.3 whose clear body has 3.4's keep_task_state field clears as 3.4 does: detected the same way."""
    pytest.importorskip("airflow.api_fastapi.core_api.datamodels.task_instances")
    from tests.harness import airflow_34_clear

    with airflow_34_clear():
        assert shims.clear_discards_task_state() is True
    assert shims.clear_discards_task_state() is False


def test_3_4s_clear_is_told_by_a_clear_task_instances_parameter_too(monkeypatch):
    """Where a later Airflow moves the discard into ``clear_task_instances``, its parameter tells it."""
    from airflow.models import taskinstance

    def clear_task_instances(tis, session, dag_run_state=None, keep_task_state=False):  # noqa: ANN001, ANN202
        raise AssertionError("never called: only its signature is read")

    monkeypatch.setattr(taskinstance, "clear_task_instances", clear_task_instances)
    assert shims.clear_discards_task_state() is True


@pytest.mark.skipif(
    not shims.DURABLE_RUNTIME, reason="the runtime tier's 3.4 patch is for its Airflow 3.3 deployments"
)
def test_the_runtime_tiers_patch_makes_a_deployment_clear_as_3_4():
    """``tests/e2e_runtime/airflow34``: on a component's PYTHONPATH, Airflow's clear body gains 3.4's field
    once Airflow imports it (the api-server then accepts it) and the shim sees 3.4; nothing else runs."""
    root = Path(__file__).resolve().parents[1]
    env = {
        **os.environ,
        "PYTHONPATH": os.pathsep.join([str(root / "tests/e2e_runtime/airflow34"), str(root)]),
    }
    code = (
        "import sys; assert 'airflow' not in sys.modules; "
        "from airflow_durable import shims; "
        "from airflow.api_fastapi.core_api.routes.public import task_instances as routes; "
        "body = routes.ClearTaskInstancesBody(dry_run=False, keep_task_state=True); "
        "print(shims.clear_discards_task_state(), body.keep_task_state)"
    )
    done = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]
    assert done.stdout.split()[-2:] == ["True", "True"]


def test_the_user_action_cancel_message_is_airflows_own_where_it_has_one():
    """The owned trigger hands a provider trigger Airflow's user-action cancel message (3.3+), so that a
    provider's pre-3.3 cancel path stands down; below 3.3 there is none to hand."""
    if shims.DURABLE_RUNTIME:
        from airflow.jobs.triggerer_job_runner import _USER_ACTION_CANCEL_MSG

        assert shims.user_action_cancel_message() == _USER_ACTION_CANCEL_MSG
    else:
        assert shims.user_action_cancel_message() is None
