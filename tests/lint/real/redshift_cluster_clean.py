# Licensed under the Apache License, Version 2.0 (http://www.apache.org/licenses/LICENSE-2.0).
# Reduced from apache/airflow providers/amazon/tests/system/amazon/aws/example_redshift.py: cluster
# operations sensed by cluster state, Redshift Data statements that wait. No split.
from __future__ import annotations

from datetime import datetime

from airflow.providers.amazon.aws.operators.redshift_cluster import (
    RedshiftCreateClusterOperator,
    RedshiftPauseClusterOperator,
    RedshiftResumeClusterOperator,
)
from airflow.providers.amazon.aws.operators.redshift_data import RedshiftDataOperator
from airflow.providers.amazon.aws.sensors.redshift_cluster import RedshiftClusterSensor
from airflow.providers.common.compat.sdk import DAG, chain

POLL_INTERVAL = 10

with DAG(dag_id="example_redshift", start_date=datetime(2021, 1, 1), schedule="@once", catchup=False) as dag:
    create_cluster = RedshiftCreateClusterOperator(
        task_id="create_cluster",
        cluster_identifier="cluster",
        cluster_type="single-node",
        node_type="ra3.large",
        master_username="adminuser",
        master_user_password="MyAmazonPassword1",
    )
    wait_cluster_available = RedshiftClusterSensor(
        task_id="wait_cluster_available",
        cluster_identifier="cluster",
        target_status="available",
        poke_interval=15,
    )
    pause_cluster = RedshiftPauseClusterOperator(task_id="pause_cluster", cluster_identifier="cluster")
    wait_cluster_paused = RedshiftClusterSensor(
        task_id="wait_cluster_paused", cluster_identifier="cluster", target_status="paused"
    )
    resume_cluster = RedshiftResumeClusterOperator(task_id="resume_cluster", cluster_identifier="cluster")
    create_table_redshift_data = RedshiftDataOperator(
        task_id="create_table_redshift_data",
        cluster_identifier="cluster",
        database="dev",
        db_user="adminuser",
        sql=["CREATE TABLE IF NOT EXISTS fruit (fruit_id INTEGER);"],
        poll_interval=POLL_INTERVAL,
        wait_for_completion=True,
    )
    insert_data_reuse_session = RedshiftDataOperator(
        task_id="insert_data_reuse_session",
        sql=["INSERT INTO tmp_people VALUES ( 1, 'Bob', 30);"],
        poll_interval=POLL_INTERVAL,
        wait_for_completion=True,
        session_id="{{ task_instance.xcom_pull(task_ids='create_table_redshift_data', key='session_id') }}",
    )
    chain(
        create_cluster,
        wait_cluster_available,
        pause_cluster,
        wait_cluster_paused,
        resume_cluster,
        create_table_redshift_data,
        insert_data_reuse_session,
    )
