# Licensed under the Apache License, Version 2.0 (http://www.apache.org/licenses/LICENSE-2.0).
# Reduced from apache/airflow providers/google/tests/system/google/cloud/bigquery/example_bigquery_sensors.py:
# an insert job that waits, then sensors on the table and partition (not on the job). No split.
from __future__ import annotations

from datetime import datetime

from airflow.models.dag import DAG
from airflow.providers.google.cloud.operators.bigquery import BigQueryInsertJobOperator
from airflow.providers.google.cloud.sensors.bigquery import (
    BigQueryTableExistenceSensor,
    BigQueryTablePartitionExistenceSensor,
)

PROJECT_ID = "my-project"
DATASET_NAME = "sensors_ds"
TABLE_NAME = "partitioned_table"
PARTITION_NAME = "{{ ds_nodash }}"

with DAG("bigquery_sensors", schedule="@once", start_date=datetime(2021, 1, 1), catchup=False) as dag:
    execute_insert_query = BigQueryInsertJobOperator(
        task_id="execute_insert_query",
        configuration={"query": {"query": "INSERT INTO sensors_ds.partitioned_table VALUES (42)"}},
    )
    check_table_exists = BigQueryTableExistenceSensor(
        task_id="check_table_exists", project_id=PROJECT_ID, dataset_id=DATASET_NAME, table_id=TABLE_NAME
    )
    check_table_partition_exists = BigQueryTablePartitionExistenceSensor(
        task_id="check_table_partition_exists",
        project_id=PROJECT_ID,
        dataset_id=DATASET_NAME,
        table_id=TABLE_NAME,
        partition_id=PARTITION_NAME,
        deferrable=True,
    )
    execute_insert_query >> [check_table_exists, check_table_partition_exists]
