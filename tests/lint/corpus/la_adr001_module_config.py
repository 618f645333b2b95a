"""Variables as configuration, a local class named Variable, and a shadowed name: none is task state."""

from airflow.sdk import Variable, dag, task

# Read once for configuration at parse time: ruff's AIR003 has an opinion on this, we do not.
ENVIRONMENT = Variable.get("environment", default="dev")


class Cache:
    """A local helper that happens to have get/set methods."""

    def get(self, key):
        return None

    def set(self, key, value):
        return None


@dag(schedule=None)
def module_config():
    @task
    def notify():
        # A constant setting read at run time (the recommended place), never written by the task.
        channel = Variable.get("slack_channel")
        return channel

    @task
    def local_variable_class():
        class Variable:  # shadows the import inside this function only
            @staticmethod
            def get(key):
                return key

            @staticmethod
            def set(key, value):
                return None

        Variable.set("progress", Variable.get("progress"))

    @task
    def parameter_named_variable(Variable=Cache()):  # noqa: N803 - the shadowing is the point
        Variable.set("progress", 1)

    notify() >> local_variable_class() >> parameter_named_variable()


module_config()
