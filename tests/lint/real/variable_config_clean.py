# Pattern from user DAGs (see MANIFEST.json): Variables as configuration, read at run time and never written.
from __future__ import annotations

import pendulum

from airflow.sdk import Variable, dag, task


@dag(schedule="@daily", start_date=pendulum.datetime(2024, 1, 1, tz="UTC"), catchup=False)
def config_reader():
    @task
    def notify(**context):
        channel = Variable.get("slack_channel", default="#data")
        threshold = int(Variable.get("row_threshold", default="1000"))
        settings = Variable.get("pipeline_settings", deserialize_json=True)
        if settings.get("dry_run"):
            return
        print(channel, threshold, context["ds"])

    notify()


config_reader()
