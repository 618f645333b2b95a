# Licensed under the Apache License, Version 2.0 (http://www.apache.org/licenses/LICENSE-2.0).
# Reduced from astronomer/astronomer-providers astronomer/providers/amazon/aws/example_dags/
# example_redshift_data.py: RedshiftDataOperatorAsync waits (deferred). No finding.
from datetime import datetime, timedelta

from airflow import DAG

from astronomer.providers.amazon.aws.operators.redshift_data import RedshiftDataOperatorAsync

default_args = {"execution_timeout": timedelta(hours=6), "retries": 2}

with DAG(
    dag_id="example_async_redshift_data",
    start_date=datetime(2022, 1, 1),
    schedule=None,
    catchup=False,
    default_args=default_args,
) as dag:
    task_create_table = RedshiftDataOperatorAsync(
        task_id="task_create_table",
        sql="CREATE TABLE IF NOT EXISTS fruit (fruit_id INTEGER, name VARCHAR NOT NULL);",
        cluster_identifier="cluster",
        database="dev",
        db_user="awsuser",
        poll_interval=5,
    )
    task_insert_data = RedshiftDataOperatorAsync(
        task_id="task_insert_data",
        sql="INSERT INTO fruit VALUES ( 1, 'Banana');",
        cluster_identifier="cluster",
        database="dev",
        db_user="awsuser",
        poll_interval=5,
    )
    task_create_table >> task_insert_data
