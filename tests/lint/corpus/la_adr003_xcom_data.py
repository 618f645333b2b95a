"""XCom used for what it is for: passing data (even an id) from one task to the next."""

from airflow.sdk import dag, task


@dag(schedule=None)
def xcom_data():
    @task
    def extract(**context):
        context["ti"].xcom_push(key="row_count", value=42)
        context["ti"].xcom_push(key="batch_job_id", value="job-7")  # read by 'report', not by a retry
        return [1, 2, 3]

    @task
    def report(**context):
        rows = context["ti"].xcom_pull(task_ids="extract", key="row_count")
        job = context["ti"].xcom_pull(task_ids="extract", key="batch_job_id")
        return f"{job}: {rows}"

    extract() >> report()


xcom_data()
