"""A ResumableJobMixin subclass written the way Airflow 3.3.2 needs it, plus a local look-alike."""

from typing import Any

from airflow.sdk import BaseOperator, ResumableJobMixin


class GoodOperator(ResumableJobMixin, BaseOperator):
    external_id_key = "good_operator_job_id"

    def execute(self, context):
        return self.execute_resumable(context)

    def submit_job(self, context):
        return "job-1"

    def get_job_status(self, external_id, context):
        return "RUNNING"

    def is_job_active(self, status):
        return status == "RUNNING"

    def is_job_succeeded(self, status):
        return status == "SUCCEEDED"

    def poll_until_complete(self, external_id, context):
        return self.get_job_result(external_id, context)

    def get_job_result(self, external_id, context) -> Any:
        return {"id": external_id}


class NothingToReturn(ResumableJobMixin, BaseOperator):
    """get_job_result returns None too, so a reconnect returning None changes nothing."""

    def __init__(self, **kwargs):
        super().__init__(**kwargs)
        self.external_id_key = "nothing_to_return_job_id"

    def execute(self, context):
        return self.execute_resumable(context)

    def submit_job(self, context):
        return "job-1"

    def get_job_status(self, external_id, context):
        return "RUNNING"

    def is_job_active(self, status):
        return False

    def is_job_succeeded(self, status):
        return True

    def poll_until_complete(self, external_id, context):
        return None

    def get_job_result(self, external_id, context):
        return None
