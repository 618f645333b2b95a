"""Example: trigger a dbt Cloud job durably — a retry rejoins the run instead of starting another.

Connection ``dbt_cloud_default`` (login = account id, password = API token, host = tenant). To run it
offline against the emulator::

    from airflow_durable.testing import DbtCloudEmulator

    with DbtCloudEmulator() as dbt:
        dbt.add_job(job_id=42)
        dbt.install_connection()  # AIRFLOW_CONN_DBT_CLOUD_DEFAULT + the emulator's CA variables
        dag.test()
"""

from __future__ import annotations

from datetime import datetime, timedelta

try:
    from airflow.sdk import DAG
except ImportError:  # Airflow 2.x
    from airflow import DAG

from airflow_durable.operators.dbt_cloud import DurableDbtCloudRunJobOperator

with DAG(
    dag_id="durable_dbt_cloud_run_job",
    schedule=None,
    start_date=datetime(2026, 1, 1),
    catchup=False,
    tags=["airflow-durable", "example", "dbt-cloud"],
) as dag:
    # Same arguments as DbtCloudRunJobOperator. The run's cause becomes
    # "Nightly models for {{ ds }} [afd-…-g1]": the suffix is how a retry finds its own run.
    run_job = DurableDbtCloudRunJobOperator(
        task_id="run_job",
        job_id=42,
        trigger_reason="Nightly models for {{ ds }}",
        deferrable=True,  # waits in the provider's DbtCloudRunJobTrigger; False polls in the worker
        check_interval=10,
        timeout=3600,
        retries=3,
        retry_delay=timedelta(seconds=30),
    )
    # The run id is the return value (XCom "return_value"); "job_run_url" feeds the extra link.
