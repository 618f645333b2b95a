"""State-store writes that fail at run time or silently corrupt a watermark."""

import datetime as dt
from datetime import datetime

from airflow.sdk import Asset, dag, task

PARTITIONS = Asset("s3://lake/partitions")


@dag(schedule="@daily")
def state_values():
    @task(retries=2)
    def checkpoint(task_state_store, logical_date):
        task_state_store.set("cursor", None)  # expect: ADR013
        task_state_store.set("seen", {1, 2, 3})  # expect: ADR013
        task_state_store.set("started", logical_date)  # expect: ADR013
        now = datetime.utcnow()
        task_state_store.set("started_at", now)  # expect: ADR013 ADR014

    @task(outlets=[PARTITIONS])
    def watermark(**context):
        store = context["asset_state_store"]
        store.set("last_processed_at", dt.datetime.utcnow().isoformat())  # expect: ADR014
        store.set("loaded_at", str(datetime.now()))  # expect: ADR014

    @task(outlets=[PARTITIONS])
    def load_partition(partition: str, **context):
        context["asset_state_store"][PARTITIONS].set("watermark", partition)  # expect: ADR015

    checkpoint() >> watermark() >> load_partition.expand(partition=["a", "b", "c"])


state_values()
