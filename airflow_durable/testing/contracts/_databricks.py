"""Databricks: the Jobs API as the Databricks-maintained SDK (``databricks-sdk``) declares it.

Each route the emulator serves is bound to the SDK's ``JobsAPI`` method that calls it and to the class
its answer loads into (`ROUTES`). A request's arguments (query string and JSON body) must be keyword
arguments of that method, with the types it declares; an answer must load with the class's own
``from_dict``, and every field in it must be a field the class declares, of the declared type, down
through the nested classes (``from_dict`` itself ignores fields it does not know, so that is checked
field by field). Fields without a default in the SDK's dataclasses are required.

Enum values are checked, except in the run state's ``life_cycle_state`` / ``result_state``, which
tests script with states the client has never heard of on purpose (the SDK loads them as ``None``).
"""

from __future__ import annotations

import dataclasses
import enum
import functools
import inspect
import re
import types
import typing
from typing import Any

from airflow_durable.testing._core import Request, Response
from airflow_durable.testing.contracts import Contract, Problem

__all__ = ["ROUTES", "DatabricksContract"]

#: ``route (without the /api/<version>/ prefix) -> (JobsAPI method, answer class or None for {})``.
ROUTES: dict[tuple[str, str], tuple[str, str | None]] = {
    ("POST", "jobs/runs/submit"): ("submit", "SubmitRunResponse"),
    ("POST", "jobs/run-now"): ("run_now", "RunNowResponse"),
    ("GET", "jobs/runs/get"): ("get_run", "Run"),
    ("GET", "jobs/runs/get-output"): ("get_run_output", "RunOutput"),
    ("POST", "jobs/runs/cancel"): ("cancel_run", None),
    ("POST", "jobs/runs/cancel-all"): ("cancel_all_runs", None),
    ("POST", "jobs/runs/repair"): ("repair_run", "RepairRunResponse"),
    ("GET", "jobs/list"): ("list", "ListJobsResponse"),
    ("GET", "jobs/get"): ("get", "Job"),
    ("POST", "jobs/create"): ("create", "CreateResponse"),
    ("POST", "jobs/update"): ("update", None),
}
#: Request arguments the SDK does not declare that the provider sends and Databricks accepts, with their
#: type (a class: the value is checked as that class's field of the same name) and why.
REQUEST_EXTRAS: dict[tuple[str, str], tuple[str, str]] = {
    **{
        ("jobs/runs/submit", name): (
            "SubmitTask",
            "the single-task format (task fields at the top level): the provider's "
            "DatabricksSubmitRunOperator builds it from its named arguments and documents it; the SDK "
            "(Jobs API 2.2) declares only `tasks`",
        )
        for name in (
            "notebook_task",
            "spark_jar_task",
            "spark_python_task",
            "spark_submit_task",
            "pipeline_task",
            "python_wheel_task",
            "dbt_task",
            "sql_task",
            "new_cluster",
            "existing_cluster_id",
            "libraries",
        )
    },
    ("jobs/list", "include_user_names"): (
        "bool",
        "sent by the provider's DatabricksHook.list_jobs; not an argument of the SDK's JobsAPI.list",
    ),
}
#: ``(class, field)`` whose enum a test may script with an unknown value (see the module docstring).
OPEN_ENUM_FIELDS = frozenset({("RunState", "life_cycle_state"), ("RunState", "result_state")})
_PATH = re.compile(r"^/api/(?:2\.[0-2])/(?P<route>.+?)/?$")


@functools.cache
def _jobs() -> Any:
    from databricks.sdk.service import jobs

    return jobs


@functools.cache
def _hints(cls: type) -> dict[str, Any]:
    return typing.get_type_hints(cls)


@functools.cache
def _signature(method: str) -> dict[str, Any]:
    api = _jobs().JobsAPI
    hints = typing.get_type_hints(getattr(api, method))
    params = inspect.signature(getattr(api, method)).parameters
    return {name: hints.get(name, Any) for name in params if name != "self"}


def _strip_optional(kind: Any) -> Any:
    if typing.get_origin(kind) in (typing.Union, types.UnionType):
        args = [a for a in typing.get_args(kind) if a is not type(None)]
        return args[0] if len(args) == 1 else Any
    return kind


def check_value(
    value: Any,
    kind: Any,
    path: str,
    problems: list[Problem],
    *,
    text: bool = False,
    int64_text: bool = False,
    at: tuple[str, str] = ("", ""),
) -> None:
    """Check ``value`` against an SDK type annotation; ``text``: it came as query-string text.

    ``int64_text``: an integer may be a decimal string, as the protobuf JSON mapping behind the API
    accepts in requests (the provider's ``DatabricksHook.update_job`` sends ``job_id`` as a string).
    ``at`` is the ``(class, field)`` the value is in, for `OPEN_ENUM_FIELDS`.
    """
    kind = _strip_optional(kind)
    if kind is Any or value is None:
        return
    origin = typing.get_origin(kind)
    if origin in (list, typing.List):  # noqa: UP006 - the SDK annotates with typing.List
        if not isinstance(value, list):
            problems.append(Problem(path, f"expected a list, got {value!r}"))
            return
        (item,) = typing.get_args(kind) or (Any,)
        for i, element in enumerate(value):
            check_value(element, item, f"{path}[{i}]", problems, int64_text=int64_text, at=at)
        return
    if origin in (dict, typing.Dict):  # noqa: UP006
        if not isinstance(value, dict):
            problems.append(Problem(path, f"expected an object, got {value!r}"))
            return
        args = typing.get_args(kind)
        for key, element in value.items():
            check_value(
                element,
                args[1] if len(args) == 2 else Any,
                f"{path}[{key!r}]",
                problems,
                int64_text=int64_text,
                at=at,
            )
        return
    if isinstance(kind, type) and issubclass(kind, enum.Enum):
        allowed = [member.value for member in kind]
        if value not in allowed:
            if at not in OPEN_ENUM_FIELDS:
                problems.append(Problem(path, f"{value!r} is not one of {kind.__name__}'s values {allowed}"))
        return
    if isinstance(kind, type) and dataclasses.is_dataclass(kind):
        check_object(value, kind, path, problems, int64_text=int64_text)
        return
    if kind is bool:
        ok = isinstance(value, bool) or (text and str(value).lower() in ("true", "false"))
    elif kind is int:
        ok = (isinstance(value, int) and not isinstance(value, bool)) or (
            (text or int64_text) and isinstance(value, str) and re.fullmatch(r"-?\d+", value) is not None
        )
    elif kind is float:
        ok = isinstance(value, (int, float)) and not isinstance(value, bool)
    elif kind is str:
        ok = isinstance(value, str)
    else:
        ok = True  # a type the SDK uses that we do not model: nothing to check
    if not ok:
        problems.append(Problem(path, f"expected {getattr(kind, '__name__', kind)}, got {value!r}"))


def check_object(
    value: Any, cls: type, path: str, problems: list[Problem], *, int64_text: bool = False
) -> None:
    """A JSON object against one SDK dataclass: known fields only, required ones present, types right."""
    if not isinstance(value, dict):
        problems.append(Problem(path, f"expected a {cls.__name__} object, got {value!r}"))
        return
    hints = _hints(cls)
    fields = {f.name: f for f in dataclasses.fields(cls)}
    for key, item in value.items():
        where = f"{path}.{key}" if path else key
        if key not in fields:
            problems.append(Problem(where, f"not a field of {cls.__name__} in databricks-sdk"))
            continue
        check_value(item, hints.get(key, Any), where, problems, int64_text=int64_text, at=(cls.__name__, key))
    for name, f in fields.items():
        required = f.default is dataclasses.MISSING and f.default_factory is dataclasses.MISSING
        if required and name not in value:
            problems.append(Problem(f"{path}.{name}" if path else name, f"{cls.__name__} requires it"))


class DatabricksContract(Contract):
    """The Jobs API as ``databricks.sdk.service.jobs`` declares it."""

    system = "databricks"

    @property
    def source(self) -> str:
        try:
            from databricks.sdk.version import __version__
        except ImportError:
            return "databricks-sdk (not installed)"
        return f"databricks-sdk {__version__} (databricks.sdk.service.jobs)"

    @property
    def available(self) -> str | None:
        try:
            _jobs()
        except ImportError:
            return "databricks-sdk is not installed"
        return None

    def operation(self, request: Request) -> str | None:
        match = _PATH.match(request.path)
        if match is None or (request.method, match["route"]) not in ROUTES:
            return None
        return match["route"]

    def check_request(self, operation: str, request: Request) -> list[Problem]:
        method, _ = ROUTES[(request.method, operation)]
        accepted = _signature(method)
        problems: list[Problem] = []
        body = request.json if isinstance(request.json, dict) else {}
        for source, values, text in (("query", request.query, True), ("body", body, False)):
            for key, value in values.items():
                where = f"{source}.{key}"
                extra = REQUEST_EXTRAS.get((operation, key))
                if key in accepted:
                    kind = accepted[key]
                elif extra is not None:
                    kind = bool if extra[0] == "bool" else _hints(getattr(_jobs(), extra[0])).get(key, Any)
                else:
                    problems.append(Problem(where, f"not an argument of JobsAPI.{method}", rejects=False))
                    continue
                check_value(value, kind, where, problems, text=text, int64_text=True)
        return problems

    def check_response(self, operation: str, request: Request, response: Response) -> list[Problem]:
        _, answer = ROUTES[(request.method, operation)]
        if response.status >= 300:  # the SDK has no classes for error bodies
            return []
        body = response.json
        if answer is None:
            return (
                [] if body in ({}, None) else [Problem("", f"the SDK expects an empty answer, got {body!r}")]
            )
        cls = getattr(_jobs(), answer)
        problems: list[Problem] = []
        try:
            cls.from_dict(body)
        except Exception as err:
            problems.append(Problem("", f"{answer}.from_dict fails: {type(err).__name__}: {err}"))
        check_object(body, cls, "", problems)
        return problems
