"""AWS Batch specifics the conformance suite does not cover: the tag lookup, a submit answer without a job
id, user tags and array jobs."""

from __future__ import annotations

from typing import Any

import pytest

pytest.importorskip("airflow.providers.amazon")

from airflow_durable.engine import DurableToken  # noqa: E402
from tests.aws_support import NO_BOTOCORE_RETRIES, PromptBatchWaiters  # noqa: E402
from tests.harness import DURABLE, TaskRunner, record_state  # noqa: E402

PATHS = [pytest.param(False, id="sync"), pytest.param(True, id="deferrable")]
TOKEN = DurableToken("afd-0123456789abcdef0123456789abcdef01234567-g1", 1)


def _batch(emulator: Any, **overrides: Any) -> Any:
    from airflow_durable.operators.batch import DurableBatchOperator

    kwargs: dict[str, Any] = dict(
        task_id="job",
        job_name="nightly-etl",
        job_queue=emulator.job_queue,
        job_definition=emulator.job_definition,
        poll_interval=0,
        max_retries=1000,
        waiters=PromptBatchWaiters(),
        botocore_config=NO_BOTOCORE_RETRIES,
    )
    kwargs.update(overrides)
    return DurableBatchOperator(**kwargs)


@pytest.mark.skipif(not DURABLE, reason="the lookup exists only on a durable runtime")
def test_lookup_matches_the_token_not_the_job_name_and_lists_the_earliest_job_first(batch_emulator):
    operator = _batch(batch_emulator)
    first = batch_emulator.submit("nightly-etl", tags={"airflow-durable-token": TOKEN.text})
    other = batch_emulator.submit("nightly-etl", tags={"airflow-durable-token": "afd-someone-else-g1"})
    untagged = batch_emulator.submit("nightly-etl")
    second = batch_emulator.submit("nightly-etl", tags={"airflow-durable-token": TOKEN.text})
    assert operator.durable_find_all(TOKEN, {}) == [first, second]
    assert operator.durable_find_all(DurableToken("afd-nobody-g1", 1), {}) == []
    assert {other, untagged} <= set(batch_emulator.jobs)
    # Same createdAt (Batch reports milliseconds): the job id decides, the same way for every try.
    backend = batch_emulator._backend()
    backend._jobs[second].job_created_at = backend._jobs[first].job_created_at
    assert operator.durable_find_all(TOKEN, {}) == sorted([first, second])


@pytest.mark.skipif(not DURABLE, reason="the intent record exists only on a durable runtime")
@pytest.mark.parametrize("deferrable", PATHS)
def test_submit_job_answer_without_a_job_id_is_looked_up_not_sent_again(batch_emulator, deferrable):
    """Upstream raises "job_id was not found" before waiting (and never stores or polls ""). The job may
    exist all the same: SubmitJob has no idempotency key, so the try looks its token up before sending it
    again, finds the job whose answer lacked its id, and submits nothing more."""
    batch_emulator.faults.add(
        path_contains="/batch/SubmitJob",
        status=200,
        body={"jobName": "nightly-etl", "jobArn": "arn:aws:batch:us-east-1:123456789012:job/x", "jobId": ""},
        after=True,  # the job was created; only the answer lacks its id
    )
    runner = TaskRunner(lambda: _batch(batch_emulator, deferrable=deferrable))
    outcome = runner.run_try()
    assert outcome.state == "success", outcome.error
    (only,) = batch_emulator.ledger.submissions()
    assert outcome.result == only.external_id
    assert runner.store.data["airflow_durable.batch"]["external_id"] == only.external_id


@pytest.mark.parametrize("deferrable", PATHS)
def test_user_tags_are_kept_and_the_token_tag_added(batch_emulator, deferrable):
    runner = TaskRunner(lambda: _batch(batch_emulator, tags={"team": "data"}, deferrable=deferrable))
    assert runner.run().state == "success"
    (entry,) = batch_emulator.ledger.submissions()
    tags = entry.payload["tags"]
    assert tags["team"] == "data"
    assert ("airflow-durable-token" in tags) is DURABLE
    assert runner.last_operator.tags == {"team": "data"}  # the operator's own attribute is untouched


@pytest.mark.skipif(not DURABLE, reason="reconnects exist only on a durable runtime")
@pytest.mark.parametrize("deferrable", PATHS)
def test_array_job_is_tracked_by_its_parent_id(batch_emulator, deferrable):
    batch_emulator.lifecycle = ["PENDING", "RUNNING", "RUNNING", "SUCCEEDED"]
    runner = TaskRunner(lambda: _batch(batch_emulator, array_properties={"size": 3}, deferrable=deferrable))
    runner.store.crash_when(record_state("submitted"), before=False)
    outcome = runner.run()
    assert outcome.state == "success", outcome.error
    (entry,) = batch_emulator.ledger.submissions()
    assert outcome.result == entry.external_id
    assert entry.payload["arrayProperties"] == {"size": 3}
    assert len(batch_emulator.job(entry.external_id).extra["children"]) == 3
