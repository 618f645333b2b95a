"""An offline AWS Batch, as the provider's ``BatchClientHook`` and ``BatchJobTrigger`` call it.

moto serves the Batch API (its Docker-less backend); the emulator sits in front of it, drives each
job's status from a scripted lifecycle (set in moto's backend before every ``DescribeJobs``), records
``SubmitJob`` / ``TerminateJob`` / ``CancelJob`` in the ledger and injects faults::

    with BatchEmulator(lifecycle=["RUNNABLE", "RUNNING", "SUCCEEDED"]) as batch:
        batch.install_connection(monkeypatch.setenv)          # aws_default → the emulator
        job_id = batch.client().submit_job(jobName="x", jobQueue=batch.job_queue,
                                           jobDefinition=batch.job_definition)["jobId"]
        batch.set_state(job_id, "FAILED")

A job queue (`BatchEmulator.job_queue`) and a container job definition
(`BatchEmulator.job_definition`) exist after `start`. Batch has no cancelled state: a
cancelled or terminated job ends ``FAILED``. An expired job disappears from ``DescribeJobs`` and
``ListJobs``, as after Batch's retention period. Throttling is ``429 TooManyRequestsException``.
SubmitJob has no idempotency token; the ledger records the ``airflow-durable-token`` tag as the token.
Lookups are strongly consistent: a job is in ``ListJobs`` / ``DescribeJobs`` (tags and ``createdAt``
included) as soon as ``SubmitJob`` has answered, and ``createdAt`` increases strictly with every
submission, so "the earliest job carrying a tag" is the one submitted first. ``ListJobs`` pages as Batch
does: ``maxResults`` (1-1000, default 100) entries a page in submission order and a ``nextToken`` while more
remain; a token it did not give, or one of another listing, answers ``400 ClientException``.
"""

from __future__ import annotations

import datetime as dt
import json
from collections.abc import Mapping, Sequence
from typing import Any, ClassVar

from airflow_durable.testing._core import FaultPlan, Ledger, Response
from airflow_durable.testing.aws import AwsCall, AwsEmulator, AwsJob, ListPaging, MotoServer

__all__ = ["TOKEN_TAG", "BatchEmulator"]

#: The tag the durable Batch operator carries its token in (the ledger reads it).
TOKEN_TAG = "airflow-durable-token"
TERMINAL_STATES = frozenset({"SUCCEEDED", "FAILED"})
#: The statuses moto (and the Batch API model) accept; any other scripted state is written into the
#: DescribeJobs answer instead, so a test can serve a status the client has never heard of.
MOTO_STATES = frozenset({"SUBMITTED", "PENDING", "RUNNABLE", "STARTING", "RUNNING", "SUCCEEDED", "FAILED"})
STARTED_STATES = frozenset({"STARTING", "RUNNING", "SUCCEEDED", "FAILED"})


class BatchEmulator(AwsEmulator):
    """AWS Batch on a loopback port: moto behind a recording, scripted, fault-injecting front."""

    system = "batch"
    service = "batch"
    DEFAULT_LIFECYCLE = ("SUBMITTED", "RUNNABLE", "RUNNING", "SUCCEEDED")
    submit_operations = frozenset({"SubmitJob"})
    status_operations = frozenset({"DescribeJobs"})
    cancel_operations = frozenset({"TerminateJob", "CancelJob"})
    list_operations: ClassVar[Mapping[str, tuple[str, str]]] = {"ListJobs": ("jobSummaryList", "jobId")}
    # moto answers every job in one page; Batch pages by maxResults (at least 1; up to 1000 with a status;
    # 100 when the request names none, per the API reference) and an opaque nextToken it rejects with a
    # ClientException when it did not give it.
    paged_operations: ClassVar[Mapping[str, ListPaging]] = {
        "ListJobs": ListPaging("jobSummaryList", "jobId", error_code="ClientException")
    }
    ERROR_CODES: ClassVar[dict[int, str]] = {400: "TooManyRequestsException", 429: "TooManyRequestsException"}

    def __init__(
        self,
        ledger: Ledger | None = None,
        lifecycle: Sequence[str] | None = None,
        *,
        faults: FaultPlan | None = None,
        moto: MotoServer | None = None,
        region: str = "us-east-1",
        job_queue: str = "emulator-queue",
        job_definition: str = "emulator-job-def",
    ) -> None:
        super().__init__(ledger, lifecycle, faults=faults, moto=moto, region=region)
        self.job_queue = job_queue
        self.job_definition = job_definition

    # ------------------------------------------------------------------ moto set-up
    def configure_moto(self) -> None:
        import boto3
        from moto.core.config import default_user_config
        from moto.moto_api import state_manager

        # Docker-less Batch (jobs "finish" at submit), and statuses that never move on their own: the
        # lifecycle sets them at every DescribeJobs.
        default_user_config.setdefault("batch", {})["use_docker"] = False
        state_manager.set_transition("batch::job", {"progression": "manual", "times": 2**62})

        def client(name: str) -> Any:
            return boto3.client(
                name,
                endpoint_url=self.moto.url,
                region_name=self.region,
                aws_access_key_id="testing",
                aws_secret_access_key="testing",
            )

        role = client("iam").create_role(
            RoleName="emulator-batch-role",
            AssumeRolePolicyDocument=json.dumps({"Version": "2012-10-17", "Statement": []}),
        )["Role"]["Arn"]
        batch = client("batch")
        env = batch.create_compute_environment(
            computeEnvironmentName="emulator-env", type="UNMANAGED", state="ENABLED", serviceRole=role
        )["computeEnvironmentArn"]
        batch.create_job_queue(
            jobQueueName=self.job_queue,
            state="ENABLED",
            priority=1,
            computeEnvironmentOrder=[{"order": 1, "computeEnvironment": env}],
        )
        batch.register_job_definition(
            jobDefinitionName=self.job_definition,
            type="container",
            containerProperties={"image": "busybox", "vcpus": 1, "memory": 128, "command": ["true"]},
        )

    def _backend(self) -> Any:
        from moto.batch.models import batch_backends

        return batch_backends[self.account_id][self.region]

    # ------------------------------------------------------------------ the adapter hooks
    def submission_token(self, call: AwsCall) -> str | None:
        tags = call.params.get("tags") or {}
        token = tags.get(TOKEN_TAG) if isinstance(tags, dict) else None
        return None if token is None else str(token)

    def submitted_id(self, call: AwsCall, answer: Any) -> str:
        return str(answer["jobId"])

    def status_ids(self, call: AwsCall) -> list[str]:
        return [str(j) for j in call.params.get("jobs") or []]

    def cancel_ids(self, call: AwsCall) -> list[str]:
        return [str(call.params["jobId"])] if call.params.get("jobId") else []

    def cancelled_state(self, job: AwsJob) -> str:
        return "FAILED"

    def is_terminal(self, state: str) -> bool:
        return state in TERMINAL_STATES

    def on_created(self, job: AwsJob, call: AwsCall) -> None:
        # Array jobs: moto creates the children too; keep their ids so states reach them as well.
        moto_job = self._backend()._jobs.get(job.job_id)
        children = getattr(moto_job, "_child_jobs", None) or []
        job.extra["children"] = [child.job_id for child in children]
        if moto_job is not None:
            # createdAt (ms) orders jobs as they were submitted, as Batch's does.
            moto_job.job_created_at = self.strictly_later(moto_job.job_created_at)

    def apply_state(self, job: AwsJob, state: str) -> None:
        backend = self._backend()
        for job_id in [job.job_id, *job.extra.get("children", [])]:
            moto_job = backend._jobs.get(job_id)
            if moto_job is None:
                continue
            moto_job.status = state if state in MOTO_STATES else "RUNNING"
            moto_job.job_stopped = state in TERMINAL_STATES
            if state == "FAILED":
                moto_job.job_stopped_reason = (
                    "Terminated by the test" if job.cancelled else "Essential container in task exited"
                )
                moto_job.exit_code = 1
            elif state == "SUCCEEDED":
                moto_job.job_stopped_reason = None
                moto_job.exit_code = 0
            else:
                moto_job.job_stopped_reason = None
                moto_job.exit_code = None

    def rewrite_status(self, call: AwsCall, response: Response) -> Response:
        unknown = {j.job_id: j.reported for j in self.jobs.values() if j.reported not in MOTO_STATES}
        if not unknown or response.raw is None:
            return response
        answer = json.loads(response.raw)
        for job in answer.get("jobs", []):
            if job.get("jobId") in unknown:
                job["status"] = unknown[job["jobId"]]
        return Response(response.status, headers=response.headers, raw=json.dumps(answer).encode())

    def shift_created(self, job: AwsJob, by: dt.timedelta) -> None:
        moto_job = self._backend()._jobs.get(job.job_id)
        if moto_job is not None:
            moto_job.job_created_at -= by

    def forget(self, job: AwsJob) -> None:
        backend = self._backend()
        for job_id in [job.job_id, *job.extra.get("children", [])]:
            moto_job = backend._jobs.pop(job_id, None)
            if moto_job is not None and moto_job in moto_job.job_queue.jobs:
                moto_job.job_queue.jobs.remove(moto_job)

    # ------------------------------------------------------------------ helpers for tests
    def submit(self, name: str = "job", tags: dict[str, str] | None = None, **kwargs: Any) -> str:
        """Submit a job through the front (recorded like any other), for tests that need one."""
        answer = self.client().submit_job(
            jobName=name,
            jobQueue=self.job_queue,
            jobDefinition=self.job_definition,
            tags=tags or {},
            **kwargs,
        )
        return str(answer["jobId"])
