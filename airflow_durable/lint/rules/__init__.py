"""The rules. Each module exposes ``check(ctx) -> Iterable[Finding]`` for the codes it owns."""

from __future__ import annotations

from collections.abc import Callable, Iterable

from airflow_durable.lint.context import FileContext
from airflow_durable.lint.findings import Finding
from airflow_durable.lint.rules import dropin, mixin, split, values, variables, xcom

Checker = Callable[[FileContext], Iterable[Finding]]

CHECKERS: tuple[Checker, ...] = (
    variables.check,
    xcom.check,
    split.check,
    dropin.check,
    mixin.check,
    values.check,
)
