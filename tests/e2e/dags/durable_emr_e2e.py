"""The EMR end-to-end DAGs: for each EMR flavour, one DAG with the durable operator and one with the
provider's own (measured side by side). Shaped by environment variables the runner sets (the emulator's
resource ids). Kept in the dags folder because ``dag.test()`` needs the file inside a configured bundle.
"""

from __future__ import annotations

import os
import uuid
from datetime import datetime, timedelta

try:
    from airflow.sdk import DAG
except ImportError:  # Airflow 2.x
    from airflow import DAG

from airflow.providers.amazon.aws.operators import emr as upstream

from airflow_durable.operators import emr as durable

ROLE = "arn:aws:iam::123456789012:role/emr-job"
common = dict(
    task_id="durable_job",
    retries=1,
    retry_delay=timedelta(seconds=1),
    deferrable=True,
    # No botocore-level retries: one injected 5xx reaches the provider's wait, which does not retry it.
    botocore_config={"retries": {"mode": "standard", "total_max_attempts": 1}},
)


class UpstreamEmrServerlessStartJobOperator(upstream.EmrServerlessStartJobOperator):
    """The provider operator as a real worker runs it: every try parses the DAG file anew, so its
    ``client_request_token`` (a uuid4 made in ``__init__``) is new on every try. ``dag.test()`` runs all
    tries on one parsed object, which would hide that; this restores it and changes nothing else."""

    def execute(self, context, event=None):
        if event is None:
            self.client_request_token = str(uuid.uuid4())
        return super().execute(context, event)


def _steps(cls: type) -> None:
    cls(
        job_flow_id=os.environ.get("E2E_EMR_CLUSTER_ID", "j-unset"),
        steps=[
            {
                "Name": "etl-{{ ds }}",
                "ActionOnFailure": "CONTINUE",
                "HadoopJarStep": {"Jar": "command-runner.jar", "Args": ["spark-submit", "s3://jobs/etl.py"]},
            }
        ],
        waiter_delay=1,
        waiter_max_attempts=30,
        **common,
    )


def _serverless(cls: type) -> None:
    cls(
        application_id=os.environ.get("E2E_EMR_APPLICATION_ID", "unset"),
        execution_role_arn=ROLE,
        job_driver={"sparkSubmit": {"entryPoint": "s3://jobs/etl.py"}},
        waiter_delay=1,
        waiter_max_attempts=30,
        **common,
    )


def _container(cls: type) -> None:
    cls(
        name="etl",
        virtual_cluster_id=os.environ.get("E2E_EMR_VIRTUAL_CLUSTER_ID", "unset"),
        execution_role_arn=ROLE,
        release_label="emr-7.1.0-latest",
        job_driver={"sparkSubmitJobDriver": {"entryPoint": "s3://jobs/etl.py"}},
        poll_interval=1,
        **common,
    )


FLAVOURS = {
    "steps": (_steps, durable.DurableEmrAddStepsOperator, upstream.EmrAddStepsOperator),
    "serverless": (
        _serverless,
        durable.DurableEmrServerlessStartJobOperator,
        UpstreamEmrServerlessStartJobOperator,
    ),
    "containers": (_container, durable.DurableEmrContainerOperator, upstream.EmrContainerOperator),
}

dags: dict[str, DAG] = {}
for flavour, (build, durable_cls, upstream_cls) in FLAVOURS.items():
    for impl, cls in (("durable", durable_cls), ("upstream", upstream_cls)):
        dag_id = f"emr_e2e_{flavour}_{impl}"
        with DAG(dag_id=dag_id, schedule=None, start_date=datetime(2026, 1, 1), catchup=False) as dag:
            build(cls)
        dags[dag_id] = dag
        globals()[dag_id] = dag
