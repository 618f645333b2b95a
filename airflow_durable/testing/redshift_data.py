"""An offline Amazon Redshift Data API, as the provider's ``RedshiftDataHook`` and trigger call it.

moto's ``redshift-data`` has no ``BatchExecuteStatement``, ``ListStatements``, sessions or
``ClientToken``, so this emulator answers the Redshift Data API itself, on the shared AWS front (other
services still pass through to moto)::

    with RedshiftDataEmulator(lifecycle=["SUBMITTED", "STARTED", "FINISHED"]) as rsd:
        rsd.install_connection(monkeypatch.setenv)
        statement_id = rsd.client().execute_statement(
            ClusterIdentifier="c", Database="dev", Sql="select 1", ClientToken="t1")["Id"]
        rsd.set_state(statement_id, "FAILED")

Each ``DescribeStatement`` of a statement returns its current state, then advances its script; the
sub-statements of a batch (``<id>:1``, ``<id>:2``...) mirror their parent. ``ClientToken`` is honoured
as AWS does: a second submission with the same token returns the statement it already created
(ledger ``created=False``). An expired statement answers ``ResourceNotFoundException``.
"""

from __future__ import annotations

import datetime as dt
import json
import time
import uuid
from collections.abc import Callable, Mapping
from typing import Any

from airflow_durable.testing.aws import AwsCall, AwsEmulator, AwsJob, aws_error

__all__ = ["RedshiftDataEmulator"]

TERMINAL_STATES = frozenset({"FINISHED", "FAILED", "ABORTED"})
ACTIVE_STATES = frozenset({"SUBMITTED", "PICKED", "STARTED"})
MAX_TOKEN_LENGTH = 64

#: What ``GetStatementResult`` answers unless a test sets ``emulator.job(id).extra["result"]``.
DEFAULT_RESULT: dict[str, Any] = {
    "ColumnMetadata": [{"name": "answer", "typeName": "int4", "isCurrency": False, "nullable": 1}],
    "Records": [[{"longValue": 42}]],
    "TotalNumRows": 1,
}


def _not_found(statement_id: str) -> Exception:
    return aws_error(400, "ResourceNotFoundException", f"Query does not exist: {statement_id}")


class RedshiftDataEmulator(AwsEmulator):
    """The Redshift Data API on a loopback port, with a ledger, scripted statements and faults."""

    system = "redshift-data"
    service = "redshift-data"
    DEFAULT_LIFECYCLE = ("SUBMITTED", "STARTED", "FINISHED")
    submit_operations = frozenset({"ExecuteStatement", "BatchExecuteStatement"})
    status_operations = frozenset({"DescribeStatement"})
    cancel_operations = frozenset({"CancelStatement"})
    native_token_param = "ClientToken"
    uses_moto = False

    @property
    def local_operations(self) -> Mapping[str, Callable[[AwsCall], Any]]:
        return {
            "ExecuteStatement": self._execute,
            "BatchExecuteStatement": self._execute,
            "DescribeStatement": self._describe,
            "GetStatementResult": self._result,
            "CancelStatement": self._cancel,
            "ListStatements": self._list,
        }

    # ------------------------------------------------------------------ hooks
    def submitted_id(self, call: AwsCall, answer: Any) -> str:
        return str(answer["Id"])

    def status_ids(self, call: AwsCall) -> list[str]:
        # A sub-statement read ("<id>:2") is a read of its parent's status.
        return [str(call.params.get("Id", "")).split(":", 1)[0]]

    def cancel_ids(self, call: AwsCall) -> list[str]:
        return [str(call.params.get("Id", ""))]

    def cancelled_state(self, job: AwsJob) -> str:
        return "ABORTED"

    def is_terminal(self, state: str) -> bool:
        return state in TERMINAL_STATES

    def not_found(self, call: AwsCall, job_id: str) -> Any:
        raise _not_found(job_id)

    def on_created(self, job: AwsJob, call: AwsCall) -> None:
        job.extra.update(call.extra)

    def shift_created(self, job: AwsJob, by: dt.timedelta) -> None:
        seconds = by.total_seconds()
        job.extra["created_at"] = job.extra.get("created_at", job.created_at) - seconds
        # A ClientToken replay answers with the submission's own answer: its CreatedAt moves too.
        for token, (job_id, raw, headers) in list(self._tokens.items()):
            if job_id == job.job_id:
                answer = json.loads(raw)
                answer["CreatedAt"] = job.extra["created_at"]
                self._tokens[token] = (job_id, json.dumps(answer).encode(), headers)

    # ------------------------------------------------------------------ endpoints
    def _statement(self, statement_id: str) -> AwsJob:
        job = self.jobs.get(statement_id.split(":", 1)[0])
        if job is None or job.expired:
            raise _not_found(statement_id)
        return job

    def _execute(self, call: AwsCall) -> dict[str, Any]:
        params = call.params
        token = params.get("ClientToken")
        if token is not None and not 1 <= len(str(token)) <= MAX_TOKEN_LENGTH:
            raise aws_error(
                400, "ValidationException", f"ClientToken must be 1 to {MAX_TOKEN_LENGTH} characters long"
            )
        targets = [k for k in ("ClusterIdentifier", "WorkgroupName", "SessionId") if params.get(k)]
        if len(targets) != 1:
            raise aws_error(
                400, "ValidationException", "Exactly one of ClusterIdentifier, WorkgroupName or SessionId"
            )
        sqls = params.get("Sqls") if call.operation == "BatchExecuteStatement" else [params.get("Sql")]
        if not sqls or not all(isinstance(s, str) and s for s in sqls):
            raise aws_error(400, "ValidationException", "Sql must be a non-empty string")
        session_id = params.get("SessionId")
        if session_id is None and params.get("SessionKeepAliveSeconds") is not None:
            session_id = str(uuid.uuid4())
        statement_id = str(uuid.uuid4())
        now = time.time()
        # Handed to on_created, which stores it on the new job.
        call.extra.update(
            {
                "sqls": list(sqls),
                "batch": call.operation == "BatchExecuteStatement",
                "session_id": session_id,
                "created_at": now,
            }
        )
        answer: dict[str, Any] = {"Id": statement_id, "CreatedAt": now}
        for key in ("ClusterIdentifier", "WorkgroupName", "Database", "DbUser", "SecretArn"):
            if params.get(key) is not None:
                answer[key] = params[key]
        if session_id is not None:
            answer["SessionId"] = session_id
        return answer

    def _describe(self, call: AwsCall) -> dict[str, Any]:
        requested = str(call.params.get("Id", ""))
        job = self._statement(requested)
        state = job.reported
        sqls: list[str] = job.extra.get("sqls", [])
        base = {
            "CreatedAt": job.extra.get("created_at", job.created_at),
            "UpdatedAt": time.time(),
            "Duration": 0 if state in ACTIVE_STATES else 1_000_000,
            "RedshiftQueryId": 0 if state == "SUBMITTED" else 4711,
        }
        subs = [
            {
                **base,
                "Id": f"{job.job_id}:{n}",
                "Status": state,
                "QueryString": sql,
                "HasResultSet": state == "FINISHED",
                "ResultRows": 1 if state == "FINISHED" else -1,
                "ResultSize": 16 if state == "FINISHED" else -1,
                **({"Error": "ERROR: emulated statement failure"} if state == "FAILED" else {}),
            }
            for n, sql in enumerate(sqls, start=1)
        ]
        if ":" in requested:
            for sub in subs:
                if sub["Id"] == requested:
                    return sub
            raise _not_found(requested)
        answer: dict[str, Any] = {
            **base,
            "Id": job.job_id,
            "Status": state,
            "QueryString": "; ".join(sqls),
            "HasResultSet": state == "FINISHED" and not job.extra.get("batch"),
            "ResultRows": 1 if state == "FINISHED" else -1,
            "ResultSize": 16 if state == "FINISHED" else -1,
            # Only the statement has a process id; a sub-statement has none (SubStatementData).
            "RedshiftPid": 1073,
        }
        for key in ("ClusterIdentifier", "WorkgroupName", "Database", "DbUser", "SecretArn"):
            if job.payload.get(key) is not None:
                answer[key] = job.payload[key]
        if job.extra.get("session_id"):
            answer["SessionId"] = job.extra["session_id"]
        if state == "FAILED":
            answer["Error"] = "ERROR: emulated statement failure"
        if job.extra.get("batch"):
            answer["SubStatements"] = subs
        return answer

    def _result(self, call: AwsCall) -> dict[str, Any]:
        requested = str(call.params.get("Id", ""))
        job = self._statement(requested)
        if job.extra.get("batch") and ":" not in requested:
            raise aws_error(400, "ValidationException", "Ask for the result of each sub-statement (<id>:<n>)")
        if job.reported != "FINISHED":
            raise aws_error(400, "ValidationException", f"Query {requested} is {job.reported}: no result yet")
        return dict(job.extra.get("result") or DEFAULT_RESULT)

    def _cancel(self, call: AwsCall) -> dict[str, Any]:
        job = self._statement(str(call.params.get("Id", "")))
        # Redshift declines (Status=False) to cancel a statement that already ended.
        return {"Status": job.reported not in TERMINAL_STATES}

    def _list(self, call: AwsCall) -> dict[str, Any]:
        params = call.params
        name = params.get("StatementName")
        status = params.get("Status", "ALL")
        found = []
        for job in sorted(self.jobs.values(), key=lambda j: j.created_at, reverse=True):
            if job.expired:
                continue
            statement_name = job.payload.get("StatementName")
            if name and not (statement_name or "").startswith(name):
                continue
            if status != "ALL" and job.reported != status:
                continue
            entry = {
                "Id": job.job_id,
                "Status": job.reported,
                "CreatedAt": job.created_at,
                "UpdatedAt": time.time(),
                "IsBatchStatement": bool(job.extra.get("batch")),
                "QueryStrings" if job.extra.get("batch") else "QueryString": (
                    job.extra.get("sqls") if job.extra.get("batch") else "; ".join(job.extra.get("sqls", []))
                ),
            }
            if statement_name:
                entry["StatementName"] = statement_name
            found.append(entry)
        return {"Statements": found}
