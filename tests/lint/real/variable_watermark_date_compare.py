# Pattern from user DAGs (see MANIFEST.json): a date watermark under a name without any watermark word.
from __future__ import annotations

import pendulum

from airflow.sdk import Variable, dag, task


@dag(schedule="@hourly", start_date=pendulum.datetime(2024, 1, 1, tz="UTC"), catchup=False)
def crm_contacts():
    @task
    def extract_changed_contacts():
        loaded_until = Variable.get("crm_contacts_loaded_until", default="2020-01-01T00:00:00+00:00")
        contacts = [c for c in list_contacts() if c["updated_at"] > loaded_until]
        write(contacts)
        newest = max((c["updated_at"] for c in contacts), default=loaded_until)
        Variable.set("crm_contacts_loaded_until", newest)  # expect: ADR002

    extract_changed_contacts()


def list_contacts():
    return []


def write(rows):
    pass


crm_contacts()
