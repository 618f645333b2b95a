"""Run SQL through the Redshift Data API and wait for it in one durable task.

``DurableRedshiftDataOperator`` takes the same arguments as the provider's ``RedshiftDataOperator``.
The statement carries Redshift Data's ``ClientToken``, derived from the task instance, so a retry after
a crash between submitting and recording the statement id gets the statement already running instead
of running the SQL twice. With ``deferrable=True`` it stores the statement id in the task state store,
then waits in the provider's ``RedshiftDataTrigger``; a retry reconnects to the same statement, and a
retry after the statement finished returns its result without running the SQL again.

Connection: ``aws_default``. Runs offline against ``airflow_durable.testing.RedshiftDataEmulator``. On
Airflow < 3.3 it still works as one task; each try then submits fresh.
"""

from __future__ import annotations

from datetime import datetime, timedelta

try:
    from airflow.sdk import DAG, task
except ImportError:  # Airflow 2.x
    from airflow import DAG
    from airflow.decorators import task

from airflow_durable.operators.redshift import DurableRedshiftDataOperator

with DAG(
    dag_id="durable_redshift_data",
    schedule=None,
    start_date=datetime(2026, 1, 1),
    catchup=False,
    tags=["airflow-durable", "example", "redshift"],
) as dag:
    load_sales = DurableRedshiftDataOperator(
        task_id="load_sales",
        aws_conn_id="aws_default",
        cluster_identifier="analytics",
        database="dev",
        # A list runs as one BatchExecuteStatement; the return value lists its sub-statement ids.
        sql=[
            "delete from sales where day = '{{ ds }}'",
            "insert into sales select * from staging_sales where day = '{{ ds }}'",
        ],
        deferrable=True,
        poll_interval=10,
        retries=3,
        retry_delay=timedelta(minutes=2),
    )

    @task
    def report(statement_ids: list[str]) -> int:
        # The provider's return value on every path: fresh, reconnected, already finished.
        print(f"Redshift statements finished: {statement_ids}")
        return len(statement_ids)

    report(load_sales.output)
