"""ADR001 (Variable as per-run / per-task state) and ADR002 (Variable as a watermark)."""

from __future__ import annotations

from collections.abc import Callable, Iterator

import libcst as cst

from airflow_durable.lint.context import FileContext, arg, callee_name, names_in, string_parts, string_value
from airflow_durable.lint.findings import Finding
from airflow_durable.lint.flow import FunctionFlow, is_variable_call
from airflow_durable.lint.rules.keys import (
    is_external_id_key,
    is_run_scoped_placeholder,
    is_submit_call_name,
    is_watermark_key,
    names_a_position,
)

ADR001 = (
    "Variable.{method}({key}) inside {task} keeps state of one run in a global Variable ({why}): "
    "Variables are shared by every DAG, run, mapped instance and retry, so concurrent runs overwrite each "
    "other and nothing scopes or expires the value. Fix: to hand a value to another task of this run, "
    'return it (XCom); to keep it across this task\'s retries, use context["task_state_store"] (scoped to '
    "dag_id, run_id, task_id and map_index)."
)
ADR002 = (
    "Variable.set({key}) inside {task} stores state that carries from one DAG run to the next "
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


def _task_code(ctx: FileContext) -> Iterator[tuple[cst.FunctionDef, str]]:
    """Task bodies, and the module's own functions a task body calls by name (one level down): a
    ``_save_cursor(value)`` helper that writes the Variable runs inside the task that calls it."""
    by_name = {fn.name.value: fn for fn in ctx.functions if ctx.functions[fn].class_node is None}
    helpers: dict[cst.FunctionDef, str] = {}
    for fn, info in ctx.functions.items():
        if not info.is_task:
            continue
        yield fn, f"task '{fn.name.value}'"
        for node in ctx.own_nodes(fn):
            if isinstance(node, cst.Call) and isinstance(node.func, cst.Name):
                helper = by_name.get(node.func.value)
                if helper is not None and helper is not fn and not ctx.functions[helper].is_task:
                    helpers.setdefault(helper, fn.name.value)
    for helper, caller in helpers.items():
        yield helper, f"'{helper.name.value}' (called by task '{caller}')"


def _submitted(ctx: FileContext, flow: FunctionFlow, fn: cst.FunctionDef, name: str, write: cst.Call) -> bool:
    """The Variable holds a job this run started: the value written comes from a submit call, or the
    key's stored value decides whether to submit (``if stored: reconnect else: submit``)."""
    value = arg(write, 1, "value")
    if value is not None:
        resolved = flow.resolve(value)
        if any(isinstance(n, cst.Call) and is_submit_call_name(callee_name(n)) for n in ctx.walk(resolved)):
            return True
    for node in ctx.own_nodes(fn):
        if not isinstance(node, cst.If):
            continue
        read = flow.stored_read(node.test)
        if read is None or read[0] != "Variable" or read[1] is None or repr(read[1]) != name:
            continue
        if any(isinstance(n, cst.Call) and is_submit_call_name(callee_name(n)) for n in ctx.walk(node)):
            return True
    return False


def check(ctx: FileContext) -> Iterator[Finding]:
    for fn, task in _task_code(ctx):
        flow = FunctionFlow(ctx, fn)
        writes = list(flow.variable_calls({"set", "delete"}))
        reads = list(flow.variable_calls({"get"}))

        def ident(call: cst.Call, flow: FunctionFlow = flow) -> str | None:
            key = arg(call, 0, "key")
            if key is None:
                return None
            literal = string_value(flow.resolve(key))
            return repr(literal) if literal is not None else ctx.code(key)

        written = {i for c in writes if (i := ident(c)) is not None}
        read_at_parse = _read_at_module_level(ctx, flow, writes, ident)
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
            elif name in written and name in deleted:
                per_run.add(name)
            elif name in written and is_external_id_key(text) and not names_a_position(text):
                per_run.add(name)  # "nightly_run_id": a handle; "last_batch_id": a position (ADR002)
        submitted = {
            name for c in writes if (name := ident(c)) is not None and _submitted(ctx, flow, fn, name, c)
        }
        per_run |= submitted
        for call in writes:
            key, name = arg(call, 0, "key"), ident(call)
            label = _key_label(ctx, key)
            text = string_parts(flow.resolve(key)) if key is not None else None
            if name in per_run or _method(call) == "delete":
                why = _per_run_why(ctx, flow, key, name, deleted, submitted)
                yield ctx.finding(
                    "ADR001", call, ADR001.format(method=_method(call), key=label, task=task, why=why)
                )
            elif name in read or name in read_at_parse:
                why = "it reads this key, then writes a new value for the next run"
                yield ctx.finding("ADR002", call, ADR002.format(key=label, task=task, why=why))
            elif is_watermark_key(text) or names_a_position(text):
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
            why = _per_run_why(ctx, flow, key, name, deleted, submitted)
            label = _key_label(ctx, key)
            yield ctx.finding("ADR001", call, ADR001.format(method="get", key=label, task=task, why=why))


def _read_at_module_level(
    ctx: FileContext, flow: FunctionFlow, writes: list[cst.Call], ident: Callable[[cst.Call], str | None]
) -> set[str]:
    """Keys whose written value is computed from the same key read at module level and handed to the task
    (``uid = int(Variable.get("uid"))`` at parse time, then ``Variable.set("uid", int(uid) + 1)`` in the
    task it is passed to): the value goes from one run to the next, like a read inside the task."""
    module_reads: dict[str, set[str]] = {}
    for stmt in ctx.module.body:
        if not isinstance(stmt, cst.SimpleStatementLine):
            continue
        for small in stmt.body:
            if isinstance(small, cst.Assign) and len(small.targets) == 1:
                target = small.targets[0].target
                if isinstance(target, cst.Name):
                    keys = {
                        repr(k)
                        for n in ctx.walk(small.value)
                        if isinstance(n, cst.Call)
                        and is_variable_call(ctx, n, {"get"})
                        and (k := string_value(arg(n, 0, "key"))) is not None
                    }
                    if keys:
                        module_reads[target.value] = keys
    out: set[str] = set()
    for call in writes:
        name, value = ident(call), arg(call, 1, "value")
        if name is None or value is None:
            continue
        if any(name in module_reads.get(n, set()) for n in names_in(flow.resolve(value))):
            out.add(name)
    return out


def _per_run_why(
    ctx: FileContext,
    flow: FunctionFlow,
    key: cst.BaseExpression | None,
    name: str | None,
    deleted: set[str],
    submitted: set[str],
) -> str:
    if key is not None and _run_scoped(ctx, flow.resolve(key)):
        return "the key is built from the run's identity"
    if name in deleted:
        return "the task deletes the key when it is done"
    if name in submitted:
        return "it holds the job this run submitted, read back by the next try"
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
