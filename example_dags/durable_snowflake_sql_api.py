"""Run a multi-statement Snowflake SQL API request and wait for it in one durable task.

``DurableSnowflakeSqlApiOperator`` takes the same arguments as the provider's ``SnowflakeSqlApiOperator``.
It submits with a ``requestId`` derived from the task instance (and ``retry=true``), stores the statement
handles in the task state store, then, with ``deferrable=True``, frees the worker and waits in the
provider's ``SnowflakeSqlApiTrigger``. A retry (worker crash, trigger error, lost deferral) reconnects to
the same statements instead of running the SQL again; a retry after they already succeeded returns
without submitting. The ``query_ids`` XCom holds the handles on every path.

Connection: ``snowflake_default``. Runs offline against ``airflow_durable.testing.SnowflakeEmulator``
(see ``tests/examples``). On Airflow < 3.3 it still works as one task; each try then submits fresh.
"""

from __future__ import annotations

from datetime import datetime, timedelta

try:
    from airflow.sdk import DAG, task
except ImportError:  # Airflow 2.x
    from airflow import DAG
    from airflow.decorators import task

from airflow_durable.operators.snowflake import DurableSnowflakeSqlApiOperator

with DAG(
    dag_id="durable_snowflake_sql_api",
    schedule=None,
    start_date=datetime(2026, 1, 1),
    catchup=False,
    tags=["airflow-durable", "example", "snowflake"],
) as dag:
    load_orders = DurableSnowflakeSqlApiOperator(
        task_id="load_orders",
        snowflake_conn_id="snowflake_default",
        sql=(
            "delete from analytics.orders_daily where day = '{{ ds }}'; "
            "insert into analytics.orders_daily select * from raw.orders where day = '{{ ds }}'"
        ),
        statement_count=2,
        deferrable=True,
        poll_interval=30,
        retries=3,
        retry_delay=timedelta(minutes=2),
    )

    @task
    def report(**context) -> list[str]:
        # The provider's XCom is pushed on every path: fresh, reconnected, already succeeded.
        handles = context["ti"].xcom_pull(task_ids="load_orders", key="query_ids")
        print(f"Snowflake statements {handles} finished")
        return handles

    load_orders >> report()
