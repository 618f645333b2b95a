"""End-to-end DAGs for the Snowflake SQL API: the durable operator and the upstream one, on both paths.

One DAG per (implementation, path), so a single process can run every scenario with ``dag.test()``
(``tests/e2e/run_snowflake.py``). Kept in the dags folder because ``dag.test()`` needs the file inside
a configured bundle.
"""

from __future__ import annotations

from datetime import datetime, timedelta

from airflow.providers.snowflake.operators.snowflake import SnowflakeSqlApiOperator
from tenacity import stop_after_attempt, wait_fixed

try:
    from airflow.sdk import DAG
except ImportError:  # Airflow 2.x
    from airflow import DAG

from airflow_durable.operators.snowflake import DurableSnowflakeSqlApiOperator

IMPLEMENTATIONS = {"durable": DurableSnowflakeSqlApiOperator, "upstream": SnowflakeSqlApiOperator}
DAGS: dict[str, DAG] = {}

for name, operator in IMPLEMENTATIONS.items():
    for deferrable in (True, False):
        dag_id = f"snowflake_e2e_{name}_{'deferrable' if deferrable else 'sync'}"
        with DAG(
            dag_id=dag_id,
            schedule=None,
            start_date=datetime(2026, 1, 1),
            catchup=False,
            tags=["airflow-durable", "e2e"],
        ) as dag:
            operator(
                task_id="durable_job",
                sql="insert into audit select '{{ run_id }}'; select count(*) from audit",
                statement_count=2,
                deferrable=deferrable,
                poll_interval=0,
                retries=2,
                retry_delay=timedelta(seconds=1),
                # The hook's own retries (connection errors, 429/503/504) without its 1-60 s back-off.
                snowflake_api_retry_args={"stop": stop_after_attempt(3), "wait": wait_fixed(0.1)},
            )
        DAGS[dag_id] = dag
        globals()[dag_id] = dag
