# Licensed under the Apache License, Version 2.0 (http://www.apache.org/licenses/LICENSE-2.0).
# Reduced from apache/airflow providers/google/tests/system/google/cloud/bigquery/example_bigquery_to_gcs.py.
from __future__ import annotations

from datetime import datetime

from airflow.models.dag import DAG
from airflow.providers.google.cloud.operators.bigquery import (
    BigQueryCreateEmptyDatasetOperator,
    BigQueryCreateTableOperator,
)
from airflow.providers.google.cloud.transfers.bigquery_to_gcs import BigQueryToGCSOperator

with DAG("bigquery_to_gcs", schedule="@once", start_date=datetime(2021, 1, 1), catchup=False) as dag:
    create_dataset = BigQueryCreateEmptyDatasetOperator(task_id="create_dataset", dataset_id="ds")
    create_table = BigQueryCreateTableOperator(
        task_id="create_table", dataset_id="ds", table_id="t", table_resource={"schema": {"fields": []}}
    )
    bigquery_to_gcs = BigQueryToGCSOperator(
        task_id="bigquery_to_gcs",
        source_project_dataset_table="ds.t",
        destination_cloud_storage_uris=["gs://bucket/export-bigquery.csv"],
    )
    create_dataset >> create_table >> bigquery_to_gcs
