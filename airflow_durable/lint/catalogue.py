"""The drop-in table that ``check`` and ``migrate`` both read, derived from `airflow_durable.catalogue`.

Class names are public API; a rename in the catalogue is a breaking change for every migrated DAG.
"""

from __future__ import annotations

from dataclasses import dataclass

from airflow_durable.catalogue import OPERATORS


@dataclass(frozen=True)
class DropIn:
    """One provider operator and the durable operator that replaces it with the same arguments."""

    provider_module: str
    provider_class: str
    durable_module: str
    durable_class: str
    # The argument that turns "submit and wait" into "submit only", and the value that does it.
    # ``None`` when the provider operator always waits.
    no_wait_kwarg: str | None = None
    # True when the provider operator does not wait unless told to (EmrAddStepsOperator).
    waits_by_default: bool = True

    @property
    def provider_qualname(self) -> str:
        return f"{self.provider_module}.{self.provider_class}"

    @property
    def durable_qualname(self) -> str:
        return f"{self.durable_module}.{self.durable_class}"


# Derived from the one catalogue (airflow_durable.catalogue), in its order.
DROP_INS: tuple[DropIn, ...] = tuple(
    DropIn(
        o.provider_module,
        o.provider_class,
        o.durable_module,
        o.durable_class,
        o.no_wait_kwarg,
        waits_by_default=o.waits_by_default,
    )
    for o in OPERATORS
)
_DBX = next(d.provider_module for d in DROP_INS if d.provider_class == "DatabricksSubmitRunOperator")
_EMR = next(d.provider_module for d in DROP_INS if d.provider_class == "EmrAddStepsOperator")

BY_PROVIDER_QUALNAME: dict[str, DropIn] = {d.provider_qualname: d for d in DROP_INS}
BY_PROVIDER_MODULE: dict[str, list[DropIn]] = {}
for _d in DROP_INS:
    BY_PROVIDER_MODULE.setdefault(_d.provider_module, []).append(_d)
DURABLE_CLASSES: frozenset[str] = frozenset(d.durable_class for d in DROP_INS)


# Module paths that older Airflow and provider releases used for the same classes, with the same
# arguments: ``check`` and ``migrate`` treat an import from one of them like one from the current module.
DEPRECATED_MODULES: dict[str, str] = {
    "airflow.contrib.operators.databricks_operator": _DBX,
    "airflow.contrib.operators.emr_add_steps_operator": _EMR,
    "airflow.providers.amazon.aws.operators.emr_add_steps": _EMR,
    "airflow.providers.amazon.aws.operators.emr_containers": _EMR,
}


def current_module(module: str) -> str:
    """The provider module a (possibly deprecated) module path stands for today."""
    return DEPRECATED_MODULES.get(module, module)


def drop_ins_for_module(module: str) -> list[DropIn]:
    """The drop-ins importable from a module, deprecated paths included."""
    return BY_PROVIDER_MODULE.get(current_module(module), [])


def lookup(qualname: str) -> DropIn | None:
    """The drop-in for a provider class's fully qualified name (deprecated module paths included)."""
    found = BY_PROVIDER_QUALNAME.get(qualname)
    if found is None:
        module, _, name = qualname.rpartition(".")
        if module in DEPRECATED_MODULES:
            found = BY_PROVIDER_QUALNAME.get(f"{DEPRECATED_MODULES[module]}.{name}")
    return found
