"""A project-local class that happens to be called ResumableJobMixin: not Airflow's, not flagged."""

from airflow.sdk import BaseOperator


class ResumableJobMixin:
    def resume(self):
        return None


class LocalResumable(BaseOperator, ResumableJobMixin):
    def execute(self, context):
        return self.resume()
