"""Example: a BigQuery query job whose retries never start a second copy of it.

``DurableBigQueryInsertJobOperator`` takes exactly the arguments of the provider's
``BigQueryInsertJobOperator``. Each try of the task instance submits under a job id derived from the
task instance and a generation, so a retry after a crash finds (BigQuery answers 409) or reconnects to
the job the earlier try started, on the sync path and on the deferrable path.

Connection: ``google_cloud_default``. To run it offline against the emulator::

    from airflow_durable.testing import BigQueryEmulator
    with BigQueryEmulator() as bq:
        bq.install_connection()  # BIGQUERY_EMULATOR_HOST + an anonymous google_cloud_default
        dag.test()
"""

from __future__ import annotations

from datetime import datetime, timedelta

try:
    from airflow.sdk import DAG
except ImportError:  # Airflow 2.x
    from airflow import DAG

from airflow_durable.operators.bigquery import DurableBigQueryInsertJobOperator

PROJECT = "emulator-project"  # your GCP project (the emulator accepts any)

DAILY_ROLLUP = """
SELECT DATE(created_at) AS day, COUNT(*) AS orders
FROM `shop.orders`
WHERE DATE(created_at) = '{{ ds }}'
GROUP BY day
"""

AUDIT = "SELECT COUNT(*) FROM `reporting.daily_orders` -- after {{ ti.xcom_pull('daily_rollup') }}"

with DAG(
    dag_id="durable_bigquery_insert_job",
    schedule=None,
    start_date=datetime(2026, 1, 1),
    catchup=False,
    tags=["airflow-durable", "example", "bigquery"],
    default_args={"retries": 3, "retry_delay": timedelta(minutes=1)},
) as dag:
    # Deferrable: waits in the triggerer (the provider's BigQueryInsertJobTrigger).
    rollup = DurableBigQueryInsertJobOperator(
        task_id="daily_rollup",
        configuration={
            "query": {
                "query": DAILY_ROLLUP,
                "useLegacySql": False,
                "destinationTable": {
                    "projectId": PROJECT,
                    "datasetId": "reporting",
                    "tableId": "daily_orders",
                },
                "writeDisposition": "WRITE_TRUNCATE",
            }
        },
        deferrable=True,
        poll_interval=5.0,
    )

    # Sync: polls in the worker with the provider's own job.result() loop. The returned job id
    # (XCom "return_value") is what the provider operator returns too.
    audit = DurableBigQueryInsertJobOperator(
        task_id="audit_rollup",
        configuration={
            "query": {
                # The upstream task's return value is its BigQuery job id, as with the provider operator.
                "query": AUDIT,
                "useLegacySql": False,
            }
        },
    )

    rollup >> audit
