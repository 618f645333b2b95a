"""The recommended shape: the watermark lives on the asset, in UTC, as a JSON string."""

from datetime import datetime, timezone

from airflow.sdk import Asset, Variable, dag, task

ORDERS = Asset("s3://lake/orders")


@dag(schedule="@hourly")
def asset_watermark():
    @task(outlets=[ORDERS])
    def incremental_load(**context):
        store = context["asset_state_store"][ORDERS]
        since = store.get("last_processed_at", default="1970-01-01T00:00:00+00:00")
        bucket = Variable.get("orders_bucket")  # configuration, not state
        rows = extract(bucket, since)
        store.set("last_processed_at", datetime.now(timezone.utc).isoformat())
        return len(rows)

    incremental_load()


def extract(bucket, since):
    return [bucket, since]


asset_watermark()
