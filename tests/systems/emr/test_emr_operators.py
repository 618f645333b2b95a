"""EMR specifics beyond the shared failure model: step markers and lookup, submit-only mode, and the
upstream EMR Serverless defects the durable operator fixes (``QUEUED``, the ``KeyError`` on trigger
failure events, cancelling a healthy job when the sync wait runs out)."""

from __future__ import annotations

from typing import Any

import pytest
from airflow.exceptions import AirflowException

from airflow_durable.engine import DurableToken, JobPhase
from tests.conformance.systems import SYSTEMS
from tests.harness import DURABLE, TaskRunner, record_state

pytestmark = pytest.mark.skipif(
    not DURABLE, reason="Airflow < 3.3: degraded, see tests/conformance/test_degraded.py"
)

CASES = {case.id: case for case in SYSTEMS}
TOKEN = DurableToken("afd-0123456789abcdef0123456789abcdef01234567-g1", 1)
STEPS = [
    {
        "Name": "extract",
        "ActionOnFailure": "CONTINUE",
        "HadoopJarStep": {"Jar": "command-runner.jar", "Args": ["a"]},
    },
    {
        "Name": "load",
        "ActionOnFailure": "CONTINUE",
        "HadoopJarStep": {"Jar": "command-runner.jar", "Args": ["b"]},
    },
]


def make(case_id: str, emulator: Any, deferrable: bool = False, **overrides: Any) -> TaskRunner:
    return TaskRunner(lambda: CASES[case_id].make(emulator, deferrable, **overrides))


def submits(emulator: Any, operation: str) -> list[Any]:
    return [e for e in emulator.ledger.entries if e.operation == operation]


# --------------------------------------------------------------------------- EMR steps
def test_steps_keep_readable_names_and_a_retry_after_an_interrupted_submit_finds_them(emr_emulator):
    """Upstream default ``wait_for_completion=False``: the task only adds the steps."""
    runner = make("emr_add_steps", emr_emulator, steps=STEPS, wait_for_completion=False)
    runner.store.crash_when(record_state("submitted"), before=True)
    outcome = runner.run()
    assert [o.state for o in runner.outcomes] == ["crashed", "success"]
    (added,) = submits(emr_emulator, "AddJobFlowSteps")  # the retry listed the steps, added none
    step_ids = emr_emulator.step_ids(added.external_id)
    assert outcome.result == step_ids and len(step_ids) == 2
    names = [step["Name"] for step in added.payload["Steps"]]
    # The task only submits: each name says so before its marker (docs/jobs.md).
    assert names[0].startswith("extract afd-submit-only [afd-") and names[0].endswith(" step 1/2]")
    assert names[1].startswith("load afd-submit-only [afd-") and names[1].endswith(" step 2/2]")
    assert outcome.xcoms["job_flow_id"] == emr_emulator.cluster_id


@pytest.mark.parametrize("ending", ["COMPLETED", "FAILED"])
def test_submit_only_retry_returns_the_steps_it_added_whatever_they_did(emr_emulator, ending):
    emr_emulator.lifecycle = [ending]
    runner = make("emr_add_steps", emr_emulator, steps=STEPS, wait_for_completion=False)
    runner.store.crash_when(record_state("done"), before=True)  # died before Airflow recorded success
    outcome = runner.run()
    assert [o.state for o in runner.outcomes] == ["crashed", "success"]
    (added,) = submits(emr_emulator, "AddJobFlowSteps")
    assert outcome.result == emr_emulator.step_ids(added.external_id)
    assert outcome.xcoms["job_flow_id"] == emr_emulator.cluster_id  # pushed again on the retry


def test_steps_any_failed_step_is_failed_else_any_active_step_is_active(emr_emulator):
    operator = CASES["emr_add_steps"].make(emr_emulator, False)
    assert operator.durable_phase("COMPLETED,FAILED") is JobPhase.FAILED
    assert operator.durable_phase("FAILED,RUNNING") is JobPhase.FAILED
    assert operator.durable_phase("COMPLETED,PENDING") is JobPhase.ACTIVE
    assert operator.durable_phase("COMPLETED,COMPLETED") is JobPhase.SUCCEEDED
    assert operator.durable_phase("COMPLETED,HIBERNATING") is None


def test_steps_lookup_returns_each_add_steps_call_as_one_set_earliest_first(emr_emulator):
    """Two tries that each added the same two marked steps: two sets, in the order they were added."""
    operator = CASES["emr_add_steps"].make(emr_emulator, False, steps=STEPS)
    client = emr_emulator.client()

    def add(token: DurableToken) -> list[str]:
        return client.add_job_flow_steps(
            JobFlowId=emr_emulator.cluster_id, Steps=operator._marked_steps(token)
        )["StepIds"]

    other_generation = DurableToken(TOKEN.text.removesuffix("-g1") + "-g12", 12)
    first = add(TOKEN)
    add(other_generation)  # another generation's steps (a "-g1" marker never matches "-g12")
    client.add_job_flow_steps(JobFlowId=emr_emulator.cluster_id, Steps=STEPS)  # someone else's, unmarked
    second = add(TOKEN)
    assert operator.durable_find_all(TOKEN, {}) == [first, second]
    assert operator.durable_find_all(DurableToken("afd-nobody-g1", 1), {}) == []
    # The emulator lists newest first by strictly increasing creation times, as EMR does.
    listed = client.list_steps(ClusterId=emr_emulator.cluster_id)["Steps"]
    times = [step["Status"]["Timeline"]["CreationDateTime"] for step in listed]
    assert times == sorted(times, reverse=True) and len(set(times)) == len(times)


def test_steps_lookup_reads_every_page_of_the_cluster_steps(emr_emulator):
    """EMR lists 50 steps a page, newest first: a set added before 60 other steps is on page two."""
    operator = CASES["emr_add_steps"].make(emr_emulator, False, steps=STEPS)
    client = emr_emulator.client()
    marked = operator._marked_steps(TOKEN)
    first = client.add_job_flow_steps(JobFlowId=emr_emulator.cluster_id, Steps=marked)["StepIds"]
    for _ in range(30):
        client.add_job_flow_steps(JobFlowId=emr_emulator.cluster_id, Steps=STEPS)  # someone else's
    assert "Marker" in client.list_steps(ClusterId=emr_emulator.cluster_id)  # the set is past page one
    assert operator.durable_find_all(TOKEN, {}) == [first]


def test_steps_lookup_refuses_an_incomplete_set(emr_emulator):
    operator = CASES["emr_add_steps"].make(emr_emulator, False, steps=STEPS)
    marked = operator._marked_steps(TOKEN)
    client = emr_emulator.client()
    client.add_job_flow_steps(JobFlowId=emr_emulator.cluster_id, Steps=marked)
    client.add_job_flow_steps(JobFlowId=emr_emulator.cluster_id, Steps=marked[1:])  # step 2/2 alone
    with pytest.raises(AirflowException, match=r"found only steps \[2\] of 2"):
        operator.durable_find_all(TOKEN, {})


# --------------------------------------------------------------------------- EMR Serverless
def test_serverless_queued_job_is_active_and_the_retry_reconnects(emr_serverless_emulator):
    emr_serverless_emulator.lifecycle = ["QUEUED"] * 3 + ["RUNNING", "SUCCESS"]
    runner = make("emr_serverless_start_job", emr_serverless_emulator)
    runner.store.crash_when(record_state("submitted"), before=False)
    outcome = runner.run()
    assert [o.state for o in runner.outcomes] == ["crashed", "success"], outcome.error
    assert len(emr_serverless_emulator.ledger.submissions()) == 1


@pytest.mark.parametrize("durable", [True, False], ids=["durable", "degraded"])
def test_serverless_trigger_failure_event_fails_clearly_instead_of_keyerror(emr_serverless_emulator, durable):
    emr_serverless_emulator.lifecycle = ["RUNNING", "FAILED"]
    runner = make("emr_serverless_start_job", emr_serverless_emulator, True, durable=durable)
    outcome = runner.run_try()
    assert isinstance(outcome.error, AirflowException) and not isinstance(outcome.error, KeyError)
    assert "in deferrable mode" in str(outcome.error) and "FAILED" in str(outcome.error)
    assert ("Not cancelled" in str(outcome.error)) is durable


@pytest.mark.parametrize("durable", [True, False], ids=["durable", "degraded"])
def test_serverless_sync_wait_running_out_cancels_only_when_degraded(emr_serverless_emulator, durable):
    emr_serverless_emulator.lifecycle = ["RUNNING"] * 3 + ["SUCCESS"]  # try 1 reads 2, the decision 1
    runner = make("emr_serverless_start_job", emr_serverless_emulator, durable=durable, waiter_max_attempts=2)
    first = runner.run_try()
    assert first.state == "failed"
    (job,) = emr_serverless_emulator.ledger.submissions()
    cancels = submits(emr_serverless_emulator, "CancelJobRun")
    if not durable:  # upstream's behaviour, kept where the job cannot be tracked
        assert len(cancels) == 1
        return
    assert cancels == [] and "Not cancelled" in str(first.error)
    assert emr_serverless_emulator.job(job.external_id).state == "RUNNING"
    second = runner.run_try()  # the retry reconnects to the healthy job
    assert second.state == "success" and second.result == job.external_id
    assert len(emr_serverless_emulator.ledger.submissions()) == 1


@pytest.mark.parametrize("durable", [True, False], ids=["durable", "degraded"])
def test_serverless_leaves_the_generated_job_name_on_the_operator_as_upstream(
    emr_serverless_emulator, durable
):
    from airflow.providers.amazon.aws.operators.emr import EmrServerlessStartJobOperator

    emr_serverless_emulator.lifecycle = ["SUCCESS"]
    upstream = TaskRunner(
        lambda: EmrServerlessStartJobOperator(
            task_id="job",
            application_id=emr_serverless_emulator.application_id,
            execution_role_arn="arn:aws:iam::123456789012:role/emr-job",
            job_driver={"sparkSubmit": {"entryPoint": "s3://jobs/etl.py"}},
            waiter_delay=0,
        )
    )
    assert upstream.run_try().state == "success"
    ours = make("emr_serverless_start_job", emr_serverless_emulator, durable=durable)
    outcome = ours.run_try()
    assert outcome.state == "success", outcome.error
    upstream_run, our_run = emr_serverless_emulator.ledger.submissions()
    assert upstream.last_operator.name == upstream_run.payload["name"]
    assert ours.last_operator.name == our_run.payload["name"]
    if durable:  # derived from the token, so a resubmission with the same clientToken is identical
        # ... followed by the task instance's identity (durable_find matches it in ListJobRuns' names)
        name = f"emr_serverless_job_airflow_{DurableToken(our_run.token, 1).uuid}"
        assert our_run.payload["name"].startswith(name + " afd-ti-")


@pytest.mark.parametrize(
    "overrides, token",
    [
        ({"client_request_token": "my-token"}, "my-token"),
        ({"config": {"clientToken": "cfg-token"}}, "cfg-token"),
        ({"client_request_token": "my-token", "config": {"clientToken": "cfg-token"}}, "cfg-token"),
    ],
)
def test_serverless_a_token_you_set_wins(emr_serverless_emulator, overrides, token):
    outcome = make("emr_serverless_start_job", emr_serverless_emulator, **overrides).run_try()
    assert outcome.state == "success", outcome.error
    assert [e.token for e in emr_serverless_emulator.ledger.submissions()] == [token]


# --------------------------------------------------------------------------- EMR on EKS
def test_container_a_token_you_set_wins_and_default_names_are_untouched(emr_containers_emulator):
    outcome = make("emr_container", emr_containers_emulator, client_request_token="my-token").run_try()
    assert outcome.state == "success", outcome.error
    (job,) = emr_containers_emulator.ledger.submissions()
    assert job.token == "my-token" and job.payload["name"] == "nightly-etl"


def test_container_lookup_finds_only_runs_carrying_our_client_token(emr_containers_emulator):
    operator = CASES["emr_container"].make(emr_containers_emulator, False)
    client = emr_containers_emulator.client()

    def start(client_token: str) -> str:
        return client.start_job_run(
            name="nightly-etl",
            virtualClusterId=emr_containers_emulator.virtual_cluster_id,
            executionRoleArn="arn:aws:iam::123456789012:role/emr-job",
            releaseLabel="emr-7.1.0-latest",
            jobDriver={"sparkSubmitJobDriver": {"entryPoint": "s3://jobs/etl.py"}},
            clientToken=client_token,
        )["id"]

    start("someone-elses-token")
    ours = start(TOKEN.text)
    assert operator.durable_find_all(TOKEN, {}) == [ours]
    assert operator.durable_find_all(DurableToken("afd-nobody-g1", 1), {}) == []
