"""One DAG per remaining system. Their durable modules land later, so this golden is only parsed and
its imports checked (see test_migrate.py); the Databricks case is imported for real."""

import airflow.providers.amazon.aws.operators.batch
from airflow.providers.amazon.aws.operators.emr import (
    EmrAddStepsOperator,
    EmrContainerOperator,
    EmrCreateJobFlowOperator,  # no durable drop-in: stays
    EmrServerlessStartJobOperator,
)
from airflow.providers.amazon.aws.operators.redshift_data import RedshiftDataOperator as Redshift
from airflow.providers.dbt.cloud.operators.dbt import DbtCloudRunJobOperator
from airflow.providers.google.cloud.operators.bigquery import BigQueryInsertJobOperator
from airflow.providers.snowflake.operators.snowflake import SnowflakeSqlApiOperator
from airflow.sdk import DAG

with DAG("migrate_other_systems", schedule=None):
    snowflake = SnowflakeSqlApiOperator(task_id="snowflake", sql="call refresh()", statement_count=1)
    bigquery = BigQueryInsertJobOperator(task_id="bq", configuration={"query": {"query": "select 1"}})
    redshift = Redshift(task_id="redshift", sql="vacuum", database="dev")
    cluster = EmrCreateJobFlowOperator(task_id="cluster")
    steps = EmrAddStepsOperator(task_id="steps", job_flow_id=cluster.output, steps=[], wait_for_completion=True)
    serverless = EmrServerlessStartJobOperator(
        task_id="serverless", application_id="app", execution_role_arn="arn", job_driver={}
    )
    eks = EmrContainerOperator(
        task_id="eks", virtual_cluster_id="vc", execution_role_arn="arn", release_label="emr-7", job_driver={}
    )
    batch = airflow.providers.amazon.aws.operators.batch.BatchOperator(
        task_id="batch", job_name="j", job_queue="q", job_definition="d"
    )
    dbt = DbtCloudRunJobOperator(task_id="dbt", job_id=1)
    [snowflake, bigquery, redshift] >> cluster >> steps >> [serverless, eks, batch, dbt]
