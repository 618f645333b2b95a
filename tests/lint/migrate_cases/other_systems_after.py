"""One DAG per remaining system. Their durable modules land later, so this golden is only parsed and
its imports checked (see test_migrate.py); the Databricks case is imported for real."""

import airflow.providers.amazon.aws.operators.batch
from airflow_durable.operators.batch import DurableBatchOperator
from airflow.providers.amazon.aws.operators.emr import (
    EmrCreateJobFlowOperator,  # no durable drop-in: stays
)
from airflow_durable.operators.emr import (
    DurableEmrAddStepsOperator,
    DurableEmrContainerOperator,
    DurableEmrServerlessStartJobOperator,
)
from airflow_durable.operators.redshift import DurableRedshiftDataOperator as Redshift
from airflow_durable.operators.dbt_cloud import DurableDbtCloudRunJobOperator
from airflow_durable.operators.bigquery import DurableBigQueryInsertJobOperator
from airflow_durable.operators.snowflake import DurableSnowflakeSqlApiOperator
from airflow.sdk import DAG

with DAG("migrate_other_systems", schedule=None):
    snowflake = DurableSnowflakeSqlApiOperator(task_id="snowflake", sql="call refresh()", statement_count=1)
    bigquery = DurableBigQueryInsertJobOperator(task_id="bq", configuration={"query": {"query": "select 1"}})
    redshift = Redshift(task_id="redshift", sql="vacuum", database="dev")
    cluster = EmrCreateJobFlowOperator(task_id="cluster")
    steps = DurableEmrAddStepsOperator(task_id="steps", job_flow_id=cluster.output, steps=[], wait_for_completion=True)
    serverless = DurableEmrServerlessStartJobOperator(
        task_id="serverless", application_id="app", execution_role_arn="arn", job_driver={}
    )
    eks = DurableEmrContainerOperator(
        task_id="eks", virtual_cluster_id="vc", execution_role_arn="arn", release_label="emr-7", job_driver={}
    )
    batch = DurableBatchOperator(
        task_id="batch", job_name="j", job_queue="q", job_definition="d"
    )
    dbt = DurableDbtCloudRunJobOperator(task_id="dbt", job_id=1)
    [snowflake, bigquery, redshift] >> cluster >> steps >> [serverless, eks, batch, dbt]
