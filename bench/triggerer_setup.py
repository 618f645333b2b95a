"""The deferred task instances a real ``airflow triggerer`` picks up, written straight into the metadata DB.

Run as ``python -m bench.triggerer_setup`` (JSON spec on stdin, JSON result on stdout) in the benchmark's
``AIRFLOW_HOME``, with the emulator's connection in the environment. Per task it does what a worker and the
execution API do when a task defers, without starting a task process per task (a 2-core machine cannot
start 1,000 of them in a benchmark's time):

1. the DAG file (``TASKS_PER_DAG`` tasks of one operator class: ours or the provider's) is parsed and synced
   to the DB like the dag-processor does (so the triggerer finds a DAG version for each task instance);
2. ``tasks / TASKS_PER_DAG`` DAG runs with their task instances (``get_or_create_dagrun``, the helper
   ``dag.test()`` uses). Many runs of a small DAG, not one run of a 1,000-task DAG: the triggerer
   deserializes the task's whole DAG for every trigger it loads (``SerializedDagModel.dag``, no cache), so
   one 1,000-task DAG makes loading quadratic (seen: over 10 minutes) and would measure only that;
3. per task instance, the operator's own ``execute()`` runs against the emulator (it submits the job and
   raises ``TaskDeferred``: ours with ``DurableOwnedTrigger`` around the provider trigger, upstream with the
   provider trigger alone), with a state store that counts what the try writes;
4. the trigger row and the task instance's deferred state are written as the execution API's
   ``ti_update_state`` does for ``TIDeferredStatePayload`` (``Trigger`` row with the serde-serialized kwargs
   as JSON, ``state=deferred``, ``trigger_id``, ``next_method``, ``next_kwargs``), after the task runner's
   ``_defer_task`` serialization.
"""

from __future__ import annotations

import json
import sys
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

DAG_ID = "bench_triggerer_scale"
TASKS_PER_DAG = 10


def dag_file(side: str, tasks: int, poll: int) -> str:
    module = (
        "airflow_durable.operators.databricks"
        if side == "ours"
        else "airflow.providers.databricks.operators.databricks"
    )
    name = "DurableDatabricksSubmitRunOperator" if side == "ours" else "DatabricksSubmitRunOperator"
    return (
        "from datetime import datetime\n"
        "from airflow.sdk import DAG\n"
        f"from {module} import {name} as Op\n"
        "JOB = {'new_cluster': {'spark_version': '15.4.x-scala2.12', 'num_workers': 1},\n"
        "       'notebook_task': {'notebook_path': '/Shared/etl'}}\n"
        f"with DAG(dag_id={DAG_ID!r}, schedule=None, start_date=datetime(2026, 1, 1)):\n"
        f"    for i in range({min(tasks, TASKS_PER_DAG)}):\n"
        f"        Op(task_id=f't{{i:04d}}', json=JOB, deferrable=True, polling_period_seconds={poll})\n"
    )


def main() -> None:
    spec = json.loads(sys.stdin.read())
    Path(spec["dags_folder"], "bench_triggerer_scale.py").write_text(
        dag_file(spec["side"], spec["tasks"], spec["poll"])
    )

    from airflow import settings
    from airflow.dag_processing.bundles.manager import DagBundlesManager
    from airflow.dag_processing.dagbag import BundleDagBag, sync_bag_to_db
    from airflow.models.dagrun import DagRun, get_or_create_dagrun
    from airflow.models.trigger import Trigger
    from airflow.sdk.exceptions import TaskDeferred
    from airflow.sdk.serde import serialize as serde_serialize
    from airflow.serialization.serialized_objects import DagSerialization
    from airflow.utils.state import TaskInstanceState
    from airflow.utils.types import DagRunTriggeredByType, DagRunType

    from tests.harness import FakeTaskInstance, MemoryStateStore

    session = settings.Session()  # type: ignore[misc]  # configured by importing airflow
    manager = DagBundlesManager()
    manager.sync_bundles_to_db(session=session)
    session.commit()
    dag = None
    for bundle in manager.get_all_dag_bundles():
        if not bundle.is_initialized:
            bundle.initialize()
        bag = BundleDagBag(dag_folder=bundle.path, bundle_path=bundle.path, bundle_name=bundle.name)
        sync_bag_to_db(bag, bundle.name, bundle.version)
        dag = bag.dags.get(DAG_ID) or dag
        errors = dict(getattr(bag, "import_errors", {}) or {})
    if dag is None:
        raise RuntimeError(f"the DAG file did not parse into {DAG_ID}: {errors}")
    scheduler_dag = DagSerialization.deserialize_dag(DagSerialization.serialize_dag(dag))
    start = datetime.now(UTC)
    tis = []
    for k in range(-(-spec["tasks"] // TASKS_PER_DAG)):
        when = start + timedelta(minutes=k)
        dr = get_or_create_dagrun(
            dag=scheduler_dag,
            run_id=DagRun.generate_run_id(run_type=DagRunType.MANUAL, logical_date=when, run_after=when),
            logical_date=when,
            data_interval=None,
            run_after=when,
            conf=None,
            triggered_by=DagRunTriggeredByType.TEST,
            triggering_user_name="bench",
            start_date=when,
            session=session,
        )
        session.commit()
        tis += sorted(dr.get_task_instances(session=session), key=lambda t: t.task_id)
    stores: list[MemoryStateStore] = []
    trigger_bytes = 0
    classpath = ""
    for ti in tis[: spec["tasks"]]:
        op = dag.get_task(ti.task_id)
        fake = FakeTaskInstance(ti.dag_id, ti.run_id, ti.task_id, op.retries or 0)
        fake.try_number = 1
        store = MemoryStateStore()
        stores.append(store)
        context: dict[str, Any] = {
            "ti": fake,
            "task_instance": fake,
            "run_id": ti.run_id,
            "task": op,
            "task_state_store": store,
        }
        try:
            op.execute(context)  # type: ignore[union-attr, arg-type]  # a plain operator; harness context
        except TaskDeferred as defer:
            # The task runner's _defer_task, then the execution API's ti_update_state (deferred).
            classpath, kwargs = defer.trigger.serialize()
            encrypted = json.dumps(serde_serialize(kwargs))
            trigger_bytes += len(encrypted)
            row = Trigger(classpath=classpath, kwargs={})
            row.encrypted_kwargs = encrypted
            session.add(row)
            session.flush()
            ti.try_number = 1
            ti.state = TaskInstanceState.DEFERRED
            ti.trigger_id = row.id
            ti.next_method = defer.method_name
            ti.next_kwargs = serde_serialize(defer.kwargs or {})
            ti.trigger_timeout = None
        else:
            raise RuntimeError(f"{ti.task_id} did not defer")
    session.commit()
    n = len(stores)
    writes = [c for s in stores for c in s.calls if c.op == "set"]
    print(
        json.dumps(
            {
                "tasks": n,
                "dag_runs": -(-n // TASKS_PER_DAG),
                "classpath": classpath,
                "rows_per_task": len({(id(s), c.key) for s in stores for c in s.calls if c.op == "set"}) / n,
                "writes_per_task": len(writes) / n,
                "reads_per_task": sum(1 for s in stores for c in s.calls if c.op == "get") / n,
                "bytes_per_task": sum(len(json.dumps(c.value)) for c in writes) / n,
                "trigger_row_bytes_per_task": trigger_bytes / n,
            }
        )
    )


if __name__ == "__main__":
    main()
