"""Per-run progress kept in a global Variable, reached through an alias and a module attribute."""

import airflow.models as models
from airflow.sdk import Variable as V
from airflow.sdk import dag, task


@dag(schedule="@daily")
def variable_state():
    @task(retries=3)
    def load_pages(**context):
        key = f"pages_done_{context['run_id']}"
        done = int(V.get(key, default=0))  # expect: ADR001
        for page in range(done, 100):
            fetch(page)
            V.set(key, page + 1)  # expect: ADR001

    @task
    def count_rows():
        rows = int(models.Variable.get("rows_loaded", default=0))  # a counter across runs: not per-run
        models.Variable.set("rows_loaded", rows + 10)  # expect: ADR002

    load_pages() >> count_rows()


def fetch(page):
    return page


variable_state()
