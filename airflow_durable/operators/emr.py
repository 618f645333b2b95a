"""Durable EMR operators: drop-in replacements for the provider's add-steps, Serverless and on-EKS operators.

How each EMR flavour submits, reports, classifies, defers and returns — the durable logic is in
`airflow_durable.engine`. Each ``durable_submit`` runs the provider's own ``execute`` with waiting
switched off, so cluster/application resolution, OpenLineage injection, XComs and links stay the
provider's; only the idempotency carrier is ours.

* **EMR steps** (``AddJobFlowSteps`` takes no token): the token goes into every step's ``Name``
  (``"<your name> [afd-…-g1 step 1/2]"``) and a retry that finds the submit interrupted lists the
  cluster's steps (``ListSteps``) before adding any; every try also lists them right after adding, so
  two tries that added at the same instant both adopt the earliest set and cancel the other. The
  external id is the list of step ids; any failed step makes the job failed, otherwise any active step
  makes it active.
* **EMR Serverless**: ``clientToken`` is the token (a token you set — ``client_request_token=`` or
  ``config["clientToken"]`` — wins). Also fixes what is broken upstream: ``QUEUED`` counts as active,
  a trigger failure event raises a clear error instead of ``KeyError``, and a wait that runs out of
  attempts fails the try *without cancelling* the job, which stays tracked for the retry to rejoin.
* **EMR on EKS**: ``clientToken`` is the token (``client_request_token=`` wins); a retry reconnects by
  job id, and looks the job up by name and token (``ListJobRuns(name=…)``) if the submit was interrupted.

Where the provider operator only submits (``wait_for_completion=False``), the task's work is done once
the job exists: a retry that finds it, in whatever state, returns its id (the engine's policy).
"""

from __future__ import annotations

import ast
import datetime as dt
import re
from contextlib import nullcontext
from datetime import timedelta
from typing import TYPE_CHECKING, Any, ClassVar

from airflow_durable import shims
from airflow_durable.engine import DurableJobEngine, JobNotFoundError, JobPhase, earliest_first, tokens_in
from airflow_durable.engine.identity import DurableToken as _Token
from airflow_durable.identity_tags import (
    IDENTITY_TAG,
    SUBMIT_ONLY,
    SUBMIT_ONLY_TAG,
    TOKEN_TAG,
    FoundJob,
    identities_in,
    identity_of,
)
from airflow_durable.operators import provider_required
from airflow_durable.operators._text import marked_name
from airflow_durable.shims.aws import error_code, sent_once

with provider_required(__name__):
    # Hooks, triggers and helpers are reached through the provider operator module's names at call time,
    # as upstream does: a test that patches e.g. ``EmrAddStepsTrigger`` in
    # ``airflow.providers.amazon.aws.operators.emr`` patches ours too.
    from airflow.providers.amazon.aws.hooks import emr as provider_hooks
    from airflow.providers.amazon.aws.operators import emr as provider
    from airflow.providers.common.compat.sdk import AirflowException
    from botocore.exceptions import ClientError

if TYPE_CHECKING:
    from airflow.sdk import Context

    from airflow_durable.engine import DurableToken

__all__ = [
    "DurableEmrAddStepsOperator",
    "DurableEmrContainerOperator",
    "DurableEmrServerlessStartJobOperator",
]

_STEP_NAME_MAX = 256
#: botocore emr-serverless String256 (StartJobRun name).
_JOB_RUN_NAME_MAX = 256
# ListSteps accepts at most 10 StepIds per call.
_LIST_STEPS_IDS_MAX = 10
_NOT_FOUND = frozenset({"InvalidRequestException", "ResourceNotFoundException"})


# =========================================================================== EMR steps
class DurableEmrAddStepsOperator(DurableJobEngine, provider.EmrAddStepsOperator):
    """``EmrAddStepsOperator`` whose retries find the steps they already added instead of adding more.

    Same arguments, templated fields, XComs (``job_flow_id``), extra links and return value (the list
    of step ids) as the provider operator, plus ``durable`` (default: durable wherever Airflow has a
    task state store, i.e. 3.3+). Each step's name gets a readable marker
    ``" [<token> step <i>/<n>]"``; the steps a retry finds by it are never added again.

    Stored under the task-state-store key ``airflow_durable.emr_add_steps`` (fixed).
    """

    durable_locator_fields = ("aws_conn_id", "job_flow_id")
    # botocore emr StepState; the status is the steps' states, comma-separated (see durable_phase).
    durable_active_statuses = frozenset({"PENDING", "RUNNING", "CANCEL_PENDING"})
    durable_succeeded_statuses = frozenset({"COMPLETED"})
    durable_failed_statuses = frozenset({"FAILED", "CANCELLED", "INTERRUPTED"})
    durable_id_type, durable_id_name = list[str], "EMR step id"
    durable_event_id_key = "value"
    #: The provider's deferrable path waits whatever ``wait_for_completion`` says.
    durable_deferrable_waits = True
    #: AddJobFlowSteps has no idempotency key: after adding, every try adopts the earliest marked set.
    durable_converge_after_submit: ClassVar[bool] = True

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

    def _announce(self, context: Context) -> None:
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

    def _marked_steps(self, token: DurableToken, identity: str | None = None) -> list[dict[str, Any]]:
        steps = self.steps
        if isinstance(steps, str):  # as the provider does: XCom or a .json file gives a string
            steps = ast.literal_eval(steps)
        if not isinstance(steps, list) or not all(isinstance(step, dict) for step in steps):
            raise AirflowException(
                f"steps must be a list of EMR StepConfig dicts, got {type(steps).__name__}"
            )
        count = len(steps)
        prefix = f"{identity} " if identity else ""
        # Before the bracket: the token lookup matches the bracket whole.
        mode = "" if self.durable_waits() else f"{SUBMIT_ONLY} "
        return [
            {
                **step,
                "Name": marked_name(
                    step.get("Name"), f"{mode}[{prefix}{token.text} step {i}/{count}]", _STEP_NAME_MAX
                ),
            }
            for i, step in enumerate(steps, start=1)
        ]

    def durable_submit(self, context: Context, token: DurableToken | None) -> list[str]:
        steps = self._marked_steps(token, identity_of(context)) if token is not None else self.steps
        # The provider's own execute: resolves the cluster, pushes job_flow_id and links, injects
        # OpenLineage, adds the steps — without waiting (we wait in durable_poll / durable_defer).
        # AddJobFlowSteps has no idempotency key: a durable submit is not resent blind by the SDK.
        with (
            sent_once(self.hook.conn, ("AddJobFlowSteps",)) if token is not None else nullcontext(),
            self.durable_overriding(deferrable=False, wait_for_completion=False, steps=steps),
        ):
            step_ids = provider.EmrAddStepsOperator.execute(self, context)
        return list(step_ids)

    def durable_find_all(self, token: DurableToken, context: Context) -> list[list[str]]:
        """Every set of steps added with ``token`` (one list of step ids per ``AddJobFlowSteps``), earliest
        first; ``[]`` if none.

        ``ListSteps`` lists the cluster's steps newest first; read oldest first, each ``step 1/n`` marker
        opens a set and ``step i/n`` joins the earliest set still missing step ``i``. Sets are ordered by
        their first step's creation time, ties by the cluster's own step order. A set missing steps
        raises: ``AddJobFlowSteps`` adds all its steps or none, so someone changed the cluster.
        """
        # Steps added before the identity was carried have no identity in the marker.
        found = self._step_sets(token, self._listed_steps())
        if found:
            self.log.info("task %s: steps carrying token %s: %s", self.task_id, token.text, found)
        return [[step["Id"] for step in group] for group in found]

    def _listed_steps(self) -> list[dict[str, Any]]:
        """Every step ``ListSteps`` lists on the cluster, newest first."""
        listed: list[dict[str, Any]] = []
        # Marker by hand, not get_paginator: botocore loads the paginator model once per client, which
        # cost every task ~15 ms of its happy path (this lookup runs after every submit).
        page: dict[str, Any] = {}
        while True:
            marker = {"Marker": page["Marker"]} if page.get("Marker") else {}
            page = self.hook.conn.list_steps(ClusterId=self._cluster_id(), **marker)
            listed.extend(page.get("Steps", []))
            if not page.get("Marker"):
                return listed

    def _step_sets(self, token: DurableToken, listed: list[dict[str, Any]]) -> list[list[dict[str, Any]]]:
        """The sets of steps (as listed) added with ``token``, earliest first (see `durable_find_all`)."""
        # Steps added before the identity was carried have no identity in the marker.
        pattern = re.compile(rf"\[(?:afd-ti-[0-9a-f]{{16}} )?{re.escape(token.text)} step (\d+)/(\d+)\]$")
        groups: list[tuple[int, dict[int, Any]]] = []  # (n, index -> step), in the order they began
        began: list[tuple[Any, int]] = []
        for position, step in enumerate(reversed(listed)):  # oldest first
            match = pattern.search(step.get("Name") or "")
            if not match:
                continue
            index, count = int(match.group(1)), int(match.group(2))
            group = next((g for n, g in groups if n == count and index not in g and index != 1), None)
            if group is None:
                group = {}
                groups.append((count, group))
                created = ((step.get("Status") or {}).get("Timeline") or {}).get("CreationDateTime")
                began.append((created.timestamp() if created is not None else float("inf"), position))
            group[index] = step
        incomplete = [(n, g) for n, g in groups if set(g) != set(range(1, n + 1))]
        if incomplete:
            n, group = incomplete[0]
            raise AirflowException(
                f"task {self.task_id}: found only steps {sorted(group)} of {n} marked with token "
                f"{token.text} on cluster {self._cluster_id()}: "
                f"{ {i: step['Id'] for i, step in group.items()} }. Not adding steps again; inspect the "
                "cluster, then delete the task's state-store key and retry."
            )
        ordered = [g for _, (_, g) in sorted(zip(began, groups, strict=True), key=lambda pair: pair[0])]
        return [[group[index] for index in sorted(group)] for group in ordered]

    def durable_find(self, identity: str, context: Context | None = None) -> list[FoundJob]:
        """This task instance's step sets of every generation and clear epoch, earliest first.

        One ``ListSteps`` listing of the cluster; the sets are told apart by the token beside the identity.
        Status is what ``durable_status`` reports (the steps' states, comma-separated).
        """
        listed = self._listed_steps()
        tokens = sorted(
            {
                t
                for step in listed
                if identity in identities_in(step.get("Name"))
                for t in tokens_in(step.get("Name"))
            }
        )
        found: list[FoundJob] = []
        for text in tokens:
            for group in self._step_sets(_Token(text, int(text.rsplit("-g", 1)[1])), listed):
                created = ((group[0].get("Status") or {}).get("Timeline") or {}).get("CreationDateTime")
                status = ",".join(str((step.get("Status") or {}).get("State")) for step in group)
                found.append(FoundJob([step["Id"] for step in group], status, created, text))
        return sorted(found, key=lambda job: (job.created_at is None, job.created_at or 0))

    def durable_status(self, external_id: list[str], context: Context) -> str:
        states: dict[str, str] = {}
        for start in range(0, len(external_id), _LIST_STEPS_IDS_MAX):
            chunk = external_id[start : start + _LIST_STEPS_IDS_MAX]
            try:
                response = self.hook.conn.list_steps(ClusterId=self._cluster_id(), StepIds=chunk)
            except ClientError as err:
                # An unknown/expired cluster: its steps are gone with it.
                if error_code(err) in _NOT_FOUND:
                    raise JobNotFoundError(external_id) from err
                raise
            for step in response.get("Steps", []):
                states[step["Id"]] = step["Status"]["State"]
        if any(step_id not in states for step_id in external_id):
            raise JobNotFoundError(external_id)
        return ",".join(states[step_id] for step_id in external_id)

    def durable_phase(self, status: str) -> JobPhase | None:
        # Composite: any unknown step state is unknown, else any failed step fails the job, else any
        # active step keeps it active.
        phases = {DurableJobEngine.durable_phase(self, state) for state in status.split(",")}
        for phase in (None, JobPhase.FAILED, JobPhase.ACTIVE):
            if phase in phases:
                return phase
        return JobPhase.SUCCEEDED

    def durable_cancel(self, external_id: list[str]) -> None:
        # The provider has no on_kill; EMR can cancel pending steps and interrupt running ones.
        self.hook.conn.cancel_steps(
            ClusterId=self._cluster_id(), StepIds=external_id, StepCancellationOption="SEND_INTERRUPT"
        )

    def durable_poll(self, external_id: list[str], context: Context, reconnect: bool) -> None:
        if reconnect:
            self._announce(context)
        if not self.durable_waits():
            return
        # The hook's own wait loop (EmrHook.add_job_flow_steps), without adding the steps.
        cluster_id = self._cluster_id()
        waiter = self.hook.conn.get_waiter("step_complete")
        for step_id in external_id:
            try:
                # Through the hook module's name, where upstream's add_job_flow_steps looks it up.
                provider_hooks.wait(
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

    def durable_defer(self, external_id: list[str], context: Context, reconnect: bool) -> None:
        if reconnect:
            self._announce(context)
        self.defer(
            trigger=provider.EmrAddStepsTrigger(
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

    def durable_result(self, external_id: list[str], context: Context, already_succeeded: bool) -> list[str]:
        if already_succeeded:
            self._announce(context)
        return list(external_id)


# =========================================================================== EMR Serverless
class _ServerlessCompletion(provider.EmrServerlessStartJobOperator):
    """The provider's ``execute_complete`` without its ``KeyError`` on failure events."""

    durable: bool  # set by the engine's __init__

    def execute_complete(self, context: Context, event: dict[str, Any] | None = None) -> Any:
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


class DurableEmrServerlessStartJobOperator(DurableJobEngine, _ServerlessCompletion):
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

    durable_locator_fields = ("aws_conn_id", "application_id")
    # botocore emr-serverless JobRunState: the hook's INTERMEDIATE set lacks QUEUED.
    durable_active_statuses = frozenset(provider.EmrServerlessHook.JOB_INTERMEDIATE_STATES) | {"QUEUED"}
    durable_succeeded_statuses = frozenset(provider.EmrServerlessHook.JOB_SUCCESS_STATES)
    durable_failed_statuses = frozenset(provider.EmrServerlessHook.JOB_FAILURE_STATES)
    durable_id_name = "EMR Serverless job run id"
    durable_event_id_key = "job_details.job_id"
    # The provider trigger's failure event names no job: it is about the tracked one.
    durable_event_statuses, durable_anonymous_event_statuses = frozenset({"success"}), frozenset({"failure"})

    def __init__(self, *, client_request_token: str = "", **kwargs: Any) -> None:
        super().__init__(client_request_token=client_request_token, **kwargs)
        self._user_client_token = bool(client_request_token)

    def durable_submit(self, context: Context, token: DurableToken | None) -> str:
        overrides: dict[str, Any] = {"wait_for_completion": False}
        if token is not None:
            if not self._user_client_token:
                overrides["client_request_token"] = token.text  # a config["clientToken"] still wins
            generated = self.__dict__.get("_durable_generated_name")
            # The job run carries its task instance's identity and token as tags, and the identity at the
            # end of its name (ListJobRuns shows names, not tags). Your tags and name stay.
            identity = identity_of(context)
            # ListJobRuns shows names only: a job run of a task that only submits says so before the identity.
            ending = identity if self.durable_waits() else f"{SUBMIT_ONLY} {identity}"
            mode = {} if self.durable_waits() else {SUBMIT_ONLY_TAG: "true"}
            if (not self.name or self.name == generated) and "name" not in self.config:
                # Left on the operator afterwards, as upstream leaves the name it generates; a later
                # generation submitted by this same object gets its own name again.
                self.name = self._durable_generated_name = marked_name(
                    f"emr_serverless_job_airflow_{token.uuid}", ending, _JOB_RUN_NAME_MAX
                )
            config = dict(self.config or {})
            config["tags"] = {
                **(config.get("tags") or {}),
                IDENTITY_TAG: identity,
                TOKEN_TAG: token.text,
                **mode,
            }
            if "name" in config:
                config["name"] = marked_name(config["name"], ending, _JOB_RUN_NAME_MAX)
            elif self.name != self.__dict__.get("_durable_generated_name"):
                overrides["name"] = marked_name(self.name, ending, _JOB_RUN_NAME_MAX)
            overrides["config"] = config
        # The provider's own execute: starts the application if needed (it may defer on that and resume
        # into execute: the record says "submitting", so the resumed try submits with the same token),
        # then start_job_run and the links — without waiting.
        with self.durable_overriding(**overrides):
            job_id = provider.EmrServerlessStartJobOperator.execute(self, context)
        if not job_id:  # never track "None": the provider's execute returns the id StartJobRun gave
            raise AirflowException("EMR Serverless StartJobRun returned no job run id")
        self.job_id = job_id
        return job_id

    def durable_created_at(self, external_id: str, context: Context) -> dt.datetime | None:
        # StartJobRun answers no creation time and nothing reads the run before the wait: a GetJobRun is
        # worth its call only where the clientToken is the user's own, which every DAG run may send again.
        if not (self._user_client_token or (self.config or {}).get("clientToken")):
            return None
        created = self.hook.conn.get_job_run(applicationId=self.application_id, jobRunId=external_id)[
            "jobRun"
        ].get("createdAt")
        return created if isinstance(created, dt.datetime) else None

    def durable_find(
        self, identity: str, context: Context | None = None, since: dt.datetime | None = None
    ) -> list[FoundJob]:
        """This task instance's job runs of every generation and clear epoch, newest first.

        ``ListJobRuns`` filters no name or tag: the application's job runs (created after ``since``) are
        matched on the identity at the end of their name, then ``GetJobRun`` reads the tags of a match.
        """
        kwargs: dict[str, Any] = {"applicationId": self.application_id, "maxResults": 50}
        if since is not None:
            kwargs["createdAtAfter"] = since
        found: list[FoundJob] = []
        while True:
            page = self.hook.conn.list_job_runs(**kwargs)
            for run in page.get("jobRuns", []):
                if identity not in identities_in(run.get("name")):
                    continue
                tags = (
                    self.hook.conn.get_job_run(applicationId=self.application_id, jobRunId=run["id"])[
                        "jobRun"
                    ].get("tags")
                    or {}
                )
                if tags.get(IDENTITY_TAG, identity) != identity:
                    continue
                found.append(
                    FoundJob(run["id"], str(run["state"]), run.get("createdAt"), tags.get(TOKEN_TAG))
                )
            if not page.get("nextToken"):
                return found
            kwargs["nextToken"] = page["nextToken"]

    def durable_status(self, external_id: str, context: Context) -> str:
        try:
            response = self.hook.conn.get_job_run(applicationId=self.application_id, jobRunId=external_id)
        except ClientError as err:
            if error_code(err) == "ResourceNotFoundException":
                raise JobNotFoundError(external_id) from err
            raise
        return response["jobRun"]["state"]

    def durable_cancel(self, external_id: str) -> None:
        self.hook.conn.cancel_job_run(applicationId=self.application_id, jobRunId=external_id)

    def durable_poll(self, external_id: str, context: Context, reconnect: bool) -> None:
        self.job_id = external_id
        if reconnect:
            self.persist_links(context)
        if not self.durable_waits():
            return
        try:
            provider.wait(
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

    def durable_defer(self, external_id: str, context: Context, reconnect: bool) -> None:
        self.job_id = external_id
        if reconnect:
            self.persist_links(context)
        if not self.durable_waits():
            return
        self.defer(
            trigger=provider.EmrServerlessStartJobTrigger(
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

    def durable_result(self, external_id: str, context: Context, already_succeeded: bool) -> str:
        self.job_id = external_id
        if already_succeeded:
            self.persist_links(context)
        return external_id


# =========================================================================== EMR on EKS
class DurableEmrContainerOperator(DurableJobEngine, provider.EmrContainerOperator):
    """``EmrContainerOperator`` whose retries reconnect to the job run instead of starting another.

    Same arguments, templated fields and return value (the job run id) as the provider operator, plus
    ``durable``. ``StartJobRun`` receives ``clientToken`` derived from the task instance and generation
    (``client_request_token=`` wins). A retry reconnects by job id; if the previous try died inside
    the submit call, it first looks the job up by ``name`` and token (``ListJobRuns`` + ``DescribeJobRun``).

    Stored under the task-state-store key ``airflow_durable.emr_container`` (fixed).
    """

    durable_locator_fields = ("aws_conn_id", "virtual_cluster_id")
    durable_active_statuses = frozenset(provider.EmrContainerHook.INTERMEDIATE_STATES)
    durable_succeeded_statuses = frozenset(provider.EmrContainerHook.SUCCESS_STATES)
    durable_failed_statuses = frozenset(provider.EmrContainerHook.FAILURE_STATES)
    durable_id_name = "EMR on EKS job run id"
    durable_event_id_key = "job_id"
    #: The provider's deferrable path waits whatever ``wait_for_completion`` says.
    durable_deferrable_waits = True

    def _client_token(self, token: DurableToken) -> str:
        return self.client_request_token or token.text

    def durable_submit(self, context: Context, token: DurableToken | None) -> str:
        client_token = self._client_token(token) if token is not None else self.client_request_token
        tags = self.tags
        if token is not None:
            # Your tags stay; ListJobRuns answers them with each run (durable_find).
            tags = {**(self.tags or {}), IDENTITY_TAG: identity_of(context), TOKEN_TAG: token.text}
            if not self.durable_waits():
                tags[SUBMIT_ONLY_TAG] = "true"
        with self.durable_overriding(
            deferrable=False, wait_for_completion=False, client_request_token=client_token, tags=tags
        ):
            job_id = provider.EmrContainerOperator.execute(self, context)
        self.job_id = job_id
        return job_id  # type: ignore[return-value]

    def durable_find_all(self, token: DurableToken, context: Context) -> list[str]:
        """Every job run named ``name`` that carries our client token, earliest created first (ties: by
        id); ``[]`` if none. ``clientToken`` dedupes resubmissions, so this is at most one run in practice.
        """
        client_token = self._client_token(token)
        found: dict[str, Any] = {}
        paginator = self.hook.conn.get_paginator("list_job_runs")
        for page in paginator.paginate(virtualClusterId=self.virtual_cluster_id, name=self.name):
            for run in page.get("jobRuns", []):
                described = self.hook.conn.describe_job_run(
                    virtualClusterId=self.virtual_cluster_id, id=run["id"]
                )["jobRun"]
                if described.get("clientToken") == client_token:
                    created = described.get("createdAt") or run.get("createdAt")
                    found[run["id"]] = created
        runs = earliest_first(found)
        if runs:
            self.log.info("task %s: job runs carrying token %s: %s", self.task_id, client_token, runs)
        return runs

    def durable_find(self, identity: str, context: Context | None = None) -> list[FoundJob]:
        """This task instance's job runs of every generation and clear epoch, newest first.

        ``ListJobRuns(name=…)`` answers the operator's job runs with their tags; the identity tag picks ours.
        """
        kwargs: dict[str, Any] = {"virtualClusterId": self.virtual_cluster_id, "name": self.name}
        found: list[FoundJob] = []
        while True:
            page = self.hook.conn.list_job_runs(**kwargs)
            for run in page.get("jobRuns", []):
                tags = run.get("tags") or {}
                if tags.get(IDENTITY_TAG) == identity:
                    found.append(
                        FoundJob(run["id"], str(run["state"]), run.get("createdAt"), tags.get(TOKEN_TAG))
                    )
            if not page.get("nextToken"):
                return found
            kwargs["nextToken"] = page["nextToken"]

    def durable_created_at(self, external_id: str, context: Context) -> dt.datetime | None:
        # StartJobRun answers no creation time: reading it puts a DescribeJobRun between the submit and the
        # id being stored, worth it only for a clientToken of the user's own, which every DAG run may send
        # again (ours is unique to the task instance, DAG run and generation). Where the wait follows, that
        # read is the one it begins with (the hook's check_query_status), which it then answers: no extra
        # call.
        if not self.client_request_token:
            return None
        waits = self.durable_waits()
        try:
            run = self.hook.conn.describe_job_run(virtualClusterId=self.virtual_cluster_id, id=external_id)[
                "jobRun"
            ]
        except ClientError as err:
            if error_code(err) == "ResourceNotFoundException":
                raise
            # What the hook's check_query_status makes of it: no state yet (the poll goes on), and here no
            # creation time either.
            self.log.error("AWS request failed, check logs for more info: %s", err)
            run = {}
        if waits:
            _answer_next_status(self.hook, external_id, run.get("state"))
        created = run.get("createdAt")
        return created if isinstance(created, dt.datetime) else None

    def durable_status(self, external_id: str, context: Context) -> str:
        try:
            response = self.hook.conn.describe_job_run(
                virtualClusterId=self.virtual_cluster_id, id=external_id
            )
        except ClientError as err:
            if error_code(err) == "ResourceNotFoundException":
                raise JobNotFoundError(external_id) from err
            raise
        return response["jobRun"]["state"]

    def durable_cancel(self, external_id: str) -> None:
        self.hook.stop_query(external_id)

    def durable_poll(self, external_id: str, context: Context, reconnect: bool) -> None:
        self.job_id = external_id
        if not self.durable_waits():
            return
        # The provider's sync wait (EmrContainerOperator.execute), without submitting.
        query_status = self.hook.poll_query_status(
            external_id, max_polling_attempts=self.max_polling_attempts, poll_interval=self.poll_interval
        )
        self.check_failure(query_status)
        if not query_status or query_status in provider.EmrContainerHook.INTERMEDIATE_STATES:
            raise AirflowException(
                f"Final state of EMR Containers job is {query_status}. "
                f"Max tries of poll status exceeded, query_execution_id is {external_id}."
            )

    def durable_defer(self, external_id: str, context: Context, reconnect: bool) -> None:
        # The provider's deferrable path: a job already terminal completes (or fails) inline.
        self.job_id = external_id
        query_status = self.hook.check_query_status(job_id=external_id)
        self.check_failure(query_status)
        if query_status in provider.EmrContainerHook.SUCCESS_STATES:
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
            timeout=timeout,
            trigger=provider.EmrContainerTrigger(**trigger_kwargs),
            method_name="execute_complete",
        )

    def durable_result(self, external_id: str, context: Context, already_succeeded: bool) -> str:
        self.job_id = external_id
        return external_id


def _answer_next_status(hook: Any, job_id: str, state: Any) -> None:
    """Answer the hook's next ``check_query_status(job_id)`` with ``state``, read a moment ago."""
    real = hook.check_query_status

    def once(*args: Any, **kwargs: Any) -> Any:
        vars(hook).pop("check_query_status", None)  # one answer; later reads ask the service
        asked = args[0] if args else kwargs.get("job_id")
        return state if asked == job_id else real(*args, **kwargs)

    hook.check_query_status = once
