# A run counter read at module level (parse time) and handed to the task that writes it back plus one: the
# value carries from one run to the next (ADR002), although the task itself never calls Variable.get.
from airflow.decorators import dag, task
from airflow.models import Variable

uid = int(Variable.get("validation_uid", 0))
version = Variable.get("model_version", "v0")


@dag(schedule="@daily")
def validator():
    @task
    def validate(uid):
        run_checks(uid)
        Variable.set("validation_uid", int(uid) + 1)  # expect: ADR002

    @task
    def name_version(**context):
        Variable.set("model_version", f"v_{context['ts_nodash']}")  # expect: ADR001

    validate(uid)
    name_version()


validator()
