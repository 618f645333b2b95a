# Licensed under the Apache License, Version 2.0 (http://www.apache.org/licenses/LICENSE-2.0).
# Reduced from apache/airflow providers/amazon/tests/system/amazon/aws/example_athena.py: the query
# operator waits; the sensor re-checks the same query after it finished (a double wait, not a split).
from __future__ import annotations

from datetime import datetime

from airflow.providers.amazon.aws.operators.athena import AthenaOperator
from airflow.providers.amazon.aws.sensors.athena import AthenaSensor
from airflow.sdk import DAG, chain

with DAG(dag_id="example_athena", schedule="@once", start_date=datetime(2021, 1, 1), catchup=False) as dag:
    read_table = AthenaOperator(
        task_id="read_table",
        query="SELECT * from db.tbl",
        database="db",
        output_location="s3://bucket/",
    )
    await_query = AthenaSensor(
        task_id="await_query",
        query_execution_id=read_table.output,
    )
    chain(read_table, await_query)
