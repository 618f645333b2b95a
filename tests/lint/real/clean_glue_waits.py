# Licensed under the Apache License, Version 2.0 (http://www.apache.org/licenses/LICENSE-2.0).
# Reduced from apache/airflow providers/amazon/tests/system/amazon/aws/example_glue_data_quality.py: the
# Glue operators wait (the default). No finding.
from __future__ import annotations

from datetime import datetime

from airflow.providers.amazon.aws.operators.glue import GlueDataQualityOperator, GlueJobOperator
from airflow.sdk import DAG, chain

with DAG(dag_id="example_glue_dq", schedule="@once", start_date=datetime(2021, 1, 1), catchup=False) as dag:
    create_rule_set = GlueDataQualityOperator(
        task_id="create_rule_set",
        name="rules",
        ruleset='Rules = [ RowCount between 2 and 8 ]',
        description="basic rules",
        data_quality_ruleset_kwargs={"TargetTable": {"TableName": "t", "DatabaseName": "db"}},
    )
    run_job = GlueJobOperator(
        task_id="run_job",
        job_name="nightly",
        script_location="s3://bucket/etl.py",
        iam_role_name="role",
        deferrable=True,
    )
    chain(create_rule_set, run_job)
