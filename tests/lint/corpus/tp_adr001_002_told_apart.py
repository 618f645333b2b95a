# ADR001 and ADR002 told apart by what the Variable holds and when it is read, not by its name alone.
from airflow.decorators import task
from airflow.models import Variable
from airflow.providers.databricks.hooks.databricks import DatabricksHook


@task
def load_batches():
    last = int(Variable.get("last_batch_id", default_var=0))
    newest = process_after(last)
    Variable.set("last_batch_id", newest)  # expect: ADR002


@task(retries=3)
def run_export():
    hook = DatabricksHook()
    current = Variable.get("nightly_export", default_var=None)  # expect: ADR001
    if current:  # expect: ADR004
        hook.get_run_state(current)
    else:
        current = hook.submit_run({"tasks": []})
        Variable.set("nightly_export", current)  # expect: ADR001


def _save_cursor(value):
    Variable.set("orders_cursor", value)  # expect: ADR002


@task
def sync_orders():
    since = Variable.get("orders_cursor")
    _save_cursor(fetch_since(since))
