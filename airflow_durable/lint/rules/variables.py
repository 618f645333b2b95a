"""ADR001 (Variable as per-run / per-task state) and ADR002 (Variable as a watermark)."""

from __future__ import annotations

from collections.abc import Iterator

import libcst as cst

from airflow_durable.lint.context import FileContext, arg, names_in, string_parts, string_value
from airflow_durable.lint.findings import Finding
from airflow_durable.lint.flow import FunctionFlow
from airflow_durable.lint.rules.keys import is_external_id_key, is_run_scoped_placeholder, is_watermark_key

ADR001 = (
    "Variable.{method}({key}) inside task '{task}' keeps state of one run in a global Variable ({why}): "
    "Variables are shared by every DAG, run, mapped instance and retry, so concurrent runs overwrite each "
    "other and nothing scopes or expires the value. Fix: to hand a value to another task of this run, "
    'return it (XCom); to keep it across this task\'s retries, use context["task_state_store"] (scoped to '
    "dag_id, run_id, task_id and map_index)."
)
ADR002 = (
    "Variable.set({key}) inside task '{task}' stores state that carries from one DAG run to the next "
    "({why}): a watermark, cursor or counter. In a global Variable any DAG or task can overwrite it, two "
    "overlapping runs read the same value and one update is lost, and nothing ties it to the data it "
    'describes. Fix: keep it on the asset this task reads or writes, context["asset_state_store"][ASSET]'
    ".set({key}, ...), which also carries across runs. A Variable is acceptable only when no other DAG or "
    "task writes this key and the DAG never runs twice at once (max_active_runs=1)."
)


def _key_label(ctx: FileContext, key: cst.BaseExpression | None) -> str:
    return ctx.code(key) if key is not None else "..."


def _method(call: cst.Call) -> str:
    return call.func.attr.value if isinstance(call.func, cst.Attribute) else "set"


def check(ctx: FileContext) -> Iterator[Finding]:
    for fn, info in ctx.functions.items():
        if not info.is_task:
            continue
        flow = FunctionFlow(ctx, fn)
        task = fn.name.value
        writes = list(flow.variable_calls({"set", "delete"}))
        reads = list(flow.variable_calls({"get"}))

        def ident(call: cst.Call, flow: FunctionFlow = flow) -> str | None:
            key = arg(call, 0, "key")
            if key is None:
                return None
            literal = string_value(flow.resolve(key))
            return repr(literal) if literal is not None else ctx.code(key)

        written = {i for c in writes if (i := ident(c)) is not None}
        deleted = {i for c in writes if _method(c) == "delete" and (i := ident(c)) is not None}
        read = {i for c in reads if (i := ident(c)) is not None}
        per_run: set[str] = set()  # keys this task uses as state of one run
        for call in [*writes, *reads]:
            key, name = arg(call, 0, "key"), ident(call)
            if key is None or name is None:
                continue
            text = string_parts(flow.resolve(key))
            if _run_scoped(ctx, flow.resolve(key)):
                per_run.add(name)
            elif name in written and (name in deleted or is_external_id_key(text)):
                per_run.add(name)
        for call in writes:
            key, name = arg(call, 0, "key"), ident(call)
            label = _key_label(ctx, key)
            text = string_parts(flow.resolve(key)) if key is not None else None
            if name in per_run or _method(call) == "delete":
                why = _per_run_why(ctx, flow, key, name, deleted)
                yield ctx.finding(
                    "ADR001", call, ADR001.format(method=_method(call), key=label, task=task, why=why)
                )
            elif name in read:
                why = "it reads this key, then writes a new value for the next run"
                yield ctx.finding("ADR002", call, ADR002.format(key=label, task=task, why=why))
            elif is_watermark_key(text):
                why = "the key names a watermark"
                yield ctx.finding("ADR002", call, ADR002.format(key=label, task=task, why=why))
            else:
                why = "a value written for another task or a later try to read"
                yield ctx.finding(
                    "ADR001", call, ADR001.format(method=_method(call), key=label, task=task, why=why)
                )
        for call in reads:
            key, name = arg(call, 0, "key"), ident(call)
            if key is None or name not in per_run:
                # A constant key this task never writes is configuration (read it here, at run time); one it
                # also writes back is cross-run state, reported once on the write (ADR002).
                continue
            why = _per_run_why(ctx, flow, key, name, deleted)
            label = _key_label(ctx, key)
            yield ctx.finding("ADR001", call, ADR001.format(method="get", key=label, task=task, why=why))


def _per_run_why(
    ctx: FileContext, flow: FunctionFlow, key: cst.BaseExpression | None, name: str | None, deleted: set[str]
) -> str:
    if key is not None and _run_scoped(ctx, flow.resolve(key)):
        return "the key is built from the run's identity"
    if name in deleted:
        return "the task deletes the key when it is done"
    if key is not None and is_external_id_key(string_parts(flow.resolve(key))):
        return "the key holds the id of a job this run started"
    return "a value written for another task or a later try to read"


def _run_scoped(ctx: FileContext, key: cst.BaseExpression) -> bool:
    if not isinstance(key, cst.FormattedString):
        return False
    words: set[str] = set()
    for part in key.parts:
        if isinstance(part, cst.FormattedStringExpression):
            words |= names_in(part.expression)
            words |= {
                v
                for n in ctx.walk(part.expression)
                if isinstance(n, cst.BaseExpression) and (v := string_value(n)) is not None
            }
    return is_run_scoped_placeholder(words)
