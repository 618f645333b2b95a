# Pattern from user DAGs (see MANIFEST.json): the classic "last sync time" Variable, set to a naive utcnow().
from datetime import datetime, timedelta

from airflow import DAG
from airflow.models import Variable
from airflow.operators.python import PythonOperator


def pull_api_changes(**context):
    last_sync = Variable.get("hubspot_last_sync_time", default_var=None)
    since = datetime.fromisoformat(last_sync) if last_sync else datetime.utcnow() - timedelta(days=1)
    print("fetching changes since", since)
    Variable.set("hubspot_last_sync_time", datetime.utcnow().isoformat())  # expect: ADR002 ADR014


dag = DAG("hubspot_sync", start_date=datetime(2021, 1, 1), schedule_interval="@hourly", catchup=False)
PythonOperator(task_id="pull_api_changes", python_callable=pull_api_changes, dag=dag)
