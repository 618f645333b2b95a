"""ADR008–ADR012: ResumableJobMixin subclasses that break at instantiation or on a retry.

Each rule was measured against Airflow 3.3.2's ``airflow.sdk.ResumableJobMixin`` (see docs/check.md).
"""

from __future__ import annotations

from collections.abc import Iterator

import libcst as cst

from airflow_durable.lint.context import BASE_OPERATOR_CLASSES, MIXIN_CLASSES, FileContext, is_none
from airflow_durable.lint.findings import Finding

ABSTRACT_METHODS = (
    "submit_job",
    "get_job_status",
    "is_job_active",
    "is_job_succeeded",
    "poll_until_complete",
    "get_job_result",
)


def check(ctx: FileContext) -> Iterator[Finding]:
    for node in ctx.walk():
        if isinstance(node, cst.ClassDef):
            yield from _check_class(ctx, node)


def _base_kinds(ctx: FileContext, cls: cst.ClassDef) -> list[str]:
    """'mixin', 'base' (BaseOperator), 'airflow' (another Airflow/provider class) or 'other' per base."""
    kinds = []
    for base in cls.bases:
        if base.keyword is not None:
            continue
        q = ctx.qnames(base.value)
        if q & MIXIN_CLASSES:
            kinds.append("mixin")
        elif q & BASE_OPERATOR_CLASSES:
            kinds.append("base")
        elif any(name.startswith("airflow.") for name in q):
            kinds.append("airflow")
        else:
            kinds.append("other")
    return kinds


def _methods(cls: cst.ClassDef) -> dict[str, cst.FunctionDef]:
    body = cls.body.body if isinstance(cls.body, cst.IndentedBlock) else ()
    return {s.name.value: s for s in body if isinstance(s, cst.FunctionDef)}


def _assigns_external_id_key(ctx: FileContext, cls: cst.ClassDef) -> bool:
    for node in ctx.walk(cls.body):
        if isinstance(node, cst.AssignTarget):
            target = node.target
            if isinstance(target, cst.Name) and target.value == "external_id_key":
                return True
            if isinstance(target, cst.Attribute) and target.attr.value == "external_id_key":
                return True
        if isinstance(node, cst.AnnAssign) and isinstance(node.target, cst.Name):
            if node.target.value == "external_id_key" and node.value is not None:
                return True
    return False


def _calls_method(ctx: FileContext, fn: cst.FunctionDef, name: str) -> bool:
    return any(
        isinstance(n, cst.Call) and isinstance(n.func, cst.Attribute) and n.func.attr.value == name
        for n in ctx.walk(fn.body)
    )


def _returns_value(ctx: FileContext, fn: cst.FunctionDef) -> bool:
    return any(
        isinstance(n, cst.Return) and n.value is not None and not is_none(n.value) for n in ctx.own_nodes(fn)
    )


def _check_class(ctx: FileContext, cls: cst.ClassDef) -> Iterator[Finding]:
    kinds = _base_kinds(ctx, cls)
    if "mixin" not in kinds:
        return
    name = cls.name.value
    mixin_at = kinds.index("mixin")
    if "base" in kinds[:mixin_at]:
        yield ctx.finding(
            "ADR008",
            cls,
            (
                f"'{name}' lists BaseOperator before ResumableJobMixin: the mixin's __init__ then sits after "
                "BaseOperator's in the MRO and forwards keyword arguments to object.__init__, so on "
                "Airflow 3.3.2 "
                f"'{name}(task_id=...)' raises 'TypeError: object.__init__() takes exactly one "
                f"argument'. Fix: class {name}(ResumableJobMixin, BaseOperator) — the mixin first."
            ),
        )
    methods = _methods(cls)
    # Only judge what we can see: with a base class defined elsewhere (a user base, a provider operator)
    # the missing pieces may well be inherited.
    fully_known = all(k in ("mixin", "base") for k in kinds)
    execute = methods.get("execute")
    if execute is not None and not _calls_method(ctx, execute, "execute_resumable"):
        yield ctx.finding(
            "ADR009",
            execute,
            (
                f"'{name}.execute()' does not call self.execute_resumable(context): the mixin's decision "
                "(reconnect / already succeeded / submit) never runs, so a retry submits a second job. Fix: "
                "def execute(self, context): return self.execute_resumable(context)."
            ),
        )
    elif execute is None and fully_known:
        yield ctx.finding(
            "ADR009",
            cls,
            (
                f"'{name}' subclasses ResumableJobMixin but defines no execute(): BaseOperator.execute does "
                "nothing useful and the mixin never runs. Fix: def execute(self, context): return "
                "self.execute_resumable(context)."
            ),
        )
    if fully_known and not _assigns_external_id_key(ctx, cls):
        yield ctx.finding(
            "ADR010",
            cls,
            (
                f"'{name}' keeps the default external_id_key 'remote_job_id': every such operator "
                "shares that "
                "task_state_store key name, and renaming it after release strands in-flight retries "
                "(they look "
                f"under the old key and submit again). Fix: set a specific key now, e.g. external_id_key = "
                f'"{_snake(name)}_job_id", and never change it.'
            ),
        )
    if fully_known:
        missing = [m for m in ABSTRACT_METHODS if m not in methods]
        if missing:
            yield ctx.finding(
                "ADR011",
                cls,
                (
                    f"'{name}' does not implement {', '.join(missing)}: ResumableJobMixin declares them "
                    "abstract, "
                    f"so '{name}(task_id=...)' raises TypeError ('Can't instantiate abstract class') "
                    "when the DAG "
                    "is parsed. Fix: implement every one of submit_job, get_job_status, is_job_active, "
                    "is_job_succeeded, poll_until_complete and get_job_result."
                ),
            )
    poll, result = methods.get("poll_until_complete"), methods.get("get_job_result")
    if (
        poll is not None
        and result is not None
        and _returns_value(ctx, result)
        and not _returns_value(ctx, poll)
    ):
        yield ctx.finding(
            "ADR012",
            poll,
            (
                f"'{name}.get_job_result()' returns a value but poll_until_complete() returns None: on "
                "Airflow "
                "3.3.2 execute_resumable() returns poll_until_complete()'s value when a retry "
                "reconnects to a "
                "running job, so that try's return value (XCom) is None instead of the result. Fix: end "
                "poll_until_complete() with 'return self.get_job_result(external_id, context)', or use "
                "a durable "
                "operator, which returns the provider's result on every path."
            ),
        )


def _snake(name: str) -> str:
    out = []
    for i, ch in enumerate(name.removesuffix("Operator")):
        if ch.isupper() and i:
            out.append("_")
        out.append(ch.lower())
    return "".join(out) or "my"
