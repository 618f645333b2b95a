"""ADR005 (submit that does not wait + sensor on the same job) and ADR006 (downstream of the submit).

A green submit task only means "accepted"; only the sensor's outcome says whether the job succeeded.
The finding gives the decision from the skill's Section 6 rather than a single verdict.

What counts, measured on real DAGs (tests/lint/real):

- the submit: a no-wait flag given as an argument, through a module constant, or set on the operator
  after construction (``op.wait_for_completion = False``); an operator that does not wait by default
  (``EmrAddStepsOperator``); a ``@task`` or ``python_callable`` that calls a submit method and returns.
  Creating, stopping or deleting a resource (an EMR cluster, an EMR Serverless application) is not a job
  run, whatever sensor follows it.
- the sensor: any ``*Sensor`` / ``*SensorAsync`` class (also from deprecated module paths), a sensor class
  defined in the file, ``@task.sensor``, or a ``@task`` / ``PythonOperator`` callable that loops and sleeps.
- "on the same job": the sensor receives the submit's output, or a template, an ``op_kwargs`` value or
  the sensor's own code pulls the submit's XCom (``xcom_pull(task_ids=SUBMIT_ID)``).
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from dataclasses import dataclass, field

import libcst as cst

from airflow_durable.lint import catalogue
from airflow_durable.lint.catalogue import DropIn
from airflow_durable.lint.context import (
    FileContext,
    arg,
    callable_name,
    callee_name,
    method_name,
    names_in,
    string_value,
)
from airflow_durable.lint.findings import Finding
from airflow_durable.lint.rules.keys import WAIT_METHODS, is_submit_call_name

_NO_WAIT_FLAGS = {"wait_for_termination": False, "wait_for_completion": False, "asynchronous": True}
# Provider operators that submit without waiting unless told to.
_NO_WAIT_BY_DEFAULT = {"EmrAddStepsOperator", "EmrStartNotebookExecutionOperator"}
# Operators that manage a resource rather than run a job: a sensor on what they made is not a split.
_RESOURCE_VERB = re.compile(r"(Create|Delete|Terminate|Stop|Start(?=Application)|Pause|Resume|Modify|Update)")
# ...except creating a run of something: DataformCreateWorkflowInvocationOperator(asynchronous=True) starts a
# job the way a submit does (EmrCreateJobFlowOperator, a cluster, stays a resource).
_CREATES_A_RUN = re.compile(r"Create\w*(Invocation|Run|Execution)(Operator)?(Async)?$")


@dataclass
class TaskNode:
    key: str  # the variable holding it, or a synthetic key for an inline call
    task_id: str
    call: cst.Call
    scope: cst.CSTNode
    class_name: str | None = None  # operator class (last component), None for TaskFlow
    qnames: set[str] = field(default_factory=set)
    function: cst.FunctionDef | None = None  # the @task function for TaskFlow calls
    callable_fn: cst.FunctionDef | None = None  # python_callable of an operator
    local_class: cst.ClassDef | None = None  # the operator's class when it is defined in this file
    # Attributes assigned after construction: ``op.wait_for_completion = False``.
    settings: dict[str, tuple[cst.BaseExpression, cst.CSTNode]] = field(default_factory=dict)

    @property
    def display_class(self) -> str:
        return self.class_name.removesuffix("Async") if self.class_name else ""


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
    other_sensors: list[TaskNode] = field(default_factory=list)
    setting_node: cst.CSTNode | None = None  # the ``op.flag = False`` statement, when that is the reason


def _decision(split: Split) -> str:
    target = (
        f"{split.drop_in.durable_class}(..., deferrable=True)"
        if split.drop_in
        else "durable operator (or ResumableJobMixin subclass) that submits and waits"
    )
    sync = (
        f"{split.drop_in.durable_class}(..., deferrable=False)"
        if split.drop_in
        else "durable synchronous task"
    )
    return (
        f"Decide by your deployment: with a Triggerer, replace {_these(split)} with one {target}, which "
        "frees the worker while it waits; without a Triggerer and a job that may hold a worker slot, "
        f"use one {sync}; "
        f"without a Triggerer, a long job and scarce worker slots, keep the split but {_reschedule(split)} "
        "and make everything downstream depend on the sensor."
    )


def _these(split: Split) -> str:
    return "both tasks" if not split.other_sensors else f"all {2 + len(split.other_sensors)} tasks"


def _reschedule(split: Split) -> str:
    sensor = split.sensor
    if sensor.class_name is not None and not sensor.display_class.endswith("Sensor"):
        # A PythonOperator that loops cannot reschedule: it has to become a sensor first.
        return (
            f"turn '{sensor.task_id}' into a sensor (a PythonSensor or @task.sensor) with mode=\"reschedule\""
        )
    return f"give '{sensor.task_id}' mode=\"reschedule\""


def adr005_message(split: Split) -> str:
    others = ""
    if split.other_sensors:
        names = ", ".join(f"'{s.task_id}'" for s in split.other_sensors)
        verb = "does" if len(split.other_sensors) == 1 else "do"
        others = f" (so {verb} {names})"
    return (
        f"Task '{split.submit.task_id}' submits the job without waiting ({split.how}) and "
        f"'{split.sensor.task_id}' (line {{sensor_line}}) waits on the same job{others}: a green "
        f"'{split.submit.task_id}' only means the job was accepted, not that it succeeded, and a retry of "
        f"either task cannot reconnect to the job the other one knows about. {_decision(split)}"
    )


def check(ctx: FileContext) -> Iterator[Finding]:
    for split in find_splits(ctx):
        sensor_line, _ = ctx.position(split.sensor.call)
        yield ctx.finding(
            "ADR005", split.submit.call, adr005_message(split).replace("{sensor_line}", str(sensor_line))
        )
        for where, what in split.offenders:
            yield ctx.finding(
                "ADR006",
                where,
                (
                    f"{what} depends on '{split.submit.task_id}', which turns green as soon as the job is "
                    f"accepted, instead of on '{split.sensor.task_id}', which reflects whether it "
                    "succeeded: it can run (or alert success) while the job is still running or after it "
                    f"failed. Fix: depend on '{split.sensor.task_id}' (or collapse the split into one "
                    "durable task, see ADR005)."
                ),
            )


# -- collection ------------------------------------------------------------------------------------
class _Tasks:
    """Every task construction in a file, with the functions and classes they run."""

    def __init__(self, ctx: FileContext) -> None:
        self.ctx = ctx
        self.functions: dict[str, cst.FunctionDef] = {}
        for fn in ctx.functions:  # module-level definitions win over nested ones of the same name
            if fn.name.value not in self.functions or isinstance(ctx.parent(fn), cst.Module):
                self.functions[fn.name.value] = fn
        self.taskflow = {fn.name.value: fn for fn in ctx.functions if ctx.is_taskflow(fn)}
        self.classes = {n.name.value: n for n in ctx.walk() if isinstance(n, cst.ClassDef)}
        self.tasks: list[TaskNode] = []
        self.by_call: dict[int, TaskNode] = {}
        # ``app_id = create_app.output``: names that stand for (an expression over) other names.
        self.aliases: dict[tuple[int, str], set[str]] = {}
        settings = self._settings()
        for node in ctx.walk():
            if not isinstance(node, cst.Call):
                continue
            made = self._make(node)
            if made is None:
                continue
            made.settings = settings.get((id(made.scope), made.key), {})
            self.tasks.append(made)
            self.by_call[id(node)] = made

    def _key(self, call: cst.Call) -> str:
        parent = self.ctx.parent(call)
        if isinstance(parent, cst.Assign) and len(parent.targets) == 1:
            target = parent.targets[0].target
            if isinstance(target, cst.Name):
                return target.value
        if isinstance(parent, cst.AnnAssign) and isinstance(parent.target, cst.Name):
            return parent.target.value
        return f"<task {id(call)}>"  # an inline call: only edges refer to it

    def _scope(self, node: cst.CSTNode) -> cst.CSTNode:
        return self.ctx.enclosing_function(node) or self.ctx.module

    def _make(self, call: cst.Call) -> TaskNode | None:
        ctx = self.ctx
        func = call.func
        # fn.override(task_id=...)(...) is still the TaskFlow function fn.
        override_id = None
        if isinstance(func, cst.Call) and method_name(func) == "override":
            override_id = ctx.constant_string(arg(func, None, "task_id"))
            assert isinstance(func.func, cst.Attribute)
            func = func.func.value
        fn: cst.FunctionDef | None = None
        if isinstance(func, cst.Name) and func.value in self.taskflow:
            fn = self.taskflow[func.value]
        elif isinstance(func, cst.Call) and func.args and ctx._is_task_decorator(func.func):
            # task(fn)() / task.sensor(fn)(): TaskFlow without the decorator syntax.
            name = callable_name(func.args[0].value)
            fn = self.functions.get(name or "")
        if fn is not None:
            return TaskNode(
                self._key(call), override_id or fn.name.value, call, self._scope(call), function=fn
            )
        name = callee_name(call)
        task_id = task_id_template(ctx, arg(call, None, "task_id"))
        if not (name and task_id and name[:1].isupper()):
            return None
        callable_fn = None
        value = arg(call, None, "python_callable")
        if value is not None:
            callable_fn = self.functions.get(callable_name(value) or "")
        return TaskNode(
            self._key(call),
            task_id,
            call,
            self._scope(call),
            class_name=name,
            qnames=ctx.call_qnames(call),
            callable_fn=callable_fn,
            local_class=self.classes.get(name),
        )

    def _settings(self) -> dict[tuple[int, str], dict[str, tuple[cst.BaseExpression, cst.CSTNode]]]:
        out: dict[tuple[int, str], dict[str, tuple[cst.BaseExpression, cst.CSTNode]]] = {}
        for node in self.ctx.walk():
            if not isinstance(node, cst.Assign) or len(node.targets) != 1:
                continue
            target = node.targets[0].target
            if isinstance(target, cst.Name) and not isinstance(node.value, cst.Call):
                self.aliases[(id(self._scope(node)), target.value)] = names_in(node.value)
            if isinstance(target, cst.Attribute) and isinstance(target.value, cst.Name):
                scope = self._scope(node)
                out.setdefault((id(scope), target.value.value), {})[target.attr.value] = (node.value, node)
        return out

    def expand(self, scope: cst.CSTNode, names: set[str]) -> set[str]:
        """Names plus everything the aliases among them stand for."""
        out, stack = set(names), list(names)
        while stack:
            for inner in self.aliases.get((id(scope), stack.pop()), ()):
                if inner not in out:
                    out.add(inner)
                    stack.append(inner)
        return out

    def setting(self, task: TaskNode, name: str) -> tuple[cst.BaseExpression | None, cst.CSTNode | None]:
        """An operator argument, from its call or from an assignment after construction (which wins)."""
        if name in task.settings:
            value, where = task.settings[name]
            return self.ctx.constant(value), where
        return self.ctx.constant(arg(task.call, None, name)), None


def _operands(expr: cst.BaseExpression, tasks: _Tasks) -> list[str]:
    if isinstance(expr, cst.Name):
        return [expr.value]
    if isinstance(expr, cst.Call) and id(expr) in tasks.by_call:
        return [tasks.by_call[id(expr)].key]
    if isinstance(expr, (cst.List, cst.Tuple)):
        return [n for el in expr.elements for n in _operands(el.value, tasks)]
    return []


def _collect_edges(ctx: FileContext, tasks: _Tasks) -> list[Edge]:
    by_scope: dict[int, set[str]] = {}
    for t in tasks.tasks:
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
        return _operands(expr, tasks)

    for node in ctx.walk():
        if isinstance(node, cst.Expr) and isinstance(node.value, cst.BinaryOperation):
            shift(node.value)
        elif isinstance(node, cst.Call):
            name = callee_name(node)
            if name in {"set_downstream", "set_upstream"} and isinstance(node.func, cst.Attribute):
                this = _operands(node.func.value, tasks)
                other = [n for a in node.args for n in _operands(a.value, tasks)]
                pairs = [(t, o) for t in this for o in other]
                edges.extend(
                    Edge(t, o, node) if name == "set_downstream" else Edge(o, t, node) for t, o in pairs
                )
            elif any(q.endswith(".chain") for q in ctx.call_qnames(node)):
                groups = [_operands(a.value, tasks) for a in node.args]
                for ups, downs in zip(groups, groups[1:], strict=False):
                    edges.extend(Edge(u, d, node) for u in ups for d in downs)
    # Data dependencies: a task call that receives another task's output (or call) runs after it.
    for t in tasks.tasks:
        known = by_scope.get(id(t.scope), set())
        for ref in _arg_names(t.call):
            if ref in known and ref != t.key:
                edges.append(Edge(ref, t.key, t.call))
        for a in t.call.args:
            for inner in ctx.walk(a.value):
                if isinstance(inner, cst.Call) and id(inner) in tasks.by_call:
                    edges.append(Edge(tasks.by_call[id(inner)].key, t.key, t.call))
    return edges


def _arg_names(call: cst.Call) -> set[str]:
    out: set[str] = set()
    for a in call.args:
        out |= names_in(a.value)
    return out


# -- classification ---------------------------------------------------------------------------------
def _polls(ctx: FileContext, fn: cst.FunctionDef) -> bool:
    """A loop that sleeps: hand-written polling."""
    return any(
        isinstance(n, (cst.While, cst.For))
        and any(isinstance(c, cst.Call) and callee_name(c) == "sleep" for c in ctx.walk(n))
        for n in ctx.own_nodes(fn)
    )


def _is_sensor_class(ctx: FileContext, cls: cst.ClassDef) -> bool:
    for base in cls.bases:
        names = ctx.qnames(base.value) | {cst.helpers.get_full_name_for_node(base.value) or ""}
        if any(n.removesuffix("Async").endswith(("Sensor", "SensorOperator")) for n in names):
            return True
    return False


def _is_sensor(ctx: FileContext, task: TaskNode) -> bool:
    if task.class_name is not None:
        if task.display_class.endswith("Sensor"):
            return True
        if task.local_class is not None and _is_sensor_class(ctx, task.local_class):
            return True
        # A PythonOperator whose callable loops and sleeps is a hand-written polling task.
        return task.callable_fn is not None and _polls(ctx, task.callable_fn)
    assert task.function is not None
    if ctx.is_task_sensor(task.function):
        return True
    return _polls(ctx, task.function)


def _is_false(expr: cst.BaseExpression | None, bad: bool) -> bool:
    return isinstance(expr, cst.Name) and expr.value == str(bad)


def _no_wait_reason(ctx: FileContext, tasks: _Tasks, task: TaskNode) -> tuple[str, cst.CSTNode | None] | None:
    if task.class_name is not None:
        if _is_sensor(ctx, task):
            return None
        if _RESOURCE_VERB.search(task.display_class) and not _CREATES_A_RUN.search(task.class_name):
            return None
        for flag, bad in _NO_WAIT_FLAGS.items():
            value, where = tasks.setting(task, flag)
            if _is_false(value, bad):
                if where is not None:
                    return f"{flag} = {bad}, set after the operator is created", where
                return f"{flag}={bad}", None
        drop_in = _drop_in(task)
        default_no_wait = (
            drop_in is not None and not drop_in.waits_by_default
        ) or task.display_class in _NO_WAIT_BY_DEFAULT
        if default_no_wait and tasks.setting(task, "wait_for_completion")[0] is None:
            return f"{task.display_class} does not wait unless wait_for_completion=True", None
        if task.callable_fn is not None:
            reason = _submits_and_returns(ctx, task.callable_fn)
            return (reason, None) if reason else None
        return None
    assert task.function is not None
    if _is_sensor(ctx, task):
        return None
    reason = _submits_and_returns(ctx, task.function)
    return (reason, None) if reason else None


def _submits_and_returns(ctx: FileContext, fn: cst.FunctionDef) -> str | None:
    calls = [n for n in ctx.own_nodes(fn) if isinstance(n, cst.Call)]
    submits = [c for c in calls if is_submit_call_name(callee_name(c))]
    waits = [c for c in calls if callee_name(c) in WAIT_METHODS]
    if submits and not waits and not _polls(ctx, fn):
        return f"it calls {callee_name(submits[0])}() and returns"
    return None


def _drop_in(task: TaskNode) -> DropIn | None:
    for q in task.qnames:
        found = catalogue.lookup(q)
        if found:
            return found
    return None


def _strings(ctx: FileContext, root: cst.CSTNode) -> str:
    """The text of every string in an expression, module constants included, in source order."""
    parts: list[str] = []
    for node in ctx.walk(root):
        if isinstance(node, cst.Name) and node.value in ctx.constants:
            text = ctx.constant_string(node)
            if text is not None:
                parts.append(text)
        elif isinstance(node, cst.SimpleString):
            text = string_value(node)
            if text is not None:
                parts.append(text)
        elif isinstance(node, cst.FormattedStringText):
            parts.append(node.value)
    return "".join(parts)


def task_id_template(ctx: FileContext, expr: cst.BaseExpression | None) -> str | None:
    """A task id as written: the string, or an f-string's text with each placeholder kept as ``{...}``.

    Tasks built in a loop or a task factory (``task_id=f"start_{job}"``) get their id from an f-string; an
    xcom_pull(task_ids=f"start_{job}") in the poller's callable names the same task when the two
    templates have the same text around their placeholders.
    """
    if expr is None:
        return None
    constant = ctx.constant_string(expr)
    if constant is not None:
        return constant
    if isinstance(expr, cst.FormattedString):
        parts: list[str] = []
        for part in expr.parts:
            if isinstance(part, cst.FormattedStringText):
                parts.append(part.value)
            elif isinstance(part, cst.FormattedStringExpression):
                parts.append("{" + ctx.code(part.expression) + "}")
        return "".join(parts)
    return None


def _shape(template: str) -> str:
    return re.sub(r"\{[^{}]*\}", "{}", template)


def _pulls_xcom_of(ctx: FileContext, root: cst.CSTNode, task_id: str, templates: bool = False) -> bool:
    """Whether code pulls the XCom of ``task_id``; with ``templates``, an f-string of its shape counts."""
    for node in ctx.walk(root):
        if isinstance(node, cst.Call) and method_name(node) == "xcom_pull":
            pulled = task_id_template(ctx, arg(node, 0, "task_ids"))
            if pulled == task_id and "{" not in task_id:
                return True
            if templates and pulled is not None and "{" in task_id and _shape(pulled) == _shape(task_id):
                return True
    return False


def _refers_to(ctx: FileContext, tasks: _Tasks, sensor: TaskNode, submit: TaskNode) -> bool:
    # The submit's output, or the submit call itself, handed to the sensor.
    if submit.scope is sensor.scope and submit.key in tasks.expand(sensor.scope, _arg_names(sensor.call)):
        return True
    for a in sensor.call.args:
        if any(node is submit.call for node in ctx.walk(a.value)):
            return True
    # A template (or op_kwargs value) pulling the submit's XCom.
    text = "".join(_strings(ctx, a.value) for a in sensor.call.args)
    if "xcom_pull" in text and re.search(rf"""['"]{re.escape(submit.task_id)}['"]""", text):
        return True
    # The sensor's own code pulling the submit's XCom.
    bodies: list[cst.CSTNode] = []
    for fn in (sensor.function, sensor.callable_fn):
        if fn is not None:
            bodies.append(fn)
    if sensor.local_class is not None:
        bodies.append(sensor.local_class)
    # A templated id (a loop or a task factory) names the submit of the same loop or factory call only.
    same_scope = submit.scope is sensor.scope
    return any(_pulls_xcom_of(ctx, body, submit.task_id, templates=same_scope) for body in bodies)


def find_splits(ctx: FileContext) -> list[Split]:
    tasks = _Tasks(ctx)
    edges = _collect_edges(ctx, tasks)
    by_key = {(id(t.scope), t.key): t for t in tasks.tasks}
    splits: list[Split] = []
    for submit in tasks.tasks:
        found = _no_wait_reason(ctx, tasks, submit)
        if found is None:
            continue
        how, setting_node = found
        sensors = [
            s
            for s in tasks.tasks
            if s is not submit and _is_sensor(ctx, s) and _refers_to(ctx, tasks, s, submit)
        ]
        if not sensors:
            continue
        offenders = _downstream_offenders(submit, sensors, edges, by_key)
        splits.append(Split(submit, sensors[0], how, _drop_in(submit), offenders, sensors[1:], setting_node))
    return splits


def _downstream_offenders(
    submit: TaskNode,
    sensors: list[TaskNode],
    edges: list[Edge],
    by_key: dict[tuple[int, str], TaskNode],
) -> list[tuple[cst.CSTNode, str]]:
    children: dict[str, set[str]] = {}
    for e in edges:
        children.setdefault(e.upstream, set()).add(e.downstream)
    sensor_keys = {s.key for s in sensors}
    after_sensor: set[str] = set()
    stack = list(sensor_keys)
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
            or e.downstream in sensor_keys
            or e.downstream == submit.key
            or e.downstream in after_sensor
        ):
            continue
        other = by_key.get((id(submit.scope), e.downstream))
        if other is None or e.downstream in seen:
            continue  # not a task this file defines (a label, a helper): nothing to judge
        seen.add(e.downstream)
        offenders.append((e.node, f"Task '{other.task_id}'"))
    for kw in ("on_success_callback", "on_execute_callback"):
        value = arg(submit.call, None, kw)
        if value is not None:
            offenders.append((value, f"The {kw} alert on '{submit.task_id}'"))
    return offenders
