# Look-alikes: a helper that writes a Variable but no task calls it (an admin script's function), and a
# setting read to decide whether to submit (configuration, not a stored job).
from airflow.decorators import task
from airflow.models import Variable
from airflow.providers.databricks.hooks.databricks import DatabricksHook


def reset_cursor():
    Variable.set("orders_cursor", "1970-01-01")


@task
def maybe_run():
    if Variable.get("export_enabled", default_var="true") == "true":
        DatabricksHook().submit_run({"tasks": []})


if __name__ == "__main__":
    reset_cursor()
