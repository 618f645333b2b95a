# Pattern from user DAGs (see MANIFEST.json): RedshiftDataOperator told not to wait, then a @task.sensor
# describes the statement whose id the operator returned.
from __future__ import annotations

import pendulum

from airflow.providers.amazon.aws.hooks.redshift_data import RedshiftDataHook
from airflow.providers.amazon.aws.operators.redshift_data import RedshiftDataOperator
from airflow.sdk import dag, task


@dag(start_date=pendulum.datetime(2024, 1, 1, tz="UTC"), schedule="@daily", catchup=False)
def redshift_unload():
    unload = RedshiftDataOperator(  # expect: ADR005
        task_id="unload_orders",
        cluster_identifier="analytics",
        database="dev",
        db_user="etl",
        sql="UNLOAD ('select * from orders') TO 's3://bucket/orders/' IAM_ROLE default",
        wait_for_completion=False,
    )

    @task.sensor(poke_interval=30, timeout=3600)
    def statement_finished(statement_ids: list[str]) -> bool:
        client = RedshiftDataHook().conn
        status = client.describe_statement(Id=statement_ids[0])["Status"]
        if status in ("FAILED", "ABORTED"):
            raise RuntimeError(status)
        return status == "FINISHED"

    statement_finished(unload.output)


redshift_unload()
