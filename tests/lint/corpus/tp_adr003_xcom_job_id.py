"""An operator that hides its job id in XCom hoping the next try will find it there."""

from airflow.sdk import BaseOperator, dag


class SparkSubmitViaRest(BaseOperator):
    def execute(self, context):
        ti = context["ti"]
        job_id = ti.xcom_pull(task_ids=self.task_id, key="spark_job_id")
        if job_id is None:  # expect: ADR004
            job_id = self.client().submit_job(self.payload)
            ti.xcom_push(key="spark_job_id", value=job_id)  # expect: ADR003
        return self.client().wait(job_id)

    def client(self):
        raise NotImplementedError


@dag(schedule=None)
def xcom_job_id():
    SparkSubmitViaRest(task_id="spark")


xcom_job_id()
