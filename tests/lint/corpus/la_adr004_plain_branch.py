"""Branches around a submit that are about configuration, not about a stored id."""

from airflow.sdk import Variable, dag, task
from airflow.providers.databricks.hooks.databricks import DatabricksHook


@dag(schedule=None)
def plain_branch():
    @task
    def maybe_submit():
        if Variable.get("dry_run", default="false") == "true":
            return None
        return DatabricksHook().submit_run({"tasks": []})

    @task
    def retry_aware(**context):
        if context["ti"].try_number > 1:
            print("retrying")
        return DatabricksHook().submit_run({"tasks": []})

    maybe_submit() >> retry_aware()


plain_branch()
