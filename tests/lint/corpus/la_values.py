"""State-store writes done right, and set() calls on things that are not state stores."""

from datetime import datetime, timezone

from airflow.sdk import Asset, dag, task

PARTITIONS = Asset("s3://lake/partitions")


@dag(schedule="@daily")
def good_values():
    @task(retries=2)
    def checkpoint(task_state_store, logical_date):
        task_state_store.set("cursor", 0)
        task_state_store.set("seen", sorted({1, 2, 3}))
        task_state_store.set("started", logical_date.isoformat())
        task_state_store.set("started_at", datetime.now(timezone.utc).isoformat())
        cache = {}
        cache.setdefault("x", None)

    @task(outlets=[PARTITIONS])
    def load_partition(partition: str, **context):
        store = context["asset_state_store"][PARTITIONS]
        store.set(f"watermark:{partition}", datetime.now(tz=timezone.utc).isoformat())

    @task(outlets=[PARTITIONS])
    def summarise(**context):
        # Not mapped: one writer for the constant key.
        context["asset_state_store"].set("last_summary", "ok")

    checkpoint() >> load_partition.expand(partition=["a", "b"]) >> summarise()


good_values()
