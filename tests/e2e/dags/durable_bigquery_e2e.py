"""End-to-end DAGs for BigQuery: one task each, durable or upstream, deferrable or sync.

Kept in the dags folder because ``dag.test()`` needs the file inside a configured bundle. The runner
(``tests/e2e/run_bigquery_scenario.py``) points the google connection at the emulator.
"""

from __future__ import annotations

from datetime import datetime, timedelta

try:
    from airflow.sdk import DAG
except ImportError:  # Airflow 2.x
    from airflow import DAG

from airflow.providers.google.cloud.operators.bigquery import BigQueryInsertJobOperator

from airflow_durable.operators.bigquery import DurableBigQueryInsertJobOperator

CONFIGURATION = {
    "query": {
        "query": "SELECT '{{ ds }}' AS day",
        "useLegacySql": False,
        "destinationTable": {"projectId": "emulator-project", "datasetId": "ds", "tableId": "daily"},
    }
}

VARIANTS = {
    "durable_deferrable": (DurableBigQueryInsertJobOperator, True),
    "durable_sync": (DurableBigQueryInsertJobOperator, False),
    "upstream_deferrable": (BigQueryInsertJobOperator, True),
    "upstream_sync": (BigQueryInsertJobOperator, False),
}

for variant, (operator_class, deferrable) in VARIANTS.items():
    with DAG(
        dag_id=f"bigquery_e2e_{variant}",
        schedule=None,
        start_date=datetime(2026, 1, 1),
        catchup=False,
        tags=["airflow-durable", "e2e"],
    ) as dag:
        operator_class(
            task_id="insert_job",
            configuration=CONFIGURATION,
            deferrable=deferrable,
            poll_interval=0.5,
            retries=2,
            retry_delay=timedelta(seconds=1),
        )
    globals()[f"dag_{variant}"] = dag
