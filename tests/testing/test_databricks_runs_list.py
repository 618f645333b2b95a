"""The Databricks emulator's ``runs/list`` as JobsAPI.list_runs documents it, through the real hook.

Newest first by start time; ``limit`` 1 to 25 (0: the maximum, default 20); ``has_more``, opaque
``next_page_token`` / ``prev_page_token``; the deprecated ``offset``; ``run_type`` and inclusive
``start_time_from`` / ``start_time_to`` filters. The answers are checked against the SDK's
``ListRunsResponse`` by the emulator's strict contract mode (tests/conftest.py).
"""

from __future__ import annotations

from typing import Any

import pytest

pytest.importorskip("airflow.providers.databricks")

from airflow.exceptions import AirflowException  # noqa: E402

LIST = ("GET", "2.2/jobs/runs/list")


def _submit(hook: Any, count: int) -> list[int]:
    return [hook.submit_run({"run_name": f"r{i}", "tasks": []}) for i in range(count)]


def _ids(page: dict[str, Any]) -> list[int]:
    return [run["run_id"] for run in page.get("runs", [])]


def test_pages_newest_first_until_has_more_is_false(databricks_emulator, hook):
    runs = _submit(hook, 30)
    databricks_emulator.add_job(job_id=7, name="j")
    hook.run_now({"job_id": 7})  # a JOB_RUN: not listed under run_type=SUBMIT_RUN
    params: dict[str, Any] = {"run_type": "SUBMIT_RUN", "limit": 12}
    pages = []
    while True:
        page = hook._do_api_call(LIST, dict(params))
        pages.append(page)
        if not page["has_more"]:
            assert "next_page_token" not in page
            break
        params["page_token"] = page["next_page_token"]
    assert [len(_ids(p)) for p in pages] == [12, 12, 6]
    assert [run for p in pages for run in _ids(p)] == runs[::-1]
    assert "prev_page_token" not in pages[0]
    back = hook._do_api_call(
        LIST, {"run_type": "SUBMIT_RUN", "limit": 12, "page_token": pages[1]["prev_page_token"]}
    )
    assert _ids(back) == _ids(pages[0])


def test_a_run_started_between_pages_does_not_shift_the_next_page(databricks_emulator, hook):
    runs = _submit(hook, 10)
    first = hook._do_api_call(LIST, {"limit": 4})
    _submit(hook, 3)  # newer runs arrive while a client pages
    second = hook._do_api_call(LIST, {"limit": 4, "page_token": first["next_page_token"]})
    assert _ids(first) + _ids(second) == runs[::-1][:8]
    # The deprecated offset counts from the newest run: the same arrivals shift it.
    by_offset = hook._do_api_call(LIST, {"limit": 4, "offset": 4})
    assert _ids(by_offset) != _ids(second)


def test_start_time_filters_are_inclusive(databricks_emulator, hook):
    old, middle, new = _submit(hook, 3)
    databricks_emulator.backdate(old, 7200)
    databricks_emulator.backdate(middle, 3600)
    start = {run: databricks_emulator.run(run).start_time for run in (old, middle, new)}
    since = hook._do_api_call(LIST, {"start_time_from": start[middle]})
    assert _ids(since) == [new, middle]
    until = hook._do_api_call(LIST, {"start_time_to": start[middle]})
    assert _ids(until) == [middle, old]
    both = hook._do_api_call(LIST, {"start_time_from": start[middle], "start_time_to": start[middle]})
    assert _ids(both) == [middle]
    assert "runs" not in hook._do_api_call(LIST, {"start_time_from": start[new] + 1})


def test_limit_is_1_to_25_and_0_means_the_maximum(databricks_emulator, hook):
    _submit(hook, 30)
    assert len(_ids(hook._do_api_call(LIST, {}))) == 20
    assert len(_ids(hook._do_api_call(LIST, {"limit": 0}))) == 25
    assert len(_ids(hook._do_api_call(LIST, {"limit": 25}))) == 25
    for bad in (26, -1):
        with pytest.raises(AirflowException, match="limit must be between 1 and 25"):
            hook._do_api_call(LIST, {"limit": bad})


def test_a_bad_page_token_or_offset_is_refused(databricks_emulator, hook):
    _submit(hook, 3)
    with pytest.raises(AirflowException, match="Invalid page_token"):
        hook._do_api_call(LIST, {"page_token": "not-a-token"})
    with pytest.raises(AirflowException, match="offset must be at least 0"):
        hook._do_api_call(LIST, {"offset": -1})
