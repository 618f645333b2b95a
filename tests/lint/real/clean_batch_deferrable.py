# Pattern from user DAGs (see MANIFEST.json): one AWS Batch job that waits deferred.
from __future__ import annotations

import pendulum

from airflow.providers.amazon.aws.operators.batch import BatchOperator
from airflow.sdk import DAG

with DAG("batch_features", start_date=pendulum.datetime(2024, 1, 1, tz="UTC"), schedule="@daily", catchup=False):
    features = BatchOperator(
        task_id="compute_features",
        job_name="features-{{ ds_nodash }}",
        job_queue="spot",
        job_definition="features:12",
        container_overrides={"command": ["python", "features.py", "{{ ds }}"]},
        deferrable=True,
        retries=3,
    )
