# Pattern from user DAGs (see MANIFEST.json): submit statements through SnowflakeSqlApiHook in a @task, poll
# their status in a @task.sensor.
from __future__ import annotations

import pendulum

from airflow.providers.snowflake.hooks.snowflake_sql_api import SnowflakeSqlApiHook
from airflow.sdk import dag, task

SQL = "CALL reporting.refresh_all();"


@dag(schedule="@daily", start_date=pendulum.datetime(2024, 1, 1, tz="UTC"), catchup=False)
def snowflake_refresh():
    @task
    def submit_refresh() -> list[str]:
        hook = SnowflakeSqlApiHook(snowflake_conn_id="snowflake_default")
        return hook.execute_query(SQL, statement_count=1)

    @task.sensor(poke_interval=30, timeout=7200)
    def refresh_done(query_ids: list[str]) -> bool:
        hook = SnowflakeSqlApiHook(snowflake_conn_id="snowflake_default")
        statuses = [hook.get_sql_api_query_status(q)["status"] for q in query_ids]
        if "error" in statuses:
            raise RuntimeError(statuses)
        return all(s == "success" for s in statuses)

    refresh_done(submit_refresh())  # expect: ADR005


snowflake_refresh()
