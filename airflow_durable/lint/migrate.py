"""``airflow-durable migrate``: swap provider operators for their durable drop-ins (libcst codemod).

Only imports and references to the catalogue's classes change; arguments, comments, formatting, aliases
and DAG structure are left exactly as they were. A second run changes nothing.
"""

from __future__ import annotations

import difflib
from collections.abc import Sequence
from dataclasses import dataclass, field

import libcst as cst
from libcst._metadata_dependent import LazyValue
from libcst.metadata import MetadataWrapper, QualifiedNameProvider

from airflow_durable.lint import catalogue
from airflow_durable.lint.catalogue import DropIn
from airflow_durable.lint.context import FileContext, replaces_execute
from airflow_durable.lint.rules.split import Split, find_splits


@dataclass
class MigrationResult:
    path: str
    original: str
    migrated: str
    swapped: list[str] = field(default_factory=list)  # "Provider -> Durable" per rewritten import
    notes: list[str] = field(default_factory=list)  # things seen but deliberately not rewritten
    split_suggestions: list[str] = field(default_factory=list)

    @property
    def changed(self) -> bool:
        return self.original != self.migrated

    def diff(self) -> str:
        """A unified diff that ``git apply`` / ``patch`` accept: lines keep their own endings (CRLF
        stays CRLF) and a last line without a newline is marked as such."""
        out = []
        for line in difflib.unified_diff(
            _lines(self.original),
            _lines(self.migrated),
            fromfile=f"a/{self.path}",
            tofile=f"b/{self.path}",
        ):
            if not line.endswith("\n"):
                line += "\n\\ No newline at end of file\n"
            out.append(line)
        return "".join(out)


def _lines(text: str) -> list[str]:
    # str.splitlines() also splits on form feeds, \x1c-\x1e, \u2028...: git only splits on \n.
    parts = text.split("\n")
    lines = [p + "\n" for p in parts[:-1]]
    if parts[-1]:
        lines.append(parts[-1])
    return lines


def _dotted(name: str) -> cst.Attribute | cst.Name:
    parts = name.split(".")
    node: cst.Attribute | cst.Name = cst.Name(parts[0])
    for part in parts[1:]:
        node = cst.Attribute(value=node, attr=cst.Name(part))
    return node


def _module_name(node: cst.ImportFrom) -> str | None:
    if node.relative or node.module is None:
        return None
    return cst.helpers.get_full_name_for_node(node.module)


def _closing_comma(
    own: cst.Comma | cst.MaybeSentinel, original_last: cst.Comma | cst.MaybeSentinel
) -> cst.Comma | cst.MaybeSentinel:
    """The comma for a name that now ends an import list: the original last name's, keeping our comment."""
    if isinstance(original_last, cst.MaybeSentinel) or not isinstance(own, cst.Comma):
        return original_last
    own_ws, last_ws = own.whitespace_after, original_last.whitespace_after
    if isinstance(own_ws, cst.ParenthesizedWhitespace) and isinstance(last_ws, cst.ParenthesizedWhitespace):
        return own.with_changes(
            whitespace_after=own_ws.with_changes(indent=last_ws.indent, last_line=last_ws.last_line)
        )
    return original_last


def _qnames(mapping: object, node: cst.CSTNode) -> set[str]:
    value = mapping.get(node, ())  # type: ignore[attr-defined]
    if isinstance(value, LazyValue):
        value = value()
    return {q.name for q in value}


class _AttributeUses(cst.CSTVisitor):
    """Pre-pass: provider classes reached through a module (``dbx.DatabricksSubmitRunOperator``)."""

    METADATA_DEPENDENCIES = (QualifiedNameProvider,)

    def __init__(self, skipped: frozenset[DropIn] = frozenset()) -> None:
        super().__init__()
        self.skipped = skipped
        self.by_module: dict[str, list[DropIn]] = {}
        self.from_imported: set[str] = set()  # durable classes the rewritten from-imports will bind

    def visit_Import(self, node: cst.Import) -> bool:
        return False

    def visit_ImportFrom(self, node: cst.ImportFrom) -> bool:
        module = _module_name(node)
        if module and not isinstance(node.names, cst.ImportStar):
            for alias in node.names:
                drop_in = catalogue.lookup(f"{module}.{cst.helpers.get_full_name_for_node(alias.name)}")
                if drop_in and drop_in not in self.skipped and alias.asname is None:
                    self.from_imported.add(drop_in.durable_class)
        return False

    def visit_Attribute(self, node: cst.Attribute) -> None:
        for q in self.get_metadata(QualifiedNameProvider, node, set()):
            drop_in = catalogue.lookup(q.name)
            if drop_in in self.skipped:
                continue
            if drop_in and drop_in not in self.by_module.setdefault(drop_in.provider_module, []):
                self.by_module[drop_in.provider_module].append(drop_in)


class DurableTransformer(cst.CSTTransformer):
    METADATA_DEPENDENCIES = (QualifiedNameProvider,)

    def __init__(
        self,
        attribute_uses: dict[str, list[DropIn]],
        already_imported: set[str],
        skipped: frozenset[DropIn] = frozenset(),
    ) -> None:
        super().__init__()
        self.attribute_uses = attribute_uses
        self.already_imported = already_imported
        self.skipped = skipped  # drop-ins left alone in this file (see _execute_overrides)
        self.swapped: list[str] = []
        self.notes: list[str] = []

    def _lookup(self, qualname: str) -> DropIn | None:
        found = catalogue.lookup(qualname)
        return None if found in self.skipped else found

    # Import statements are rewritten as whole lines (see leave_SimpleStatementLine); their names must
    # not be renamed as if they were uses.
    def visit_Import(self, node: cst.Import) -> bool:
        return False

    def visit_ImportFrom(self, node: cst.ImportFrom) -> bool:
        return False

    def leave_Name(self, original_node: cst.Name, updated_node: cst.Name) -> cst.BaseExpression:
        for q in self.get_metadata(QualifiedNameProvider, original_node, set()):
            drop_in = self._lookup(q.name)
            # Only a name that *is* the provider class (imported without an alias) is renamed; an alias
            # keeps pointing at the rewritten import, so its uses stay as written.
            if drop_in and original_node.value == drop_in.provider_class:
                return updated_node.with_changes(value=drop_in.durable_class)
        return updated_node

    def leave_Attribute(
        self, original_node: cst.Attribute, updated_node: cst.Attribute
    ) -> cst.BaseExpression:
        for q in self.get_metadata(QualifiedNameProvider, original_node, set()):
            drop_in = self._lookup(q.name)
            if drop_in:
                return cst.Name(drop_in.durable_class)
        return updated_node

    def leave_SimpleStatementLine(
        self, original_node: cst.SimpleStatementLine, updated_node: cst.SimpleStatementLine
    ) -> cst.BaseStatement | cst.FlattenSentinel[cst.BaseStatement]:
        if len(updated_node.body) != 1:
            return updated_node
        stmt = updated_node.body[0]
        if isinstance(stmt, cst.ImportFrom):
            rewritten = self._rewrite_from(updated_node, stmt)
            module = _module_name(stmt)
            if module is None or isinstance(stmt.names, cst.ImportStar):
                return rewritten
            bound = [f"{module}.{cst.helpers.get_full_name_for_node(a.name)}" for a in stmt.names]
            return self._add_after(rewritten, bound)
        if isinstance(stmt, cst.Import):
            bound = [cst.helpers.get_full_name_for_node(a.name) or "" for a in stmt.names]
            return self._add_after(updated_node, bound)
        return updated_node

    def _rewrite_from(
        self, line: cst.SimpleStatementLine, stmt: cst.ImportFrom
    ) -> cst.BaseStatement | cst.FlattenSentinel[cst.BaseStatement]:
        module = _module_name(stmt)
        candidates = {
            d.provider_class: d for d in catalogue.drop_ins_for_module(module or "") if d not in self.skipped
        }
        if not candidates:
            return line
        if isinstance(stmt.names, cst.ImportStar):
            self.notes.append(
                f"'from {module} import *' left as is: name the operators explicitly to migrate"
            )
            return line
        keep: list[cst.ImportAlias] = []
        moved: dict[str, list[cst.ImportAlias]] = {}
        for alias in stmt.names:
            name = cst.helpers.get_full_name_for_node(alias.name)
            drop_in = candidates.get(name or "")
            if drop_in is None:
                keep.append(alias)
                continue
            self.swapped.append(f"{drop_in.provider_class} -> {drop_in.durable_class}")
            moved.setdefault(drop_in.durable_module, []).append(
                alias.with_changes(name=cst.Name(drop_in.durable_class))
            )
        if not moved:
            return line
        if not keep and len(moved) == 1:
            # Everything moves to one module: edit in place so parentheses, commas and comments survive.
            target, aliases = next(iter(moved.items()))
            return line.with_changes(body=[stmt.with_changes(module=_dotted(target), names=aliases)])
        lines: list[cst.BaseStatement] = []
        last_comma = stmt.names[-1].comma
        if keep:
            keep[-1] = keep[-1].with_changes(comma=_closing_comma(keep[-1].comma, last_comma))
            lines.append(line.with_changes(body=[stmt.with_changes(names=keep)]))
        for index, (target, aliases) in enumerate(moved.items()):
            if stmt.lpar is not None:
                # Parenthesised: keep each name's own line and comment, close like the original did.
                aliases[-1] = aliases[-1].with_changes(comma=_closing_comma(aliases[-1].comma, last_comma))
                new_import = cst.ImportFrom(
                    module=_dotted(target), names=aliases, lpar=stmt.lpar, rpar=stmt.rpar
                )
            else:
                aliases = [
                    a.with_changes(comma=cst.Comma(whitespace_after=cst.SimpleWhitespace(" ")))
                    for a in aliases[:-1]
                ] + [aliases[-1].with_changes(comma=cst.MaybeSentinel.DEFAULT)]
                new_import = cst.ImportFrom(module=_dotted(target), names=aliases)
            # The first new line takes the original's leading comments when the original line went away.
            leading = line.leading_lines if (not keep and index == 0) else ()
            lines.append(cst.SimpleStatementLine(body=[new_import], leading_lines=leading))
        return cst.FlattenSentinel(lines)

    def _add_after(
        self, rewritten: cst.BaseStatement | cst.FlattenSentinel[cst.BaseStatement], modules: list[str]
    ) -> cst.BaseStatement | cst.FlattenSentinel[cst.BaseStatement]:
        """After an import that binds a provider *module*, import the durable classes its uses now name."""
        added: list[cst.BaseStatement] = []
        for module in modules:
            by_target: dict[str, list[str]] = {}
            for drop_in in self.attribute_uses.get(catalogue.current_module(module), []):
                self.swapped.append(f"{module}.{drop_in.provider_class} -> {drop_in.durable_class}")
                if drop_in.durable_class not in self.already_imported:
                    by_target.setdefault(drop_in.durable_module, []).append(drop_in.durable_class)
                    self.already_imported.add(drop_in.durable_class)
            for target, classes in by_target.items():
                added.append(
                    cst.SimpleStatementLine(
                        body=[
                            cst.ImportFrom(
                                module=_dotted(target),
                                names=[cst.ImportAlias(name=cst.Name(c)) for c in classes],
                            )
                        ]
                    )
                )
        if not added:
            return rewritten
        # The module import stays: other names may still come from it.
        head = list(rewritten.nodes) if isinstance(rewritten, cst.FlattenSentinel) else [rewritten]
        return cst.FlattenSentinel([*head, *added])


def migrate_source(path: str, source: str) -> MigrationResult:
    """Rewrite one file's source. Raises ``libcst.ParserSyntaxError`` when it does not parse."""
    ctx = FileContext(path, source)
    overrides = execute_overrides(ctx)
    skipped = frozenset(drop_in for drop_in, _ in overrides)
    wrapper = MetadataWrapper(ctx.module, unsafe_skip_copy=True)
    uses = _AttributeUses(skipped)
    wrapper.visit(uses)
    transformer = DurableTransformer(uses.by_module, set(uses.from_imported), skipped)
    migrated = wrapper.visit(transformer).code
    notes = [
        f"'{cls}' subclasses {drop_in.provider_class} and overrides execute(): a durable base would never "
        f"run (execute() is where it reconnects), so {drop_in.provider_class} is left as it is in this "
        f"file. Make '{cls}' call super().execute(context), then migrate, or keep it."
        for drop_in, cls in overrides
    ]
    result = MigrationResult(path, source, migrated, transformer.swapped, notes + transformer.notes)
    result.split_suggestions = [split_suggestion(ctx, s) for s in find_splits(ctx)]
    return result


def execute_overrides(ctx: FileContext) -> list[tuple[DropIn, str]]:
    """(drop-in, class name) for each class here that subclasses a catalogue operator and replaces
    ``execute`` without calling ``super().execute``: swapping its base would change nothing."""
    out: list[tuple[DropIn, str]] = []
    for node in ctx.walk():
        if isinstance(node, cst.ClassDef) and replaces_execute(ctx, node):
            for base in node.bases:
                for q in ctx.qnames(base.value):
                    drop_in = catalogue.lookup(q)
                    if drop_in is not None:
                        out.append((drop_in, node.name.value))
    return out


def split_suggestion(ctx: FileContext, split: Split) -> str:
    """The one-task rewrite for a submit+sensor split, as text for a person to apply (never applied)."""
    submit_line, _ = ctx.position(split.submit.call)
    sensor_line, _ = ctx.position(split.sensor.call)
    header = (
        f"{ctx.path}:{submit_line}: '{split.submit.task_id}' submits without waiting ({split.how}) and "
        f"'{split.sensor.task_id}' (line {sensor_line}) waits on the same job. Not rewritten; suggested:"
    )
    if split.drop_in is None or split.submit.class_name is None:
        body = (
            "    Replace both with one task that submits and waits (a durable operator, or a "
            'ResumableJobMixin subclass), or keep the split with mode="reschedule" on the sensor.'
        )
        return f"{header}\n{body}"
    call = split.submit.call
    flag = split.drop_in.no_wait_kwarg
    args = [a for a in call.args if not (a.keyword is not None and a.keyword.value in {flag, "deferrable"})]
    args.append(
        cst.Arg(
            keyword=cst.Name("deferrable"),
            value=cst.Name("True"),
            equal=cst.AssignEqual(
                whitespace_before=cst.SimpleWhitespace(""), whitespace_after=cst.SimpleWhitespace("")
            ),
        )
    )
    fixed = [
        a.with_changes(comma=cst.MaybeSentinel.DEFAULT)
        if i == len(args) - 1
        else a.with_changes(comma=cst.Comma(whitespace_after=cst.SimpleWhitespace(" ")))
        for i, a in enumerate(args)
    ]
    new_call = call.with_changes(
        func=cst.Name(split.drop_in.durable_class),
        args=fixed,
        whitespace_before_args=cst.SimpleWhitespace(""),
    )
    code = cst.Module(body=[]).code_for_node(new_call)
    code = " ".join(code.split())  # one line: formatting is the user's choice, not ours
    lines = [
        header,
        f"    {split.submit.key} = {code}",
        f"    # remove '{split.sensor.task_id}' and make its downstream tasks depend on "
        f"'{split.submit.task_id}'.",
        *(
            [
                f"    # and delete line {ctx.position(split.setting_node)[0]}: "
                f"{ctx.code(split.setting_node).strip()}"
            ]
            if split.setting_node is not None
            else []
        ),
        "    # With a Triggerer: deferrable=True (above). No Triggerer and the job may hold a worker: "
        "deferrable=False.",
        f"    # No Triggerer, a long job and scarce worker slots: keep the split and give "
        f"'{split.sensor.task_id}' mode=\"reschedule\".",
    ]
    return "\n".join(lines)


def migrate_paths(paths: Sequence[str]) -> list[MigrationResult]:  # pragma: no cover - thin convenience
    out = []
    for p in paths:
        with open(p, encoding="utf-8") as fh:
            out.append(migrate_source(p, fh.read()))
    return out
