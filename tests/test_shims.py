"""The version shim: what it detects on the installed Airflow, and the degraded `durable` handling."""

from __future__ import annotations

import importlib.util
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


@pytest.mark.skipif(shims.DURABLE_RUNTIME, reason="the no-op warning exists only below Airflow 3.3")
def test_explicit_durable_true_warns_once_below_3_3():
    shims._warned_noop.discard("ProbeOperator")
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        assert shims.resolve_durable(True, "ProbeOperator") is False
        assert shims.resolve_durable(True, "ProbeOperator") is False
    assert len([w for w in caught if "has no effect" in str(w.message)]) == 1
    assert shims.resolve_durable(None, "ProbeOperator") is False


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
