# Pattern from user DAGs (see MANIFEST.json): a custom operator submits and polls in one task and pushes
# the run id for downstream tasks (ordinary XCom use; nothing is read back in the same task).
from __future__ import annotations

import time

from airflow.models import BaseOperator
from airflow.providers.databricks.hooks.databricks import DatabricksHook


class NotebookRunOperator(BaseOperator):
    def __init__(self, notebook_path: str, cluster_id: str, **kwargs):
        super().__init__(**kwargs)
        self.notebook_path = notebook_path
        self.cluster_id = cluster_id

    def execute(self, context):
        hook = DatabricksHook()
        run_id = hook.submit_run(
            {"existing_cluster_id": self.cluster_id, "notebook_task": {"notebook_path": self.notebook_path}}
        )
        context["ti"].xcom_push(key="databricks_run_id", value=run_id)
        while True:
            state = hook.get_run_state(run_id)
            if state.is_terminal:
                if not state.is_successful:
                    raise RuntimeError(state.state_message)
                return run_id
            time.sleep(30)
