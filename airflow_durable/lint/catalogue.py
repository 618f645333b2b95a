"""The drop-in table that ``check`` and ``migrate`` both read, derived from `airflow_durable.catalogue`.

Class names are public API; a rename in the catalogue is a breaking change for every migrated DAG.
"""

from __future__ import annotations

from airflow_durable.catalogue import OPERATORS, Operator

#: One provider operator and the durable operator that replaces it with the same arguments: the catalogue's
#: own row (its ``no_wait_kwarg`` and ``waits_by_default`` say how the provider operator waits).
DropIn = Operator

#: The catalogue's rows, in its order.
DROP_INS: tuple[DropIn, ...] = OPERATORS
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
