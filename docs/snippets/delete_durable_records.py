"""Delete the airflow-durable records that ``airflow-durable jobs --format json`` listed.

Usage: ``python delete_durable_records.py durable-records.json``. The API's URL and a bearer token (a JWT)
come from ``AIRFLOW_DURABLE_API_URL`` and ``AIRFLOW_DURABLE_API_TOKEN``, as for ``airflow-durable jobs``.
"""

from __future__ import annotations

import json
import os
import sys
from urllib.parse import quote

import httpx

# A task instance in one of these states (or in none yet: cleared, not started) may still reach its job
# through the record: a try that finds no record submits a new job.
IN_FLIGHT = {
    None,
    "scheduled",
    "queued",
    "running",
    "deferred",
    "up_for_retry",
    "up_for_reschedule",
    "restarting",
}


def main(path: str) -> int:
    with open(path) as f:
        rows = json.load(f)
    headers = {"Authorization": f"Bearer {os.environ['AIRFLOW_DURABLE_API_TOKEN']}"}
    with httpx.Client(base_url=os.environ["AIRFLOW_DURABLE_API_URL"], headers=headers, timeout=30) as api:
        for row in rows:
            where = f"{row['dag_id']}/{row['run_id']}/{row['task_id']}[{row['map_index']}] {row['key']}"
            if row["source"] != "record":  # an earlier generation's job, or a record already gone
                continue
            if row["ti_state"] in IN_FLIGHT:
                print(f"kept {where}: the task is {row['ti_state'] or 'not started'}")
                continue
            dag, run, task, key = (
                quote(str(row[k]), safe="") for k in ("dag_id", "run_id", "task_id", "key")
            )
            url = f"/api/v2/dags/{dag}/dagRuns/{run}/taskInstances/{task}/state-store/{key}"
            api.delete(url, params={"map_index": row["map_index"]}).raise_for_status()
            print(f"deleted {where}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1]))
