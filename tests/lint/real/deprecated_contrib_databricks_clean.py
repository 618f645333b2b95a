# Pattern from Airflow 1.10-era DAGs (see MANIFEST.json): the contrib Databricks operator, which waits.
from datetime import timedelta

from airflow import DAG
from airflow.contrib.operators.databricks_operator import DatabricksSubmitRunOperator
from airflow.utils.dates import days_ago

args = {"owner": "airflow", "email": ["airflow@example.com"], "depends_on_past": False}

dag = DAG(dag_id="example_databricks_operator", default_args=args, schedule_interval="@daily",
          start_date=days_ago(2), dagrun_timeout=timedelta(minutes=60))

new_cluster = {"spark_version": "2.1.0-db3-scala2.11", "node_type_id": "r3.xlarge", "num_workers": 8}
notebook_task_params = {"new_cluster": new_cluster, "notebook_task": {"notebook_path": "/Users/a/PrepareData"}}

notebook_task = DatabricksSubmitRunOperator(task_id="notebook_task", dag=dag, json=notebook_task_params)

spark_jar_task = DatabricksSubmitRunOperator(
    task_id="spark_jar_task",
    dag=dag,
    new_cluster=new_cluster,
    spark_jar_task={"main_class_name": "com.example.ProcessData"},
    libraries=[{"jar": "dbfs:/lib/etl-0.1.jar"}],
)

notebook_task.set_downstream(spark_jar_task)
