"""ADR005 (submit that does not wait + sensor on the same job) and ADR006 (downstream of the submit).

A green submit task only means "accepted"; only the sensor's outcome says whether the job succeeded.
The finding gives the decision from the skill's Section 6 rather than a single verdict.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, field

import libcst as cst

from airflow_durable.lint import catalogue
from airflow_durable.lint.catalogue import DropIn
from airflow_durable.lint.context import FileContext, arg, callee_name, names_in, string_value
from airflow_durable.lint.findings import Finding
from airflow_durable.lint.rules.keys import WAIT_METHODS, is_submit_call_name

_NO_WAIT_FLAGS = {"wait_for_termination": False, "wait_for_completion": False, "asynchronous": True}
# Provider operators that submit without waiting unless told to.
_NO_WAIT_BY_DEFAULT = {"EmrAddStepsOperator", "EmrCreateJobFlowOperator"}


@dataclass
class TaskNode:
    key: str  # the variable holding it, or a synthetic key for an inline call
    task_id: str
    call: cst.Call
    scope: cst.CSTNode
    class_name: str | None = None  # operator class (last component), None for TaskFlow
    qnames: set[str] = field(default_factory=set)
    function: cst.FunctionDef | None = None  # the @task function for TaskFlow calls


@dataclass
class Edge:
    upstream: str
    downstream: str
    node: cst.CSTNode


@dataclass
class Split:
    submit: TaskNode
    sensor: TaskNode
    how: str  # why the submit is considered fire-and-forget
    drop_in: DropIn | None
    offenders: list[tuple[cst.CSTNode, str]]  # (where, description) for ADR006


def _decision(split: Split) -> str:
    target = (
        f"{split.drop_in.durable_class}(..., deferrable=True)"
        if split.drop_in
        else "a durable operator (or a ResumableJobMixin subclass) that submits and waits"
    )
    sync = (
        f"{split.drop_in.durable_class}(..., deferrable=False)"
        if split.drop_in
        else "one durable synchronous task"
    )
    return (
        f"Decide by your deployment: with a Triggerer, replace both tasks with one {target}, which frees the "
        f"worker while it waits; without a Triggerer and a job that may hold a worker slot, use one {sync}; "
        "without a Triggerer, a long job and scarce worker slots, keep the split but give "
        f"'{split.sensor.task_id}' "
        'mode="reschedule" and make everything downstream depend on the sensor.'
    )


def adr005_message(split: Split) -> str:
    return (
        f"Task '{split.submit.task_id}' submits the job without waiting ({split.how}) and "
        f"'{split.sensor.task_id}' (line {{sensor_line}}) waits on the same job: a green "
        f"'{split.submit.task_id}' only means the job was accepted, not that it succeeded, and a retry of "
        f"either task cannot reconnect to the job the other one knows about. {_decision(split)}"
    )


def check(ctx: FileContext) -> Iterator[Finding]:
    for split in find_splits(ctx):
        sensor_line, _ = ctx.position(split.sensor.call)
        yield ctx.finding("ADR005", split.submit.call, adr005_message(split).format(sensor_line=sensor_line))
        for where, what in split.offenders:
            yield ctx.finding(
                "ADR006",
                where,
                (
                    f"{what} depends on '{split.submit.task_id}', which turns green as soon as the job is "
                    f"accepted, instead of on '{split.sensor.task_id}', which reflects whether it "
                    "succeeded: it "
                    "can run (or alert success) while the job is still running or after it failed. "
                    "Fix: depend on "
                    f"'{split.sensor.task_id}' (or collapse the split into one durable task, see ADR005)."
                ),
            )


# -- collection ------------------------------------------------------------------------------------
def _task_functions(ctx: FileContext) -> dict[str, cst.FunctionDef]:
    return {fn.name.value: fn for fn in ctx.functions if ctx.is_taskflow(fn)}


def _scope_of(ctx: FileContext, node: cst.CSTNode) -> cst.CSTNode:
    return ctx.enclosing_function(node) or ctx.module


def _make_node(
    ctx: FileContext, call: cst.Call, key: str, taskflow: dict[str, cst.FunctionDef]
) -> TaskNode | None:
    func = call.func
    # fn.override(task_id=...)(...) is still the TaskFlow function fn.
    override_id = None
    if (
        isinstance(func, cst.Call)
        and isinstance(func.func, cst.Attribute)
        and func.func.attr.value == "override"
    ):
        override_id = string_value(arg(func, None, "task_id"))
        func = func.func.value
    if isinstance(func, cst.Name) and func.value in taskflow:
        fn = taskflow[func.value]
        return TaskNode(key, override_id or fn.name.value, call, _scope_of(ctx, call), function=fn)
    name = callee_name(call)
    task_id = string_value(arg(call, None, "task_id"))
    if name and task_id and (name.endswith(("Operator", "Sensor")) or name[:1].isupper()):
        return TaskNode(
            key, task_id, call, _scope_of(ctx, call), class_name=name, qnames=ctx.call_qnames(call)
        )
    return None


def _collect_tasks(ctx: FileContext) -> list[TaskNode]:
    taskflow = _task_functions(ctx)
    tasks: list[TaskNode] = []
    for node in ctx.walk():
        if isinstance(node, cst.Assign) and isinstance(node.value, cst.Call):
            for target in node.targets:
                if isinstance(target.target, cst.Name):
                    made = _make_node(ctx, node.value, target.target.value, taskflow)
                    if made:
                        tasks.append(made)
        elif isinstance(node, cst.Expr) and isinstance(node.value, cst.Call):
            # A task created and not kept in a variable (e.g. `wait_for_run(submit.output)`).
            line, col = ctx.position(node.value)
            made = _make_node(ctx, node.value, f"<task at {line}:{col}>", taskflow)
            if made:
                tasks.append(made)
    return tasks


def _operands(expr: cst.BaseExpression) -> list[str]:
    if isinstance(expr, cst.Name):
        return [expr.value]
    if isinstance(expr, (cst.List, cst.Tuple)):
        return [n for el in expr.elements for n in _operands(el.value)]
    return []


def _collect_edges(ctx: FileContext, tasks: list[TaskNode]) -> list[Edge]:
    by_scope: dict[int, set[str]] = {}
    for t in tasks:
        by_scope.setdefault(id(t.scope), set()).add(t.key)
    edges: list[Edge] = []

    def shift(expr: cst.BaseExpression) -> list[str]:
        if isinstance(expr, cst.BinaryOperation) and isinstance(
            expr.operator, (cst.RightShift, cst.LeftShift)
        ):
            left, right = shift(expr.left), shift(expr.right)
            up, down = (left, right) if isinstance(expr.operator, cst.RightShift) else (right, left)
            edges.extend(Edge(u, d, expr) for u in up for d in down)
            return right
        return _operands(expr)

    for node in ctx.walk():
        if isinstance(node, cst.Expr) and isinstance(node.value, cst.BinaryOperation):
            shift(node.value)
        elif isinstance(node, cst.Call):
            name = callee_name(node)
            if name in {"set_downstream", "set_upstream"} and isinstance(node.func, cst.Attribute):
                this = _operands(node.func.value)
                other = [n for a in node.args for n in _operands(a.value)]
                pairs = [(t, o) for t in this for o in other]
                edges.extend(
                    Edge(t, o, node) if name == "set_downstream" else Edge(o, t, node) for t, o in pairs
                )
            elif any(q.endswith(".chain") for q in ctx.call_qnames(node)):
                groups = [_operands(a.value) for a in node.args]
                for ups, downs in zip(groups, groups[1:], strict=False):
                    edges.extend(Edge(u, d, node) for u in ups for d in downs)
    # Data dependencies: a task call that receives another task's output runs after it.
    for t in tasks:
        known = by_scope.get(id(t.scope), set())
        for ref in _arg_names(t.call):
            if ref in known and ref != t.key:
                edges.append(Edge(ref, t.key, t.call))
    return edges


def _arg_names(call: cst.Call) -> set[str]:
    out: set[str] = set()
    for a in call.args:
        out |= names_in(a.value)
    return out


# -- classification ---------------------------------------------------------------------------------
def _is_sensor(ctx: FileContext, task: TaskNode) -> bool:
    if task.class_name is not None:
        return task.class_name.endswith("Sensor")
    assert task.function is not None
    if ctx.is_task_sensor(task.function):
        return True
    # A @task that loops and sleeps is a hand-written polling task.
    return any(
        isinstance(n, cst.While)
        and any(isinstance(c, cst.Call) and callee_name(c) == "sleep" for c in ctx.walk(n))
        for n in ctx.own_nodes(task.function)
    )


def _no_wait_reason(ctx: FileContext, task: TaskNode) -> str | None:
    if task.class_name is not None:
        if task.class_name.endswith("Sensor"):
            return None
        for flag, bad in _NO_WAIT_FLAGS.items():
            value = arg(task.call, None, flag)
            if value is not None and isinstance(value, cst.Name) and value.value == str(bad):
                return f"{flag}={bad}"
        drop_in = _drop_in(task)
        default_no_wait = (
            drop_in is not None and not drop_in.waits_by_default
        ) or task.class_name in _NO_WAIT_BY_DEFAULT
        if default_no_wait and arg(task.call, None, "wait_for_completion") is None:
            return "wait_for_completion defaults to False"
        return None
    assert task.function is not None
    calls = [n for n in ctx.own_nodes(task.function) if isinstance(n, cst.Call)]
    submits = [c for c in calls if is_submit_call_name(callee_name(c))]
    waits = [c for c in calls if callee_name(c) in WAIT_METHODS]
    if submits and not waits and not _is_sensor(ctx, task):
        return f"it calls {callee_name(submits[0])}() and returns"
    return None


def _drop_in(task: TaskNode) -> DropIn | None:
    for q in task.qnames:
        found = catalogue.lookup(q)
        if found:
            return found
    return None


def _refers_to(ctx: FileContext, sensor: TaskNode, submit: TaskNode) -> bool:
    if submit.key in _arg_names(sensor.call):
        return True
    quoted = (f"'{submit.task_id}'", f'"{submit.task_id}"')
    for node in ctx.walk(sensor.call):
        text = string_value(node) if isinstance(node, (cst.SimpleString, cst.ConcatenatedString)) else None
        if text and "xcom_pull" in text and any(q in text for q in quoted):
            return True
    return False


def find_splits(ctx: FileContext) -> list[Split]:
    tasks = _collect_tasks(ctx)
    edges = _collect_edges(ctx, tasks)
    by_key = {(id(t.scope), t.key): t for t in tasks}
    splits: list[Split] = []
    for submit in tasks:
        how = _no_wait_reason(ctx, submit)
        if how is None:
            continue
        for sensor in tasks:
            if sensor is submit or sensor.scope is not submit.scope or not _is_sensor(ctx, sensor):
                continue
            if not _refers_to(ctx, sensor, submit):
                continue
            offenders = _downstream_offenders(ctx, submit, sensor, edges, by_key)
            splits.append(Split(submit, sensor, how, _drop_in(submit), offenders))
            break
    return splits


def _downstream_offenders(
    ctx: FileContext,
    submit: TaskNode,
    sensor: TaskNode,
    edges: list[Edge],
    by_key: dict[tuple[int, str], TaskNode],
) -> list[tuple[cst.CSTNode, str]]:
    children: dict[str, set[str]] = {}
    for e in edges:
        children.setdefault(e.upstream, set()).add(e.downstream)
    after_sensor: set[str] = set()
    stack = [sensor.key]
    while stack:
        for nxt in children.get(stack.pop(), ()):
            if nxt not in after_sensor:
                after_sensor.add(nxt)
                stack.append(nxt)
    offenders: list[tuple[cst.CSTNode, str]] = []
    seen: set[str] = set()
    for e in edges:
        if (
            e.upstream != submit.key
            or e.downstream in (sensor.key, submit.key)
            or e.downstream in after_sensor
        ):
            continue
        if e.downstream in seen:
            continue
        seen.add(e.downstream)
        other = by_key.get((id(submit.scope), e.downstream))
        label = f"Task '{other.task_id}'" if other else f"Task '{e.downstream}'"
        offenders.append((e.node, label))
    for kw in ("on_success_callback", "on_execute_callback"):
        value = arg(submit.call, None, kw)
        if value is not None:
            offenders.append((value, f"The {kw} alert on '{submit.task_id}'"))
    return offenders
