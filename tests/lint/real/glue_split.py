# Licensed under the Apache License, Version 2.0 (http://www.apache.org/licenses/LICENSE-2.0).
# Reduced from apache/airflow providers/amazon/tests/system/amazon/aws/example_glue.py: the Glue job is
# submitted without waiting and sensed (a system without a durable drop-in).
from __future__ import annotations

from datetime import datetime

from airflow.providers.amazon.aws.operators.glue import GlueJobOperator
from airflow.providers.amazon.aws.operators.glue_crawler import GlueCrawlerOperator
from airflow.providers.amazon.aws.sensors.glue import GlueJobSensor
from airflow.providers.amazon.aws.sensors.glue_crawler import GlueCrawlerSensor
from airflow.sdk import DAG, chain

with DAG(dag_id="example_glue", schedule="@once", start_date=datetime(2021, 1, 1), catchup=False) as dag:
    crawl_s3 = GlueCrawlerOperator(task_id="crawl_s3", config={"Name": "crawler"})
    crawl_s3.wait_for_completion = False

    wait_for_crawl = GlueCrawlerSensor(task_id="wait_for_crawl", crawler_name="crawler")
    wait_for_crawl.timeout = 500

    submit_glue_job = GlueJobOperator(  # expect: ADR005
        task_id="submit_glue_job",
        job_name="glue_job",
        script_location="s3://bucket/etl_script.py",
        s3_bucket="bucket",
        iam_role_name="role",
        create_job_kwargs={"GlueVersion": "3.0", "NumberOfWorkers": 2, "WorkerType": "G.1X"},
    )
    submit_glue_job.wait_for_completion = False

    wait_for_job = GlueJobSensor(
        task_id="wait_for_job",
        job_name="glue_job",
        run_id=submit_glue_job.output,
        verbose=True,
    )
    wait_for_job.timeout = 500

    chain(crawl_s3, wait_for_crawl, submit_glue_job, wait_for_job)
