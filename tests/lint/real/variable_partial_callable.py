# Pattern from user DAGs (see MANIFEST.json): the python_callable is a functools.partial of a function that
# takes **context; it keeps per-run progress in a Variable keyed by the logical date.
import functools
from datetime import datetime

from airflow import DAG
from airflow.models import Variable
from airflow.operators.python import PythonOperator


def export_table(table, **context):
    key = f"export_{table}_{context['ds']}_done_pages"
    done = int(Variable.get(key, default_var=0))  # expect: ADR001
    for page in range(done, 50):
        print(table, page)
        Variable.set(key, page + 1)  # expect: ADR001


with DAG("exports", start_date=datetime(2023, 1, 1), schedule_interval="@daily", catchup=False) as dag:
    for name in ("users", "orders"):
        PythonOperator(task_id=f"export_{name}", python_callable=functools.partial(export_table, name))
