"""Test your DAGs offline: the real provider hook and trigger talk to airflow-durable's emulator.

Run it like any pytest file, with an AIRFLOW_HOME whose database is migrated (``airflow db migrate``)
and ``[core] dags_folder`` pointing at your DAGs (``dag.test()`` only runs DAGs from the dags folder),
with that folder on ``sys.path`` so the DAG module imports by name.
"""

from datetime import timedelta

# Your DAG files; here, the examples shipped in example_dags/.
from durable_databricks_run_now import dag as run_now_dag
from durable_databricks_submit_run import dag as submit_run_dag


def fast(dag, **overrides):
    """Keep the DAG's production settings, but do not wait minutes in a test."""
    for task in dag.tasks:
        for name, value in overrides.items():
            if hasattr(task, name):
                setattr(task, name, value)


def test_a_retry_reconnects_instead_of_submitting_again(databricks_emulator, durable_ledger):
    # The run stays active for a while, then succeeds.
    databricks_emulator.lifecycle = ["PENDING"] * 4 + ["RUNNING"] * 3 + ["TERMINATED:SUCCESS"]
    # Right after the submit, the status API answers 503 past the hook's retries: try 1 fails.
    outage = databricks_emulator.faults.add(method="GET", path_contains="runs/get", status=503, times=2)
    fast(
        submit_run_dag,
        retry_delay=timedelta(seconds=1),
        polling_period_seconds=1,
        databricks_retry_limit=2,
        databricks_retry_delay=0.1,
    )

    dag_run = submit_run_dag.test()

    assert str(dag_run.state).endswith("success")
    assert outage.hits == 2  # the outage happened, and try 1 failed on it
    # Try 2 reconnected to the run try 1 started: one Databricks run, not two.
    assert len(durable_ledger.submissions("databricks")) == 1


def test_a_lost_submit_response_does_not_start_a_second_run(databricks_emulator, durable_ledger):
    databricks_emulator.add_job(job_id=42, name="refresh-marts")
    databricks_emulator.lifecycle = ["PENDING", "RUNNING", "TERMINATED:SUCCESS"]
    # Databricks starts the run, but the response is lost (503): the hook sends run-now again.
    # It carries the same idempotency token, so Databricks answers with the run it already started.
    lost = databricks_emulator.faults.add(method="POST", path_contains="run-now", status=503, after=True)
    fast(run_now_dag, polling_period_seconds=1, databricks_retry_delay=0.1)

    dag_run = run_now_dag.test()

    assert str(dag_run.state).endswith("success")
    assert lost.hits == 1
    run_now_calls = durable_ledger.select("databricks", "run-now")
    assert [call.created for call in run_now_calls] == [True, False]  # sent twice, started once
