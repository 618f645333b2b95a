"""AWS provider differences, in one place (imported only by the AWS operator modules).

The amazon provider's Redshift Data hook builds the ``ExecuteStatement`` / ``BatchExecuteStatement``
request itself and exposes no ``ClientToken`` (botocore then fills in a random one per call). A
provider that adds a ``client_token`` argument to ``execute_query`` gets it passed directly; otherwise
the token is added to the request through botocore's own extension point, the client's
``before-parameter-build`` event, registered first so botocore's random default never applies. Either
way the hook's own validation, lineage and session handling run unchanged.

``sent_once`` uses the same extension point (``needs-retry``) for submit calls that carry no idempotency
key (EMR's ``AddJobFlowSteps``, Batch's ``SubmitJob``): botocore resends any call whose answer it lost, and
such a resend starts a second job that nothing tracks.
"""

from __future__ import annotations

import contextlib
import inspect
from collections.abc import Callable, Iterator
from typing import Any

__all__ = ["client_token_on", "error_code", "execute_query", "sent_once"]

#: Error codes of a request the service refused because of its rate: it did nothing, so resending is safe.
THROTTLED_CODES = frozenset(
    {
        "Throttling",
        "ThrottlingException",
        "ThrottledException",
        "RequestThrottledException",
        "TooManyRequestsException",
        "RequestLimitExceeded",
        "RequestThrottled",
        "SlowDown",
    }
)


def error_code(error: BaseException) -> str | None:
    """The AWS error code of a botocore ``ClientError`` (``None`` for anything else)."""
    response = getattr(error, "response", None)
    if not isinstance(response, dict):
        return None
    code = (response.get("Error") or {}).get("Code")
    return str(code) if code is not None else None


@contextlib.contextmanager
def client_token_on(client: Any, operations: tuple[str, ...], token: str | None) -> Iterator[None]:
    """While active, every call of ``operations`` on ``client`` carries ``ClientToken=token``."""
    if token is None:
        yield
        return

    def add_token(params: dict[str, Any], **_: Any) -> None:
        params.setdefault("ClientToken", token)

    with _first_handler(client, "before-parameter-build", operations, add_token, "airflow-durable-token"):
        yield


@contextlib.contextmanager
def _first_handler(
    client: Any, event: str, operations: tuple[str, ...], handler: Callable[..., Any], unique: str
) -> Iterator[None]:
    """While active, ``handler`` answers ``event`` for ``operations`` on ``client`` before botocore's own."""
    service = client.meta.service_model.service_id.hyphenize()
    names = [f"{event}.{service}.{operation}" for operation in operations]
    for name in names:
        client.meta.events.register_first(name, handler, unique_id=f"{unique}-{name}")
    try:
        yield
    finally:
        for name in names:
            client.meta.events.unregister(name, unique_id=f"{unique}-{name}")


def _may_have_taken_effect(caught_exception: BaseException | None, response: Any) -> bool:
    """Whether a failed attempt may have reached the service and made its job."""
    from botocore.exceptions import ConnectionError as NeverConnected

    if caught_exception is not None:
        # Connecting failed (refused, timed out, proxy): the request was never sent. Anything later (a read
        # timeout, a connection closed mid-answer) may come after the service acted.
        return not isinstance(caught_exception, NeverConnected)
    if not isinstance(response, tuple) or len(response) != 2:
        return False
    http, parsed = response
    status = getattr(http, "status_code", 200)
    code = ((parsed or {}).get("Error") or {}).get("Code") if isinstance(parsed, dict) else None
    return status >= 500 and code not in THROTTLED_CODES


@contextlib.contextmanager
def sent_once(client: Any, operations: tuple[str, ...]) -> Iterator[None]:
    """While active, botocore resends ``operations`` on ``client`` only when the failed attempt cannot have
    made a job (a connection never made, a throttled request); any other failure is raised to the engine,
    which looks the job up before it sends the request again."""

    def no_blind_resend(caught_exception: BaseException | None = None, response: Any = None, **_: Any) -> Any:
        # ``False`` answers "do not retry" and ends the search for an answer; ``None`` leaves it to botocore.
        return False if _may_have_taken_effect(caught_exception, response) else None

    with _first_handler(client, "needs-retry", operations, no_blind_resend, "airflow-durable-once"):
        yield


def execute_query(hook: Any, token: str | None, **kwargs: Any) -> Any:
    """``RedshiftDataHook.execute_query(**kwargs)`` whose request carries ``token`` as its ClientToken."""
    execute: Callable[..., Any] = hook.execute_query
    if token is not None and "client_token" in inspect.signature(execute).parameters:
        return execute(client_token=token, **kwargs)
    with client_token_on(hook.conn, ("ExecuteStatement", "BatchExecuteStatement"), token):
        return execute(**kwargs)


def submit_statement(operator: Any, context: Any, token: str | None) -> str:
    """Submit a ``RedshiftDataOperator``'s SQL as the installed provider does, carrying ``token``.

    Providers whose operator inherits ``ResumableJobMixin`` (amazon 9.3x) have ``submit_job``, which
    also sets ``statement_id`` and pushes the ``session_id`` XCom; earlier ones do the same inline in
    ``execute``, which is repeated here.
    """
    submit = getattr(operator, "submit_job", None)
    if submit is not None:
        with client_token_on(operator.hook.conn, ("ExecuteStatement", "BatchExecuteStatement"), token):
            return str(submit(context))
    output = execute_query(
        operator.hook,
        token,
        database=operator.database,
        sql=operator.sql,
        cluster_identifier=operator.cluster_identifier,
        workgroup_name=operator.workgroup_name,
        db_user=operator.db_user,
        parameters=operator.parameters,
        secret_arn=operator.secret_arn,
        statement_name=operator.statement_name,
        with_event=operator.with_event,
        wait_for_completion=False,
        poll_interval=operator.poll_interval,
        session_id=operator.session_id,
        session_keep_alive_seconds=operator.session_keep_alive_seconds,
    )
    operator.statement_id = output.statement_id
    if output.session_id:
        context["ti"].xcom_push(key="session_id", value=output.session_id)
    return str(output.statement_id)
