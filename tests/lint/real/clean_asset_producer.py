# Licensed under the Apache License, Version 2.0 (http://www.apache.org/licenses/LICENSE-2.0).
# Reduced from apache/airflow airflow-core/src/airflow/example_dags/example_assets.py. No finding.
from __future__ import annotations

import pendulum

from airflow.providers.standard.operators.bash import BashOperator
from airflow.sdk import DAG, Asset

dag1_asset = Asset("s3://dag1/output_1.txt", extra={"hi": "bye"})

with DAG(
    dag_id="asset_produces_1",
    catchup=False,
    start_date=pendulum.datetime(2021, 1, 1, tz="UTC"),
    schedule="@daily",
):
    BashOperator(outlets=[dag1_asset], task_id="producing_task_1", bash_command="sleep 5")

with DAG(dag_id="asset_consumes_1", catchup=False, start_date=pendulum.datetime(2021, 1, 1, tz="UTC"),
         schedule=[dag1_asset]):
    BashOperator(task_id="consuming_1", bash_command="sleep 5")
