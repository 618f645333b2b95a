"""AWS: every call checked against botocore's service model of its operation.

Requests: the wire request (JSON body, and for REST-JSON services the URI, query string and headers) is
mapped back to the operation's parameters through the model's own serialization names, then checked
with botocore's ``ParamValidator`` (required members, types, unknown members, minimums), plus the
constraints the model declares and botocore leaves to the service (``max``, ``pattern``, ``enum``):
AWS answers a ``ValidationException`` for those, so the emulator does too.

Answers: the raw JSON body must use only members of the operation's output shape (botocore's parser
would silently drop an unknown one), then it is parsed with botocore's own response parser for the
service's protocol and the result checked with ``ParamValidator`` against the output shape (required
members present, types right).

Enum values in answers are checked too, except in the status members that tests deliberately script
with a state the client has never heard of (`OPEN_STATUS_MEMBERS`): AWS adds states over time and
botocore treats every enum as open.
"""

from __future__ import annotations

import functools
import json
import re
import threading
from typing import Any

from airflow_durable.testing._core import Request, Response
from airflow_durable.testing.contracts import Contract, Problem

__all__ = ["AwsContract", "OPEN_STATUS_MEMBERS", "service_model"]

# Signing name (credential scope) → botocore service model name, where they differ.
MODEL_NAMES = {"elasticmapreduce": "emr"}

#: ``(service, shape name, member)``: status members a test may script with a state the service never
#: reported (to check how a client copes with a new one); their enum is not enforced in answers.
OPEN_STATUS_MEMBERS = frozenset(
    {
        ("batch", "JobDetail", "status"),
        ("batch", "JobSummary", "status"),
        ("redshift-data", "DescribeStatementResponse", "Status"),
        ("redshift-data", "SubStatementData", "Status"),
        ("redshift-data", "StatementData", "Status"),
        ("emr", "StepStatus", "State"),
        ("emr-serverless", "JobRun", "state"),
        ("emr-serverless", "JobRunSummary", "state"),
        ("emr-containers", "JobRun", "state"),
    }
)

#: ``(service, operation, member) -> why``: members botocore's model marks required in an answer that the
#: service itself leaves out in some states. The emulator follows the service; the fidelity page lists them.
REQUIRED_BUT_ABSENT: dict[tuple[str, str, str], str] = {
    ("batch", "DescribeJobs", "startedAt"): (
        "the model marks JobDetail.startedAt required, but Batch leaves it out until the job has started "
        "(its own description: when the job went from STARTING to RUNNING; measured against AWS in "
        "getmoto/moto#2202, and brendanhay/amazonka#561 made it optional for the same reason)"
    ),
}

_lock = threading.Lock()
_session: Any = None


def _botocore_session() -> Any:
    global _session
    with _lock:
        if _session is None:
            import botocore.session

            _session = botocore.session.get_session()
        return _session


@functools.cache
def service_model(service: str) -> Any:
    """botocore's model of a service by its signing name (loaded once per process)."""
    return _botocore_session().get_service_model(MODEL_NAMES.get(service, service))


@functools.cache
def _validator() -> Any:
    from botocore.validate import ParamValidator

    return ParamValidator()


@functools.cache
def _parser(protocol: str) -> Any:
    from botocore.parsers import create_parser

    return create_parser(protocol)


def _wire_name(name: str, shape: Any) -> str:
    return str(shape.serialization.get("name", name))


# --------------------------------------------------------------------------- request: wire → parameters
def _scalar_from_text(text: str, shape: Any) -> Any:
    """A query-string or header value as the parameter botocore would have been given."""
    kind = shape.type_name
    try:
        if kind in ("integer", "long"):
            return int(text)
        if kind in ("float", "double"):
            return float(text)
    except ValueError:
        return text
    if kind == "boolean":
        return {"true": True, "false": False}.get(text.lower(), text)
    if kind == "list":
        return [_scalar_from_text(part, shape.member) for part in text.split(",")]
    return text


def _from_json(value: Any, shape: Any) -> Any:
    """A JSON value as parameters: members under their model names (unknown keys kept as they are)."""
    if shape is None:
        return value
    kind = shape.type_name
    if kind == "structure" and isinstance(value, dict):
        by_wire = {_wire_name(n, s): n for n, s in shape.members.items()}
        out = {}
        for key, item in value.items():
            name = by_wire.get(key, key)
            out[name] = _from_json(item, shape.members.get(name))
        return out
    if kind == "list" and isinstance(value, list):
        return [_from_json(item, shape.member) for item in value]
    if kind == "map" and isinstance(value, dict):
        return {key: _from_json(item, shape.value) for key, item in value.items()}
    return value


def request_params(operation_model: Any, request: Request) -> dict[str, Any]:
    """The parameters a botocore caller passed, rebuilt from the request as it came over the wire."""
    shape = operation_model.input_shape
    if shape is None:
        return {}
    body = request.json if isinstance(request.json, dict) else {}
    params = _from_json(body, shape) if body else {}
    for name, member in shape.members.items():
        location = member.serialization.get("location")
        wire = _wire_name(name, member)
        if location == "uri" and wire in request.path_params:
            params[name] = _scalar_from_text(request.path_params[wire], member)
        elif location == "querystring" and member.type_name != "map" and wire in request.query:
            params[name] = _scalar_from_text(request.query[wire], member)
        elif location == "header" and request.headers.get(wire) is not None:
            params[name] = _scalar_from_text(str(request.headers.get(wire)), member)
    return params


# --------------------------------------------------------------------------- checks
def _validate(
    params: Any, shape: Any, *, request: bool, absent_ok: frozenset[str] = frozenset()
) -> list[Problem]:
    report = _validator().validate(params, shape)
    problems = []
    for error_type, name, details in getattr(report, "_errors", []):
        if error_type == "missing required field" and details.get("required_name") in absent_ok:
            continue
        text = report._format_error((error_type, name, details))
        # AWS services ignore members they do not know (forward compatibility); the rest is rejected.
        problems.append(Problem(str(name), text, rejects=request and error_type != "unknown field"))
    if not hasattr(report, "_errors") and report.has_errors():  # a report we cannot read item by item
        problems.append(Problem("", report.generate_report()))
    return problems


def _constraints(
    value: Any, shape: Any, path: str, problems: list[Problem], service: str, *, request: bool
) -> None:
    """The model's ``max``, ``pattern`` and ``enum``, which botocore leaves to the service to enforce."""
    if shape is None or value is None:
        return
    kind, meta = shape.type_name, shape.metadata
    if kind == "structure" and isinstance(value, dict):
        for name, item in value.items():
            member = shape.members.get(name)
            if member is None:
                continue
            if (
                not request
                and (service, shape.name, name) in OPEN_STATUS_MEMBERS
                and member.type_name == "string"
            ):
                continue
            _constraints(item, member, f"{path}.{name}" if path else name, problems, service, request=request)
    elif kind == "list" and isinstance(value, list):
        if "max" in meta and len(value) > meta["max"]:
            problems.append(Problem(path, f"{len(value)} items, the model allows at most {meta['max']}"))
        for i, item in enumerate(value):
            _constraints(item, shape.member, f"{path}[{i}]", problems, service, request=request)
    elif kind == "map" and isinstance(value, dict):
        if "max" in meta and len(value) > meta["max"]:
            problems.append(Problem(path, f"{len(value)} entries, the model allows at most {meta['max']}"))
        for key, item in value.items():
            _constraints(key, shape.key, f"{path}<key>", problems, service, request=request)
            _constraints(item, shape.value, f"{path}[{key!r}]", problems, service, request=request)
    elif kind == "string" and isinstance(value, str):
        if "max" in meta and len(value) > meta["max"]:
            problems.append(Problem(path, f"{len(value)} characters, the model allows at most {meta['max']}"))
        pattern = meta.get("pattern")
        # Smithy (and the models botocore ships) do not anchor a pattern implicitly: it must match somewhere.
        if pattern and _pattern(pattern).search(value) is None:
            problems.append(Problem(path, f"{value!r} does not match the model's pattern {pattern!r}"))
        if shape.enum and value not in shape.enum:
            problems.append(Problem(path, f"{value!r} is not one of the model's values {list(shape.enum)}"))


@functools.cache
def _pattern(pattern: str) -> re.Pattern[str]:
    try:
        return re.compile(pattern)
    except re.error:  # a Java-only construct: accept everything rather than guess
        return re.compile("")


def _unknown_members(value: Any, shape: Any, path: str, problems: list[Problem]) -> None:
    """Keys of the raw answer that the output shape does not have (botocore's parser drops them)."""
    if shape is None:
        return
    kind = shape.type_name
    if kind == "structure" and isinstance(value, dict):
        members = {
            _wire_name(n, s): s
            for n, s in shape.members.items()
            if s.serialization.get("location") in (None, "body")
        }
        for key, item in value.items():
            where = f"{path}.{key}" if path else key
            if key not in members:
                problems.append(Problem(where, f"not a member of {shape.name} in the model"))
            else:
                _unknown_members(item, members[key], where, problems)
    elif kind == "list" and isinstance(value, list):
        for i, item in enumerate(value):
            _unknown_members(item, shape.member, f"{path}[{i}]", problems)
    elif kind == "map" and isinstance(value, dict):
        for key, item in value.items():
            _unknown_members(item, shape.value, f"{path}[{key!r}]", problems)


class AwsContract(Contract):
    """botocore's model of the service an `AwsEmulator` serves (and of those it forwards to moto)."""

    def __init__(self, system: str, service: str) -> None:
        self.system = system  # type: ignore[misc]
        self.service = service

    @property
    def source(self) -> str:
        import botocore

        return f"botocore {botocore.__version__} service model"

    @property
    def available(self) -> str | None:
        try:
            import botocore  # noqa: F401
        except ImportError:
            return "botocore is not installed"
        return None

    def _call(self, request: Request) -> tuple[str, str] | None:
        service = request.path_params.get("service", "")
        operation = request.path_params.get("operation", "Unknown")
        if not service or operation == "Unknown":
            return None
        return service, operation

    def operation(self, request: Request) -> str | None:
        call = self._call(request)
        if call is None:
            return None
        service, operation = call
        return operation if service == self.service else f"{service}:{operation}"

    def _model(self, request: Request) -> tuple[str, Any] | None:
        call = self._call(request)
        if call is None:
            return None
        service, operation = call
        try:
            return service, service_model(service).operation_model(operation)
        except Exception:  # a service or operation botocore does not know: nothing to check against
            return None

    def check_request(self, operation: str, request: Request) -> list[Problem]:
        found = self._model(request)
        if found is None:
            return [Problem("", "botocore's model has no such operation", rejects=False)]
        service, model = found
        if model.input_shape is None:
            return []
        params = request_params(model, request)
        problems = _validate(params, model.input_shape, request=True)
        _constraints(params, model.input_shape, "", problems, service, request=True)
        return problems

    def check_response(self, operation: str, request: Request, response: Response) -> list[Problem]:
        found = self._model(request)
        if found is None or response.status >= 300:  # error shapes: see the fidelity page
            return []
        service, model = found
        raw = response.raw if response.raw is not None else json.dumps(response.json).encode()
        shape = model.output_shape
        if shape is None:
            body = json.loads(raw or b"{}")
            return [] if body in ({}, None) else [Problem("", f"the operation answers no body, got {body!r}")]
        problems: list[Problem] = []
        try:
            body = json.loads(raw or b"{}")
        except ValueError as err:
            return [Problem("", f"not JSON: {err}")]
        _unknown_members(body, shape, "", problems)
        headers = {k.lower(): v for k, v in response.headers.items()}
        try:
            parsed = _parser(model.metadata["protocol"]).parse(
                {"status_code": response.status, "headers": headers, "body": raw}, shape
            )
        except Exception as err:
            return [*problems, Problem("", f"botocore cannot parse it: {type(err).__name__}: {err}")]
        parsed.pop("ResponseMetadata", None)
        absent_ok = frozenset(m for (svc, op, m) in REQUIRED_BUT_ABSENT if (svc, op) == (service, model.name))
        problems += _validate(parsed, shape, request=False, absent_ok=absent_ok)
        _constraints(parsed, shape, "", problems, service, request=False)
        return problems
