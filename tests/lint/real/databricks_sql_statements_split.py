# Licensed under the Apache License, Version 2.0 (http://www.apache.org/licenses/LICENSE-2.0).
# Reduced from apache/airflow providers/databricks/tests/system/databricks/example_databricks_sensors.py:
# a SQL statement submitted without waiting and sensed by DatabricksSQLStatementsSensor.
from __future__ import annotations

import os
from datetime import datetime

from airflow.models.dag import DAG
from airflow.providers.databricks.operators.databricks import DatabricksSQLStatementsOperator
from airflow.providers.databricks.sensors.databricks import DatabricksSQLStatementsSensor

WAREHOUSE_ID = os.environ.get("WAREHOUSE_ID", "cf414a2206dfb397")

with DAG(dag_id="example_databricks_sensor", schedule="@daily", start_date=datetime(2021, 1, 1)) as dag:
    sql_statement = DatabricksSQLStatementsOperator(  # expect: ADR005
        task_id="sql_statement",
        databricks_conn_id="databricks_default",
        statement="select * from default.my_airflow_table",
        warehouse_id=WAREHOUSE_ID,
        wait_for_termination=False,
    )
    sql_statement_sensor = DatabricksSQLStatementsSensor(
        task_id="sql_statement_sensor_task",
        databricks_conn_id="databricks_default",
        statement_id=sql_statement.output,
        timeout=60 * 60,
    )
    sql_statement >> sql_statement_sensor
