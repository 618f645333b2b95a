"""Trigger a dbt Cloud job and wait for its run in one durable task.

``DurableDbtCloudRunJobOperator`` takes the same arguments as the provider's ``DbtCloudRunJobOperator``.
dbt Cloud has no idempotency key, so the run's cause carries a token after your ``trigger_reason``
(``"Nightly models for 2026-12-02 [afd-…-g1]"``): the run id goes to the task state store before
waiting, and a try that died between triggering and storing finds its run by that token. A retry
(worker crash, trigger error, lost deferral) reconnects to the same run instead of starting another;
a retry after the run already succeeded returns its id without triggering.

Connection: ``dbt_cloud_default`` (login = account id, password = API token, host = tenant). Runs
offline against ``airflow_durable.testing.DbtCloudEmulator`` (see ``tests/examples``). On Airflow < 3.3
it still works as one task; each try then triggers a fresh run, as upstream.
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
