"""The runtime tier's DAGs: one DAG per matrix cell (``tests/e2e_runtime/matrix.py``), one task each.

The upstream side runs the provider's operator, the durable side its drop-in, with the same arguments
(the demo's, ``airflow_durable/demo/dags``), deferrable or not per the cell's path. Only the cells the
test selected (``AFD_RT_CELLS``) are defined, and a task process (whose parsing context names its DAG)
defines only its own: it imports one provider, not the nine the dag-processor imports. On 2 cores that
is about a CPU second less for every task process the matrix starts (a thousand or so in a full run).
"""

from __future__ import annotations

import importlib
import logging
import time
from datetime import datetime, timedelta
from typing import Any

from airflow.sdk import DAG, get_parsing_context

from airflow_durable import catalogue
from tests.e2e_runtime.matrix import (
    COMPLETE_HOLD_MARK,
    EXECUTION_TIMEOUT,
    KINDS,
    SYSTEMS,
    TASK_ID,
    defined_job_id,
    parse_dag_id,
    selected_dag_ids,
)

#: ``completekill`` and ``podcomplete`` cells: how long try 1 stays inside its resumption
#: (``execute_complete``) after the trigger's success event, for the test to kill (or stop) it there. A
#: later try is not held.
COMPLETE_HOLD_SECONDS = 120.0


def _held_in_completion(operator: type) -> type:
    """``operator`` whose try 1, resumed after its trigger fired, waits before running the completion
    method (``execute_complete``): the moment a worker dies between the success event and the end.
    The operator's own code is untouched; this only widens the window the test aims at."""

    class Held(operator):  # type: ignore[misc,valid-type,unused-ignore]
        def resume_execution(self, next_method: str, next_kwargs: Any, context: Any) -> Any:
            if next_method != "__fail__" and context["ti"].try_number == 1:
                logging.getLogger(__name__).warning(
                    "%s %s for %ss", COMPLETE_HOLD_MARK, next_method, COMPLETE_HOLD_SECONDS
                )
                time.sleep(COMPLETE_HOLD_SECONDS)
            return super().resume_execution(next_method, next_kwargs, context)

    Held.__name__ = Held.__qualname__ = operator.__name__
    return Held


def _classes(system: str) -> tuple[type, type]:
    """The matrix system's (upstream, durable) operator classes, named by the catalogue."""
    # Imported per system: a DAG file of Databricks cells never imports Google's libraries.
    kind = KINDS.get(system)
    if kind is None:
        raise ValueError(f"unknown system {system!r}")
    _, upstream, durable = SYSTEMS[system]
    row = next(o for o in catalogue.operators_of(kind) if o.durable_class == durable)
    return (
        getattr(importlib.import_module(row.provider_module), upstream),
        getattr(importlib.import_module(row.durable_module), durable),
    )


def _arguments(system: str, dag_id: str, deferrable: bool) -> dict[str, Any]:
    if system == "databricks":
        return {
            "json": {
                "run_name": dag_id,
                "new_cluster": {"spark_version": "15.4.x-scala2.12", "num_workers": 1},
                "notebook_task": {"notebook_path": "/Shared/etl"},
            },
            "polling_period_seconds": 1,
            "databricks_retry_limit": 2,
            "databricks_retry_delay": 0.2,
        }
    if system == "dbrunnow":
        # A run of the DAG's own job, defined in the emulator (matrix.DEFINED_JOB_SYSTEMS).
        return {
            "databricks_conn_id": "databricks_dbrunnow",
            "job_id": defined_job_id(dag_id),
            "notebook_params": {"dag": dag_id},
            "polling_period_seconds": 1,
            "databricks_retry_limit": 2,
            "databricks_retry_delay": 0.2,
        }
    if system == "snowflake":
        return {
            "snowflake_conn_id": "snowflake_default",
            "sql": f"insert into analytics.orders_daily select * from raw.orders /* {dag_id} */",
            "statement_count": 1,
            "poll_interval": 1,
        }
    if system == "bigquery":
        return {
            "gcp_conn_id": "google_cloud_default",
            "configuration": {
                "query": {"query": f"SELECT COUNT(*) FROM `shop.orders` -- {dag_id}", "useLegacySql": False}
            },
            "poll_interval": 1.0,
        }
    if system == "dbtcloud":
        return {
            "dbt_cloud_conn_id": "dbt_cloud_default",
            "job_id": defined_job_id(dag_id),
            "trigger_reason": f"nightly models ({dag_id})",
            "check_interval": 1,
            "timeout": 600,
        }
    if system == "redshift":
        return {
            "aws_conn_id": "aws_redshift",
            "cluster_identifier": "analytics",
            "database": "dev",
            "sql": f"insert into sales select * from staging_sales /* {dag_id} */",
            "poll_interval": 1,
        }
    if system == "batch":
        return {
            "aws_conn_id": "aws_batch",
            "job_name": dag_id,
            "job_queue": "emulator-queue",
            "job_definition": "emulator-job-def",
            "container_overrides": {"command": ["python", "etl.py"]},
            "poll_interval": 1,
        }
    if system == "emreks":
        return {
            "aws_conn_id": "aws_emreks",
            "name": dag_id,
            "virtual_cluster_id": "{{ var.value.afd_rt_emr_virtual_cluster_id }}",
            "execution_role_arn": "arn:aws:iam::123456789012:role/emr-on-eks-job",
            "release_label": "emr-7.1.0-latest",
            "job_driver": {"sparkSubmitJobDriver": {"entryPoint": "s3://my-bucket/jobs/etl.py"}},
            "poll_interval": 1,
        }
    if system == "emr":
        return {
            "aws_conn_id": "aws_emr",
            "job_flow_id": "{{ var.value.afd_rt_emr_cluster_id }}",
            "steps": [
                {
                    "Name": dag_id,
                    "ActionOnFailure": "CONTINUE",
                    "HadoopJarStep": {
                        "Jar": "command-runner.jar",
                        "Args": ["spark-submit", "s3://my-bucket/etl.py"],
                    },
                }
            ],
            # The provider only adds the steps unless told to wait; its deferrable path waits anyway (and
            # with wait_for_completion it would first wait in the worker, then defer).
            "wait_for_completion": not deferrable,
            "waiter_delay": 1,
            "waiter_max_attempts": 1200,
        }
    if system == "emrserverless":
        return {
            "aws_conn_id": "aws_emrserverless",
            "name": dag_id,
            "application_id": "{{ var.value.afd_rt_emr_serverless_application_id }}",
            "execution_role_arn": "arn:aws:iam::123456789012:role/emr-serverless-job",
            "job_driver": {"sparkSubmit": {"entryPoint": "s3://my-bucket/jobs/etl.py"}},
            "waiter_delay": 1,
            # Also the deferral's timeout (attempts x delay): longer than any cell lets a job run.
            "waiter_max_attempts": 1200,
        }
    raise ValueError(f"unknown system {system!r}")


_own = get_parsing_context().dag_id  # set in a task process: the one DAG it runs
for _dag_id in selected_dag_ids():
    if _own and _dag_id != _own:
        continue
    _cell = parse_dag_id(_dag_id)
    _upstream, _durable = _classes(_cell.system)
    _operator = _durable if _cell.side == "durable" else _upstream
    if _cell.fault in ("completekill", "podcomplete"):
        _operator = _held_in_completion(_operator)
    _limits: dict[str, Any] = {"retries": 2, "retry_delay": timedelta(seconds=2)}
    if _cell.fault == "exectimeout":  # one try: the timeout must end the task, not start another job
        _limits = {"retries": 0, "execution_timeout": timedelta(seconds=EXECUTION_TIMEOUT)}
    with DAG(
        dag_id=_dag_id,
        schedule=None,
        start_date=datetime(2026, 1, 1),
        catchup=False,
        tags=["airflow-durable", "runtime-matrix"],
    ) as _dag:
        _operator(
            task_id=TASK_ID,
            deferrable=_cell.path == "deferrable",
            **_limits,
            **_arguments(_cell.system, _dag_id, _cell.path == "deferrable"),
        )
    globals()[_dag_id] = _dag
