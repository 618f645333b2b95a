"""Snowflake provider internals we rely on, in one place (imported only by ``operators.snowflake``).

The provider's ``SnowflakeSqlApiHook.execute_query`` makes a fresh ``uuid4()`` ``requestId`` per call
and never sends ``retry=true``, and exposes no parameter for either. Every HTTP call of the hook goes
through ``_make_api_call_with_retries(method, url, headers, params, json)`` (provider 6.x; tested:
6.20.0), so `IdempotentSqlApiHook` supplies our ``requestId`` and ``retry=true`` there, for the
submission only, and only while the operator asks for it: the body, the handle parsing, the lineage
and the hook's own retries stay the provider's. With no request id set it is the provider's hook.
"""

from __future__ import annotations

from typing import Any

from airflow.providers.snowflake.hooks.sql_api import SnowflakeSqlApiHook

_STATEMENTS_PATH = "/api/v2/statements"


class IdempotentSqlApiHook(SnowflakeSqlApiHook):
    """``SnowflakeSqlApiHook`` whose statement submission can carry a caller-chosen ``requestId``.

    While `durable_request_id` is set, ``POST /api/v2/statements`` is sent with that
    ``requestId`` and ``retry=true``, so that the SQL API answers a resubmission (after a crash before
    the handles were stored) with the statements it already started instead of running them again.
    The hook's own tenacity retries resend the same parameters, so they are deduplicated too.
    """

    durable_request_id: str | None = None

    def _make_api_call_with_retries(
        self,
        method: str,
        url: str,
        headers: dict[str, Any],
        params: dict[str, Any] | None = None,
        json: dict[str, Any] | None = None,
    ) -> Any:
        if (
            self.durable_request_id is not None
            and method.upper() == "POST"
            and url.endswith(_STATEMENTS_PATH)
        ):
            params = {**(params or {}), "requestId": self.durable_request_id, "retry": True}
        return super()._make_api_call_with_retries(method, url, headers, params, json)


def sql_api_hook(operator: Any, hook_class: Any = SnowflakeSqlApiHook) -> IdempotentSqlApiHook:
    """The hook exactly as ``SnowflakeSqlApiOperator._hook`` builds it, as `IdempotentSqlApiHook`.

    ``hook_class`` is what the provider operator module's ``SnowflakeSqlApiHook`` name holds when the hook
    is built (a test may have patched it there): a subclass of the hook gets the idempotent submission
    mixed in; anything else (a mock standing in for the whole hook) is used as it is.
    """
    cls: Any = IdempotentSqlApiHook
    if hook_class is not SnowflakeSqlApiHook:
        if isinstance(hook_class, type) and issubclass(hook_class, SnowflakeSqlApiHook):
            cls = type(f"Idempotent{hook_class.__name__}", (IdempotentSqlApiHook, hook_class), {})
        else:
            cls = hook_class
    return cls(
        snowflake_conn_id=operator.snowflake_conn_id,
        token_life_time=operator.token_life_time,
        token_renewal_delta=operator.token_renewal_delta,
        deferrable=operator.deferrable,
        api_retry_args=operator.snowflake_api_retry_args,
        **operator.hook_params,
    )


def statement_status(hook: SnowflakeSqlApiHook, handle: str) -> tuple[int, dict[str, Any]]:
    """``GET /api/v2/statements/{handle}`` as the hook sends it: ``(HTTP status, body)``.

    The hook's ``get_sql_api_query_status`` folds every status code it does not know into "error";
    the decision step needs the code itself, so that an answer nobody expected stops the engine
    from resubmitting instead of passing for a failed statement. HTTP errors (404 included) raise
    ``requests.HTTPError`` as in the hook.
    """
    headers, params, url = hook.get_request_url_header_params(handle)
    status, body = hook._make_api_call_with_retries("GET", url, headers, params)
    return int(status), body if isinstance(body, dict) else {}


def process_response(hook: SnowflakeSqlApiHook, status: int, body: dict[str, Any]) -> dict[str, Any]:
    """The hook's own reading of a status answer (``{"status": "running"|"success"|"error", ...}``)."""
    return hook._process_response(status, body)
