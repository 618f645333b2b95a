"""BigQuery: the v2 discovery document that google-api-python-client ships.

Each request is matched to its discovery method by the method's ``flatPath``. Its query parameters
must be the method's (or the API's global ones), of the declared type and enum; its JSON body must fit
the method's request schema (Google APIs reject an unknown field: "Invalid JSON payload received.
Unknown name"), with the properties the document marks required for that method. Each answer must
fit the method's response schema: known properties only, right types, 64-bit integers as decimal
strings (the JSON mapping the discovery ``format: int64`` means).
"""

from __future__ import annotations

import functools
import json
import os
import re
from typing import Any

from airflow_durable.testing._core import Request, Response
from airflow_durable.testing.contracts import Contract, Problem

__all__ = ["BigQueryContract", "discovery_document"]

#: Query parameters the discovery document does not declare that the Google client sends, and why.
PARAMETER_EXTRAS: dict[tuple[str, str], str] = {
    ("bigquery.jobs.get", "projection"): (
        "google-cloud-bigquery's Client.get_job sends projection=full; the discovery document declares "
        "projection for jobs.list only"
    ),
    ("bigquery.jobs.cancel", "projection"): (
        "google-cloud-bigquery's Client.cancel_job sends projection=full; the discovery document declares "
        "projection for jobs.list only"
    ),
}
_PREFIX = "/bigquery/v2/"
_INT64 = re.compile(r"-?\d+")


@functools.cache
def _document_path() -> str:
    import googleapiclient  # type: ignore[import-untyped]

    return os.path.join(
        os.path.dirname(googleapiclient.__file__), "discovery_cache", "documents", "bigquery.v2.json"
    )


@functools.cache
def discovery_document() -> dict[str, Any]:
    """The BigQuery v2 discovery document google-api-python-client ships (read once per process)."""
    with open(_document_path(), encoding="utf-8") as f:
        document: dict[str, Any] = json.load(f)
    return document


@functools.cache
def _methods() -> list[tuple[str, re.Pattern[str], dict[str, Any]]]:
    found = []
    for resource in discovery_document()["resources"].values():
        for method in resource.get("methods", {}).values():
            path = method.get("flatPath") or method["path"]
            regex = re.sub(r"\\\{[^}]+\\\}", "[^/]+", re.escape(path))
            found.append((method["httpMethod"], re.compile(f"^{regex}$"), method))
    return found


def check_schema(
    value: Any, schema: dict[str, Any], path: str, problems: list[Problem], *, request: bool, method: str = ""
) -> None:
    """``value`` against a discovery schema; ``method`` (a request's method id) selects required ones."""
    if "$ref" in schema:
        schema = discovery_document()["schemas"][schema["$ref"]]
    kind = schema.get("type")
    if value is None or kind == "any":
        return
    name = schema.get("id", "")
    if kind == "object":
        if not isinstance(value, dict):
            problems.append(Problem(path, f"expected an object ({name or 'map'}), got {value!r}"))
            return
        properties = schema.get("properties", {})
        extra = schema.get("additionalProperties")
        for key, item in value.items():
            where = f"{path}.{key}" if path else key
            if key in properties:
                check_schema(item, properties[key], where, problems, request=request, method=method)
            elif extra is not None:
                check_schema(item, extra, where, problems, request=request, method=method)
            else:
                problems.append(Problem(where, f"not a property of {name or 'this object'}"))
        if request and method:
            for key, prop in properties.items():
                if method in prop.get("annotations", {}).get("required", []) and key not in value:
                    where = f"{path}.{key}" if path else key
                    problems.append(Problem(where, f"required by {method}"))
        return
    if kind == "array":
        if not isinstance(value, list):
            problems.append(Problem(path, f"expected an array, got {value!r}"))
            return
        for i, item in enumerate(value):
            check_schema(
                item, schema.get("items", {}), f"{path}[{i}]", problems, request=request, method=method
            )
        return
    problem = _scalar_problem(value, kind, schema.get("format"), request=request)
    if problem:
        problems.append(Problem(path, problem))
    elif "enum" in schema and value not in schema["enum"]:
        problems.append(Problem(path, f"{value!r} is not one of {schema['enum']}"))


def _scalar_problem(value: Any, kind: str | None, fmt: str | None, *, request: bool) -> str | None:
    if kind == "string":
        if fmt in ("int64", "uint64"):
            # Answers carry 64-bit integers as decimal strings; requests may send a number too.
            if isinstance(value, str) and _INT64.fullmatch(value):
                return None
            if request and isinstance(value, int) and not isinstance(value, bool):
                return None
            return f"expected a 64-bit integer as a decimal string, got {value!r}"
        return None if isinstance(value, str) else f"expected a string, got {value!r}"
    if kind == "integer":
        ok = isinstance(value, int) and not isinstance(value, bool)
        return None if ok else f"expected an integer, got {value!r}"
    if kind == "number":
        ok = isinstance(value, (int, float)) and not isinstance(value, bool)
        return None if ok else f"expected a number, got {value!r}"
    if kind == "boolean":
        return None if isinstance(value, bool) else f"expected a boolean, got {value!r}"
    return None


def _parameter_problem(value: str, spec: dict[str, Any]) -> str | None:
    kind = spec.get("type")
    if kind == "integer" and not _INT64.fullmatch(value):
        return f"expected an integer, got {value!r}"
    if kind == "boolean" and value.lower() not in ("true", "false"):
        return f"expected true or false, got {value!r}"
    if kind == "string" and spec.get("format") in ("int64", "uint64") and not _INT64.fullmatch(value):
        return f"expected a 64-bit integer, got {value!r}"
    if "enum" in spec and value not in spec["enum"]:
        return f"{value!r} is not one of {spec['enum']}"
    return None


class BigQueryContract(Contract):
    """The BigQuery v2 discovery document (google-api-python-client's copy)."""

    system = "bigquery"

    @property
    def source(self) -> str:
        try:
            document = discovery_document()
        except (ImportError, OSError):
            return "BigQuery v2 discovery document (not installed)"
        return f"BigQuery v2 discovery document, revision {document.get('revision')}"

    @property
    def available(self) -> str | None:
        try:
            discovery_document()
        except (ImportError, OSError) as err:
            return f"google-api-python-client's BigQuery discovery document is not installed ({err})"
        return None

    def _method(self, request: Request) -> dict[str, Any] | None:
        if not request.path.startswith(_PREFIX):
            return None
        path = request.path[len(_PREFIX) :]
        for http_method, regex, method in _methods():
            if http_method == request.method and regex.match(path):
                return method
        return None

    def operation(self, request: Request) -> str | None:
        method = self._method(request)
        return None if method is None else str(method["id"])

    def check_request(self, operation: str, request: Request) -> list[Problem]:
        method = self._method(request)
        assert method is not None
        problems: list[Problem] = []
        known = {**discovery_document().get("parameters", {}), **method.get("parameters", {})}
        for key, value in request.query.items():
            spec = known.get(key)
            if (operation, key) in PARAMETER_EXTRAS:
                continue
            if spec is None or spec.get("location") == "path":
                problems.append(Problem(f"query.{key}", f"not a parameter of {operation}", rejects=False))
                continue
            problem = _parameter_problem(value, spec)
            if problem:
                problems.append(Problem(f"query.{key}", problem))
        reference = method.get("request")
        if reference is not None:
            check_schema(request.json or {}, reference, "", problems, request=True, method=operation)
        elif request.json not in (None, {}):
            problems.append(Problem("", f"{operation} takes no body", rejects=False))
        return problems

    def check_response(self, operation: str, request: Request, response: Response) -> list[Problem]:
        method = self._method(request)
        assert method is not None
        if response.status >= 300:  # the discovery document describes no error body
            return []
        problems: list[Problem] = []
        reference = method.get("response")
        if reference is None:
            if response.json not in (None, {}):
                problems.append(Problem("", f"{operation} answers no body, got {response.json!r}"))
            return problems
        check_schema(response.json, reference, "", problems, request=False)
        return problems
