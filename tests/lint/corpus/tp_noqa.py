"""Inline suppressions: the marked lines are reported, the suppressed ones are not."""

from airflow.sdk import Variable, dag, task


@dag(schedule=None)
def noqa_dag():
    @task
    def counters():
        Variable.set("counter_a", 1)  # noqa: ADR001
        Variable.set("counter_b", 2)  # noqa: ADR005 (a different code does not suppress)  # expect: ADR001
        Variable.set("counter_c", 3)  # noqa
        text = "Variable.set('in_a_string', 1)  # noqa: ADR001"
        return text

    counters()


noqa_dag()
