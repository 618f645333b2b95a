"""What is specific to ``DurableSnowflakeSqlApiOperator`` beyond the conformance suite's cells.

The request id and retry flag it sends, how it reads a list of handles, ``cancel_on_kill``, and that
its hook is built exactly like the provider's.
"""

from __future__ import annotations

import uuid
from typing import Any

import pytest

pytest.importorskip("airflow.providers.snowflake")

from airflow_durable.engine import DurableToken  # noqa: E402
from tests.conformance.systems import SYSTEMS  # noqa: E402
from tests.harness import DURABLE, MemoryStateStore, TaskRunner, record_state  # noqa: E402

make = next(case for case in SYSTEMS if case.id == "snowflake_sql_api").make
durable_only = pytest.mark.skipif(not DURABLE, reason="Airflow < 3.3: no task_state_store")


def submits(emulator: Any) -> list[Any]:
    return [e for e in emulator.ledger.entries if e.operation == "statements"]


@durable_only
@pytest.mark.parametrize("deferrable", [False, True], ids=["sync", "deferrable"])
def test_durable_submission_carries_the_token_uuid_with_retry_true(snowflake_emulator, deferrable):
    runner = TaskRunner(lambda: make(snowflake_emulator, deferrable))
    assert runner.run().state == "success"
    [entry] = submits(snowflake_emulator)
    record = runner.store.data["airflow_durable.snowflake_sql_api"]
    expected = DurableToken(record["token"], record["generation"]).uuid
    assert entry.payload["requestId"] == expected and entry.payload["retry"] is True
    assert entry.token == expected


@pytest.mark.parametrize("deferrable", [False, True], ids=["sync", "deferrable"])
def test_not_durable_is_upstream_fresh_request_id_and_no_retry_flag(snowflake_emulator, deferrable):
    overrides = {"durable": False} if DURABLE else {}
    runner = TaskRunner(lambda: make(snowflake_emulator, deferrable, **overrides), store=MemoryStateStore())
    snowflake_emulator.faults.add(
        method="GET",
        path_contains="/api/v2/statements/",
        status=500,
        transport="async" if deferrable else "sync",
    )
    assert runner.run().state == "success"
    first, second = submits(snowflake_emulator)
    assert first.payload["retry"] is False and second.payload["retry"] is False
    assert first.payload["requestId"] != second.payload["requestId"]
    uuid.UUID(first.payload["requestId"])
    assert runner.store.calls == []


def _crashed_after_persist(emulator: Any, deferrable: bool) -> tuple[TaskRunner, list[str]]:
    runner = TaskRunner(lambda: make(emulator, deferrable))
    runner.store.crash_when(record_state("submitted"), before=False)
    assert runner.run_try().state == "crashed"
    [entry] = submits(emulator)
    return runner, entry.external_id


@durable_only
@pytest.mark.parametrize("deferrable", [False, True], ids=["sync", "deferrable"])
def test_some_handles_still_running_is_active_so_the_retry_reconnects(snowflake_emulator, deferrable):
    runner, handles = _crashed_after_persist(snowflake_emulator, deferrable)
    snowflake_emulator.set_state(handles[0], "SUCCESS")
    snowflake_emulator.script(handles[1], ["RUNNING", "RUNNING", "SUCCESS"])
    outcome = runner.run_try()
    assert outcome.state == "success", outcome.error
    assert outcome.xcoms["query_ids"] == handles
    assert len(snowflake_emulator.ledger.submissions()) == 1


@durable_only
@pytest.mark.parametrize("deferrable", [False, True], ids=["sync", "deferrable"])
def test_one_failed_handle_fails_the_request_so_the_retry_submits_a_new_generation(
    snowflake_emulator, deferrable
):
    runner, handles = _crashed_after_persist(snowflake_emulator, deferrable)
    snowflake_emulator.set_state(handles[0], "SUCCESS")
    snowflake_emulator.set_state(handles[1], "FAILED")
    snowflake_emulator.lifecycle = ["SUCCESS"]
    outcome = runner.run_try()
    assert outcome.state == "success", outcome.error
    first, second = snowflake_emulator.ledger.submissions()
    assert first.token != second.token
    assert outcome.xcoms["query_ids"] == second.external_id
    assert runner.store.data["airflow_durable.snowflake_sql_api"]["generation"] == 2


@durable_only
def test_already_succeeded_fetches_the_output_and_pushes_query_ids(snowflake_emulator):
    runner, handles = _crashed_after_persist(snowflake_emulator, True)
    snowflake_emulator.set_state(handles, "SUCCESS")
    outcome = runner.run_try()
    assert outcome.state == "success" and outcome.deferrals == 0
    assert outcome.xcoms["query_ids"] == handles
    # check_query_output reads each handle once more after the decision's status reads.
    assert all(snowflake_emulator.statement(h).gets == 2 for h in handles)


@durable_only
def test_cancel_on_kill_false_leaves_the_statements_running(snowflake_emulator):
    snowflake_emulator.lifecycle = ["RUNNING"]
    runner = TaskRunner(lambda: make(snowflake_emulator, False, cancel_on_kill=False))
    runner.store.crash_when(record_state("submitted"), before=False)
    runner.run_try()
    runner.last_operator.on_kill()
    assert [e.operation for e in snowflake_emulator.ledger.entries] == ["statements"]


def test_the_hook_is_built_like_the_providers(snowflake_emulator):
    from airflow.providers.snowflake.operators.snowflake import SnowflakeSqlApiOperator

    ours = make(snowflake_emulator, True, warehouse="WH2", role="R2")._hook
    kwargs = dict(task_id="p", sql="select 1", deferrable=True, warehouse="WH2", role="R2", poll_interval=0)
    theirs = SnowflakeSqlApiOperator(
        **kwargs, snowflake_api_retry_args=make(snowflake_emulator, True).snowflake_api_retry_args
    )._hook
    skip = {"retry_config", "_rest_token_provider", "_oauth", "log"}  # per-instance helpers

    def state(hook: Any) -> dict[str, Any]:
        return {k: v for k, v in vars(hook).items() if k not in skip and not k.startswith("_log")}

    assert state(ours) == state(theirs)
    assert type(ours).__mro__[1] is type(theirs)
