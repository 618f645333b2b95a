"""End the jobs no task will ever end, every five minutes: the airflow-durable reaper.

A task marked failed (or success) while its job still runs, before any triggerer picked its trigger up
or while it was ``up_for_retry`` or ``queued``, leaves that job running with nothing to cancel it. This DAG
finds such jobs as ``airflow-durable orphans`` does and cancels them; a job whose task instance is
running, deferred, queued, up for retry or cleared is never touched.

Connection ``airflow_durable_api``: the Airflow REST API as the workers reach it and a user allowed to
read the DAGs, e.g. ``AIRFLOW_CONN_AIRFLOW_DURABLE_API='http://reaper:<password>@airflow-apiserver:8080'``.
Start with ``dry_run=True`` (or trigger a run with ``{"dry_run": true}``) and read the task's log.
"""

from __future__ import annotations

from datetime import timedelta

from airflow_durable.reaper import durable_reaper_dag

dag = durable_reaper_dag(
    "maintenance_reaper",
    schedule=timedelta(minutes=5),
    api_conn_id="airflow_durable_api",
    dry_run=False,
)
