"""Every provider operator in the catalogue, imported every way a DAG does it."""

import airflow.providers.amazon.aws.operators.batch as batch_ops
from airflow.providers.amazon.aws.operators.emr import (
    EmrAddStepsOperator,
    EmrContainerOperator,
    EmrServerlessStartJobOperator,
)
from airflow.providers.amazon.aws.operators.redshift_data import RedshiftDataOperator
from airflow.providers.databricks.operators.databricks import DatabricksRunNowOperator
from airflow.providers.databricks.operators.databricks import DatabricksSubmitRunOperator as Submit
from airflow.providers.dbt.cloud.operators.dbt import DbtCloudRunJobOperator
from airflow.providers.google.cloud.operators.bigquery import BigQueryInsertJobOperator
from airflow.providers.snowflake.operators.snowflake import SnowflakeSqlApiOperator
from airflow.sdk import DAG

with DAG("every_drop_in", schedule=None):
    Submit(task_id="submit", json={})  # expect: ADR007
    DatabricksRunNowOperator(task_id="run_now", job_id=1)  # expect: ADR007
    SnowflakeSqlApiOperator(task_id="snowflake", sql="select 1")  # expect: ADR007
    BigQueryInsertJobOperator(task_id="bq", configuration={})  # expect: ADR007
    RedshiftDataOperator(task_id="redshift", sql="select 1", database="dev")  # expect: ADR007
    EmrAddStepsOperator(task_id="emr_steps", job_flow_id="j-1", steps=[], wait_for_completion=True)  # expect: ADR007
    EmrServerlessStartJobOperator(task_id="emr_serverless", application_id="a", execution_role_arn="r", job_driver={})  # expect: ADR007
    EmrContainerOperator(task_id="emr_eks", virtual_cluster_id="v", execution_role_arn="r", release_label="l", job_driver={})  # expect: ADR007
    batch_ops.BatchOperator(task_id="batch", job_name="j", job_queue="q", job_definition="d")  # expect: ADR007
    DbtCloudRunJobOperator(task_id="dbt", job_id=1)  # expect: ADR007


class TunedSubmit(Submit):  # expect: ADR007
    template_fields = (*Submit.template_fields, "extra")
