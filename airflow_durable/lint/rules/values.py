"""ADR013 (state-store value None / not JSON), ADR014 (naive utcnow watermark), ADR015 (mapped same key)."""

from __future__ import annotations

from collections.abc import Iterator

import libcst as cst

from airflow_durable.lint.context import FileContext, arg, callee_name, is_none, method_name, string_value
from airflow_durable.lint.findings import Finding
from airflow_durable.lint.flow import FunctionFlow

# Calls whose result json.dumps rejects.
_NON_JSON_CALLS = {
    "datetime.datetime.now": "a datetime",
    "datetime.datetime.utcnow": "a datetime",
    "datetime.datetime": "a datetime",
    "datetime.date.today": "a date",
    "datetime.date": "a date",
    "datetime.timedelta": "a timedelta",
    "pendulum.now": "a datetime",
    "pendulum.datetime": "a datetime",
    "pendulum.today": "a datetime",
    "decimal.Decimal": "a Decimal",
    "uuid.uuid4": "a UUID",
    "uuid.UUID": "a UUID",
    "builtins.set": "a set",
    "builtins.frozenset": "a frozenset",
    "builtins.bytes": "bytes",
    "builtins.object": "an object",
}
# Context entries that are objects or datetimes, not JSON.
_NON_JSON_CONTEXT = {
    "logical_date",
    "data_interval_start",
    "data_interval_end",
    "ti",
    "task_instance",
    "dag_run",
    "dag",
    "task",
    "execution_date",
    "prev_data_interval_start_success",
    "prev_data_interval_end_success",
    "start_date",
}
_NAIVE_NOW = {"datetime.datetime.utcnow"}
_NAIVE_NOW_NO_TZ = {"datetime.datetime.now"}
_STRINGIFY = {"isoformat", "strftime", "timestamp", "str", "ctime"}
_MAP_METHODS = {"expand", "expand_kwargs"}


def check(ctx: FileContext) -> Iterator[Finding]:
    mapped = _mapped_task_names(ctx)
    for fn, info in ctx.functions.items():
        if not info.is_task:
            continue
        flow = FunctionFlow(ctx, fn)
        owner = info.class_node.name.value if info.class_node is not None else fn.name.value
        for call, kind in flow.store_calls({"set", "aset"}):
            value = arg(call, 1, "value")
            if value is None:
                continue
            store = f"{kind}_state_store"
            problem = _non_json(ctx, flow, value)
            if problem:
                yield ctx.finding(
                    "ADR013",
                    call,
                    (
                        f"{store}.set() is given {problem}: state-store values must be JSON (str, int, "
                        "float, bool, "
                        "list, dict) and None is rejected, so this raises at run time — on the retry "
                        "path, where it "
                        "hurts most. Fix: store a JSON value (e.g. an ISO-8601 string with an explicit "
                        "UTC offset)"
                        " and delete the key instead of storing None."
                    ),
                )
            naive = _naive_now(ctx, flow, value)
            if naive:
                yield ctx.finding("ADR014", call, _adr014(naive, store))
            if kind == "asset" and owner in mapped and _constant_key(arg(call, 0, "key")):
                key = ctx.code(arg(call, 0, "key"))  # type: ignore[arg-type]
                yield ctx.finding(
                    "ADR015",
                    call,
                    (
                        f"'{owner}' is mapped ({mapped[owner]}) and every mapped instance writes "
                        f"asset_state_store key {key} of the same asset: the instances overwrite each "
                        "other and the "
                        "last one to finish wins, whatever order the data was processed in. Fix: "
                        "include the map index or the partition in the key "
                        '(f"watermark:{partition}"), or write the key once in a non-mapped task downstream '
                        "of the mapped ones."
                    ),
                )
        for call in flow.variable_calls({"set"}):
            value = arg(call, 1, "value")
            naive = _naive_now(ctx, flow, value) if value is not None else None
            if naive:
                yield ctx.finding("ADR014", call, _adr014(naive, "Variable"))


def _adr014(naive: str, store: str) -> str:
    return (
        f"{naive} is stored in {store} as a watermark: it is a naive datetime (no timezone), so comparing it "
        "with Airflow's timezone-aware dates (logical_date, data_interval_end) fails or silently shifts "
        "by the "
        "UTC offset, and datetime.utcnow() is deprecated since Python 3.12. Fix: "
        "datetime.now(timezone.utc).isoformat(), or better the run's data_interval_end."
    )


def _non_json(ctx: FileContext, flow: FunctionFlow, value: cst.BaseExpression) -> str | None:
    value = flow.resolve(value)
    if is_none(value):
        return "None"
    if isinstance(value, (cst.Set, cst.SetComp)):
        return "a set"
    if isinstance(value, cst.SimpleString) and "b" in value.prefix.lower():
        return "bytes"
    if isinstance(value, (cst.Lambda, cst.GeneratorExp)):
        return "a lambda or generator"
    if isinstance(value, cst.Call):
        for q in ctx.call_qnames(value):
            if q in _NON_JSON_CALLS:
                return f"{_NON_JSON_CALLS[q]} ({ctx.code(value)})"
    if (
        isinstance(value, cst.Subscript)
        and len(value.slice) == 1
        and isinstance(value.slice[0].slice, cst.Index)
    ):
        key = string_value(value.slice[0].slice.value)
        if key in _NON_JSON_CONTEXT:
            return f"context[{key!r}], which is not JSON"
    if isinstance(value, cst.Name) and value.value in flow.params and value.value in _NON_JSON_CONTEXT:
        return f"the injected '{value.value}', which is not JSON"
    return None


def _naive_now(ctx: FileContext, flow: FunctionFlow, value: cst.BaseExpression, depth: int = 0) -> str | None:
    """The naive now-call a stored value is computed from (directly, stringified, or via a local name)."""
    if depth > 5:
        return None
    value = flow.resolve(value)
    if isinstance(value, cst.Call):
        qn = ctx.call_qnames(value)
        if qn & _NAIVE_NOW:
            return "datetime.utcnow()"
        if qn & _NAIVE_NOW_NO_TZ and not value.args:
            return "datetime.now() without tz"
        inner: cst.BaseExpression | None = None
        if method_name(value) in _STRINGIFY and isinstance(value.func, cst.Attribute):
            inner = value.func.value
        elif callee_name(value) == "str" and value.args:
            inner = value.args[0].value
        if inner is not None:
            return _naive_now(ctx, flow, inner, depth + 1)
    return None


def _constant_key(key: cst.BaseExpression | None) -> bool:
    if isinstance(key, (cst.SimpleString, cst.ConcatenatedString)):
        return True
    if isinstance(key, cst.FormattedString):
        return not any(isinstance(p, cst.FormattedStringExpression) for p in key.parts)
    return False


def _mapped_task_names(ctx: FileContext) -> dict[str, str]:
    """TaskFlow functions (by name) that are mapped somewhere in the file, with how."""
    out: dict[str, str] = {}
    for call in ctx.calls():
        name = method_name(call)
        if name not in _MAP_METHODS:
            continue
        assert isinstance(call.func, cst.Attribute)
        base = call.func.value
        # fn.partial(...).expand(...) / fn.override(...).expand(...)
        while isinstance(base, cst.Call) and isinstance(base.func, cst.Attribute):
            base = base.func.value
        if isinstance(base, cst.Name):
            out.setdefault(base.value, f".{name}()")
    return out
