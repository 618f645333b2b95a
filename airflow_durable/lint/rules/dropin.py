"""ADR007: a provider operator for which a durable drop-in exists (informational; `migrate` fixes it)."""

from __future__ import annotations

from collections.abc import Iterator

import libcst as cst

from airflow_durable.lint import catalogue
from airflow_durable.lint.context import FileContext, replaces_execute
from airflow_durable.lint.findings import Finding

MESSAGE = (
    "{provider} has a durable drop-in, {durable} (from {module} import {durable}): same arguments, XComs "
    "and return value, but a retry reconnects to the job this task already started instead of submitting a "
    "second copy. Fix: run `airflow-durable migrate` on this file."
)


def check(ctx: FileContext) -> Iterator[Finding]:
    for node in ctx.walk():
        target: cst.CSTNode | None = None
        if isinstance(node, cst.Call):
            target = node.func
        elif isinstance(node, cst.ClassDef):
            if replaces_execute(ctx, node):
                continue  # a durable base would never run: migrate reports such a class instead
            for base in node.bases:
                yield from _report(ctx, base.value, base)
            continue
        if target is not None:
            yield from _report(ctx, target, node)


def _report(ctx: FileContext, target: cst.CSTNode, where: cst.CSTNode) -> Iterator[Finding]:
    for q in sorted(ctx.qnames(target)):
        drop_in = catalogue.lookup(q)
        if drop_in:
            yield ctx.finding(
                "ADR007",
                where,
                MESSAGE.format(
                    provider=drop_in.provider_class,
                    durable=drop_in.durable_class,
                    module=drop_in.durable_module,
                ),
            )
            return
