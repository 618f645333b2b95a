# Pattern from user DAGs (see MANIFEST.json): EMR Serverless job that waits deferred; no sensor.
from __future__ import annotations

import pendulum

from airflow.providers.amazon.aws.operators.emr import EmrServerlessStartJobOperator
from airflow.sdk import DAG

APPLICATION_ID = "00fabc123def"
ROLE = "arn:aws:iam::123456789012:role/emr-serverless"

with DAG("spark_daily", start_date=pendulum.datetime(2024, 1, 1, tz="UTC"), schedule="@daily", catchup=False):
    EmrServerlessStartJobOperator(
        task_id="spark_daily",
        application_id=APPLICATION_ID,
        execution_role_arn=ROLE,
        job_driver={"sparkSubmit": {"entryPoint": "s3://bucket/daily.py", "entryPointArguments": ["{{ ds }}"]}},
        deferrable=True,
        retries=2,
    )
