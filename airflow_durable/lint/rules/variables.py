"""ADR001 (Variable as per-run / per-task state) and ADR002 (Variable as a watermark)."""

from __future__ import annotations

from collections.abc import Iterator

import libcst as cst

from airflow_durable.lint.context import FileContext, arg, names_in, string_parts, string_value
from airflow_durable.lint.findings import Finding
from airflow_durable.lint.flow import FunctionFlow
from airflow_durable.lint.rules.keys import is_run_scoped_placeholder, is_watermark_key

ADR001 = (
    "Variable.{method}({key}) inside task '{task}' keeps per-run/per-task state in a global Variable: "
    "Variables are shared by every DAG, run, mapped instance and retry, so concurrent runs overwrite each "
    'other and nothing scopes or expires the value. Fix: use context["task_state_store"] '
    "(scoped to dag_id, run_id, task_id, map_index; survives retries)."
)
ADR002 = (
    "Variable.set({key}) inside task '{task}' stores a watermark / last-processed marker in a global "
    "Variable: any DAG or task can overwrite it and it is not tied to the data it describes. Fix: keep it "
    'per asset with context["asset_state_store"].set({key}, ...) on the asset this task reads or writes.'
)


def _key_text(call: cst.Call) -> tuple[str | None, cst.BaseExpression | None]:
    key = arg(call, 0, "key")
    return string_parts(key), key


def _key_label(ctx: FileContext, key: cst.BaseExpression | None) -> str:
    return ctx.code(key) if key is not None else "..."


def check(ctx: FileContext) -> Iterator[Finding]:
    for fn, info in ctx.functions.items():
        if not info.is_task:
            continue
        flow = FunctionFlow(ctx, fn)
        task = fn.name.value
        set_calls = list(flow.variable_calls({"set", "delete"}))
        written_keys = {string_value(arg(c, 0, "key")) for c in set_calls} - {None}
        for call in set_calls:
            text, key = _key_text(call)
            method = call.func.attr.value if isinstance(call.func, cst.Attribute) else "set"
            if method == "set" and is_watermark_key(text):
                yield ctx.finding("ADR002", call, ADR002.format(key=_key_label(ctx, key), task=task))
            else:
                yield ctx.finding(
                    "ADR001", call, ADR001.format(method=method, key=_key_label(ctx, key), task=task)
                )
        written_names = {ctx.code(k) for c in set_calls if (k := arg(c, 0, "key")) is not None}
        for call in flow.variable_calls({"get"}):
            key = arg(call, 0, "key")
            if key is None:
                continue
            literal = string_value(flow.resolve(key))
            if literal is not None and literal in written_keys and is_watermark_key(literal):
                continue  # the watermark pattern is reported once, on the write (ADR002)
            if (
                (literal is not None and literal in written_keys)
                or ctx.code(key) in written_names
                or _run_scoped(ctx, flow.resolve(key))
            ):
                # Read back what this task writes, or a key built from the run's identity: per-run state.
                yield ctx.finding(
                    "ADR001", call, ADR001.format(method="get", key=_key_label(ctx, key), task=task)
                )
            # A constant key that this task never writes is configuration: the recommended place to read
            # it is exactly here, at run time, so it is not flagged.


def _run_scoped(ctx: FileContext, key: cst.BaseExpression) -> bool:
    if not isinstance(key, cst.FormattedString):
        return False
    words: set[str] = set()
    for part in key.parts:
        if isinstance(part, cst.FormattedStringExpression):
            words |= names_in(part.expression)
            words |= {v for n in ctx.walk(part.expression) if (v := string_value(n)) is not None}
    return is_run_scoped_placeholder(words)
