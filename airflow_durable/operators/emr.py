"""Durable EMR operators: drop-in replacements for the provider's add-steps, Serverless and on-EKS operators.

How each EMR flavour submits, reports, classifies, defers and returns — the durable logic is in
:mod:`airflow_durable.engine`. Each ``durable_submit`` runs the provider's own ``execute`` with waiting
switched off, so cluster/application resolution, OpenLineage injection, XComs and links stay the
provider's; only the idempotency carrier is ours.

* **EMR steps** (``AddJobFlowSteps`` takes no token): the token goes into every step's ``Name``
  (``"<your name> [afd-…-g1 step 1/2]"``) and a retry that finds the submit interrupted lists the
  cluster's steps (``ListSteps``) before adding any. The external id is the list of step ids; any
  failed step makes the job failed, otherwise any active step makes it active.
* **EMR Serverless**: ``clientToken`` is the token (a token you set — ``client_request_token=`` or
  ``config["clientToken"]`` — wins). Also fixes what is broken upstream: ``QUEUED`` counts as active,
  a trigger failure event raises a clear error instead of ``KeyError``, and a wait that runs out of
  attempts fails the try *without cancelling* the job, which stays tracked for the retry to rejoin.
* **EMR on EKS**: ``clientToken`` is the token (``client_request_token=`` wins); a retry reconnects by
  job id, and looks the job up by name and token (``ListJobRuns(name=…)``) if the submit was interrupted.

Where the provider operator only submits (``wait_for_completion=False`` and not deferrable), the task's
work is done once the job exists: a retry that finds it, in whatever state, returns its id.
"""

from __future__ import annotations

import ast
import contextlib
import re
from datetime import timedelta
from typing import TYPE_CHECKING, Any

from airflow.providers.amazon.aws.hooks.emr import EmrContainerHook, EmrServerlessHook
from airflow.providers.amazon.aws.operators import emr as provider
from airflow.providers.amazon.aws.triggers.emr import (
    EmrAddStepsTrigger,
    EmrContainerTrigger,
    EmrServerlessStartJobTrigger,
)
from airflow.providers.amazon.aws.utils.waiter_with_logging import wait
from airflow.providers.common.compat.sdk import AirflowException
from botocore.exceptions import ClientError

from airflow_durable import shims
from airflow_durable.engine import DurableJobEngine, JobNotFoundError, JobPhase

if TYPE_CHECKING:
    from collections.abc import Iterator, Mapping

    from airflow_durable.engine import DurableToken

__all__ = [
    "DurableEmrAddStepsOperator",
    "DurableEmrContainerOperator",
    "DurableEmrServerlessStartJobOperator",
]

# botocore emr StepState.
_STEP_ACTIVE = frozenset({"PENDING", "RUNNING", "CANCEL_PENDING"})
_STEP_FAILED = frozenset({"FAILED", "CANCELLED", "INTERRUPTED"})
_STEP_SUCCEEDED = "COMPLETED"
_STEP_NAME_MAX = 256
# ListSteps accepts at most 10 StepIds per call.
_LIST_STEPS_IDS_MAX = 10

# botocore emr-serverless JobRunState: the hook's INTERMEDIATE set lacks QUEUED.
_SERVERLESS_ACTIVE = frozenset(EmrServerlessHook.JOB_INTERMEDIATE_STATES) | {"QUEUED"}
_SERVERLESS_FAILED = frozenset(EmrServerlessHook.JOB_FAILURE_STATES)
_SERVERLESS_SUCCEEDED = frozenset(EmrServerlessHook.JOB_SUCCESS_STATES)

_CONTAINER_ACTIVE = frozenset(EmrContainerHook.INTERMEDIATE_STATES)
_CONTAINER_FAILED = frozenset(EmrContainerHook.FAILURE_STATES)
_CONTAINER_SUCCEEDED = frozenset(EmrContainerHook.SUCCESS_STATES)


def _error_code(err: BaseException) -> str | None:
    if isinstance(err, ClientError):
        return err.response.get("Error", {}).get("Code")
    return None


@contextlib.contextmanager
def _overriding(obj: Any, **attrs: Any) -> Iterator[None]:
    """Set attributes for the duration of one provider call, then restore them (even on TaskDeferred)."""
    saved = {name: getattr(obj, name) for name in attrs}
    for name, value in attrs.items():
        setattr(obj, name, value)
    try:
        yield
    finally:
        for name, value in saved.items():
            setattr(obj, name, value)


def _phase(
    status: str, active: frozenset[str], failed: frozenset[str], succeeded: frozenset[str]
) -> JobPhase | None:
    if status in active:
        return JobPhase.ACTIVE
    if status in succeeded:
        return JobPhase.SUCCEEDED
    if status in failed:
        return JobPhase.FAILED
    return None


def _parse_str_id(value: Any, what: str) -> str:
    if not isinstance(value, str) or not value.strip():
        raise ValueError(f"an {what} id is a non-empty string, got {value!r}")
    return value


class _SubmitOnly:
    """Where the provider operator does not wait, a job that exists is the task's whole result."""

    def _waits(self) -> bool:
        raise NotImplementedError

    def _submit_only_phase(self, phase: JobPhase | None) -> JobPhase | None:
        # Upstream's task succeeds as soon as the job is submitted; a retry that finds the job (any
        # known state) must not submit it again. A user's clear starts a new epoch and submits anew.
        if phase is None or self._waits():
            return phase
        return JobPhase.SUCCEEDED


# =========================================================================== EMR steps
class DurableEmrAddStepsOperator(_SubmitOnly, DurableJobEngine, provider.EmrAddStepsOperator):
    """``EmrAddStepsOperator`` whose retries find the steps they already added instead of adding more.

    Same arguments, templated fields, XComs (``job_flow_id``), extra links and return value (the list
    of step ids) as the provider operator, plus ``durable`` (default: durable wherever Airflow has a
    task state store, i.e. 3.3+). Each step's name gets a readable marker
    ``" [<token> step <i>/<n>]"``; the steps a retry finds by it are never added again.

    Stored under the task-state-store key ``airflow_durable.emr_add_steps`` (fixed).
    """

    external_id_key = "airflow_durable.emr_add_steps"
    durable_system = "emr-steps"
    durable_locator_fields = ("aws_conn_id", "job_flow_id")

    def _waits(self) -> bool:
        return bool(self.deferrable or self.wait_for_completion)

    def _cluster_id(self) -> str:
        cluster_id = getattr(self, "_durable_cluster_id", None)
        if cluster_id is None:
            cluster_id = self.job_flow_id or self.hook.get_cluster_id_by_name(
                str(self.job_flow_name), self.cluster_states
            )
            if not cluster_id:
                raise AirflowException(f"No cluster found for name: {self.job_flow_name}")
            self._durable_cluster_id = cluster_id
        return cluster_id

    def _announce(self, context: Mapping[str, Any]) -> None:
        """The XCom and links the provider's execute pushes before adding steps (a new try lost them)."""
        cluster_id = self._cluster_id()
        if self.do_xcom_push:
            context["ti"].xcom_push(key="job_flow_id", value=cluster_id)
        provider.EmrClusterLink.persist(
            context=context,
            operator=self,
            region_name=self.hook.conn_region_name,
            aws_partition=self.hook.conn_partition,
            job_flow_id=cluster_id,
        )
        provider.EmrLogsLink.persist(
            context=context,
            operator=self,
            region_name=self.hook.conn_region_name,
            aws_partition=self.hook.conn_partition,
            job_flow_id=self.job_flow_id,
            log_uri=provider.get_log_uri(emr_client=self.hook.conn, job_flow_id=cluster_id),
        )

    @staticmethod
    def _marker(token: DurableToken, index: int, count: int) -> str:
        return f"[{token.text} step {index}/{count}]"

    def _marked_steps(self, token: DurableToken) -> list[dict[str, Any]]:
        steps = self.steps
        if isinstance(steps, str):  # as the provider does: XCom or a .json file gives a string
            steps = ast.literal_eval(steps)
        if not isinstance(steps, list) or not all(isinstance(step, dict) for step in steps):
            raise AirflowException(
                f"steps must be a list of EMR StepConfig dicts, got {type(steps).__name__}"
            )
        marked = []
        for index, step in enumerate(steps, start=1):
            marker = self._marker(token, index, len(steps))
            name = str(step.get("Name") or "").strip()
            room = _STEP_NAME_MAX - len(marker) - 1
            readable = name if len(name) <= room else name[: room - 1] + "…"
            marked.append({**step, "Name": f"{readable} {marker}" if readable else marker})
        return marked

    def durable_submit(self, context: Mapping[str, Any], token: DurableToken | None) -> list[str]:
        overrides: dict[str, Any] = {"deferrable": False, "wait_for_completion": False}
        if token is not None:
            overrides["steps"] = self._marked_steps(token)
        # The provider's own execute: resolves the cluster, pushes job_flow_id and links, injects
        # OpenLineage, adds the steps — without waiting (we wait in durable_poll / durable_defer).
        with _overriding(self, **overrides):
            step_ids = provider.EmrAddStepsOperator.execute(self, context)  # type: ignore[arg-type]
        return list(step_ids)

    def durable_find(self, token: DurableToken, context: Mapping[str, Any]) -> list[str] | None:
        pattern = re.compile(rf"\[{re.escape(token.text)} step (\d+)/(\d+)\]$")
        found: dict[int, str] = {}
        counts: set[int] = set()
        paginator = self.hook.conn.get_paginator("list_steps")
        for page in paginator.paginate(ClusterId=self._cluster_id()):
            for step in page.get("Steps", []):
                match = pattern.search(step.get("Name") or "")
                if match:
                    found[int(match.group(1))] = step["Id"]
                    counts.add(int(match.group(2)))
        if not found:
            return None
        expected = set(range(1, max(counts) + 1))
        if len(counts) != 1 or set(found) != expected:
            # AddJobFlowSteps adds all steps or none; anything else means someone changed the cluster.
            raise AirflowException(
                f"task {self.task_id}: found only steps {sorted(found)} of {max(counts)} marked with token "
                f"{token.text} on cluster {self._cluster_id()}: {found}. Not adding steps again; inspect "
                "the cluster, then delete the task's state-store key and retry."
            )
        self.log.info("task %s: found steps %s added by an interrupted try", self.task_id, found)
        return [found[index] for index in sorted(found)]

    def durable_parse_id(self, value: Any) -> list[str]:
        if not isinstance(value, list) or not value:
            raise ValueError(f"EMR step ids are a non-empty list of strings, got {value!r}")
        return [_parse_str_id(step_id, "EMR step") for step_id in value]

    def durable_status(self, external_id: list[str], context: Mapping[str, Any]) -> str:
        states: dict[str, str] = {}
        for start in range(0, len(external_id), _LIST_STEPS_IDS_MAX):
            chunk = external_id[start : start + _LIST_STEPS_IDS_MAX]
            try:
                response = self.hook.conn.list_steps(ClusterId=self._cluster_id(), StepIds=chunk)
            except ClientError as err:
                # An unknown/expired cluster: its steps are gone with it.
                if _error_code(err) in ("InvalidRequestException", "ResourceNotFoundException"):
                    raise JobNotFoundError(external_id) from err
                raise
            for step in response.get("Steps", []):
                states[step["Id"]] = step["Status"]["State"]
        if any(step_id not in states for step_id in external_id):
            raise JobNotFoundError(external_id)
        return ",".join(states[step_id] for step_id in external_id)

    def durable_phase(self, status: str) -> JobPhase | None:
        states = status.split(",")
        if any(s not in _STEP_ACTIVE | _STEP_FAILED | {_STEP_SUCCEEDED} for s in states):
            return None
        if any(s in _STEP_FAILED for s in states):
            phase = JobPhase.FAILED
        elif any(s in _STEP_ACTIVE for s in states):
            phase = JobPhase.ACTIVE
        else:
            phase = JobPhase.SUCCEEDED
        return self._submit_only_phase(phase)

    def durable_cancel(self, external_id: list[str]) -> None:
        # The provider has no on_kill; EMR can cancel pending steps and interrupt running ones.
        self.hook.conn.cancel_steps(
            ClusterId=self._cluster_id(), StepIds=external_id, StepCancellationOption="SEND_INTERRUPT"
        )

    def durable_poll(self, external_id: list[str], context: Mapping[str, Any], reconnect: bool) -> None:
        if reconnect:
            self._announce(context)
        if not self.wait_for_completion:
            return
        # The hook's own wait loop (EmrHook.add_job_flow_steps), without adding the steps.
        cluster_id = self._cluster_id()
        waiter = self.hook.conn.get_waiter("step_complete")
        for step_id in external_id:
            try:
                wait(
                    waiter=waiter,
                    waiter_max_attempts=self.waiter_max_attempts or 60,
                    waiter_delay=self.waiter_delay or 30,
                    args={"ClusterId": cluster_id, "StepId": step_id},
                    failure_message=f"EMR Steps failed: {step_id}",
                    status_message="EMR Step status is",
                    status_args=["Step.Status.State", "Step.Status.StateChangeReason"],
                )
            except AirflowException as ex:
                if "EMR Steps failed" in str(ex):
                    resp = self.hook.conn.describe_step(ClusterId=cluster_id, StepId=step_id)
                    failure_details = resp["Step"]["Status"].get("FailureDetails", None)
                    if failure_details:
                        self.log.error("EMR Steps failed: %s", failure_details)
                raise

    def durable_defer(self, external_id: list[str], context: Mapping[str, Any], reconnect: bool) -> None:
        if reconnect:
            self._announce(context)
        self.defer(
            trigger=EmrAddStepsTrigger(
                job_flow_id=self._cluster_id(),
                step_ids=external_id,
                aws_conn_id=self.aws_conn_id,
                region_name=self.region_name,
                verify=self.verify,
                botocore_config=self.botocore_config,
                waiter_max_attempts=self.waiter_max_attempts,
                waiter_delay=self.waiter_delay,
            ),
            method_name="execute_complete",
        )

    def durable_event_id(self, event: Any) -> list[str]:
        if not isinstance(event, dict):
            raise ValueError(f"expected a dict event, got {type(event).__name__}")
        if event.get("status") not in ("success", "error"):
            raise ValueError(f"unknown event status {event.get('status')!r}")
        return self.durable_parse_id(event.get("value"))

    def durable_result(
        self, external_id: list[str], context: Mapping[str, Any], already_succeeded: bool
    ) -> list[str]:
        if already_succeeded:
            self._announce(context)
        return list(external_id)


# =========================================================================== EMR Serverless
class _ServerlessCompletion(provider.EmrServerlessStartJobOperator):
    """The provider's ``execute_complete`` without its ``KeyError`` on failure events."""

    def execute_complete(self, context: Mapping[str, Any], event: dict[str, Any] | None = None) -> Any:
        if isinstance(event, dict) and event.get("status") == "success":
            self.log.info("Serverless job completed")
            return event["job_details"]["job_id"]
        message = event.get("message") if isinstance(event, dict) else event
        job_id = getattr(self, "_durable_external_id", None) or self.job_id
        if self.durable and shims.get_task_state_store(context) is not None:
            # Durable: never cancel a job because *our* wait failed (trigger gave up, API errors): the
            # job stays tracked, the next try reconnects to it or sees how it ended.
            raise AirflowException(
                f"task {self.task_id}: EMR Serverless job {job_id} failed or the wait for it timed out in "
                f"deferrable mode: {message}. Not cancelled: the next try reconnects to the job if it still "
                "runs, or submits a new one if it ended badly."
            )
        # Degraded: what upstream intends (cancel, then fail) — its failure events carry no job id, so
        # the job can only be cancelled when the event names it.
        details = event.get("job_details") if isinstance(event, dict) else None
        job_id = details.get("job_id") if isinstance(details, dict) else job_id
        if job_id:
            self.log.info("Cancelling EMR Serverless job %s", job_id)
            try:
                self.hook.conn.cancel_job_run(applicationId=self.application_id, jobRunId=job_id)
            except Exception:
                self.log.exception("Failed to cancel EMR Serverless job %s", job_id)
        raise AirflowException(f"EMR Serverless job failed or timed out in deferrable mode: {message}")


class DurableEmrServerlessStartJobOperator(_SubmitOnly, DurableJobEngine, _ServerlessCompletion):
    """``EmrServerlessStartJobOperator`` whose retries reconnect to the job run instead of starting another.

    Same arguments, templated fields, extra links and return value (the job run id) as the provider
    operator, plus ``durable``. ``StartJobRun`` receives ``clientToken`` derived from the task instance
    and generation; a ``client_request_token=`` or ``config["clientToken"]`` you set yourself wins
    (then a retry after a *failed* run gets that failed run back, as upstream). Without ``name`` the job
    is named ``emr_serverless_job_airflow_<uuid of the token>`` so a resubmission is identical.

    Unlike upstream, the synchronous wait running out of ``waiter_max_attempts`` does **not** cancel the
    job: the try fails, the job stays tracked and the retry reconnects to it (``durable=False`` and
    Airflow < 3.3 keep upstream's cancel).

    Stored under the task-state-store key ``airflow_durable.emr_serverless_start_job`` (fixed).
    """

    external_id_key = "airflow_durable.emr_serverless_start_job"
    durable_system = "emr-serverless"
    durable_locator_fields = ("aws_conn_id", "application_id")

    def __init__(self, *, client_request_token: str = "", **kwargs: Any) -> None:
        super().__init__(client_request_token=client_request_token, **kwargs)
        self._user_client_token = bool(client_request_token)

    def _waits(self) -> bool:
        return bool(self.wait_for_completion)

    def durable_submit(self, context: Mapping[str, Any], token: DurableToken | None) -> str:
        overrides: dict[str, Any] = {"wait_for_completion": False}
        if token is not None:
            if not self._user_client_token:
                overrides["client_request_token"] = token.text  # a config["clientToken"] still wins
            if not self.name and "name" not in self.config:
                overrides["name"] = f"emr_serverless_job_airflow_{token.uuid}"
        # The provider's own execute: starts the application if needed (it may defer on that and resume
        # into execute: the record says "submitting", so the resumed try submits with the same token),
        # then start_job_run and the links — without waiting.
        with _overriding(self, **overrides):
            job_id = provider.EmrServerlessStartJobOperator.execute(self, context)  # type: ignore[arg-type]
        self.job_id = job_id
        return job_id

    def durable_parse_id(self, value: Any) -> str:
        return _parse_str_id(value, "EMR Serverless job run")

    def durable_status(self, external_id: str, context: Mapping[str, Any]) -> str:
        try:
            response = self.hook.conn.get_job_run(applicationId=self.application_id, jobRunId=external_id)
        except ClientError as err:
            if _error_code(err) == "ResourceNotFoundException":
                raise JobNotFoundError(external_id) from err
            raise
        return response["jobRun"]["state"]

    def durable_phase(self, status: str) -> JobPhase | None:
        return self._submit_only_phase(
            _phase(status, _SERVERLESS_ACTIVE, _SERVERLESS_FAILED, _SERVERLESS_SUCCEEDED)
        )

    def durable_cancel(self, external_id: str) -> None:
        self.hook.conn.cancel_job_run(applicationId=self.application_id, jobRunId=external_id)

    def durable_poll(self, external_id: str, context: Mapping[str, Any], reconnect: bool) -> None:
        self.job_id = external_id
        if reconnect:
            self.persist_links(context)
        if not self.wait_for_completion:
            return
        try:
            wait(
                waiter=self.hook.get_waiter("serverless_job_completed"),
                waiter_max_attempts=self.waiter_max_attempts,
                waiter_delay=self.waiter_delay,
                args={"applicationId": self.application_id, "jobRunId": external_id},
                failure_message="Serverless Job failed",
                status_message="Serverless Job status is",
                status_args=["jobRun.state", "jobRun.stateDetails"],
            )
        except AirflowException as err:
            if "Waiter error: max attempts reached" not in str(err):
                raise
            if self.durable and shims.get_task_state_store(context) is not None:
                raise AirflowException(
                    f"task {self.task_id}: EMR Serverless job {external_id} is still running after "
                    f"waiter_max_attempts={self.waiter_max_attempts} × waiter_delay={self.waiter_delay}s. "
                    "Not cancelled: the job stays tracked and the next try reconnects to it."
                ) from err
            self.log.info("Cancelling EMR Serverless job %s due to max waiter attempts reached", external_id)
            try:
                self.hook.conn.cancel_job_run(applicationId=self.application_id, jobRunId=external_id)
            except Exception:
                self.log.exception("Failed to cancel EMR Serverless job %s after waiter timeout", external_id)
            raise

    def durable_defer(self, external_id: str, context: Mapping[str, Any], reconnect: bool) -> None:
        self.job_id = external_id
        if reconnect:
            self.persist_links(context)
        if not self.wait_for_completion:
            return
        self.defer(
            trigger=EmrServerlessStartJobTrigger(
                application_id=self.application_id,
                job_id=external_id,
                waiter_delay=self.waiter_delay,
                waiter_max_attempts=self.waiter_max_attempts,
                aws_conn_id=self.aws_conn_id,
                region_name=self.region_name,
                verify=self.verify,
                botocore_config=self.botocore_config,
                cancel_on_kill=self.cancel_on_kill,
            ),
            method_name="execute_complete",
            timeout=timedelta(seconds=self.waiter_max_attempts * self.waiter_delay),
        )

    def durable_event_id(self, event: Any) -> str | None:
        if not isinstance(event, dict):
            raise ValueError(f"expected a dict event, got {type(event).__name__}")
        status = event.get("status")
        if status == "success":
            details = event.get("job_details")
            if not isinstance(details, dict):
                raise ValueError("a success event carries job_details")
            return self.durable_parse_id(details.get("job_id"))
        if status == "failure" and isinstance(event.get("message"), str):
            # The provider trigger's failure event names no job: it is about the tracked one.
            return None
        raise ValueError(f"unknown event status {status!r}")

    def durable_result(self, external_id: str, context: Mapping[str, Any], already_succeeded: bool) -> str:
        self.job_id = external_id
        if already_succeeded:
            self.persist_links(context)
        return external_id


# =========================================================================== EMR on EKS
class DurableEmrContainerOperator(_SubmitOnly, DurableJobEngine, provider.EmrContainerOperator):
    """``EmrContainerOperator`` whose retries reconnect to the job run instead of starting another.

    Same arguments, templated fields and return value (the job run id) as the provider operator, plus
    ``durable``. ``StartJobRun`` receives ``clientToken`` derived from the task instance and generation
    (``client_request_token=`` wins). A retry reconnects by job id; if the previous try died inside
    the submit call, it first looks the job up by ``name`` and token (``ListJobRuns`` + ``DescribeJobRun``).

    Stored under the task-state-store key ``airflow_durable.emr_container`` (fixed).
    """

    external_id_key = "airflow_durable.emr_container"
    durable_system = "emr-eks"
    durable_locator_fields = ("aws_conn_id", "virtual_cluster_id")

    def _waits(self) -> bool:
        return bool(self.deferrable or self.wait_for_completion)

    def _client_token(self, token: DurableToken) -> str:
        return self.client_request_token or token.text

    def durable_submit(self, context: Mapping[str, Any], token: DurableToken | None) -> str:
        overrides: dict[str, Any] = {"deferrable": False, "wait_for_completion": False}
        if token is not None:
            overrides["client_request_token"] = self._client_token(token)
        with _overriding(self, **overrides):
            job_id = provider.EmrContainerOperator.execute(self, context)  # type: ignore[arg-type]
        self.job_id = job_id
        return job_id  # type: ignore[return-value]

    def durable_find(self, token: DurableToken, context: Mapping[str, Any]) -> str | None:
        client_token = self._client_token(token)
        paginator = self.hook.conn.get_paginator("list_job_runs")
        for page in paginator.paginate(virtualClusterId=self.virtual_cluster_id, name=self.name):
            for run in page.get("jobRuns", []):
                described = self.hook.conn.describe_job_run(
                    virtualClusterId=self.virtual_cluster_id, id=run["id"]
                )
                if described["jobRun"].get("clientToken") == client_token:
                    self.log.info(
                        "task %s: found job run %s started by an interrupted try", self.task_id, run["id"]
                    )
                    return run["id"]
        return None

    def durable_parse_id(self, value: Any) -> str:
        return _parse_str_id(value, "EMR on EKS job run")

    def durable_status(self, external_id: str, context: Mapping[str, Any]) -> str:
        try:
            response = self.hook.conn.describe_job_run(
                virtualClusterId=self.virtual_cluster_id, id=external_id
            )
        except ClientError as err:
            if _error_code(err) == "ResourceNotFoundException":
                raise JobNotFoundError(external_id) from err
            raise
        return response["jobRun"]["state"]

    def durable_phase(self, status: str) -> JobPhase | None:
        return self._submit_only_phase(
            _phase(status, _CONTAINER_ACTIVE, _CONTAINER_FAILED, _CONTAINER_SUCCEEDED)
        )

    def durable_cancel(self, external_id: str) -> None:
        self.hook.stop_query(external_id)

    def durable_poll(self, external_id: str, context: Mapping[str, Any], reconnect: bool) -> None:
        self.job_id = external_id
        if not self.wait_for_completion:
            return
        # The provider's sync wait (EmrContainerOperator.execute), without submitting.
        query_status = self.hook.poll_query_status(
            external_id, max_polling_attempts=self.max_polling_attempts, poll_interval=self.poll_interval
        )
        self.check_failure(query_status)
        if not query_status or query_status in EmrContainerHook.INTERMEDIATE_STATES:
            raise AirflowException(
                f"Final state of EMR Containers job is {query_status}. "
                f"Max tries of poll status exceeded, query_execution_id is {external_id}."
            )

    def durable_defer(self, external_id: str, context: Mapping[str, Any], reconnect: bool) -> None:
        # The provider's deferrable path: a job already terminal completes (or fails) inline.
        self.job_id = external_id
        query_status = self.hook.check_query_status(job_id=external_id)
        self.check_failure(query_status)
        if query_status in EmrContainerHook.SUCCESS_STATES:
            return
        timeout = (
            timedelta(seconds=self.max_polling_attempts * self.poll_interval)
            if self.max_polling_attempts
            else self.execution_timeout
        )
        trigger_kwargs: dict[str, Any] = dict(
            virtual_cluster_id=self.virtual_cluster_id,
            job_id=external_id,
            aws_conn_id=self.aws_conn_id,
            region_name=self.region_name,
            verify=self.verify,
            botocore_config=self.botocore_config,
            waiter_delay=self.poll_interval,
            cancel_on_kill=self.cancel_on_kill,
        )
        if self.max_polling_attempts:
            trigger_kwargs["waiter_max_attempts"] = self.max_polling_attempts
        self.defer(
            timeout=timeout, trigger=EmrContainerTrigger(**trigger_kwargs), method_name="execute_complete"
        )

    def durable_event_id(self, event: Any) -> str:
        if not isinstance(event, dict):
            raise ValueError(f"expected a dict event, got {type(event).__name__}")
        if event.get("status") not in ("success", "error"):
            raise ValueError(f"unknown event status {event.get('status')!r}")
        return self.durable_parse_id(event.get("job_id"))

    def durable_result(self, external_id: str, context: Mapping[str, Any], already_succeeded: bool) -> str:
        self.job_id = external_id
        return external_id
