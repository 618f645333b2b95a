"""The orphan rules of ``airflow-durable jobs``/``orphans`` on records as the engine writes them, without a
deployment (the real-deployment run of the same rules is ``test_jobs_runtime.py``)."""

from __future__ import annotations

from typing import Any

from airflow_durable.jobs.collect import _row, candidates, orphan_reason
from airflow_durable.jobs.systems import LiveStatus

TI = {"dag_id": "d", "dag_run_id": "r", "task_id": "t", "map_index": -1, "try_number": 3, "max_tries": 6}
KEY = "airflow_durable.databricks_submit_run"


def record(**fields: Any) -> dict[str, Any]:
    value = {
        "schema": "airflow-durable/2",
        "generation": 2,
        "token": "afd-" + "1" * 40 + "-g2",
        "state": "submitted",
        "external_id": 1038,
        "max_tries": 6,
        "locator": {"databricks_conn_id": "databricks_default"},
    }
    value.update(fields)
    return value


def test_a_job_the_record_keeps_until_it_ends_is_an_orphan_while_it_runs():
    """A clear whose cancel of the old job failed: the record tracks the new job and keeps the old id
    (``unended``). Nothing waits on the old job, so while it runs it is an orphan, and ``--cancel`` may
    end it even though the task instance is running (that try waits on the other job)."""
    kept = {"external_id": 1037, "token": "afd-" + "1" * 40 + "-g1", "generation": 1, "why": "cleared"}
    row = _row({**TI, "state": "running"}, KEY, record(unended=[kept]), "http://airflow")
    (old,) = [r for r in candidates([row]) if r.external_id == 1037]
    assert old.source == "unended" and old.record_state == "unended"
    old.live = LiveStatus("active", "RUNNING")
    assert orphan_reason(old) == "kept by the record until it ends (cleared)"
    old.live = LiveStatus("failed", "CANCELED")
    assert orphan_reason(old) is None  # ended: not an orphan
    assert all(r.external_id != 1038 for r in candidates([row]))  # the tracked job of a running try


def test_a_task_marked_failed_while_its_job_runs_leaves_the_job_to_orphans():
    """Marked failed while up_for_retry (or queued), no try and no trigger runs to end the job: the
    record keeps tracking it and ``orphans`` reports it (``orphans --cancel`` ends it)."""
    row = _row({**TI, "state": "failed"}, KEY, record(), "http://airflow")
    (tracked,) = candidates([row])
    tracked.live = LiveStatus("active", "RUNNING")
    assert orphan_reason(tracked) == "task instance failed"
