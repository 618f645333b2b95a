"""Injected faults against the real hook: they prove the hook's own retry code runs (or does not)."""

from __future__ import annotations

import time

import pytest

pytest.importorskip("airflow.providers.databricks")

from airflow.providers.common.compat.sdk import AirflowException  # noqa: E402
from airflow.providers.databricks.hooks.databricks import DatabricksHook  # noqa: E402

from tests.testing.conftest import fast_retry_args  # noqa: E402
from tests.testing.helpers import api_status  # noqa: E402

SUBMIT = {"run_name": "etl", "notebook_task": {"notebook_path": "/x"}}


@pytest.mark.parametrize("status", [500, 502, 503, 429])
def test_retryable_status_n_times_then_success(databricks_emulator, hook, status):
    """5xx and 429 are retried by the hook's tenacity loop: the third attempt gets through."""
    fault = databricks_emulator.faults.add(method="POST", path_contains="runs/submit", status=status, times=2)
    run_id = hook.submit_run(SUBMIT)
    assert fault.hits == 2
    assert databricks_emulator.run(run_id)  # the attempt that got through created the run
    assert len(databricks_emulator.ledger.submissions()) == 1  # faulted attempts never reached it
    assert [r.status for r in databricks_emulator.server.requests_to("runs/submit")] == [status, status, 200]


def test_retries_exhausted_gives_up(databricks_emulator, hook):
    fault = databricks_emulator.faults.add(path_contains="runs/get", status=500, times=None)
    run_id = hook.submit_run(SUBMIT)
    with pytest.raises(AirflowException, match="failed 3 times"):
        hook.get_run(run_id)
    assert fault.hits == 3  # retry_limit=3 attempts, all hit


@pytest.mark.parametrize("status", [400, 403, 404])
def test_client_errors_are_not_retried(databricks_emulator, hook, status):
    fault = databricks_emulator.faults.add(path_contains="runs/submit", status=status, times=None)
    with pytest.raises(AirflowException) as err:
        hook.submit_run(SUBMIT)
    assert api_status(err.value) == status
    assert fault.hits == 1
    assert '"error_code"' in str(err.value)  # Databricks' error shape


def test_could_not_acquire_lock_400_is_retried_by_the_sync_hook(databricks_emulator, hook):
    fault = databricks_emulator.faults.add(
        path_contains="runs/submit",
        status=400,
        times=1,
        body={"error_code": "COULD_NOT_ACQUIRE_LOCK", "message": "try again"},
    )
    hook.submit_run(SUBMIT)
    assert fault.hits == 1 and len(databricks_emulator.ledger.submissions()) == 1


def test_lost_submit_response_with_token_does_not_duplicate(databricks_emulator, hook):
    """The submit takes effect but its answer is lost: the hook's retry replays the same token."""
    fault = databricks_emulator.faults.add(path_contains="runs/submit", status=503, after=True)
    run_id = hook.submit_run({**SUBMIT, "idempotency_token": "tok"})
    assert fault.hits == 1
    entries = databricks_emulator.ledger.select(operation="runs/submit")
    assert [(e.external_id, e.created) for e in entries] == [(run_id, True), (run_id, False)]


def test_lost_submit_response_without_token_duplicates(databricks_emulator, hook):
    """The same fault without a token shows the duplicate the durable operators exist to prevent."""
    databricks_emulator.faults.add(path_contains="runs/submit", status=503, after=True)
    hook.submit_run(SUBMIT)
    assert len(databricks_emulator.ledger.submissions()) == 2


def test_dropped_connection_is_retried(databricks_emulator, hook):
    fault = databricks_emulator.faults.add(path_contains="runs/get", drop=True, times=1)
    run_id = hook.submit_run(SUBMIT)
    assert hook.get_run(run_id)["run_id"] == run_id
    assert fault.hits == 1


def test_latency_delays_a_normal_answer(databricks_emulator, hook):
    run_id = hook.submit_run(SUBMIT)
    fault = databricks_emulator.faults.add(path_contains="runs/get", latency=0.4)
    started = time.monotonic()
    assert hook.get_run(run_id)["run_id"] == run_id
    assert time.monotonic() - started >= 0.4 and fault.hits == 1


def test_latency_beyond_the_hook_timeout_is_a_retried_timeout(databricks_emulator):
    hook = DatabricksHook(timeout_seconds=0.3, retry_limit=2, retry_args=fast_retry_args(2))
    run_id = hook.submit_run(SUBMIT)
    fault = databricks_emulator.faults.add(path_contains="runs/get", latency=1.0, times=1)
    assert hook.get_run(run_id)["run_id"] == run_id  # first attempt timed out, the retry answered
    assert fault.hits == 1


def test_sync_only_fault_leaves_other_endpoints_alone(databricks_emulator, hook):
    databricks_emulator.faults.add(method="GET", path_contains="runs/get-output", status=500, times=None)
    run_id = hook.submit_run(SUBMIT)
    assert hook.get_run(run_id)["run_id"] == run_id  # "runs/get" is not "runs/get-output"


def test_expire_404_is_not_retried(databricks_emulator, hook):
    run_id = hook.submit_run(SUBMIT)
    databricks_emulator.expire(run_id)
    with pytest.raises(AirflowException) as err:
        hook.get_run(run_id)
    assert api_status(err.value) == 404
    assert len(databricks_emulator.server.requests_to("runs/get")) == 1
