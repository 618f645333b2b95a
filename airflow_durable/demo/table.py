"""What the demo needs of each system, as data: the rest comes from `airflow_durable.catalogue`.

One row per ``--system`` the demo runs (a job kind of the catalogue), read by
`airflow_durable.demo.systems` (the backend) and `airflow_durable.demo.dag` (the DAG pair):

* ``emulator``: the emulator class in `airflow_durable.testing`; ``running``: its state script while
  the demo lets a job run (the last state is sticky until the demo finishes the job); ``success``: the
  state the demo finishes a job in;
* ``status``: the HTTP method and a substring of the logical path of the worker's status read, which
  the demo holds after the submission so it can kill the worker while the job runs; with
  ``"hold": "submit"`` (operators that defer as soon as the submit call answers) it is the submit call,
  held after it took effect;
* ``kwargs``: the operator's arguments, the same on both sides. ``{dag_id}`` in a string is replaced by
  the DAG's id (so the emulator tells the two DAGs' jobs apart); a value that is exactly ``"{job_id}"``
  is replaced by the DAG's entry in ``job_ids``;
* words: ``job_noun`` (what the system calls one job), ``cost_unit`` (what a duplicate costs),
  ``task_id``, and ``title`` where the demo says it differently from the catalogue.

Plain data, no imports: the demo imports neither Airflow nor a provider to list its systems.
"""

from __future__ import annotations

from typing import Any

__all__ = ["COMMON_KWARGS", "DEMO"]

#: Arguments every demo task gets, on both sides (``retry_delay`` in seconds).
COMMON_KWARGS: dict[str, Any] = {"deferrable": True, "retries": 2, "retry_delay": 2}
_AWS_CONN = {"aws_conn_id": "aws_default"}
_AWS = {**_AWS_CONN, "poll_interval": 1}

DEMO: dict[str, dict[str, Any]] = {
    "databricks": {
        "emulator": "airflow_durable.testing.databricks.DatabricksEmulator",
        "running": ("PENDING", "RUNNING"),
        "success": "TERMINATED:SUCCESS",
        "status": ("GET", "jobs/runs/get"),
        "job_noun": "run",
        "cost_unit": "cluster time",
        "task_id": "nightly_etl",
        "kwargs": {
            "json": {
                "run_name": "{dag_id}",
                "new_cluster": {"spark_version": "15.4.x-scala2.12", "num_workers": 8},
                "notebook_task": {"notebook_path": "/Shared/nightly_etl"},
            },
            "polling_period_seconds": 1,
            "databricks_retry_limit": 2,
            "databricks_retry_delay": 0.2,
        },
    },
    "snowflake": {
        "emulator": "airflow_durable.testing.snowflake.SnowflakeEmulator",
        "running": ("QUEUED", "RUNNING"),
        "success": "SUCCESS",
        "status": ("GET", "/api/v2/statements/"),
        "job_noun": "statement",
        "cost_unit": "warehouse time",
        "task_id": "nightly_load",
        "kwargs": {
            "snowflake_conn_id": "snowflake_default",
            "sql": "insert into analytics.orders_daily select * from raw.orders /* {dag_id} */",
            "statement_count": 1,
            "poll_interval": 1,
        },
    },
    "bigquery": {
        "emulator": "airflow_durable.testing.bigquery.BigQueryEmulator",
        "running": ("PENDING", "RUNNING"),
        "success": "DONE",
        "status": ("GET", "/jobs/"),
        "job_noun": "job",
        "cost_unit": "slot time",
        "task_id": "nightly_rollup",
        # Both sides' job ids start "airflow_<dag_id>_<task_id>": their ends tell them apart.
        "id_tail": 14,
        "kwargs": {
            "gcp_conn_id": "google_cloud_default",
            "configuration": {
                "query": {"query": "SELECT COUNT(*) FROM `shop.orders` -- {dag_id}", "useLegacySql": False}
            },
            "poll_interval": 1.0,
        },
    },
    "redshift": {
        "emulator": "airflow_durable.testing.redshift_data.RedshiftDataEmulator",
        "running": ("SUBMITTED", "STARTED"),
        "success": "FINISHED",
        "status": ("POST", "/redshift-data/DescribeStatement"),
        "job_noun": "statement",
        "cost_unit": "cluster time",
        "task_id": "nightly_load",
        "kwargs": {
            **_AWS,
            "cluster_identifier": "analytics",
            "database": "dev",
            "sql": "insert into sales select * from staging_sales /* {dag_id} */",
        },
    },
    "batch": {
        "emulator": "airflow_durable.testing.batch.BatchEmulator",
        "running": ("RUNNABLE", "RUNNING"),
        "success": "SUCCEEDED",
        "status": ("POST", "/batch/DescribeJobs"),
        "job_noun": "job",
        "cost_unit": "compute time",
        "task_id": "nightly_etl",
        # The queue and job definition are the ones the emulator creates at start.
        "kwargs": {
            **_AWS,
            "job_name": "{dag_id}",
            "job_queue": "emulator-queue",
            "job_definition": "emulator-job-def",
            "container_overrides": {"command": ["python", "etl.py"]},
        },
    },
    "emr-steps": {
        "title": "EMR",
        "emulator": "airflow_durable.testing.emr.EmrEmulator",
        "running": ("PENDING", "RUNNING"),
        "success": "COMPLETED",
        # Both operators defer right after AddJobFlowSteps answers (no status read in the worker): try 1
        # is held inside the submit call itself, once the steps exist (see DemoBackend.hold_after_submit).
        "hold": "submit",
        "status": ("POST", "/elasticmapreduce/AddJobFlowSteps"),
        "job_noun": "step",
        "cost_unit": "cluster time",
        "task_id": "nightly_spark",
        # The cluster is created (WAITING) at start; the DAG reads its id from this Variable.
        "variables": {"afd_demo_emr_cluster_id": "cluster_id"},
        "kwargs": {
            **_AWS_CONN,
            "job_flow_id": "{{ var.value.afd_demo_emr_cluster_id }}",
            "steps": [
                {
                    "Name": "{dag_id}",
                    "ActionOnFailure": "CONTINUE",
                    "HadoopJarStep": {
                        "Jar": "command-runner.jar",
                        "Args": ["spark-submit", "s3://my-bucket/jobs/etl.py"],
                    },
                }
            ],
            "waiter_delay": 1,
            "waiter_max_attempts": 600,
        },
    },
    "emr-serverless": {
        "title": "EMR Serverless",
        "emulator": "airflow_durable.testing.emr.EmrServerlessEmulator",
        "running": ("PENDING", "RUNNING"),
        "success": "SUCCESS",
        "hold": "submit",
        "status": ("POST", "/emr-serverless/StartJobRun"),
        "job_noun": "job run",
        "cost_unit": "application time",
        "task_id": "nightly_spark",
        # The application is created at start; the DAG reads its id from this Variable.
        "variables": {"afd_demo_emr_serverless_application_id": "application_id"},
        "kwargs": {
            **_AWS_CONN,
            "name": "{dag_id}",
            "application_id": "{{ var.value.afd_demo_emr_serverless_application_id }}",
            "execution_role_arn": "arn:aws:iam::123456789012:role/emr-serverless-job",
            "job_driver": {"sparkSubmit": {"entryPoint": "s3://my-bucket/jobs/etl.py"}},
            "waiter_delay": 1,
            "waiter_max_attempts": 600,
        },
    },
    "emr-eks": {
        "title": "EMR on EKS",
        "emulator": "airflow_durable.testing.emr.EmrContainersEmulator",
        "running": ("PENDING", "RUNNING"),
        "success": "COMPLETED",
        "status": ("GET", "/emr-containers/DescribeJobRun"),
        "job_noun": "job run",
        "cost_unit": "EKS cluster time",
        "task_id": "nightly_spark",
        # The virtual cluster is created at start; the DAG reads its id from this Variable.
        "variables": {"afd_demo_emr_virtual_cluster_id": "virtual_cluster_id"},
        "kwargs": {
            **_AWS,
            "name": "{dag_id}",
            "virtual_cluster_id": "{{ var.value.afd_demo_emr_virtual_cluster_id }}",
            "execution_role_arn": "arn:aws:iam::123456789012:role/emr-on-eks-job",
            "release_label": "emr-7.1.0-latest",
            "job_driver": {"sparkSubmitJobDriver": {"entryPoint": "s3://my-bucket/jobs/etl.py"}},
        },
    },
    "dbt-cloud": {
        "emulator": "airflow_durable.testing.dbt_cloud.DbtCloudEmulator",
        "running": ("QUEUED", "RUNNING"),
        "success": "SUCCESS",
        "status": ("GET", "/runs/"),
        "job_noun": "run",
        "cost_unit": "dbt Cloud run time",
        "task_id": "nightly_models",
        # Each DAG triggers its own dbt Cloud job, which the emulator defines at start.
        "job_ids": {"afd_demo_dbt_cloud_upstream": 4201, "afd_demo_dbt_cloud_durable": 4202},
        "kwargs": {
            "dbt_cloud_conn_id": "dbt_cloud_default",
            "job_id": "{job_id}",
            "trigger_reason": "nightly models ({dag_id})",
            "check_interval": 1,
            "timeout": 600,
        },
    },
}
