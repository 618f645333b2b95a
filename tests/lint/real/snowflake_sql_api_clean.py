# Licensed under the Apache License, Version 2.0 (http://www.apache.org/licenses/LICENSE-2.0).
# Reduced from apache/airflow providers/snowflake/tests/system/snowflake/example_snowflake.py: the SQL API
# operator submits and waits (deferrable). No split.
from __future__ import annotations

from datetime import datetime

from airflow import DAG
from airflow.providers.common.sql.operators.sql import SQLExecuteQueryOperator
from airflow.providers.snowflake.operators.snowflake import SnowflakeSqlApiOperator

SNOWFLAKE_CONN_ID = "my_snowflake_conn"
SNOWFLAKE_SAMPLE_TABLE = "sample_table"
SNOWFLAKE_SQL_LIST = [f"INSERT INTO {SNOWFLAKE_SAMPLE_TABLE} VALUES ('name', 1);"]
SQL_MULTIPLE_STMTS = "; ".join(SNOWFLAKE_SQL_LIST)

with DAG(
    "example_snowflake",
    start_date=datetime(2021, 1, 1),
    default_args={"snowflake_conn_id": SNOWFLAKE_CONN_ID},
    schedule="@once",
    catchup=False,
) as dag:
    snowflake_op_sql_str = SQLExecuteQueryOperator(
        task_id="snowflake_op_sql_str", sql=f"CREATE TRANSIENT TABLE {SNOWFLAKE_SAMPLE_TABLE} (name VARCHAR)"
    )
    snowflake_sql_api_op_sql_multiple_stmt = SnowflakeSqlApiOperator(
        task_id="snowflake_op_sql_multiple_stmt",
        sql=SQL_MULTIPLE_STMTS,
        statement_count=len(SNOWFLAKE_SQL_LIST),
    )
    snowflake_sql_api_deferrable = SnowflakeSqlApiOperator(
        task_id="snowflake_sql_api_deferrable",
        sql=SQL_MULTIPLE_STMTS,
        statement_count=len(SNOWFLAKE_SQL_LIST),
        deferrable=True,
    )
    snowflake_op_sql_str >> [snowflake_sql_api_op_sql_multiple_stmt, snowflake_sql_api_deferrable]
