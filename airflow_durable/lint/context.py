"""One parsed DAG file and the facts every rule asks about it.

Names are resolved with libcst's QualifiedNameProvider, so ``from airflow.sdk import Variable as V``
and ``import airflow.sdk as sdk; sdk.Variable`` are both ``airflow.sdk.Variable`` while a local
``class Variable`` is not. Nothing here imports or runs the user's file.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any, cast

import libcst as cst
import libcst.matchers as m
from libcst._metadata_dependent import LazyValue
from libcst.metadata import (
    CodeRange,
    MetadataWrapper,
    ParentNodeProvider,
    PositionProvider,
    QualifiedNameProvider,
    ScopeProvider,
)

from airflow_durable.lint.findings import RULES, Finding

TASK_DECORATORS = ("airflow.sdk.task", "airflow.decorators.task", "airflow.sdk.definitions.decorators.task")
VARIABLE_CLASSES = frozenset(
    {
        "airflow.sdk.Variable",
        "airflow.models.Variable",
        "airflow.models.variable.Variable",
        "airflow.sdk.definitions.variable.Variable",
    }
)
MIXIN_CLASSES = frozenset(
    {
        "airflow.sdk.ResumableJobMixin",
        "airflow.sdk.bases.resumablejobmixin.ResumableJobMixin",
    }
)
BASE_OPERATOR_CLASSES = frozenset(
    {
        "airflow.sdk.BaseOperator",
        "airflow.models.BaseOperator",
        "airflow.models.baseoperator.BaseOperator",
        "airflow.sdk.bases.operator.BaseOperator",
    }
)
# TaskFlow injects context entries into parameters of the same name.
STORE_KEYS = {"task_state_store": "task", "asset_state_store": "asset"}


@dataclass
class FunctionInfo:
    node: cst.FunctionDef
    is_task: bool  # a @task body, an operator method, or a python_callable
    decorator_qnames: set[str] = field(default_factory=set)
    class_node: cst.ClassDef | None = None


class FileContext:
    """Metadata-resolved view of one module, shared by all rules."""

    def __init__(self, path: str, source: str) -> None:
        self.path = path
        self.source = source
        module = cst.parse_module(source)  # raises cst.ParserSyntaxError; the engine reports it
        # The module was just parsed and nothing else holds it: no defensive deep copy.
        self.wrapper = MetadataWrapper(module, unsafe_skip_copy=True)
        self.module = self.wrapper.module
        # One batched resolution instead of three passes over the tree; positions (a code-generation
        # pass) only when a finding or a message needs one.
        resolved = self.wrapper.resolve_many([QualifiedNameProvider, ParentNodeProvider, ScopeProvider])
        # resolve_many is typed loosely (values: object); these are what each provider stores.
        self._qnames = cast("Mapping[cst.CSTNode, Any]", resolved[QualifiedNameProvider])
        self._position_map: Mapping[cst.CSTNode, CodeRange] | None = None
        self._parents = cast("Mapping[cst.CSTNode, cst.CSTNode]", resolved[ParentNodeProvider])
        self.scopes = resolved[ScopeProvider]
        # libcst computes ``node.children`` with a visitor on every access; walking the tree through it
        # dominated the run time. The parent map already holds every edge, in source order.
        self._children: dict[cst.CSTNode, list[cst.CSTNode]] = {}
        for child, parent in self._parents.items():
            self._children.setdefault(parent, []).append(child)
        self.constants = self._module_constants()
        self.functions: dict[cst.FunctionDef, FunctionInfo] = {}
        self._index_functions()

    # -- names ---------------------------------------------------------------------------------
    def qnames(self, node: cst.CSTNode) -> set[str]:
        value = self._qnames.get(node, ())
        if isinstance(value, LazyValue):  # QualifiedNameProvider computes lazily
            value = value()
        return {q.name for q in value}

    def matches(self, node: cst.CSTNode, targets: Iterable[str]) -> bool:
        wanted = set(targets)
        return bool(self.qnames(node) & wanted)

    def call_qnames(self, call: cst.Call) -> set[str]:
        return self.qnames(call.func)

    # -- positions and parents -----------------------------------------------------------------
    def position(self, node: cst.CSTNode) -> tuple[int, int]:
        if self._position_map is None:
            self._position_map = self.wrapper.resolve(PositionProvider)
        pos = self._position_map[node].start
        return pos.line, pos.column + 1

    def parent(self, node: cst.CSTNode) -> cst.CSTNode | None:
        return self._parents.get(node)

    def ancestors(self, node: cst.CSTNode) -> Iterator[cst.CSTNode]:
        current = self._parents.get(node)
        while current is not None:
            yield current
            current = self._parents.get(current)

    def enclosing_function(self, node: cst.CSTNode) -> cst.FunctionDef | None:
        for anc in self.ancestors(node):
            if isinstance(anc, cst.FunctionDef):
                return anc
        return None

    def enclosing_task(self, node: cst.CSTNode) -> FunctionInfo | None:
        """The nearest enclosing function that runs at task run time (not at DAG parse time)."""
        for anc in self.ancestors(node):
            if isinstance(anc, cst.FunctionDef) and self.functions[anc].is_task:
                return self.functions[anc]
        return None

    def code(self, node: cst.CSTNode) -> str:
        return self.module.code_for_node(node)

    def finding(self, code: str, node: cst.CSTNode, message: str) -> Finding:
        line, col = self.position(node)
        return Finding(self.path, line, col, code, message, RULES[code].severity)

    # -- walking -------------------------------------------------------------------------------
    def children(self, node: cst.CSTNode) -> list[cst.CSTNode]:
        kids = self._children.get(node)
        if kids is not None:
            return kids
        if node in self._parents or node is self.module:
            return []  # a leaf of the parsed tree
        return list(node.children)  # a node built by a rule, not part of the parsed tree

    def walk(self, root: cst.CSTNode | None = None) -> Iterator[cst.CSTNode]:
        stack: list[cst.CSTNode] = [root or self.module]
        while stack:
            node = stack.pop()
            yield node
            stack.extend(reversed(self.children(node)))

    def calls(self, root: cst.CSTNode | None = None) -> Iterator[cst.Call]:
        for node in self.walk(root):
            if isinstance(node, cst.Call):
                yield node

    def own_nodes(self, fn: cst.FunctionDef) -> Iterator[cst.CSTNode]:
        """Nodes of a function body, not descending into nested functions or classes."""
        stack: list[cst.CSTNode] = [fn.body]
        while stack:
            node = stack.pop()
            yield node
            for child in reversed(self.children(node)):
                if not isinstance(child, (cst.FunctionDef, cst.ClassDef)):
                    stack.append(child)

    # -- indexing ------------------------------------------------------------------------------
    def _index_functions(self) -> None:
        callables = self._python_callable_names()
        for node in self.walk():
            if not isinstance(node, cst.FunctionDef):
                continue
            deco_q: set[str] = set()
            for deco in node.decorators:
                target = deco.decorator.func if isinstance(deco.decorator, cst.Call) else deco.decorator
                deco_q |= self.qnames(target)
            is_taskflow = any(q == p or q.startswith(p + ".") for q in deco_q for p in TASK_DECORATORS)
            parent = self.parent(node)
            cls = None
            if isinstance(parent, cst.IndentedBlock):
                grand = self.parent(parent)
                if isinstance(grand, cst.ClassDef):
                    cls = grand
            # Methods of a class with bases run inside a task (operators); module functions handed to
            # python_callable= do too. Everything else runs at parse time or is unknown.
            is_task = is_taskflow or (cls is not None and bool(cls.bases)) or node.name.value in callables
            self.functions[node] = FunctionInfo(node, is_task, deco_q, cls)

    def _python_callable_names(self) -> set[str]:
        """Module functions that run as a task body without ``@task``.

        ``python_callable=fn`` (also ``functools.partial(fn, ...)``), ``task(fn)`` and ``task.sensor(fn)``.
        """
        names: set[str] = set()
        for call in self.calls():
            for a in call.args:
                if a.keyword and a.keyword.value == "python_callable":
                    name = callable_name(a.value)
                    if name:
                        names.add(name)
            if call.args and self._is_task_decorator(call.func):
                name = callable_name(call.args[0].value)
                if name:
                    names.add(name)
        return names

    def _is_task_decorator(self, func: cst.BaseExpression) -> bool:
        return any(q == p or q.startswith(p + ".") for q in self.qnames(func) for p in TASK_DECORATORS)

    def _module_constants(self) -> dict[str, cst.BaseExpression]:
        """Names bound exactly once at module level (``SUBMIT_TASK_ID = "submit"``): their values."""
        seen: dict[str, list[cst.BaseExpression]] = {}
        for stmt in self.module.body:
            if not isinstance(stmt, cst.SimpleStatementLine):
                continue
            for small in stmt.body:
                if isinstance(small, cst.Assign) and len(small.targets) == 1:
                    target = small.targets[0].target
                    if isinstance(target, cst.Name):
                        seen.setdefault(target.value, []).append(small.value)
                elif isinstance(small, cst.AnnAssign) and small.value is not None:
                    if isinstance(small.target, cst.Name):
                        seen.setdefault(small.target.value, []).append(small.value)
        return {name: values[0] for name, values in seen.items() if len(values) == 1}

    def constant(self, expr: cst.BaseExpression | None) -> cst.BaseExpression | None:
        """A module constant's value for a bare name, else the expression itself."""
        depth = 0
        while isinstance(expr, cst.Name) and expr.value in self.constants and depth < 5:
            expr = self.constants[expr.value]
            depth += 1
        return expr

    def constant_string(self, expr: cst.BaseExpression | None) -> str | None:
        return string_value(self.constant(expr))

    def is_taskflow(self, fn: cst.FunctionDef) -> bool:
        info = self.functions[fn]
        return any(q == p or q.startswith(p + ".") for q in info.decorator_qnames for p in TASK_DECORATORS)

    def is_task_sensor(self, fn: cst.FunctionDef) -> bool:
        return any(q.endswith("task.sensor") for q in self.functions[fn].decorator_qnames)


# -- small expression helpers shared by rules ------------------------------------------------------
def string_value(node: cst.BaseExpression | None) -> str | None:
    """The value of a plain string literal (including implicit concatenation), else None."""
    if isinstance(node, (cst.SimpleString, cst.ConcatenatedString)):
        value = node.evaluated_value
        return value if isinstance(value, str) else None
    return None


def string_parts(node: cst.BaseExpression | None) -> str | None:
    """The literal text of a string or f-string (placeholders dropped): enough to judge a key's meaning."""
    text = string_value(node)
    if text is not None:
        return text
    if isinstance(node, cst.FormattedString):
        return "".join(p.value for p in node.parts if isinstance(p, cst.FormattedStringText))
    return None


def arg(call: cst.Call, position: int | None, keyword: str | None) -> cst.BaseExpression | None:
    """An argument by keyword, or by position among the positional ones."""
    positional = [a for a in call.args if a.keyword is None and not a.star]
    for a in call.args:
        if keyword is not None and a.keyword is not None and a.keyword.value == keyword:
            return a.value
    if position is not None and position < len(positional):
        return positional[position].value
    return None


def callable_name(expr: cst.BaseExpression) -> str | None:
    """The function a ``python_callable`` value names: ``fn`` or ``functools.partial(fn, ...)``."""
    if isinstance(expr, cst.Name):
        return expr.value
    if isinstance(expr, cst.Call) and callee_name(expr) == "partial" and expr.args:
        return callable_name(expr.args[0].value)
    return None


def method_name(call: cst.Call) -> str | None:
    return call.func.attr.value if isinstance(call.func, cst.Attribute) else None


def callee_name(call: cst.Call) -> str | None:
    if isinstance(call.func, cst.Attribute):
        return call.func.attr.value
    if isinstance(call.func, cst.Name):
        return call.func.value
    return None


def is_none(node: cst.BaseExpression | None) -> bool:
    return m.matches(node, m.Name("None")) if node is not None else False


def replaces_execute(ctx: FileContext, cls: cst.ClassDef) -> bool:
    """The class defines ``execute`` and never calls ``super().execute``: its bases' execute never runs."""
    body = cls.body.body if isinstance(cls.body, cst.IndentedBlock) else ()
    execute = next((s for s in body if isinstance(s, cst.FunctionDef) and s.name.value == "execute"), None)
    if execute is None:
        return False
    for n in ctx.walk(execute):
        if (
            isinstance(n, cst.Call)
            and isinstance(n.func, cst.Attribute)
            and n.func.attr.value == "execute"
            and isinstance(n.func.value, cst.Call)
            and callee_name(n.func.value) == "super"
        ):
            return False
    return True


def names_in(node: cst.CSTNode) -> set[str]:
    found: set[str] = set()
    stack = [node]
    while stack:
        current = stack.pop()
        if isinstance(current, cst.Name):
            found.add(current.value)
        stack.extend(current.children)
    return found
