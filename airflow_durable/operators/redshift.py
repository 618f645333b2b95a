"""Durable Amazon Redshift Data operator: a drop-in replacement for the provider's ``RedshiftDataOperator``.

How Redshift Data submits, reports, classifies, defers and returns — the durable logic is in
:mod:`airflow_durable.engine`.

* Submission carries Redshift Data's native ``ClientToken`` (the task instance's token, ≤64 chars) on
  ``ExecuteStatement`` (``sql`` a string) and ``BatchExecuteStatement`` (``sql`` a list), so a retry after a
  crash between submit and persist gets the statement it already started. Upstream never sends one
  (botocore fills in a random token per call).
* Status is ``DescribeStatement``'s ``Status``; ``ResourceNotFoundException`` / ``ValidationException``
  mean the statement is gone (Redshift keeps statement history for 24 hours).
* Waiting reuses the hook's poll loop (``deferrable=False``) or defers to the provider's
  ``RedshiftDataTrigger`` (``deferrable=True``). ``wait_for_completion=False`` returns right after the
  submit, as upstream.
* Result and XComs are the provider's: the statement ids (sub-statement ids for a batch), or the
  ``GetStatementResult`` responses with ``return_sql_result=True``; the ``session_id`` XCom when a
  session is used — also on a retry that reconnects or finds the statement already finished.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from airflow.providers.amazon.aws.operators import redshift_data as provider
from airflow.providers.amazon.aws.triggers.redshift_data import RedshiftDataTrigger

from airflow_durable.engine import DurableJobEngine, JobNotFoundError, JobPhase
from airflow_durable.shims import aws as compat

if TYPE_CHECKING:
    from collections.abc import Mapping

    from airflow_durable.engine import DurableToken

__all__ = ["DurableRedshiftDataOperator"]

# Redshift Data statement statuses (botocore StatementStatusString; hooks/redshift_data.py).
_ACTIVE = frozenset({"SUBMITTED", "PICKED", "STARTED"})
_FAILED = frozenset({"FAILED", "ABORTED"})
_NOT_FOUND_CODES = frozenset({"ResourceNotFoundException", "ValidationException"})


class DurableRedshiftDataOperator(DurableJobEngine, provider.RedshiftDataOperator):
    """``RedshiftDataOperator`` whose retries reconnect to the statement instead of running the SQL again.

    Same arguments, templated fields, XComs and return value as the provider operator, plus ``durable``
    (default: durable wherever Airflow has a task state store, i.e. 3.3+).

    Stored under the task-state-store key ``airflow_durable.redshift_data`` (fixed).
    """

    external_id_key = "airflow_durable.redshift_data"
    durable_system = "redshift"
    durable_locator_fields = ("aws_conn_id", "region_name")

    def durable_submit(self, context: Mapping[str, Any], token: DurableToken | None) -> str:
        # Sets statement_id (what on_kill cancels) and pushes session_id, as the provider does.
        return compat.submit_statement(self, context, token.text if token is not None else None)

    def durable_parse_id(self, value: Any) -> str:
        if not isinstance(value, str) or not value.strip():
            raise ValueError(f"a Redshift Data statement id is a non-empty string, got {value!r}")
        return value

    def durable_status(self, external_id: str, context: Mapping[str, Any]) -> str:
        try:
            return str(self.hook.conn.describe_statement(Id=external_id)["Status"])
        except Exception as err:
            if compat.error_code(err) in _NOT_FOUND_CODES:
                raise JobNotFoundError(external_id) from err
            raise

    def durable_phase(self, status: str) -> JobPhase | None:
        if status in _ACTIVE:
            return JobPhase.ACTIVE
        if status == "FINISHED":
            return JobPhase.SUCCEEDED
        if status in _FAILED:
            return JobPhase.FAILED
        return None

    def durable_cancel(self, external_id: str) -> None:
        self.hook.conn.cancel_statement(Id=external_id)

    def durable_poll(self, external_id: str, context: Mapping[str, Any], reconnect: bool) -> None:
        self.statement_id = external_id
        if reconnect:
            self._push_session_id(external_id, context)
        if self.wait_for_completion:
            # Raises RedshiftDataQueryFailedError / ...AbortedError when the statement ends badly.
            self.hook.wait_for_results(external_id, poll_interval=self.poll_interval)

    def durable_defer(self, external_id: str, context: Mapping[str, Any], reconnect: bool) -> None:
        self.statement_id = external_id
        if reconnect:
            self._push_session_id(external_id, context)
        # As upstream: no wait at all with wait_for_completion=False; no deferral if already finished.
        if self.wait_for_completion and not self.hook.check_query_is_finished(external_id):
            self.defer(
                timeout=self.execution_timeout,
                trigger=RedshiftDataTrigger(
                    statement_id=external_id,
                    task_id=self.task_id,
                    poll_interval=self.poll_interval,
                    aws_conn_id=self.aws_conn_id,
                    region_name=self.region_name,
                    verify=self.verify,
                    botocore_config=self.botocore_config,
                    cancel_on_kill=self.cancel_on_kill,
                ),
                method_name="execute_complete",
            )

    def durable_event_id(self, event: Any) -> str:
        if not isinstance(event, dict):
            raise ValueError(f"expected a dict event, got {type(event).__name__}")
        if event.get("status") not in ("success", "error"):
            raise ValueError(f"event status must be 'success' or 'error', got {event.get('status')!r}")
        return self.durable_parse_id(event.get("statement_id"))

    def durable_result(self, external_id: str, context: Mapping[str, Any], already_succeeded: bool) -> Any:
        self.statement_id = external_id
        if already_succeeded:
            self._push_session_id(external_id, context)
        return self.get_sql_results(statement_id=external_id, return_sql_result=self.return_sql_result)

    def _push_session_id(self, external_id: str, context: Mapping[str, Any]) -> None:
        # The try that submitted pushed it (as upstream, whatever do_xcom_push); a new try starts with
        # its XComs cleared.
        session_id = self.hook.conn.describe_statement(Id=external_id).get("SessionId")
        if session_id:
            context["ti"].xcom_push(key="session_id", value=session_id)
