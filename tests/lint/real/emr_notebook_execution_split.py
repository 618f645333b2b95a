# Licensed under the Apache License, Version 2.0 (http://www.apache.org/licenses/LICENSE-2.0).
# Reduced from apache/airflow providers/amazon/tests/system/amazon/aws/example_emr_notebook_execution.py:
# EmrStartNotebookExecutionOperator does not wait by default; a sensor waits on the execution.
from __future__ import annotations

from datetime import datetime

from airflow.providers.amazon.aws.operators.emr import (
    EmrStartNotebookExecutionOperator,
    EmrStopNotebookExecutionOperator,
)
from airflow.providers.amazon.aws.sensors.emr import EmrNotebookExecutionSensor
from airflow.sdk import DAG, chain

with DAG(dag_id="example_emr_notebook", start_date=datetime(2021, 1, 1), schedule="@once") as dag:
    start_execution = EmrStartNotebookExecutionOperator(  # expect: ADR005
        task_id="start_execution",
        editor_id="e-XXXX",
        cluster_id="j-XXXX",
        relative_path="EMR-System-Test.ipynb",
        service_role="EMR_Notebooks_DefaultRole",
    )
    notebook_execution_id_1 = start_execution.output

    wait_for_execution_start = EmrNotebookExecutionSensor(
        task_id="wait_for_execution_start",
        notebook_execution_id=notebook_execution_id_1,
        target_states={"RUNNING"},
        poke_interval=5,
    )
    stop_execution = EmrStopNotebookExecutionOperator(
        task_id="stop_execution",
        notebook_execution_id=notebook_execution_id_1,
    )
    chain(start_execution, wait_for_execution_start, stop_execution)
