"""The demo's DAG pair of any system: the provider's operator and its durable drop-in, same arguments.

``airflow-durable demo --system <name>`` writes a two-line DAG file into its deployment that calls
`build` (`DemoSystem.dag_source`); the Airflow components import this module, the demo process never
does. The operator classes come from the catalogue, their arguments from the demo table.
"""

from __future__ import annotations

import importlib
from datetime import datetime, timedelta
from typing import Any

from airflow_durable.demo.systems import get
from airflow_durable.demo.table import COMMON_KWARGS

__all__ = ["build"]


def build(system_name: str, namespace: dict[str, Any]) -> None:
    """Define the upstream and the durable DAG of ``system_name`` in ``namespace`` (a module's globals)."""
    from airflow.sdk import DAG

    system = get(system_name)
    row = system.operator
    for side, module, name in (
        (system.upstream, row.provider_module, row.provider_class),
        (system.durable, row.durable_module, row.durable_class),
    ):
        operator = getattr(importlib.import_module(module), name)
        with DAG(
            dag_id=side.dag_id,
            schedule=None,
            start_date=datetime(2026, 1, 1),
            catchup=False,
            tags=["airflow-durable", "demo"],
        ) as dag:
            operator(
                task_id=system.task_id,
                **system.operator_kwargs(side.dag_id),
                **{**COMMON_KWARGS, "retry_delay": timedelta(seconds=COMMON_KWARGS["retry_delay"])},
            )
        namespace[side.dag_id] = dag
