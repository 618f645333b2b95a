"""Durable Amazon Redshift Data operator: a drop-in replacement for the provider's ``RedshiftDataOperator``.

How Redshift Data submits, reports, classifies, defers and returns — the durable logic is in
`airflow_durable.engine`.

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

from airflow_durable.engine import DurableJobEngine, JobNotFoundError, tokens_in
from airflow_durable.identity_tags import SUBMIT_ONLY, FoundJob, identity_of
from airflow_durable.operators import provider_required
from airflow_durable.shims import aws as compat

with provider_required(__name__):
    # The trigger is reached through the provider operator module's name at call time, as upstream does: a
    # test that patches ``airflow.providers.amazon.aws.operators.redshift_data.RedshiftDataTrigger``
    # patches ours too.
    from airflow.providers.amazon.aws.operators import redshift_data as provider

if TYPE_CHECKING:
    from airflow.sdk import Context

    from airflow_durable.engine import DurableToken

__all__ = ["DurableRedshiftDataOperator"]

_NOT_FOUND_CODES = frozenset({"ResourceNotFoundException", "ValidationException"})
#: botocore redshift-data StatementNameString allows 2048 characters; names stay within 500 (what an
#: older model may still enforce client-side: the identity and token lead, so a cut only shortens yours).
_STATEMENT_NAME_MAX = 500


class DurableRedshiftDataOperator(DurableJobEngine, provider.RedshiftDataOperator):
    """``RedshiftDataOperator`` whose retries reconnect to the statement instead of running the SQL again.

    Same arguments, templated fields, XComs and return value as the provider operator, plus ``durable``
    (default: durable wherever Airflow has a task state store, i.e. 3.3+).

    Stored under the task-state-store key ``airflow_durable.redshift_data`` (fixed).
    """

    durable_locator_fields = ("aws_conn_id", "region_name")
    # Statement statuses (botocore StatementStatusString; hooks/redshift_data.py).
    durable_active_statuses = frozenset({"SUBMITTED", "PICKED", "STARTED"})
    durable_succeeded_statuses = frozenset({"FINISHED"})
    durable_failed_statuses = frozenset({"FAILED", "ABORTED"})
    durable_id_name = "Redshift Data statement id"
    durable_event_id_key = "statement_id"

    def durable_submit(self, context: Context, token: DurableToken | None) -> str:
        if token is None:
            return compat.submit_statement(self, context, None)
        # ListStatements matches a StatementName prefix: the identity leads, your name follows.
        mode = "" if self.durable_waits() else SUBMIT_ONLY
        name = " ".join(p for p in (identity_of(context), token.text, mode, self.statement_name) if p)
        with self.durable_overriding(statement_name=name[:_STATEMENT_NAME_MAX]):
            # Sets statement_id (what on_kill cancels) and pushes session_id, as the provider does.
            return compat.submit_statement(self, context, token.text)

    def durable_status(self, external_id: str, context: Context) -> str:
        try:
            described = self.hook.conn.describe_statement(Id=external_id)
        except Exception as err:
            if compat.error_code(err) in _NOT_FOUND_CODES:
                raise JobNotFoundError(external_id) from err
            raise
        # A statement's session never changes: the reconnect's session_id XCom needs no second call.
        self.__dict__.setdefault("_durable_sessions", {})[external_id] = described.get("SessionId")
        return str(described["Status"])

    def durable_cancel(self, external_id: str) -> None:
        self.hook.conn.cancel_statement(Id=external_id)

    def durable_find(self, identity: str, context: Context | None = None) -> list[FoundJob]:
        """This task instance's statements of every generation and clear epoch, newest first.

        ``ListStatements`` matches a name prefix: the identity leads every name we give (24 hours of history).
        """
        found: list[FoundJob] = []
        kwargs: dict[str, Any] = {"StatementName": identity, "Status": "ALL", "MaxResults": 100}
        while True:
            page = self.hook.conn.list_statements(**kwargs)
            for statement in page.get("Statements", []):
                name = str(statement.get("StatementName") or "")
                if name.split(" ", 1)[0] != identity:
                    continue
                tokens = sorted(tokens_in(name.split(" ", 2)[1] if " " in name else ""))
                found.append(
                    FoundJob(
                        statement["Id"],
                        str(statement["Status"]),
                        statement.get("CreatedAt"),
                        tokens[0] if tokens else None,
                    )
                )
            if not page.get("NextToken"):
                return found
            kwargs["NextToken"] = page["NextToken"]

    def durable_poll(self, external_id: str, context: Context, reconnect: bool) -> None:
        self.statement_id = external_id
        if reconnect:
            self._push_session_id(external_id, context)
        if self.durable_waits():
            # Raises RedshiftDataQueryFailedError / ...AbortedError when the statement ends badly.
            self.hook.wait_for_results(external_id, poll_interval=self.poll_interval)

    def durable_defer(self, external_id: str, context: Context, reconnect: bool) -> None:
        self.statement_id = external_id
        if reconnect:
            self._push_session_id(external_id, context)
        # As upstream: no wait at all with wait_for_completion=False; no deferral if already finished.
        if self.durable_waits() and not self.hook.check_query_is_finished(external_id):
            self.defer(
                timeout=self.execution_timeout,
                trigger=provider.RedshiftDataTrigger(
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

    def durable_result(self, external_id: str, context: Context, already_succeeded: bool) -> Any:
        self.statement_id = external_id
        if already_succeeded:
            self._push_session_id(external_id, context)
        return self.get_sql_results(statement_id=external_id, return_sql_result=self.return_sql_result)

    def get_sql_results(self, statement_id: str, return_sql_result: bool) -> Any:
        # The provider's execute_complete already fetched them in this process: fetching again would
        # double the DescribeStatement and every GetStatementResult page of a deferred statement.
        fetched: dict[tuple[str, bool], Any] = self.__dict__.setdefault("_durable_sql_results", {})
        key = (statement_id, bool(return_sql_result))
        if key not in fetched:
            fetched[key] = super().get_sql_results(
                statement_id=statement_id, return_sql_result=return_sql_result
            )
        return fetched[key]

    def _push_session_id(self, external_id: str, context: Context) -> None:
        # The try that submitted pushed it (as upstream, whatever do_xcom_push); a new try starts with
        # its XComs cleared.
        sessions: dict[str, Any] = self.__dict__.get("_durable_sessions", {})
        if external_id in sessions:
            session_id = sessions[external_id]
        else:
            session_id = self.hook.conn.describe_statement(Id=external_id).get("SessionId")
        if session_id:
            context["ti"].xcom_push(key="session_id", value=session_id)
