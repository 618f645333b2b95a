# Pattern from user DAGs (see MANIFEST.json): a cluster id handed from one task to another through a Variable.
from datetime import datetime

import boto3

from airflow import DAG
from airflow.models import Variable
from airflow.operators.python import PythonOperator


def create_cluster(ti, **kwargs):
    response = boto3.client("emr").run_job_flow(Name="nightly", Instances={"KeepJobFlowAliveWhenNoSteps": True})
    Variable.set("nightly_emr_cluster_id", response["JobFlowId"])  # expect: ADR001


def terminate_cluster(**kwargs):
    cluster_id = Variable.get("nightly_emr_cluster_id")
    boto3.client("emr").terminate_job_flows(JobFlowIds=[cluster_id])


with DAG("nightly_emr", start_date=datetime(2022, 1, 1), schedule_interval="@daily", catchup=False) as dag:
    create = PythonOperator(task_id="create_cluster", python_callable=create_cluster)
    terminate = PythonOperator(task_id="terminate_cluster", python_callable=terminate_cluster)
    create >> terminate
