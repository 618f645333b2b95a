"""Durable Snowflake SQL API operator: a drop-in replacement for the provider's ``SnowflakeSqlApiOperator``.

How the SQL API submits, reports, classifies, defers and returns — the durable logic is in
`airflow_durable.engine`.

* The external id is the list of statement handles of one request (one handle per statement of a
  multi-statement request), stored under ``airflow_durable.snowflake_sql_api``.
* Submission carries the SQL API's native idempotency key: ``requestId`` = the token's UUID
  (task instance + generation) with ``retry=true``, so a resubmission after a crash between submit
  and persist returns the statements already started instead of running the SQL again. The hook's
  own submission code builds and sends the request (``shims.snowflake.IdempotentSqlApiHook``).
  Not durable (Airflow < 3.3, ``durable=False``): a fresh ``requestId`` and no ``retry``, as upstream.
* Status aggregates the handles: any unknown answer → unknown (never resubmit on a surprise), any
  failed handle → failed, any still running → active, all succeeded → succeeded; a 404 means the
  statements expired.
* Waiting reuses the provider's poll loop (``deferrable=False``) or defers to the provider's own
  ``SnowflakeSqlApiTrigger`` (``deferrable=True``) after the provider's one pre-deferral status check.
* Result and XComs are the provider's: ``query_ids``, return value ``None``; the results are fetched
  and logged (``check_query_output``) as upstream, and ``hook.query_ids`` is kept in sync for lineage.
"""

from __future__ import annotations

import datetime as dt
from functools import cached_property
from typing import TYPE_CHECKING, ClassVar

import requests

from airflow_durable.engine import DurableJobEngine, DurableLookupError, JobNotFoundError, tokens_in
from airflow_durable.identity_tags import FoundJob, identities_in, identity_of
from airflow_durable.operators import provider_required

with provider_required(__name__):
    # The hook and trigger are reached through the provider operator module's names at call time, as
    # upstream does: a test that patches ``SnowflakeSqlApiHook`` (or ``SnowflakeSqlApiTrigger``) in
    # ``airflow.providers.snowflake.operators.snowflake`` patches ours too.
    from airflow.providers.snowflake.operators import snowflake as provider

    from airflow_durable.shims import snowflake as compat

if TYPE_CHECKING:
    from airflow.sdk import Context

    from airflow_durable.engine import DurableToken

__all__ = ["DurableSnowflakeSqlApiOperator", "find_in_history"]

# The SQL API's statement status codes: 202 running, 200 succeeded, 422 failed (or cancelled).
_KNOWN_STATUS_CODES = frozenset({200, 202, 422})
# QUERY_HISTORY's EXECUTION_STATUS in the operator's vocabulary (a cancelled statement: FAILED_WITH_ERROR).
_HISTORY_STATUS = {
    "SUCCESS": "success",
    "FAILED_WITH_ERROR": "error",
    "FAILED_WITH_INCIDENT": "error",
    **{status: "running" for status in ("RUNNING", "QUEUED", "BLOCKED", "RESUMING_WAREHOUSE")},
}
# QUERY_TYPE of a multi-statement request's own row.
_MULTI_STATEMENT = "MULTI_STATEMENT"
_EPOCH = dt.datetime.fromtimestamp(0, dt.UTC)


def _history_status(rows: list[compat.HistoryRow]) -> str:
    """The statements' aggregate, as `durable_status` makes it; an undocumented value stays unknown."""
    statuses = [_HISTORY_STATUS.get(r.status, f"QUERY_HISTORY:{r.status}") for r in rows]
    for status in statuses:
        if status.startswith("QUERY_HISTORY:"):
            return status
    for status in ("error", "running"):
        if status in statuses:
            return status
    return "success"


def _run_began(context: Context) -> dt.datetime | None:
    """When the task instance's DAG run began (queued, else started), within QUERY_HISTORY's 7 days.

    The window bounds END times: a statement still running is listed whenever it started, so only
    statements that ended before the run began (none of this run's jobs) are left out. ``None``: unknown.
    """
    run = context.get("dag_run")
    began = [t for t in (getattr(run, "queued_at", None), getattr(run, "start_date", None)) if t is not None]
    if not began or not all(isinstance(t, dt.datetime) for t in began):
        return None
    earliest = min(t if t.tzinfo else t.replace(tzinfo=dt.UTC) for t in began)
    floor = dt.datetime.now(dt.UTC) - compat.HISTORY_REACH + dt.timedelta(minutes=10)
    return max(earliest, floor)


def find_in_history(listing: compat.HistoryListing, identity: str | None) -> list[tuple[str, FoundJob]]:
    """The requests in a QUERY_HISTORY listing that carry ``identity`` (``None``: any identity), earliest
    first, each with its identity.

    A request's statements share its tag and session: they are one job, its handles in start order (a
    multi-statement request's own row gives the request's status, and is its handle while none of its
    statements has started).
    """
    groups: dict[tuple[str, str, str], list[compat.HistoryRow]] = {}
    for row in listing.rows:
        for found in sorted(identities_in(row.query_tag)):
            if identity is None or found == identity:
                groups.setdefault((found, row.query_tag, row.session_id), []).append(row)
    jobs = []
    for (found, tag, _session), rows in groups.items():
        rows.sort(key=lambda r: (r.started_at is None, r.started_at or _EPOCH))
        parents = [r for r in rows if r.query_type == _MULTI_STATEMENT]
        children = [r for r in rows if r.query_type != _MULTI_STATEMENT]
        tokens = sorted(tokens_in(tag))
        job = FoundJob(
            id=[r.query_id for r in children or parents],
            status=_history_status(parents or children),
            created_at=min((r.started_at for r in rows if r.started_at), default=None),
            token=tokens[0] if tokens else None,
        )
        jobs.append((found, job))
    jobs.sort(key=lambda pair: (pair[1].created_at is None, pair[1].created_at or _EPOCH))
    return jobs


class DurableSnowflakeSqlApiOperator(DurableJobEngine, provider.SnowflakeSqlApiOperator):
    """``SnowflakeSqlApiOperator`` whose retries reconnect to the statements instead of running the SQL again.

    Same arguments, templated fields, XComs (``query_ids``) and return value (``None``) as the provider
    operator, plus ``durable`` (default: durable wherever Airflow has a task state store, i.e. 3.3+).

    Stored under the task-state-store key ``airflow_durable.snowflake_sql_api`` (fixed).
    """

    durable_locator_fields = ("snowflake_conn_id",)
    # The aggregate status of the request's handles (see durable_status).
    durable_active_statuses = frozenset({"running"})
    durable_succeeded_statuses = frozenset({"success"})
    durable_failed_statuses = frozenset({"error"})
    durable_id_type, durable_id_name = list[str], "Snowflake statement handle"
    durable_event_id_key = "statement_query_ids"
    # The trigger's error events name no handle: they are about the tracked job.
    durable_event_statuses, durable_anonymous_event_statuses = frozenset({"success"}), frozenset({"error"})
    #: ``RESULT_LIMIT`` of the lookup (`durable_find`): the most statements QUERY_HISTORY_BY_USER returns.
    durable_lookup_limit: ClassVar[int] = 10000

    @cached_property
    def _hook(self) -> compat.IdempotentSqlApiHook:
        return compat.sql_api_hook(self, provider.SnowflakeSqlApiHook)

    # ------------------------------------------------------------------ submit
    def durable_submit(self, context: Context, token: DurableToken | None) -> list[str]:
        self.log.info("Executing: %s", self.sql)
        # The statements carry their task instance's identity and token as their QUERY_TAG (upstream sends
        # an empty one): QUERY_HISTORY finds them by it.
        tag = {"query_tag": f"{identity_of(context)} {token.text}"} if token is not None else {}
        # The hook's own submission sends requestId (and retry=true) while durable_request_id is set.
        with self.durable_overriding(
            self._hook, durable_request_id=token.uuid if token is not None else None
        ):
            # Set query_ids the moment the statements exist, as the provider does, for on_kill.
            self.query_ids = self._hook.execute_query(
                self.sql,  # type: ignore[arg-type]  # as upstream passes it (a str or a list of statements)
                statement_count=self.statement_count,
                bindings=self.bindings,
                timeout=self.timeout,
                **tag,
            )
        self.log.info("List of query ids %s", self.query_ids)
        return list(self.query_ids)

    # ------------------------------------------------------------------ status
    def durable_status(self, external_id: list[str], context: Context) -> str:
        statuses = []
        for handle in external_id:
            try:
                code, body = compat.statement_status(self._hook, handle)
            except requests.exceptions.HTTPError as err:
                if err.response is not None and err.response.status_code == 404:
                    raise JobNotFoundError(handle) from err
                raise
            if code not in _KNOWN_STATUS_CODES:
                return f"HTTP_{code}"  # an answer the SQL API does not document: unknown, not "failed"
            statuses.append(compat.process_response(self._hook, code, body)["status"])
        for status in ("error", "running"):
            if status in statuses:
                return status
        return "success"

    def durable_find(
        self, identity: str, context: Context | None = None, since: dt.datetime | None = None
    ) -> list[FoundJob]:
        """This task instance's requests of every generation and clear epoch, earliest first.

        One statement through the SQL API reads ``INFORMATION_SCHEMA.QUERY_HISTORY_BY_USER`` (the connection's
        user; statements running, or ended since ``since``: by default since the task's DAG run began, at
        most 7 days back) filtered by the identity in ``QUERY_TAG``
        (`compat.query_history`). A request's statements share its tag and session: they are one job, its
        handles in start order (a multi-statement request's own row gives the request's status, and is its
        handle while none of its statements has started). Older than 7 days, a refusal, or running statements
        past ``RESULT_LIMIT``: `DurableLookupError`, never an empty list.
        """
        if since is None and context is not None:
            since = _run_began(context)
        listing = self._durable_history(identity, since)
        return [job for _, job in find_in_history(listing, identity)]

    def durable_find_all(self, token: DurableToken, context: Context) -> list[list[str]]:
        """The requests carrying ``token``, earliest first: a crash-window retry asks before resending it,
        since a ``requestId`` Snowflake no longer deduplicates (for how long it does is not documented) would
        run the SQL a second time. The same statement as `durable_find`, the token matched in
        ``QUERY_TAG``."""
        listing = self._durable_history(token.text, _run_began(context) if context else None)
        return [list(job.id) for _, job in find_in_history(listing, None) if job.token == token.text]

    def _durable_history(self, pattern: str, since: dt.datetime | None) -> compat.HistoryListing:
        try:
            listing = compat.query_history(self._hook, pattern, since, self.durable_lookup_limit)
        except compat.HistoryError as err:
            raise DurableLookupError(f"task {self.task_id}: looking up Snowflake statements: {err}") from err
        if listing.unended_cut:
            raise DurableLookupError(
                f"task {self.task_id}: QUERY_HISTORY_BY_USER returned RESULT_LIMIT={listing.limit} "
                "statements "
                "that are all still running: a running statement of this task may be past the limit. Not "
                "answering 'none found'; the next try looks again"
            )
        if listing.cut:
            self.log.warning(
                "task %s: QUERY_HISTORY_BY_USER stopped at RESULT_LIMIT=%d statements: every running "
                "statement "
                "is listed, statements that ended before the most recent %d are not",
                self.task_id,
                listing.limit,
                listing.limit,
            )
        return listing

    def durable_cancel(self, external_id: list[str]) -> None:
        # One call per handle, carrying on past a failure (as the provider's trigger does on kill).
        errors: list[Exception] = []
        for handle in external_id:
            try:
                self._hook.cancel_queries([handle])
            except Exception as err:
                self.log.warning("could not cancel Snowflake statement %s: %s", handle, err)
                errors.append(err)
        if errors:
            raise errors[0]

    # ------------------------------------------------------------------ wait
    def _track(self, external_id: list[str]) -> None:
        self.query_ids = list(external_id)
        # A reconnecting try never ran execute_query on this hook: OpenLineage reads hook.query_ids.
        self._hook.query_ids = self.query_ids

    def durable_poll(self, external_id: list[str], context: Context, reconnect: bool) -> None:
        # The provider's own loop: pushes query_ids, polls every handle, raises on a failed one,
        # then fetches and logs the output.
        self.poll_until_complete(list(external_id), context)

    def durable_defer(self, external_id: list[str], context: Context, reconnect: bool) -> None:
        # What the provider's deferrable execute does after execute_query: push the handles, check
        # each once, complete inline if all succeeded, else defer to its trigger.
        self._track(external_id)
        if self.do_xcom_push:
            context["ti"].xcom_push(key="query_ids", value=self.query_ids)
        succeeded = []
        for query_id in self.query_ids:
            self.log.info("Retrieving status for query id %s", query_id)
            status = self._hook.get_sql_api_query_status(query_id)
            if status.get("status") == "running":
                break
            if status.get("status") == "success":
                succeeded.append(query_id)
            else:
                raise RuntimeError(f"{status.get('status')}: {status.get('message')}")
        if len(succeeded) == len(self.query_ids):
            self.log.info("%s completed successfully.", self.task_id)
            return
        self.defer(
            timeout=self.execution_timeout,
            trigger=provider.SnowflakeSqlApiTrigger(
                poll_interval=self.poll_interval,
                query_ids=self.query_ids,
                snowflake_conn_id=self.snowflake_conn_id,
                token_life_time=self.token_life_time,
                token_renewal_delta=self.token_renewal_delta,
                cancel_on_kill=self.cancel_on_kill,
            ),
            method_name="execute_complete",
        )

    def durable_result(self, external_id: list[str], context: Context, already_succeeded: bool) -> None:
        self._track(external_id)
        if already_succeeded:
            # No poll or deferral ran in this try: push and fetch what the provider's path would have.
            if self.do_xcom_push:
                context["ti"].xcom_push(key="query_ids", value=self.query_ids)
            self._hook.check_query_output(self.query_ids)
        return None
