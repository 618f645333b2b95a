"""ResumableJobMixin subclasses that break (each measured on Airflow 3.3.2)."""

from typing import Any

from airflow.sdk import BaseOperator
from airflow.sdk import ResumableJobMixin as Resumable
from airflow.sdk.bases import resumablejobmixin


class _Methods:
    pass


class WrongOrder(BaseOperator, Resumable):  # expect: ADR008
    external_id_key = "wrong_order_job_id"

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


class Bypass(resumablejobmixin.ResumableJobMixin, BaseOperator):  # expect: ADR010 ADR011
    def execute(self, context):  # expect: ADR009
        job = self.submit_job(context)
        self.poll_until_complete(job, context)


class NoExecute(Resumable, BaseOperator):  # expect: ADR009
    external_id_key: str = "no_execute_job_id"

    def submit_job(self, context):
        return "job-1"

    def get_job_status(self, external_id, context):
        return "RUNNING"

    def is_job_active(self, status):
        return True

    def is_job_succeeded(self, status):
        return False

    def poll_until_complete(self, external_id, context):  # expect: ADR012
        self.log.info("waiting for %s", external_id)

    def get_job_result(self, external_id, context):
        return {"rows": 3}
