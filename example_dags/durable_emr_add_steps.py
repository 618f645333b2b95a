"""Add Spark steps to a running EMR cluster and wait for them in one durable task.

``DurableEmrAddStepsOperator`` takes the same arguments as the provider's ``EmrAddStepsOperator``.
``AddJobFlowSteps`` has no idempotency token, so each step's name carries a readable marker
(``"nightly-etl-2026-01-01 [afd-… step 1/1]"``) and a retry that finds a previous try interrupted while
adding looks the steps up on the cluster (``ListSteps``) instead of adding them again. With
``deferrable=True`` it waits in the provider's ``EmrAddStepsTrigger``; a retry reconnects to the same
steps, and a retry after they completed returns their ids without adding anything.

Connection: ``aws_default``. The cluster is found by name (``job_flow_name``). Runs offline against
``airflow_durable.testing.emr.EmrEmulator`` (see ``tests/examples``). On Airflow < 3.3 it still works
as one task; each try then adds the steps again.
"""

from __future__ import annotations

from datetime import datetime, timedelta

try:
    from airflow.sdk import DAG, task
except ImportError:  # Airflow 2.x
    from airflow import DAG
    from airflow.decorators import task

from airflow_durable.operators.emr import DurableEmrAddStepsOperator

with DAG(
    dag_id="durable_emr_add_steps",
    schedule=None,
    start_date=datetime(2026, 1, 1),
    catchup=False,
    tags=["airflow-durable", "example", "emr"],
) as dag:
    nightly_etl = DurableEmrAddStepsOperator(
        task_id="nightly_etl",
        aws_conn_id="aws_default",
        job_flow_name="durable-emr-cluster",
        cluster_states=["WAITING", "RUNNING"],
        steps=[
            {
                "Name": "nightly-etl-{{ ds }}",
                "ActionOnFailure": "CONTINUE",
                "HadoopJarStep": {
                    "Jar": "command-runner.jar",
                    "Args": ["spark-submit", "s3://my-bucket/jobs/etl.py", "--date", "{{ ds }}"],
                },
            }
        ],
        deferrable=True,
        retries=3,
        retry_delay=timedelta(minutes=2),
    )

    @task
    def publish(step_ids: list[str], **context) -> str:
        # The provider's return value (the step ids) and its job_flow_id XCom, on every path.
        cluster_id = context["ti"].xcom_pull(task_ids="nightly_etl", key="job_flow_id")
        print(f"EMR steps {step_ids} finished on cluster {cluster_id}")
        return cluster_id

    publish(nightly_etl.output)
