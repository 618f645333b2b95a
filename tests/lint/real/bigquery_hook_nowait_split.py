# Pattern from user DAGs (see MANIFEST.json): a @task submits with BigQueryHook.insert_job(nowait=True) and
# returns the job id; a @task.sensor polls the job.
from __future__ import annotations

import pendulum

from airflow.providers.google.cloud.hooks.bigquery import BigQueryHook
from airflow.sdk import dag, task

QUERY = "CALL analytics.rebuild_sessions()"


@dag(schedule="@daily", start_date=pendulum.datetime(2024, 1, 1, tz="UTC"), catchup=False)
def sessions_rebuild():
    @task
    def start_rebuild() -> str:
        hook = BigQueryHook(gcp_conn_id="google_cloud_default", use_legacy_sql=False)
        job = hook.insert_job(
            configuration={"query": {"query": QUERY, "useLegacySql": False}},
            location="EU",
            nowait=True,
        )
        return job.job_id

    @task.sensor(poke_interval=60, timeout=4 * 3600, mode="reschedule")
    def rebuild_done(job_id: str) -> bool:
        job = BigQueryHook().get_job(job_id=job_id, location="EU")
        if job.done() and job.error_result:
            raise RuntimeError(job.error_result)
        return job.done()

    job_id = start_rebuild()  # expect: ADR005
    rebuild_done(job_id)


sessions_rebuild()
