# Licensed under the Apache License, Version 2.0 (http://www.apache.org/licenses/LICENSE-2.0).
# Reduced from apache/airflow providers/google/tests/system/google/cloud/bigquery/
# example_bigquery_queries_async.py: deferrable insert jobs, no sensor on a job.
from __future__ import annotations

from datetime import datetime, timedelta

from airflow.models.dag import DAG
from airflow.providers.google.cloud.operators.bigquery import (
    BigQueryCheckOperator,
    BigQueryGetDataOperator,
    BigQueryInsertJobOperator,
)
from airflow.providers.standard.operators.bash import BashOperator

LOCATION = "us"
default_args = {"execution_timeout": timedelta(hours=6), "retries": 2, "retry_delay": timedelta(seconds=60)}

with DAG(
    dag_id="bigquery_queries_async",
    schedule="@once",
    start_date=datetime(2022, 1, 1),
    catchup=False,
    default_args=default_args,
) as dag:
    insert_query_job = BigQueryInsertJobOperator(
        task_id="insert_query_job",
        configuration={"query": {"query": "INSERT INTO ds.t VALUES (42)", "useLegacySql": False}},
        location=LOCATION,
        deferrable=True,
    )
    get_data = BigQueryGetDataOperator(
        task_id="get_data",
        dataset_id="ds",
        table_id="t",
        max_results=10,
        location=LOCATION,
        deferrable=True,
    )
    get_data_result = BashOperator(task_id="get_data_result", bash_command=f"echo {get_data.output}")
    check_count = BigQueryCheckOperator(
        task_id="check_count",
        sql="SELECT COUNT(*) FROM ds.t",
        use_legacy_sql=False,
        location=LOCATION,
        deferrable=True,
    )
    insert_query_job >> get_data >> get_data_result
    insert_query_job >> check_count
