# Pattern from user DAGs (see MANIFEST.json): a self-triggering backfill DAG advances a cursor kept in a
# Variable; each run processes one batch and triggers the next run.
from __future__ import annotations

import pendulum

from airflow.models import Variable
from airflow.providers.standard.operators.trigger_dagrun import TriggerDagRunOperator
from airflow.sdk import dag, task

BATCH = 10_000


@dag(schedule=None, start_date=pendulum.datetime(2024, 1, 1, tz="UTC"), catchup=False)
def backfill_events():
    @task.short_circuit
    def process_batch() -> bool:
        start = int(Variable.get("backfill_events_position", default_var="0"))
        rows = fetch_rows(start, BATCH)
        load(rows)
        Variable.set("backfill_events_position", str(start + len(rows)))  # expect: ADR002
        return len(rows) == BATCH

    again = TriggerDagRunOperator(task_id="trigger_next_batch", trigger_dag_id="backfill_events")
    process_batch() >> again


def fetch_rows(start, size):
    return []


def load(rows):
    pass


backfill_events()
