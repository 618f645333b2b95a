"""A watermark kept in a global Variable (airflow.models spelling, Airflow 2 style)."""

from datetime import datetime, timezone

from airflow.models import Variable
from airflow.sdk import dag, task


@dag(schedule="@hourly")
def variable_watermark():
    @task
    def incremental_load():
        since = Variable.get("orders_last_processed_at", default_var="1970-01-01T00:00:00+00:00")
        rows = extract(since)
        Variable.set("orders_last_processed_at", datetime.now(timezone.utc).isoformat())  # expect: ADR002
        return len(rows)

    @task
    def high_water_mark(**context):
        Variable.set(key="events.high_water_mark", value=str(context["data_interval_end"]))  # expect: ADR002

    incremental_load() >> high_water_mark()


def extract(since):
    return [since]


variable_watermark()
