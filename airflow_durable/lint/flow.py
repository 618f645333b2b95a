"""Tiny intra-function data flow: which local names hold a state store, a datetime, a stored id.

Deliberately shallow (last binding wins, no branches): DAG task bodies are short, and a rule that
cannot tell stays silent rather than guess.
"""

from __future__ import annotations

from collections.abc import Iterator

import libcst as cst

from airflow_durable.lint.context import (
    STORE_KEYS,
    VARIABLE_CLASSES,
    FileContext,
    arg,
    method_name,
    string_value,
)

_MAX_DEPTH = 5


class FunctionFlow:
    def __init__(self, ctx: FileContext, fn: cst.FunctionDef) -> None:
        self.ctx = ctx
        self.fn = fn
        self.params = {p.name.value for p in _all_params(fn.params)}
        self.env: dict[str, cst.BaseExpression] = {}  # last binding of each local name
        self.bindings: dict[str, list[cst.BaseExpression]] = {}  # every binding, in source order
        for node in ctx.own_nodes(fn):
            if isinstance(node, cst.Assign):
                for target in node.targets:
                    if isinstance(target.target, cst.Name):
                        self.env[target.target.value] = node.value
            elif isinstance(node, cst.AnnAssign) and node.value is not None:
                if isinstance(node.target, cst.Name):
                    self.env[node.target.value] = node.value
            elif isinstance(node, cst.NamedExpr) and isinstance(node.target, cst.Name):
                self.env[node.target.value] = node.value
            elif isinstance(node, cst.WithItem) and node.asname is not None:
                if isinstance(node.asname.name, cst.Name):
                    self.env[node.asname.name.value] = node.item
        for node in ctx.own_nodes(fn):
            for name, value in _binding(node):
                self.bindings.setdefault(name, []).append(value)

    def resolve(self, expr: cst.BaseExpression, depth: int = 0) -> cst.BaseExpression:
        """Follow a local name to the expression last bound to it."""
        while isinstance(expr, cst.Name) and expr.value in self.env and depth < _MAX_DEPTH:
            expr = self.env[expr.value]
            depth += 1
        return expr

    def store_kind(self, expr: cst.BaseExpression, depth: int = 0) -> str | None:
        """'task' / 'asset' when ``expr`` evaluates to a task or asset state store (accessor)."""
        if depth > _MAX_DEPTH:
            return None
        if isinstance(expr, cst.Name):
            if expr.value in self.env:
                return self.store_kind(self.env[expr.value], depth + 1)
            if expr.value in self.params:
                return STORE_KEYS.get(expr.value)
            return None
        if isinstance(expr, cst.Subscript):
            if len(expr.slice) == 1 and isinstance(expr.slice[0].slice, cst.Index):
                key = string_value(expr.slice[0].slice.value)
                if key in STORE_KEYS:
                    return STORE_KEYS[key]
            # context["asset_state_store"][MY_ASSET] is the per-asset accessor.
            return "asset" if self.store_kind(expr.value, depth + 1) == "asset" else None
        if isinstance(expr, cst.Call) and method_name(expr) == "get":
            key = string_value(arg(expr, 0, None))
            return STORE_KEYS.get(key or "")
        return None

    def store_calls(self, methods: set[str]) -> Iterator[tuple[cst.Call, str]]:
        """Calls like ``<store>.set(...)`` in this function (own body only), with the store kind."""
        for node in self.ctx.own_nodes(self.fn):
            if isinstance(node, cst.Call) and method_name(node) in methods:
                assert isinstance(node.func, cst.Attribute)
                kind = self.store_kind(node.func.value)
                if kind:
                    yield node, kind

    def variable_calls(self, methods: set[str]) -> Iterator[cst.Call]:
        for node in self.ctx.own_nodes(self.fn):
            if isinstance(node, cst.Call) and is_variable_call(self.ctx, node, methods):
                yield node

    def stored_read(
        self, expr: cst.BaseExpression, seen: frozenset[str] = frozenset()
    ) -> tuple[str, str | None] | None:
        """Where a value is read back from (Variable / XCom / a state store) and under which key."""
        for node in self.ctx.walk(expr):
            if isinstance(node, cst.Name) and node.value in self.bindings and node.value not in seen:
                for bound in self.bindings[node.value]:
                    inner = self.stored_read(bound, seen | {node.value})
                    if inner:
                        return inner
            if not isinstance(node, cst.Call):
                continue
            if is_variable_call(self.ctx, node, {"get"}):
                return "Variable", string_value(arg(node, 0, "key"))
            name = method_name(node)
            if name == "xcom_pull":
                return "XCom", string_value(arg(node, None, "key"))
            if name == "get" and isinstance(node.func, cst.Attribute):
                kind = self.store_kind(node.func.value)
                if kind:
                    return f"{kind}_state_store", string_value(arg(node, 0, "key"))
        return None


def _binding(node: cst.CSTNode) -> list[tuple[str, cst.BaseExpression]]:
    if isinstance(node, cst.Assign):
        return [(t.target.value, node.value) for t in node.targets if isinstance(t.target, cst.Name)]
    if isinstance(node, (cst.AnnAssign, cst.NamedExpr)) and isinstance(node.target, cst.Name) and node.value:
        return [(node.target.value, node.value)]
    return []


def is_variable_call(ctx: FileContext, call: cst.Call, methods: set[str]) -> bool:
    return any(
        q.rsplit(".", 1)[0] in VARIABLE_CLASSES and q.rsplit(".", 1)[1] in methods
        for q in ctx.call_qnames(call)
    )


def _all_params(params: cst.Parameters) -> list[cst.Param]:
    out = list(params.posonly_params) + list(params.params) + list(params.kwonly_params)
    if isinstance(params.star_arg, cst.Param):
        out.append(params.star_arg)
    if params.star_kwarg is not None:
        out.append(params.star_kwarg)
    return out
