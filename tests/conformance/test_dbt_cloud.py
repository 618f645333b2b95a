"""dbt Cloud specifics beyond the shared failure model: the token in the cause, the lookup, and the
provider's own reuse options (``reuse_existing_run``, ``retry_from_failure``) next to durability."""

from __future__ import annotations

import json
import time
from typing import Any

import pytest

from tests.conformance.cases.dbt_cloud import JOB_ID, _dbt_cloud_run_job
from tests.harness import DURABLE, TaskDeferred, TaskRunner, record_state

pytestmark = pytest.mark.skipif(
    not DURABLE, reason="Airflow < 3.3: the degraded contract is in test_degraded.py"
)

PATHS = [pytest.param(False, id="sync"), pytest.param(True, id="deferrable")]
KEY = "airflow_durable.dbt_cloud_run_job"
LIFECYCLE = ["QUEUED"] + ["RUNNING"] * 6 + ["SUCCESS"]


@pytest.fixture
def dbt(dbt_cloud_emulator: Any) -> Any:
    dbt_cloud_emulator.add_job(job_id=JOB_ID)
    dbt_cloud_emulator.lifecycle = LIFECYCLE
    return dbt_cloud_emulator


def runner_for(dbt: Any, deferrable: bool, **overrides: Any) -> TaskRunner:
    return TaskRunner(lambda: _dbt_cloud_run_job(dbt, deferrable, **overrides))


def submitting_record(runner: TaskRunner, generation: int = 1) -> dict[str, Any]:
    """The record a try leaves when it dies inside the submit window (intent written, id not)."""
    from airflow_durable.engine import RECORD_SCHEMA, DurableToken

    token = DurableToken.for_task_instance(
        runner.ti.dag_id, runner.ti.run_id, runner.ti.task_id, -1, generation
    )
    return {"schema": RECORD_SCHEMA, "generation": generation, "token": token.text, "state": "submitting"}


# --------------------------------------------------------------------------- the cause
def test_cause_carries_the_token_after_the_users_text():
    from airflow_durable.operators.dbt_cloud import cause_with_token, tokens_in

    token = "afd-" + "0" * 40 + "-g3"
    assert cause_with_token("nightly refresh", token) == f"nightly refresh [{token}]"
    long = cause_with_token("x" * 400, token)
    assert len(long) == 255 and long.endswith(f"... [{token}]") and long.startswith("x" * 100)
    assert tokens_in(long) == {token}
    assert cause_with_token(None, token) == token


def test_a_json_cause_stays_json_with_the_token_as_a_key():
    from airflow_durable.operators.dbt_cloud import CAUSE_TOKEN_KEY, cause_with_token

    token = "afd-" + "1" * 40 + "-g1"
    lineage = {"parent": {"run": {"runId": "r" * 36}}, "root": {"run": {"runId": "q" * 150}}}
    cause = cause_with_token(json.dumps(lineage), token)
    parsed = json.loads(cause)
    assert parsed[CAUSE_TOKEN_KEY] == token and "parent" in parsed and "root" not in parsed  # root dropped
    assert len(cause) <= 255


@pytest.mark.parametrize("deferrable", PATHS)
def test_the_run_cause_keeps_the_users_reason_and_adds_the_token(dbt, deferrable):
    runner = runner_for(dbt, deferrable, trigger_reason="Nightly refresh " + "y" * 300)
    assert runner.run().state == "success"
    (entry,) = dbt.ledger.submissions()
    cause = dbt.run(entry.external_id).cause
    assert len(cause) <= 255 and cause.startswith("Nightly refresh yyy")
    assert cause.endswith(f"{runner.store.data[KEY]['token']}]")  # "[<identity> <token>]"


def test_the_default_reason_is_upstreams(dbt):
    runner = runner_for(dbt, False)
    assert runner.run().state == "success"
    cause = dbt.latest_run().cause
    assert cause.startswith("Triggered via Apache Airflow by task 'job' in the conformance DAG. [afd-")


def test_degraded_cause_is_exactly_upstreams(dbt):
    runner = runner_for(dbt, False, durable=False)
    assert runner.run().state == "success"
    assert dbt.latest_run().cause == "Triggered via Apache Airflow by task 'job' in the conformance DAG."


# --------------------------------------------------------------------------- the lookup
@pytest.mark.parametrize("deferrable", PATHS)
def test_a_run_without_our_token_is_never_adopted(dbt, deferrable):
    """After a death in the submit window, only a run carrying exactly this token may be adopted."""
    runner = runner_for(dbt, deferrable)
    record = submitting_record(runner)
    runner.store.data[KEY] = record
    ours = record["token"]
    foreign = [
        dbt.add_run(JOB_ID, "Triggered by the dbt Cloud scheduler", ["RUNNING"]),
        dbt.add_run(JOB_ID, ours.removesuffix("-g1") + "-g12", ["RUNNING"]),  # another generation
        dbt.add_run(JOB_ID, ours.replace("afd-", "afd-f", 1)[:-3] + "-g1", ["SUCCESS"]),  # another task
        dbt.add_run(
            JOB_ID, "Triggered via Apache Airflow by task 'job' in the conformance DAG.", ["RUNNING"]
        ),
    ]
    outcome = runner.run_try()
    assert outcome.state == "success", outcome.error
    (entry,) = dbt.ledger.submissions()  # nothing matched: the retry submitted, with the same token
    assert entry.token == ours
    assert runner.store.data[KEY]["external_id"] == entry.external_id
    assert entry.external_id not in {run.id for run in foreign}
    assert all(not run.cancelled for run in foreign)


@pytest.mark.parametrize("deferrable", PATHS)
def test_the_run_carrying_our_token_is_adopted_past_the_first_page(dbt, deferrable):
    runner = runner_for(dbt, deferrable)
    record = submitting_record(runner)
    runner.store.data[KEY] = record
    ours = dbt.add_run(JOB_ID, f"nightly [{record['token']}]", ["RUNNING", "RUNNING", "SUCCESS"])
    for n in range(130):  # newer runs by others push ours to the second page of 100
        dbt.add_run(JOB_ID, f"scheduled #{n}", ["SUCCESS"])
    outcome = runner.run_try()
    assert outcome.state == "success", outcome.error
    assert dbt.ledger.submissions() == []
    assert outcome.result == ours.id and outcome.xcoms["job_run_id"] == ours.id
    assert outcome.xcoms["job_run_url"].endswith(f"/runs/{ours.id}/")
    lists = dbt.server.requests_to("/runs", transport="sync")
    assert len([r for r in lists if r.path.endswith("/runs/")]) == 2


def test_the_lookup_lists_every_run_carrying_the_token_earliest_first(dbt):
    """Two tries that triggered at the same instant: both runs, oldest first, past the first page too."""
    from airflow_durable.engine import DurableToken

    operator = _dbt_cloud_run_job(dbt, False)
    token = DurableToken("afd-0123456789abcdef0123456789abcdef01234567-g1", 1)
    first = dbt.add_run(JOB_ID, f"nightly [{token.text}]", ["RUNNING"])
    dbt.add_run(JOB_ID, f"nightly [{token.text.removesuffix('-g1')}-g12]", ["RUNNING"])  # another generation
    for n in range(120):  # newer runs by others push the first one to the second page of 100
        dbt.add_run(JOB_ID, f"scheduled #{n}", ["SUCCESS"])
    second = dbt.add_run(JOB_ID, f"nightly [{token.text}]", ["RUNNING"])
    assert operator.durable_find_all(token, {}) == [first.id, second.id]
    assert operator.durable_find_all(DurableToken("afd-nobody-g1", 1), {}) == []
    # Created at the same instant: the run id decides, the same way for every try.
    second.created_at = first.created_at
    assert operator.durable_find_all(token, {}) == [first.id, second.id]


def test_a_failing_lookup_fails_the_try_without_submitting(dbt):
    runner = runner_for(dbt, True)
    runner.store.data[KEY] = submitting_record(runner)
    dbt.faults.add(
        method="GET",
        path_contains="/runs",
        status=503,
        times=1,
        predicate=lambda request: request.path.endswith("/runs/"),
    )
    outcome = runner.run_try()
    assert outcome.state == "failed" and "503" in str(outcome.error)
    assert dbt.ledger.submissions() == []
    assert runner.store.data[KEY]["state"] == "submitting"  # the next try looks again
    assert runner.run_try().state == "success"
    assert len(dbt.ledger.submissions()) == 1


# --------------------------------------------------------------------------- waiting
def test_a_reconnect_defers_with_the_whole_timeout_from_now(dbt):
    runner = runner_for(dbt, True, timeout=600)
    runner.store.crash_when(record_state("submitted"), before=False)
    started = time.time()
    assert runner.run_try().state == "crashed"
    time.sleep(1.2)
    operator = _dbt_cloud_run_job(dbt, True, timeout=600)
    runner.ti.try_number += 1
    reconnect_at = time.time()
    with pytest.raises(TaskDeferred) as deferred:
        operator.execute(runner.context())
    end_time = deferred.value.trigger.end_time
    assert reconnect_at + 600 <= end_time <= time.time() + 600
    assert end_time > started + 600 + 1  # not what was left of the first try's
    assert len(dbt.ledger.submissions()) == 1


@pytest.mark.parametrize("deferrable", PATHS)
def test_wait_for_termination_false_returns_the_run_id_at_once(dbt, deferrable):
    dbt.lifecycle = ["RUNNING"]
    runner = runner_for(dbt, deferrable, wait_for_termination=False)
    outcome = runner.run_try()
    assert outcome.state == "success" and outcome.deferrals == 0
    run_id = dbt.latest_run().id
    assert outcome.result == run_id and outcome.xcoms["job_run_id"] == run_id


# --------------------------------------------------------------------------- upstream's reuse options
@pytest.mark.parametrize("deferrable", PATHS)
def test_reuse_existing_run_adopts_an_active_run_as_upstream_documents(dbt, deferrable):
    other = dbt.add_run(JOB_ID, "started by a user", ["RUNNING", "RUNNING", "SUCCESS"])
    runner = runner_for(dbt, deferrable, reuse_existing_run=True)
    outcome = runner.run_try()
    assert outcome.state == "success", outcome.error
    assert dbt.ledger.submissions() == [] and outcome.result == other.id


@pytest.mark.parametrize("deferrable", PATHS)
def test_durability_does_not_depend_on_reuse_existing_run(dbt, deferrable):
    """With reuse on, a retry still rejoins *its* run, not the newest active run of the job."""
    runner = runner_for(dbt, deferrable, reuse_existing_run=True)
    runner.store.crash_when(record_state("submitted"), before=False)
    assert runner.run_try().state == "crashed"
    (entry,) = dbt.ledger.submissions()
    newer = dbt.add_run(JOB_ID, "started by a user", ["RUNNING"])
    outcome = runner.run_try()
    assert outcome.state == "success", outcome.error
    assert outcome.result == entry.external_id != newer.id
    assert len(dbt.ledger.submissions()) == 1


@pytest.mark.parametrize("deferrable", PATHS)
def test_retry_from_failure_reruns_after_an_error_and_never_instead_of_reconnecting(dbt, deferrable):
    dbt.queue_lifecycles(["QUEUED", "RUNNING", "ERROR"])
    runner = runner_for(dbt, deferrable, retry_from_failure=True)
    first = runner.run_try()
    assert first.state == "failed"
    # Try 2 after a terminal ERROR: upstream's rerun-from-failure, tracked as generation 2.
    runner.store.crash_when(record_state("submitted"), before=False)
    assert runner.run_try().state == "crashed"
    record = runner.store.data[KEY]
    failed_run, rerun = (e.external_id for e in dbt.ledger.submissions())
    assert [e.operation for e in dbt.ledger.submissions()] == ["jobs/run", "jobs/rerun"]
    assert record["generation"] == 2 and record["external_id"] == rerun
    assert dbt.run(rerun).rerun_of == failed_run
    # Try 3: the rerun is still running, so it reconnects: no third run, no second rerun.
    outcome = runner.run_try()
    assert outcome.state == "success", outcome.error
    assert outcome.result == rerun
    assert len(dbt.ledger.submissions()) == 2


def test_retry_from_failure_window_stays_open_for_a_rerun(dbt):
    """Documented gap: /rerun/ takes no cause, so a death between it and persisting is not found."""
    dbt.queue_lifecycles(["QUEUED", "RUNNING", "ERROR"])
    runner = runner_for(dbt, False, retry_from_failure=True)
    assert runner.run_try().state == "failed"
    runner.store.crash_when(record_state("submitted"), before=True)
    assert runner.run_try().state == "crashed"
    assert runner.run_try().state == "success"
    assert [e.operation for e in dbt.ledger.submissions()] == ["jobs/run", "jobs/rerun", "jobs/run"]


@pytest.mark.parametrize("deferrable", PATHS)
def test_already_succeeded_with_the_run_history_gone_still_returns_the_run_id(dbt, deferrable):
    """A crash after the completion was recorded; the retry cannot read the run any more (404)."""
    runner = runner_for(dbt, deferrable)
    runner.store.crash_when(record_state("done"), before=False)
    assert runner.run_try().state == "crashed"
    (entry,) = dbt.ledger.submissions()
    dbt.expire(entry.external_id)
    outcome = runner.run_try()
    assert outcome.state == "success", outcome.error
    assert outcome.result == outcome.xcoms["job_run_id"] == entry.external_id
    assert outcome.xcoms["job_run_url"] is None
    assert len(dbt.ledger.submissions()) == 1


def test_execution_timeout_event_cancels_the_run_and_the_retry_starts_a_new_generation(dbt):
    """The provider's ``timeout`` event (execution_timeout passed) cancels the run, as upstream."""
    dbt.lifecycle = ["RUNNING"]
    runner = runner_for(dbt, True)
    runner.event_filter = lambda event: {**event, "status": "timeout", "message": "timed out"}
    dbt.faults.add(method="GET", path_contains="/runs/300", status=503, times=1, transport="async")
    first = runner.run_try()
    assert first.state == "failed" and "timed out" in str(first.error)
    (entry,) = dbt.ledger.submissions()
    assert dbt.run(entry.external_id).state == "CANCELLED"
    runner.event_filter = None
    dbt.lifecycle = LIFECYCLE
    assert runner.run_try().state == "success"
    assert len(dbt.ledger.submissions()) == 2 and runner.store.data[KEY]["generation"] == 2
