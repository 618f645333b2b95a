"""The durable drop-in catalogue (DESIGN.md §1): the one table that ``check`` and ``migrate`` both read.

Class names are public API; a rename here is a breaking change for every migrated DAG.
"""

from __future__ import annotations

from dataclasses import dataclass


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


_DBX = "airflow.providers.databricks.operators.databricks"
_EMR = "airflow.providers.amazon.aws.operators.emr"

DROP_INS: tuple[DropIn, ...] = (
    DropIn(
        _DBX,
        "DatabricksSubmitRunOperator",
        "airflow_durable.operators.databricks",
        "DurableDatabricksSubmitRunOperator",
        "wait_for_termination",
    ),
    DropIn(
        _DBX,
        "DatabricksRunNowOperator",
        "airflow_durable.operators.databricks",
        "DurableDatabricksRunNowOperator",
        "wait_for_termination",
    ),
    DropIn(
        "airflow.providers.snowflake.operators.snowflake",
        "SnowflakeSqlApiOperator",
        "airflow_durable.operators.snowflake",
        "DurableSnowflakeSqlApiOperator",
    ),
    DropIn(
        "airflow.providers.google.cloud.operators.bigquery",
        "BigQueryInsertJobOperator",
        "airflow_durable.operators.bigquery",
        "DurableBigQueryInsertJobOperator",
    ),
    DropIn(
        "airflow.providers.amazon.aws.operators.redshift_data",
        "RedshiftDataOperator",
        "airflow_durable.operators.redshift",
        "DurableRedshiftDataOperator",
        "wait_for_completion",
    ),
    DropIn(
        _EMR,
        "EmrAddStepsOperator",
        "airflow_durable.operators.emr",
        "DurableEmrAddStepsOperator",
        "wait_for_completion",
        waits_by_default=False,
    ),
    DropIn(
        _EMR,
        "EmrServerlessStartJobOperator",
        "airflow_durable.operators.emr",
        "DurableEmrServerlessStartJobOperator",
        "wait_for_completion",
    ),
    DropIn(
        _EMR,
        "EmrContainerOperator",
        "airflow_durable.operators.emr",
        "DurableEmrContainerOperator",
        "wait_for_completion",
    ),
    DropIn(
        "airflow.providers.amazon.aws.operators.batch",
        "BatchOperator",
        "airflow_durable.operators.batch",
        "DurableBatchOperator",
        "wait_for_completion",
    ),
    DropIn(
        "airflow.providers.dbt.cloud.operators.dbt",
        "DbtCloudRunJobOperator",
        "airflow_durable.operators.dbt_cloud",
        "DurableDbtCloudRunJobOperator",
        "wait_for_termination",
    ),
)

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
