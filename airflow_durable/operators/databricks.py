"""Durable Databricks operators: drop-in replacements for the provider's submit-run and run-now.

How Databricks submits, reports, classifies, defers and returns — the durable logic is in
:mod:`airflow_durable.engine`.

* Submission carries Databricks' native ``idempotency_token`` (derived from the task instance and
  generation), so a retry after a crash between submit and persist gets the run it already started.
  A token you set yourself (``idempotency_token=`` or ``json["idempotency_token"]``) wins; then a
  retry after a *failed* run gets that same failed run back from Databricks, as upstream.
* Status is ``LIFE_CYCLE:RESULT`` from ``runs/get``; a 404 means the run history expired.
* Waiting reuses the provider's own poll loop (``deferrable=False``) or defers to the provider's
  ``DatabricksExecutionTrigger`` (``deferrable=True``).
* Result and XComs are the provider's: ``run_id``, ``run_page_url`` (and ``job_id`` when deferrable),
  return value ``None``.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from airflow.providers.databricks.hooks.databricks import RunState
from airflow.providers.databricks.operators import databricks as provider
from airflow.providers.databricks.utils.databricks import validate_trigger_event

from airflow_durable.engine import DurableJobEngine, JobNotFoundError, JobPhase
from airflow_durable.shims import databricks as compat

if TYPE_CHECKING:
    from collections.abc import Mapping

    from airflow_durable.engine import DurableToken

__all__ = ["DurableDatabricksRunNowOperator", "DurableDatabricksSubmitRunOperator"]

# Databricks run life cycle states (hooks/databricks.py RunState.RUN_LIFE_CYCLE_STATES).
_ACTIVE_LIFE_CYCLE = frozenset({"PENDING", "QUEUED", "RUNNING", "TERMINATING", "BLOCKED", "WAITING_FOR_RETRY"})
_TERMINAL_LIFE_CYCLE = frozenset({"TERMINATED", "SKIPPED", "INTERNAL_ERROR"})


class _DatabricksRunAdapter(DurableJobEngine):
    """What both Databricks operators share: a run id, ``runs/get``, ``runs/cancel``, the trigger."""

    run_id: int | None

    def _payload(self, context: Mapping[str, Any]) -> dict[str, Any]:
        raise NotImplementedError

    def _start_run(self, payload: dict[str, Any]) -> int:
        raise NotImplementedError

    def durable_submit(self, context: Mapping[str, Any], token: DurableToken | None) -> int:
        payload = self._payload(context)
        if token is not None:
            payload.setdefault("idempotency_token", token.text)
        # Set run_id the moment the run exists, as the provider does, so on_kill can cancel it.
        self.run_id = self._start_run(payload)
        return self.run_id

    def durable_parse_id(self, value: Any) -> int:
        if isinstance(value, bool) or not isinstance(value, int) or value <= 0:
            raise ValueError(f"a Databricks run id is a positive integer, got {value!r}")
        return value

    def durable_status(self, external_id: int, context: Mapping[str, Any]) -> str:
        try:
            run_info = self._hook.get_run(external_id)
        except Exception as err:
            if compat.is_not_found(err):
                raise JobNotFoundError(external_id) from err
            raise
        state = run_info.get("state") or {}
        life_cycle = state.get("life_cycle_state")
        result = state.get("result_state") or ""
        return f"{life_cycle}:{result}"

    def durable_phase(self, status: str) -> JobPhase | None:
        life_cycle, _, result = status.partition(":")
        if life_cycle in _ACTIVE_LIFE_CYCLE:
            return JobPhase.ACTIVE
        if life_cycle in _TERMINAL_LIFE_CYCLE:
            return JobPhase.SUCCEEDED if (life_cycle, result) == ("TERMINATED", "SUCCESS") else JobPhase.FAILED
        return None

    def durable_cancel(self, external_id: int) -> None:
        self._hook.cancel_run(external_id)

    def durable_poll(self, external_id: int, context: Mapping[str, Any], reconnect: bool) -> None:
        self.run_id = external_id
        provider._handle_databricks_operator_execution(self, self._hook, self.log, context)

    def durable_defer(self, external_id: int, context: Mapping[str, Any], reconnect: bool) -> None:
        self.run_id = external_id
        # Pushes job_id / run_id / run_page_url, then defers to DatabricksExecutionTrigger — or calls
        # execute_complete inline when the run is already terminal.
        provider._handle_deferrable_databricks_operator_execution(self, self._hook, self.log, context)

    def durable_event_id(self, event: Any) -> int:
        if not isinstance(event, dict):
            raise ValueError(f"expected a dict event, got {type(event).__name__}")
        validate_trigger_event(event)
        RunState.from_json(event["run_state"])
        return self.durable_parse_id(event["run_id"])

    def durable_result(self, external_id: int, context: Mapping[str, Any], already_succeeded: bool) -> None:
        self.run_id = external_id
        if already_succeeded and self.do_xcom_push:
            # No poll or deferral ran in this try: push what the provider's path would have pushed.
            ti = context["ti"]
            if self.deferrable:
                ti.xcom_push(key=provider.XCOM_JOB_ID_KEY, value=self._hook.get_job_id(external_id))
            ti.xcom_push(key=provider.XCOM_RUN_ID_KEY, value=external_id)
            ti.xcom_push(key=provider.XCOM_RUN_PAGE_URL_KEY, value=self._hook.get_run_page_url(external_id))
        return None


class DurableDatabricksSubmitRunOperator(_DatabricksRunAdapter, provider.DatabricksSubmitRunOperator):
    """``DatabricksSubmitRunOperator`` whose retries reconnect to the run instead of submitting another.

    Same arguments, templated fields, XComs, extra links and return value as the provider operator,
    plus ``durable`` (default: durable wherever Airflow has a task state store, i.e. 3.3+).

    Stored under the task-state-store key ``airflow_durable.databricks_submit_run`` (fixed).
    """

    external_id_key = "airflow_durable.databricks_submit_run"
    durable_system = "databricks"
    durable_locator_fields = ("databricks_conn_id",)

    def _payload(self, context: Mapping[str, Any]) -> dict[str, Any]:
        return compat.submit_payload(self, context)

    def _start_run(self, payload: dict[str, Any]) -> int:
        return self._hook.submit_run(payload)


class DurableDatabricksRunNowOperator(_DatabricksRunAdapter, provider.DatabricksRunNowOperator):
    """``DatabricksRunNowOperator`` whose retries reconnect to the run instead of starting another.

    ``cancel_previous_runs=True`` still cancels the job's other runs before a *new* run is started,
    but never the run a retry reconnects to. ``repair_run`` works on both paths as upstream.

    Stored under the task-state-store key ``airflow_durable.databricks_run_now`` (fixed).
    """

    external_id_key = "airflow_durable.databricks_run_now"
    durable_system = "databricks"
    durable_locator_fields = ("databricks_conn_id",)

    def _payload(self, context: Mapping[str, Any]) -> dict[str, Any]:
        return compat.run_now_payload(self, context)

    def _start_run(self, payload: dict[str, Any]) -> int:
        return self._hook.run_now(payload)

    def durable_poll(self, external_id: int, context: Mapping[str, Any], reconnect: bool) -> None:
        # The provider's repair path reads the merged payload; on reconnect no submit built it, and
        # rebuilding it must not re-run cancel_previous_runs (that would cancel the run we rejoin).
        compat.prepare_run_now_reconnect(self, context)
        super().durable_poll(external_id, context, reconnect)
