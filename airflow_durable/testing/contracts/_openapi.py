"""Snowflake SQL API and dbt Cloud: the OpenAPI documents their owners publish, checked offline.

Neither service ships its contract in a Python package, but both publish an OpenAPI 3 document in a
repository of their own (Snowflake: ``snowflakedb/snowflake-rest-api-specs``, ``sqlapi.yaml``; dbt Labs:
``dbt-labs/dbt-cloud-openapi-spec``, ``openapi-v2.yaml``, from which docs.getdbt.com renders its API
reference). The operations the provider hooks call were copied once, with every schema they use, into
``snowflake_sql_api_v2.json`` / ``dbt_cloud_api_v2.json`` beside this module, each naming the document,
its version and the commit it was copied from, and the documentation pages of each operation. What the
documentation pages say and the document does not (Snowflake's ``retry`` parameter and multi-statement
``statementHandles``) is written there under ``documented_only``, with the page it comes from.

`extract` rewrites such a file from a newer copy of the document: ``python -m
airflow_durable.testing.contracts._openapi SPEC.yaml OUT.json`` keeps the operations, sources and
``documented_only`` of ``OUT.json`` and refreshes their schemas.
"""

from __future__ import annotations

import functools
import json
import os
import re
from typing import Any

from airflow_durable.testing._core import Request, Response
from airflow_durable.testing.contracts import Contract, Problem

__all__ = ["OpenApiContract", "check_schema", "contract_data", "extract"]

_HERE = os.path.dirname(os.path.abspath(__file__))
_INT = re.compile(r"-?\d+")


@functools.cache
def contract_data(name: str) -> dict[str, Any]:
    """A contract file beside this module, read once per process."""
    with open(os.path.join(_HERE, name), encoding="utf-8") as f:
        data: dict[str, Any] = json.load(f)
    return data


def _resolve(schema: dict[str, Any], schemas: dict[str, Any]) -> dict[str, Any]:
    while "$ref" in schema:
        schema = schemas[schema["$ref"].rsplit("/", 1)[-1]]
    return schema


def _type_ok(value: Any, kind: str) -> bool:
    if kind == "object":
        return isinstance(value, dict)
    if kind == "array":
        return isinstance(value, list)
    if kind == "string":
        return isinstance(value, str)
    if kind == "integer":
        return isinstance(value, int) and not isinstance(value, bool)
    if kind == "number":
        return isinstance(value, (int, float)) and not isinstance(value, bool)
    if kind == "boolean":
        return isinstance(value, bool)
    return True


def _with_additions(schema: Any, additions: dict[str, Any], schemas: dict[str, Any]) -> Any:
    """``schema`` with the properties of ``additions`` (``{"a.b": {"schema": ...}}``) inserted."""
    import copy

    if not additions:
        return schema
    out = copy.deepcopy(_resolve(schema, schemas))
    for dotted, spec in additions.items():
        *parents, name = dotted.split(".")
        node = out
        for parent in parents:
            child = _resolve(
                node.setdefault("properties", {}).setdefault(parent, {"type": "object"}), schemas
            )
            child = node["properties"][parent] = copy.deepcopy(child)
            node = child
        node.setdefault("properties", {})[name] = spec["schema"]
    return out


def check_schema(
    value: Any,
    schema: dict[str, Any],
    schemas: dict[str, Any],
    path: str,
    problems: list[Problem],
    *,
    nulls: bool = False,
) -> None:
    """``value`` against an OpenAPI 3.0 schema: types, ``nullable``, ``enum``, ``required``, no unknown
    property (an object that declares ``properties`` and no ``additionalProperties`` is closed here:
    the check is that the emulator answers nothing the document does not describe)."""
    schema = _resolve(schema, schemas)
    if value is None:
        if not nulls and not schema.get("nullable") and schema.get("type") is not None:
            problems.append(Problem(path, "null, but the document does not mark it nullable"))
        return
    for key in ("anyOf", "oneOf"):
        if key in schema:
            attempts = []
            for option in schema[key]:
                found: list[Problem] = []
                check_schema(value, option, schemas, path, found, nulls=nulls)
                if not found:
                    return
                attempts.append(found)
            best = min(attempts, key=len)
            problems.extend(best)
            return
    if "allOf" in schema:
        merged: dict[str, Any] = {"type": "object", "properties": {}, "required": []}
        for part in schema["allOf"]:
            part = _resolve(part, schemas)
            merged["properties"].update(part.get("properties", {}))
            merged["required"] += part.get("required", [])
            if "additionalProperties" in part:
                merged["additionalProperties"] = part["additionalProperties"]
        check_schema(value, merged, schemas, path, problems, nulls=nulls)
        return
    kind = schema.get("type")
    if kind is not None and not _type_ok(value, kind):
        problems.append(Problem(path, f"expected {kind}, got {value!r}"))
        return
    if "enum" in schema and value not in schema["enum"]:
        problems.append(Problem(path, f"{value!r} is not one of {schema['enum']}"))
    if isinstance(value, str):
        if len(value) < schema.get("minLength", 0):
            problems.append(Problem(path, f"shorter than the document's minLength {schema['minLength']}"))
        if "maxLength" in schema and len(value) > schema["maxLength"]:
            problems.append(Problem(path, f"longer than the document's maxLength {schema['maxLength']}"))
    if (
        isinstance(value, (int, float))
        and not isinstance(value, bool)
        and value < schema.get("minimum", value)
    ):
        problems.append(Problem(path, f"below the document's minimum {schema['minimum']}"))
    if isinstance(value, dict) and (kind == "object" or "properties" in schema):
        properties = schema.get("properties", {})
        extra = schema.get("additionalProperties")
        for key, item in value.items():
            where = f"{path}.{key}" if path else key
            if key in properties:
                check_schema(item, properties[key], schemas, where, problems, nulls=nulls)
            elif isinstance(extra, dict):
                check_schema(item, extra, schemas, where, problems, nulls=nulls)
            elif extra is not True and properties:
                problems.append(Problem(where, "not a property the document describes"))
        for key in schema.get("required", []):
            if key not in value:
                problems.append(Problem(f"{path}.{key}" if path else key, "required by the document"))
    elif isinstance(value, list) and "items" in schema:
        for i, item in enumerate(value):
            check_schema(item, schema["items"], schemas, f"{path}[{i}]", problems, nulls=nulls)


def _text_ok(text: str, schema: dict[str, Any]) -> str | None:
    kind = schema.get("type")
    if kind == "integer" and not _INT.fullmatch(text):
        return f"expected an integer, got {text!r}"
    if kind == "boolean" and text.lower() not in ("true", "false"):
        return f"expected true or false, got {text!r}"
    if "enum" in schema and text not in [str(e) for e in schema["enum"]]:
        return f"{text!r} is not one of {schema['enum']}"
    return None


class OpenApiContract(Contract):
    """One service's operations from a contract file written by `extract`."""

    def __init__(self, system: str, filename: str) -> None:
        self.system = system  # type: ignore[misc]
        self.filename = filename

    @property
    def data(self) -> dict[str, Any]:
        return contract_data(self.filename)

    @property
    def source(self) -> str:
        src = self.data["source"]
        return f"{src['title']} {src['version']} ({src['repository']} {src['path']} @ {src['commit'][:12]})"

    @functools.cached_property
    def _routes(self) -> list[tuple[str, re.Pattern[str], str]]:
        routes = []
        for name, op in self.data["operations"].items():
            template = op["path"].rstrip("/")
            regex = re.sub(r"\\\{[^}]+\\\}", "[^/]+", re.escape(template))
            routes.append((op["method"].upper(), re.compile(f"^{regex}/?$"), name))
        return routes

    def operation(self, request: Request) -> str | None:
        for method, regex, name in self._routes:
            if method == request.method and regex.match(request.path):
                return name
        return None

    def _additions(self, operation: str, part: str) -> dict[str, Any]:
        """What the documentation pages add to the document, and what the provider sends beyond both."""
        found: dict[str, Any] = {}
        for section in ("documented_only", "provider_extras"):
            found.update(self.data.get(section, {}).get(operation, {}).get(part, {}))
        return found

    @property
    def _nulls(self) -> bool:
        return bool(self.data.get("nulls_allowed"))

    def check_request(self, operation: str, request: Request) -> list[Problem]:
        op = self.data["operations"][operation]
        schemas = self.data["schemas"]
        problems: list[Problem] = []
        added = self._additions(operation, "query")
        for key, text in request.query.items():
            schema = op.get("query", {}).get(key) or added.get(key, {}).get("schema")
            if schema is None:
                problems.append(Problem(f"query.{key}", "not a parameter the document declares", False))
                continue
            problem = _text_ok(text, _resolve(schema, schemas))
            if problem:
                problems.append(Problem(f"query.{key}", problem))
        body = op.get("body")
        if body is not None and isinstance(request.json, (dict, list)):
            body = _with_additions(body, self._additions(operation, "body"), schemas)
            check_schema(request.json, body, schemas, "", problems, nulls=self._nulls)
        elif body is not None and op.get("body_required") and request.json is None:
            problems.append(Problem("", "the document requires a JSON body"))
        return problems

    def check_response(self, operation: str, request: Request, response: Response) -> list[Problem]:
        op = self.data["operations"][operation]
        schema = op.get("responses", {}).get(str(response.status))
        if schema is None:
            if response.status >= 300:  # an error the document describes without a body schema
                return []
            return [Problem("", f"status {response.status} is not an answer the document gives", False)]
        schemas = self.data["schemas"]
        schema = _with_additions(schema, self._additions(operation, "response"), schemas)
        problems: list[Problem] = []
        check_schema(response.json, schema, schemas, "", problems, nulls=self._nulls)
        return problems


# --------------------------------------------------------------------------- extraction (offline, by hand)
def _refs(value: Any) -> set[str]:
    found: set[str] = set()
    if isinstance(value, dict):
        ref = value.get("$ref")
        if isinstance(ref, str) and ref.startswith("#/components/schemas/"):
            found.add(ref.rsplit("/", 1)[-1])
        for item in value.values():
            found |= _refs(item)
    elif isinstance(value, list):
        for item in value:
            found |= _refs(item)
    return found


def extract(spec: dict[str, Any], current: dict[str, Any]) -> dict[str, Any]:
    """``current`` with the schemas of its operations refreshed from the OpenAPI document ``spec``."""
    components = spec.get("components", {})
    out = {**current, "operations": {}, "schemas": {}}
    out["source"] = {**current["source"], "version": spec["info"]["version"], "title": spec["info"]["title"]}
    for name, old in current["operations"].items():
        item = spec["paths"][old["spec_path"]]
        op = item[old["method"].lower()]
        params = [*item.get("parameters", []), *op.get("parameters", [])]
        params = [
            components["parameters"][p["$ref"].rsplit("/", 1)[-1]] if "$ref" in p else p for p in params
        ]
        body = (op.get("requestBody") or {}).get("content", {}).get("application/json", {}).get("schema")
        responses = {}
        for status, answer in op.get("responses", {}).items():
            if "$ref" in answer:
                answer = components["responses"][answer["$ref"].rsplit("/", 1)[-1]]
            schema = answer.get("content", {}).get("application/json", {}).get("schema")
            if schema is not None:
                responses[status] = schema
        out["operations"][name] = {
            **{k: v for k, v in old.items() if k not in ("query", "body", "body_required", "responses")},
            "query": {p["name"]: p.get("schema", {}) for p in params if p.get("in") == "query"},
            "body": body,
            "body_required": bool((op.get("requestBody") or {}).get("required")),
            "responses": responses,
        }
    wanted = _refs(out["operations"])
    while True:
        more = set()
        for name in wanted:
            more |= _refs(components["schemas"][name])
        if more <= wanted:
            break
        wanted |= more
    out["schemas"] = {name: components["schemas"][name] for name in sorted(wanted)}
    return out


def main(argv: list[str] | None = None) -> int:
    """``python -m airflow_durable.testing.contracts._openapi SPEC.yaml CONTRACT.json [COMMIT]``."""
    import sys

    import yaml  # type: ignore[import-untyped]

    args = sys.argv[1:] if argv is None else argv
    spec_path, out_path = args[0], args[1]
    with open(spec_path, encoding="utf-8") as f:
        spec = yaml.safe_load(f)
    with open(out_path, encoding="utf-8") as f:
        current = json.load(f)
    data = extract(spec, current)
    if len(args) > 2:
        data["source"]["commit"] = args[2]
    with open(out_path, "w", encoding="utf-8") as f:
        json.dump(data, f, indent=1, sort_keys=False)
        f.write("\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
