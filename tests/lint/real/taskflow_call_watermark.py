# Pattern from user DAGs (see MANIFEST.json): a plain function made a task with task(fn) (no decorator); it
# reads a high-water id, filters on it and writes the new maximum back.
from __future__ import annotations

import pendulum

from airflow.models import Variable
from airflow.sdk import DAG, task


def load_new_events(ti=None):
    position = int(Variable.get("events_pos", default_var=0))
    events = [e for e in read_events() if e["id"] > position]
    store(events)
    if events:
        Variable.set("events_pos", max(e["id"] for e in events))  # expect: ADR002


def read_events():
    return []


def store(events):
    pass


with DAG("events_loader", start_date=pendulum.datetime(2024, 1, 1, tz="UTC"), schedule="*/10 * * * *"):
    task(load_new_events)()
