"""ADR003 (external id in XCom for a retry) and ADR004 (hand-rolled reconnect-or-submit)."""

from __future__ import annotations

from collections.abc import Iterator

import libcst as cst

from airflow_durable.lint.context import FileContext, arg, callee_name, method_name, string_value
from airflow_durable.lint.findings import Finding
from airflow_durable.lint.flow import FunctionFlow
from airflow_durable.lint.rules.keys import is_external_id_key, is_submit_call_name

ADR003 = (
    "'{task}' pushes the external id {key} to XCom and reads it back (line {pull_line}) so that a retry can "
    "find the running job, but XCom is cleared when a new try starts: the retry finds nothing and submits a "
    'second copy. Fix: persist the id with context["task_state_store"].set({key}, ...), or use a durable '
    "operator / ResumableJobMixin, which do this for you."
)
ADR004 = (
    "'{task}' hand-rolls 'if a stored id exists, reconnect, else submit' (id read from {source}){extra}. "
    "This re-implements ResumableJobMixin without its guarantees (decide before polling, persist the id "
    "before waiting, treat failed/cancelled ids as 'submit fresh', metrics). Fix: use the durable operator "
    "for your system, or subclass ResumableJobMixin and call execute_resumable() from execute()."
)
_SOURCE_NOTES = {
    "Variable": (
        ": a global Variable is not scoped to this task instance, so other runs reconnect to this job"
    ),
    "XCom": ": XCom is cleared for a new try, so the retry never sees the id",
}


def check(ctx: FileContext) -> Iterator[Finding]:
    for fn, info in ctx.functions.items():
        if not info.is_task:
            continue
        flow = FunctionFlow(ctx, fn)
        yield from _xcom_ids(ctx, fn)
        yield from _hand_rolled_resume(ctx, fn, flow)


def _xcom_key(call: cst.Call) -> str | None:
    return string_value(arg(call, None, "key"))


def _xcom_ids(ctx: FileContext, fn: cst.FunctionDef) -> Iterator[Finding]:
    pushes: list[tuple[cst.Call, str]] = []
    pulls: dict[str, cst.Call] = {}
    for node in ctx.own_nodes(fn):
        if not isinstance(node, cst.Call):
            continue
        name = method_name(node)
        if name == "xcom_push":
            key = string_value(arg(node, 0, "key"))
            if is_external_id_key(key):
                assert key is not None
                pushes.append((node, key))
        elif name == "xcom_pull":
            key = _xcom_key(node)
            if key is not None and key not in pulls:
                pulls[key] = node
    for push, key in pushes:
        pull = pulls.get(key)
        # Pushing an id for a downstream task is ordinary data passing; reading it back in the same
        # task is the retry-resume intent this rule is about.
        if pull is not None:
            line, _ = ctx.position(pull)
            yield ctx.finding(
                "ADR003", push, ADR003.format(task=fn.name.value, key=repr(key), pull_line=line)
            )


def _branch_submits(ctx: FileContext, block: cst.CSTNode | None) -> bool:
    if block is None:
        return False
    return any(isinstance(n, cst.Call) and is_submit_call_name(callee_name(n)) for n in ctx.walk(block))


def _falls_through_to_submit(ctx: FileContext, node: cst.If) -> bool:
    """``if stored: return reconnect(...)`` followed by a submit: the code after the if is the else."""
    if node.orelse is not None or not any(isinstance(n, cst.Return) for n in ctx.walk(node.body)):
        return False
    block = ctx.parent(node)
    if not isinstance(block, (cst.IndentedBlock, cst.Module)):
        return False
    after = list(block.body)[list(block.body).index(node) + 1 :]
    return any(_branch_submits(ctx, stmt) for stmt in after)


def _keys_written_from_submits(ctx: FileContext, flow: FunctionFlow) -> set[str]:
    """Variable keys this function sets to what a submit call returned (``Variable.set(k, run_id)`` after
    ``run_id = hook.submit_run(...)``)."""
    keys: set[str] = set()
    for call in flow.variable_calls({"set"}):
        key, value = string_value(arg(call, 0, "key")), arg(call, 1, "value")
        if key is None or value is None:
            continue
        resolved = flow.resolve(value)
        if any(isinstance(n, cst.Call) and is_submit_call_name(callee_name(n)) for n in ctx.walk(resolved)):
            keys.add(key)
    return keys


def _hand_rolled_resume(ctx: FileContext, fn: cst.FunctionDef, flow: FunctionFlow) -> Iterator[Finding]:
    if ctx.functions[fn].class_node is not None and fn.name.value in {"submit_job", "get_job_status"}:
        return  # inside a ResumableJobMixin implementation: the mixin owns the decision
    for node in ctx.own_nodes(fn):
        if not isinstance(node, cst.If):
            continue
        read = flow.stored_read(node.test)
        if read is None:
            continue
        source, key = read
        # A flag or a setting read from a Variable is configuration; only a stored *id* means "resume": a
        # key that names an id, or one the function writes back with what a submit returned.
        if (
            source != "XCom"
            and not is_external_id_key(key)
            and key not in _keys_written_from_submits(ctx, flow)
        ):
            continue
        if (
            _branch_submits(ctx, node.body)
            or _branch_submits(ctx, node.orelse)
            or _falls_through_to_submit(ctx, node)
        ):
            yield ctx.finding(
                "ADR004",
                node,
                ADR004.format(task=fn.name.value, source=source, extra=_SOURCE_NOTES.get(source, "")),
            )
