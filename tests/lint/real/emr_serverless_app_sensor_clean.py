# Licensed under the Apache License, Version 2.0 (http://www.apache.org/licenses/LICENSE-2.0).
# Reduced from apache/airflow providers/amazon/tests/system/amazon/aws/example_emr_serverless.py:
# the application is created without waiting and sensed; the job run itself waits. No split.
from __future__ import annotations

from datetime import datetime

from airflow.providers.amazon.aws.operators.emr import (
    EmrServerlessCreateApplicationOperator,
    EmrServerlessStartJobOperator,
)
from airflow.providers.amazon.aws.sensors.emr import EmrServerlessApplicationSensor
from airflow.sdk import DAG

with DAG(dag_id="emr_serverless_app_then_job", schedule=None, start_date=datetime(2024, 1, 1)) as dag:
    create_app = EmrServerlessCreateApplicationOperator(
        task_id="create_app",
        release_label="emr-6.15.0",
        job_type="SPARK",
        config={"name": "nightly"},
        wait_for_completion=False,
    )
    app_ready = EmrServerlessApplicationSensor(task_id="app_ready", application_id=create_app.output)
    run_job = EmrServerlessStartJobOperator(
        task_id="run_job",
        application_id=create_app.output,
        execution_role_arn="arn:aws:iam::123456789012:role/emr",
        job_driver={"sparkSubmit": {"entryPoint": "s3://bucket/job.py"}},
        deferrable=True,
    )
    create_app >> app_ready >> run_job
