"""One parsed DAG file and the facts every rule asks about it.

Names are resolved with libcst's QualifiedNameProvider, so ``from airflow.sdk import Variable as V``
and ``import airflow.sdk as sdk; sdk.Variable`` are both ``airflow.sdk.Variable`` while a local
``class Variable`` is not. Nothing here imports or runs the user's file.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field

import libcst as cst
import libcst.matchers as m
from libcst._metadata_dependent import LazyValue
from libcst.metadata import (
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
        self.wrapper = MetadataWrapper(module)
        self.module = self.wrapper.module
        self._qnames = self.wrapper.resolve(QualifiedNameProvider)
        self._positions = self.wrapper.resolve(PositionProvider)
        self._parents = self.wrapper.resolve(ParentNodeProvider)
        self.scopes = self.wrapper.resolve(ScopeProvider)
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
        pos = self._positions[node].start
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
    def walk(self, root: cst.CSTNode | None = None) -> Iterator[cst.CSTNode]:
        stack: list[cst.CSTNode] = [root or self.module]
        while stack:
            node = stack.pop()
            yield node
            stack.extend(reversed(node.children))

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
            for child in reversed(node.children):
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
        names: set[str] = set()
        for call in self.calls():
            for arg in call.args:
                if arg.keyword and arg.keyword.value == "python_callable" and isinstance(arg.value, cst.Name):
                    names.add(arg.value.value)
        return names

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


def names_in(node: cst.CSTNode) -> set[str]:
    found: set[str] = set()
    stack = [node]
    while stack:
        current = stack.pop()
        if isinstance(current, cst.Name):
            found.add(current.value)
        stack.extend(current.children)
    return found
