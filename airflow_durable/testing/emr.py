"""Offline emulators of EMR (steps on a cluster), EMR Serverless and EMR on EKS, on the AWS base.

Each is an `AwsEmulator` in front of moto: the unmodified provider
hooks (botocore) and triggers (aiobotocore) reach it through the ``aws_default`` connection's
``endpoint_url``. What the subclasses add to moto:

* a scripted `Lifecycle` per job (moto finishes EMR Serverless jobs
  instantly and never moves steps or EMR on EKS jobs at all), pushed into moto's backend on every
  status read;
* ``clientToken`` idempotency for EMR Serverless and EMR on EKS ``StartJobRun`` (moto ignores it): a
  replay with a token already seen returns the job it started, as AWS does;
* ``CancelSteps`` (moto lacks it) and the ``InvalidRequestException`` AWS answers for an unknown step;
* a ready-made resource to submit to: a ``WAITING`` cluster (`EmrEmulator.cluster_id`), a
  ``CREATED`` application (`EmrServerlessEmulator.application_id`), a ``RUNNING`` virtual cluster
  (`EmrContainersEmulator.virtual_cluster_id`).

One ``AddJobFlowSteps`` call is one job in the ledger (its id: the step ids joined by ``,``) whose
steps move through one script together. The ledger's token is the durable token found in the step
names (EMR steps carry no native token). Lookups are strongly consistent (a step or job run is listed as
soon as the call that created it has answered) and creation times increase strictly in submission order
(``ListSteps`` lists newest first, as EMR does; EMR on EKS ``createdAt`` is the moment of creation).

This module imports nothing from Airflow.
"""

from __future__ import annotations

import datetime as dt
import json
import re
from typing import Any, ClassVar

from airflow_durable.testing._core import Response
from airflow_durable.testing.aws import ACCOUNT_ID, AwsCall, AwsEmulator, AwsJob, aws_error

__all__ = ["EmrContainersEmulator", "EmrEmulator", "EmrServerlessEmulator"]

_TOKEN_IN_NAME = re.compile(r"\[(afd-[0-9a-f]{40}-g\d+) step \d+/\d+\]$")


def _moto_client(emulator: AwsEmulator, service: str) -> Any:
    """A boto3 client straight to moto (set-up calls bypass the front: no ledger, no faults)."""
    import boto3

    return boto3.client(
        service,
        endpoint_url=emulator.moto.url,
        region_name=emulator.region,
        aws_access_key_id="testing",
        aws_secret_access_key="testing",
    )


def _without_empty(response: Response, path: tuple[str, ...]) -> Response:
    """``response`` without the member at ``path`` when moto answered it empty (``""`` or ``{}``)."""
    if response.status >= 300 or response.raw is None:
        return response
    body = json.loads(response.raw or b"{}")
    *parents, name = path
    node = body
    for parent in parents:
        node = node.get(parent) if isinstance(node, dict) else None
    if not isinstance(node, dict) or node.get(name) not in ("", {}):
        return response
    del node[name]
    return Response(response.status, headers=response.headers, raw=json.dumps(body).encode())


class EmrEmulator(AwsEmulator):
    """EMR steps on one cluster: ``AddJobFlowSteps``, ``ListSteps``, ``DescribeStep``, ``CancelSteps``.

    The cluster is ``cluster_id`` (named ``CLUSTER_NAME``), ``WAITING`` after `start`.
    """

    system: ClassVar[str] = "emr"
    service: ClassVar[str] = "elasticmapreduce"
    DEFAULT_LIFECYCLE: ClassVar[tuple[str, ...]] = ("PENDING", "RUNNING", "COMPLETED")
    submit_operations: ClassVar[frozenset[str]] = frozenset({"AddJobFlowSteps"})
    status_operations: ClassVar[frozenset[str]] = frozenset({"ListSteps", "DescribeStep"})
    cancel_operations: ClassVar[frozenset[str]] = frozenset({"CancelSteps"})
    TERMINAL: ClassVar[frozenset[str]] = frozenset({"COMPLETED", "FAILED", "CANCELLED", "INTERRUPTED"})
    CLUSTER_NAME: ClassVar[str] = "durable-emr-cluster"

    cluster_id: str = ""

    def configure_moto(self) -> None:
        answer = _moto_client(self, "emr").run_job_flow(
            Name=self.CLUSTER_NAME,
            LogUri="s3://durable-emr-logs/",
            ReleaseLabel="emr-7.1.0",
            Instances={
                "MasterInstanceType": "m5.xlarge",
                "SlaveInstanceType": "m5.xlarge",
                "InstanceCount": 1,
                "KeepJobFlowAliveWhenNoSteps": True,
            },
            JobFlowRole="EMR_EC2_DefaultRole",
            ServiceRole="EMR_DefaultRole",
            VisibleToAllUsers=True,
        )
        self.cluster_id = answer["JobFlowId"]
        self._cluster().state = "WAITING"

    def _cluster(self) -> Any:
        from moto.emr.models import emr_backends

        return emr_backends[ACCOUNT_ID][self.region].clusters[self.cluster_id]

    @property
    def local_operations(self) -> dict[str, Any]:
        return {
            "CancelSteps": self._cancel_steps,
            "DescribeStep": self._describe_step,
            "DescribeCluster": self._describe_cluster,
        }

    def _describe_cluster(self, call: AwsCall) -> Response:
        # moto answers an empty KerberosAttributes (whose Realm and KdcAdminPassword the model requires);
        # EMR leaves the member out of a cluster without Kerberos.
        return _without_empty(self._forward(call.request), ("Cluster", "KerberosAttributes"))

    def _find_step(self, step_id: str) -> Any:
        return next((step for step in self._cluster().steps if step.id == step_id), None)

    def _describe_step(self, call: AwsCall) -> Response:
        # moto answers an unknown step with an empty 200; AWS says the id is not valid.
        if self._find_step(str(call.params.get("StepId"))) is None:
            raise aws_error(
                400, "InvalidRequestException", f"Step id '{call.params.get('StepId')}' is not valid."
            )
        return self._forward(call.request)

    def _cancel_steps(self, call: AwsCall) -> dict[str, Any]:
        infos = []
        for step_id in call.params.get("StepIds", []):
            step = self._find_step(step_id)
            ok = step is not None and step.state not in self.TERMINAL
            infos.append({"StepId": step_id, "Status": "SUBMITTED" if ok else "FAILED"})
        return {"CancelStepsInfoList": infos}

    def submission_token(self, call: AwsCall) -> str | None:
        for step in call.params.get("Steps", []):
            match = _TOKEN_IN_NAME.search(str(step.get("Name", "")))
            if match:
                return match.group(1)
        return None

    def submitted_id(self, call: AwsCall, answer: Any) -> str:
        return ",".join(answer["StepIds"])

    def on_created(self, job: AwsJob, call: AwsCall) -> None:
        # Strictly increasing CreationDateTime in submission order: ListSteps (newest first, by creation
        # time) then lists the cluster's steps exactly in reverse submission order, as EMR does.
        for step_id in self.step_ids(job.job_id):
            step = self._find_step(step_id)
            if step is not None:
                step.creation_date_time = self.strictly_later(step.creation_date_time)

    def _jobs_with(self, step_ids: list[str]) -> list[str]:
        wanted = set(step_ids)
        return [job_id for job_id in self.jobs if wanted & set(job_id.split(","))]

    def status_ids(self, call: AwsCall) -> list[str]:
        if call.operation == "DescribeStep":
            return self._jobs_with([str(call.params.get("StepId"))])
        # A ListSteps without StepIds is a listing (the lookup by token), not a status poll.
        return self._jobs_with(list(call.params.get("StepIds") or []))

    def cancel_ids(self, call: AwsCall) -> list[str]:
        return self._jobs_with(list(call.params.get("StepIds") or []))

    def step_ids(self, job_id: str) -> list[str]:
        """The step ids of one ``AddJobFlowSteps`` job (the operator's external id)."""
        return str(job_id).split(",")

    def apply_state(self, job: AwsJob, state: str) -> None:
        for step_id in self.step_ids(job.job_id):
            step = self._find_step(step_id)
            if step is not None:
                step.state = state

    def shift_created(self, job: AwsJob, by: dt.timedelta) -> None:
        for step_id in self.step_ids(job.job_id):
            step = self._find_step(step_id)
            if step is not None:
                step.creation_date_time -= by

    def forget(self, job: AwsJob) -> None:
        gone = set(self.step_ids(job.job_id))
        cluster = self._cluster()
        cluster.steps = [step for step in cluster.steps if step.id not in gone]

    def cancelled_state(self, job: AwsJob) -> str | None:
        return "CANCELLED"

    def is_terminal(self, state: str) -> bool:
        return state in self.TERMINAL


class EmrServerlessEmulator(AwsEmulator):
    """EMR Serverless job runs on one emulated application, with ``clientToken`` idempotency."""

    system: ClassVar[str] = "emr-serverless"
    service: ClassVar[str] = "emr-serverless"
    DEFAULT_LIFECYCLE: ClassVar[tuple[str, ...]] = ("PENDING", "RUNNING", "SUCCESS")
    submit_operations: ClassVar[frozenset[str]] = frozenset({"StartJobRun"})
    status_operations: ClassVar[frozenset[str]] = frozenset({"GetJobRun"})
    cancel_operations: ClassVar[frozenset[str]] = frozenset({"CancelJobRun"})
    native_token_param: ClassVar[str | None] = "clientToken"
    TERMINAL: ClassVar[frozenset[str]] = frozenset({"SUCCESS", "FAILED", "CANCELLED"})

    application_id: str = ""

    @property
    def local_operations(self) -> dict[str, Any]:
        return {"GetApplication": self._get_application, "GetJobRun": self._get_job_run}

    def _get_job_run(self, call: AwsCall) -> Response:
        # moto leaves out createdBy and stateDetails, both required in JobRun (botocore's model).
        response = self._forward(call.request)
        if response.status >= 300 or response.raw is None:
            return response
        body = json.loads(response.raw)
        run = body.get("jobRun")
        if isinstance(run, dict):
            run.setdefault("createdBy", f"arn:aws:iam::{ACCOUNT_ID}:user/emulator")
            if not str(run.get("stateDetails") or "").strip():
                run["stateDetails"] = f"Job run is {run.get('state', 'PENDING')}."
        return Response(response.status, headers=response.headers, raw=json.dumps(body).encode())

    def _get_application(self, call: AwsCall) -> Response:
        # moto answers stateDetails "" (the model: at least one non-space character); EMR Serverless
        # leaves it out when there is nothing to say.
        return _without_empty(self._forward(call.request), ("application", "stateDetails"))

    def configure_moto(self) -> None:
        answer = _moto_client(self, "emr-serverless").create_application(
            name="durable-emr-serverless", releaseLabel="emr-7.1.0", type="SPARK", clientToken="setup"
        )
        self.application_id = answer["applicationId"]

    def _job_run(self, job: AwsJob) -> Any:
        from moto.emrserverless.models import emrserverless_backends

        runs = emrserverless_backends[ACCOUNT_ID][self.region].job_runs.get(self.application_id, [])
        return next((run for run in runs if run.id == job.job_id), None)

    def submitted_id(self, call: AwsCall, answer: Any) -> str:
        return str(answer["jobRunId"])

    def status_ids(self, call: AwsCall) -> list[str]:
        return [str(call.params.get("jobRunId"))]

    def cancel_ids(self, call: AwsCall) -> list[str]:
        return [str(call.params.get("jobRunId"))]

    def apply_state(self, job: AwsJob, state: str) -> None:
        run = self._job_run(job)
        if run is not None:
            run.state = state

    def on_created(self, job: AwsJob, call: AwsCall) -> None:
        # moto truncates createdAt to the day; EMR Serverless reports the moment of creation.
        from moto.core.utils import utcnow

        run = self._job_run(job)
        if run is not None:
            run.created_at = self.strictly_later(utcnow())

    def shift_created(self, job: AwsJob, by: dt.timedelta) -> None:
        run = self._job_run(job)
        if run is not None:
            run.created_at -= by

    def forget(self, job: AwsJob) -> None:
        from moto.emrserverless.models import emrserverless_backends

        backend = emrserverless_backends[ACCOUNT_ID][self.region]
        runs = backend.job_runs.get(self.application_id, [])
        backend.job_runs[self.application_id] = [run for run in runs if run.id != job.job_id]

    def cancelled_state(self, job: AwsJob) -> str | None:
        return "CANCELLED"

    def is_terminal(self, state: str) -> bool:
        return state in self.TERMINAL


class EmrContainersEmulator(AwsEmulator):
    """EMR on EKS job runs on one emulated virtual cluster, with ``clientToken`` idempotency."""

    system: ClassVar[str] = "emr-containers"
    service: ClassVar[str] = "emr-containers"
    DEFAULT_LIFECYCLE: ClassVar[tuple[str, ...]] = ("PENDING", "RUNNING", "COMPLETED")
    submit_operations: ClassVar[frozenset[str]] = frozenset({"StartJobRun"})
    status_operations: ClassVar[frozenset[str]] = frozenset({"DescribeJobRun"})
    cancel_operations: ClassVar[frozenset[str]] = frozenset({"CancelJobRun"})
    native_token_param: ClassVar[str | None] = "clientToken"
    TERMINAL: ClassVar[frozenset[str]] = frozenset({"COMPLETED", "FAILED", "CANCELLED"})

    virtual_cluster_id: str = ""

    def configure_moto(self) -> None:
        answer = _moto_client(self, "emr-containers").create_virtual_cluster(
            name="durable-emr-on-eks",
            containerProvider={
                "id": "eks-cluster",
                "type": "EKS",
                "info": {"eksInfo": {"namespace": "spark"}},
            },
            clientToken="setup",
        )
        self.virtual_cluster_id = answer["id"]

    def _backend(self) -> Any:
        from moto.emrcontainers.models import emrcontainers_backends

        return emrcontainers_backends[ACCOUNT_ID][self.region]

    @property
    def local_operations(self) -> dict[str, Any]:
        return {"CancelJobRun": self._cancel_job_run}

    def _cancel_job_run(self, call: AwsCall) -> Response:
        # moto refuses to cancel in a state it considers final; scripted states are ours to judge.
        run = self._backend().job_runs.get(self._run_id(call))
        if run is None:
            raise aws_error(404, "ResourceNotFoundException", f"Job run {self._run_id(call)} doesn't exist.")
        if run.state in self.TERMINAL:
            raise aws_error(400, "ValidationException", f"Job run {run.id} is not in a cancellable state")
        return Response(200, {"id": run.id, "virtualClusterId": run.virtual_cluster_id})

    def submitted_id(self, call: AwsCall, answer: Any) -> str:
        return str(answer["id"])

    def on_created(self, job: AwsJob, call: AwsCall) -> None:
        # moto truncates createdAt to the day; EMR on EKS reports the moment of creation.
        from moto.core.utils import utcnow

        run = self._backend().job_runs.get(job.job_id)
        if run is not None:
            run.created_at = self.strictly_later(utcnow())

    @staticmethod
    def _run_id(call: AwsCall) -> str:
        # The REST URI names the job run ``{jobRunId}``; the request shape calls it ``id``.
        return str(call.params.get("jobRunId") or call.params.get("id"))

    def status_ids(self, call: AwsCall) -> list[str]:
        return [self._run_id(call)]

    def cancel_ids(self, call: AwsCall) -> list[str]:
        return [self._run_id(call)]

    def apply_state(self, job: AwsJob, state: str) -> None:
        run = self._backend().job_runs.get(job.job_id)
        if run is not None:
            run.state = state

    def shift_created(self, job: AwsJob, by: dt.timedelta) -> None:
        run = self._backend().job_runs.get(job.job_id)
        if run is not None:
            run.created_at -= by

    def forget(self, job: AwsJob) -> None:
        self._backend().job_runs.pop(job.job_id, None)

    def cancelled_state(self, job: AwsJob) -> str | None:
        return "CANCELLED"

    def is_terminal(self, state: str) -> bool:
        return state in self.TERMINAL
