"""The AWS end-to-end DAGs: one task each, durable or upstream, Redshift Data or Batch, per path.

Dag ids: ``aws_e2e__<system>__<durable|upstream>__<deferrable|sync>``. Kept in the dags folder
because ``dag.test()`` needs the file inside a configured bundle; the runner picks one per scenario.
"""

from __future__ import annotations

from datetime import datetime, timedelta

try:
    from airflow.sdk import DAG
except ImportError:  # Airflow 2.x
    from airflow import DAG

from airflow.providers.amazon.aws.operators.batch import BatchOperator
from airflow.providers.amazon.aws.operators.redshift_data import RedshiftDataOperator

from airflow_durable.operators.batch import DurableBatchOperator
from airflow_durable.operators.redshift import DurableRedshiftDataOperator
from tests.aws_support import PromptBatchWaiters

# One botocore attempt per call: an injected fault reaches the operator at once.
BOTOCORE = {"retries": {"mode": "standard", "total_max_attempts": 1}}
COMMON = dict(task_id="durable_job", retries=2, retry_delay=timedelta(seconds=1), botocore_config=BOTOCORE)


def _redshift(cls: type, deferrable: bool) -> None:
    cls(
        sql="insert into sales select * from staging_sales where day = '{{ ds }}'",
        database="dev",
        cluster_identifier="analytics",
        deferrable=deferrable,
        poll_interval=1,
        **COMMON,
    )


def _batch(cls: type, deferrable: bool) -> None:
    cls(
        job_name="nightly-etl",
        job_queue="emulator-queue",
        job_definition="emulator-job-def",
        container_overrides={"command": ["python", "etl.py", "{{ ds }}"]},
        deferrable=deferrable,
        poll_interval=1,
        max_retries=1000,
        # The provider's default sync wait sleeps 3 x U(1, 10) s; a prompt user-supplied waiter instead.
        waiters=None if deferrable else PromptBatchWaiters(),
        **COMMON,
    )


VARIANTS = {
    "redshift": (_redshift, DurableRedshiftDataOperator, RedshiftDataOperator),
    "batch": (_batch, DurableBatchOperator, BatchOperator),
}

for _system, (_build, _durable, _upstream) in VARIANTS.items():
    for _kind, _cls in (("durable", _durable), ("upstream", _upstream)):
        for _path in ("deferrable", "sync"):
            with DAG(
                dag_id=f"aws_e2e__{_system}__{_kind}__{_path}",
                schedule=None,
                start_date=datetime(2026, 1, 1),
                catchup=False,
                tags=["airflow-durable", "e2e"],
            ) as _dag:
                _build(_cls, _path == "deferrable")
            globals()[_dag.dag_id] = _dag
