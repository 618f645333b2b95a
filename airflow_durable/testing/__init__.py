"""Offline emulators of the services the durable operators talk to, for users' and our own tests.

Each emulator is a real HTTP server on 127.0.0.1 that the unmodified provider hooks and triggers
reach over their own transports. It keeps a `Ledger` of every mutating call, runs each job
through a scripted `Lifecycle`, and injects failures from a `FaultPlan`.

Importing this package imports neither Airflow nor any provider. The pytest fixtures live in
`airflow_durable.testing.pytest_plugin` (loaded automatically by pytest).
"""

from __future__ import annotations

from airflow_durable.testing._core import (
    EmulatorError,
    Fault,
    FaultPlan,
    Ledger,
    LedgerEntry,
    Lifecycle,
    LoopbackServer,
    Request,
    Response,
)
from airflow_durable.testing._tls import LoopbackCA
from airflow_durable.testing.aws import AwsEmulator, AwsJob, MotoServer
from airflow_durable.testing.batch import BatchEmulator
from airflow_durable.testing.bigquery import BigQueryEmulator, BigQueryJob
from airflow_durable.testing.databricks import DatabricksEmulator, DatabricksRun
from airflow_durable.testing.dbt_cloud import DbtCloudEmulator, DbtCloudRun
from airflow_durable.testing.emr import EmrContainersEmulator, EmrEmulator, EmrServerlessEmulator
from airflow_durable.testing.redshift_data import RedshiftDataEmulator
from airflow_durable.testing.snowflake import SnowflakeEmulator, SnowflakeRequest, SnowflakeStatement

__all__ = [
    "AwsEmulator",
    "AwsJob",
    "BatchEmulator",
    "MotoServer",
    "RedshiftDataEmulator",
    "BigQueryEmulator",
    "BigQueryJob",
    "DatabricksEmulator",
    "DatabricksRun",
    "DbtCloudEmulator",
    "DbtCloudRun",
    "EmrContainersEmulator",
    "EmrEmulator",
    "EmrServerlessEmulator",
    "EmulatorError",
    "Fault",
    "FaultPlan",
    "Ledger",
    "LedgerEntry",
    "Lifecycle",
    "LoopbackCA",
    "LoopbackServer",
    "Request",
    "Response",
    "SnowflakeEmulator",
    "SnowflakeRequest",
    "SnowflakeStatement",
]
