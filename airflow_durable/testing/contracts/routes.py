"""Which operations each emulator serves, who calls them, what is left unchecked: the fidelity page's data.

In strict mode an emulator's own operation that is not declared here is a contract violation, so this list
(and ``docs/dev/emulator-fidelity.md``, generated from it by ``python -m
airflow_durable.testing.contracts.fidelity --write``) grows with every route a provider hook starts calling.
Calls an AWS emulator forwards to another AWS service (``sts:…``, ``logs:…``) are checked against botocore's
model of that service too, without being declared one by one.
"""

from __future__ import annotations

__all__ = ["ROUTES", "SYSTEMS", "UNVALIDATED", "declared"]

HOOK = "provider hook"
TRIGGER = "provider trigger"
DURABLE = "durable operator"
TESTS = "emulator tests only"

#: ``system -> operation -> who calls it``. The operation names are the contract's own (botocore's
#: operation name, the SDK route, the discovery method id, the OpenAPI operation id).
ROUTES: dict[str, dict[str, str]] = {
    "databricks": {
        "jobs/runs/submit": f"{HOOK} (submit run)",
        "jobs/run-now": f"{HOOK} (run now)",
        "jobs/runs/get": f"{HOOK} (sync wait), {TRIGGER} (poll), {DURABLE} (decision)",
        "jobs/runs/list": f"{DURABLE} (durable_find, durable_find_all: runs by their name's marker)",
        "jobs/runs/get-output": f"{HOOK} (errors of failed tasks)",
        "jobs/runs/cancel": f"{HOOK} (on_kill), {DURABLE} (cancel)",
        "jobs/runs/cancel-all": f"{HOOK} (cancel_previous_runs)",
        "jobs/runs/repair": f"{HOOK} (repair_run)",
        "jobs/list": f"{HOOK} (find_job_id_by_name)",
        "jobs/get": f"{HOOK} (get_job)",
        "jobs/create": f"{HOOK} (create_job)",
        "jobs/update": f"{HOOK} (update_job)",
    },
    "snowflake": {
        "SubmitStatement": f"{HOOK} (execute_query), {DURABLE} (durable_find: one QUERY_HISTORY_BY_USER "
        "statement, statements by the identity in their QUERY_TAG)",
        "GetStatementStatus": f"{HOOK} (sync wait), {TRIGGER} (poll), {DURABLE} (decision)",
        "CancelStatement": f"{HOOK} (on_kill), {DURABLE} (cancel)",
    },
    "bigquery": {
        "bigquery.jobs.insert": f"{HOOK} (insert_job)",
        "bigquery.jobs.get": f"{HOOK} (sync wait), {TRIGGER} (poll, through the sync client), {DURABLE}",
        "bigquery.jobs.list": f"{DURABLE} (durable_find: jobs by their identity label)",
        "bigquery.jobs.cancel": f"{HOOK} (on_kill), {DURABLE} (cancel)",
        "bigquery.jobs.getQueryResults": f"{HOOK} (the client's result loop)",
        "bigquery.tabledata.list": f"{HOOK} (query results)",
    },
    "redshift-data": {
        "ExecuteStatement": f"{HOOK} (execute_query)",
        "BatchExecuteStatement": f"{HOOK} (execute_query, several statements)",
        "DescribeStatement": f"{HOOK} (sync wait), {TRIGGER} (poll), {DURABLE} (decision)",
        "CancelStatement": f"{HOOK} (on_kill), {DURABLE} (cancel)",
        "GetStatementResult": f"{HOOK} (return_sql_result)",
        "ListStatements": f"{DURABLE} (durable_find: statements by the identity leading their name)",
    },
    "batch": {
        "SubmitJob": f"{HOOK} (submit_job)",
        "DescribeJobs": f"{HOOK} (sync wait), {TRIGGER} (poll), {DURABLE} (decision)",
        "ListJobs": f"{DURABLE} (lookup by name and token tag; durable_find by identity tag)",
        "DescribeJobQueues": "airflow-durable orphans (the job queues it lists marked jobs on)",
        "TerminateJob": f"{HOOK} (on_kill), {DURABLE} (cancel)",
        "CancelJob": TESTS,
    },
    "emr": {
        "AddJobFlowSteps": f"{HOOK} (add_job_flow_steps)",
        "ListSteps": f"{DURABLE} (lookup by token, durable_find by identity, in the step names)",
        "DescribeStep": f"{HOOK} (waiter), {TRIGGER} (poll), {DURABLE} (decision)",
        "DescribeCluster": f"{HOOK} (cluster state, links)",
        "CancelSteps": f"{DURABLE} (cancel)",
        "ListClusters": f"{HOOK} (get_cluster_id_by_name)",
    },
    "emr-serverless": {
        "StartJobRun": f"{HOOK} (start_job_run)",
        "GetJobRun": f"{HOOK} (waiter), {TRIGGER} (poll), {DURABLE} (decision)",
        "GetApplication": f"{HOOK} (application state)",
        "StartApplication": f"{HOOK} (an application that is not started)",
        "CancelJobRun": f"{HOOK} (on_kill), {DURABLE} (cancel)",
        "ListJobRuns": f"{DURABLE} (durable_find: job runs by the identity in their name)",
    },
    "emr-containers": {
        "StartJobRun": f"{HOOK} (submit_job)",
        "DescribeJobRun": f"{HOOK} (poll_query_status), {TRIGGER} (poll), {DURABLE} (decision)",
        "ListJobRuns": f"{DURABLE} (lookup by job run name; durable_find by identity tag)",
        "CancelJobRun": f"{HOOK} (on_kill), {DURABLE} (cancel)",
    },
    "dbt_cloud": {
        "Trigger Job Run": f"{HOOK} (trigger_job_run)",
        "Retry Failed Job": f"{HOOK} (retry_failed_job_run)",
        "Retrieve Run": f"{HOOK} (sync wait), {TRIGGER} (poll), {DURABLE} (decision)",
        "List Runs": f"{DURABLE} (lookup by token, durable_find by identity, in the cause)",
        "Cancel Run": f"{HOOK} (on_kill), {DURABLE} (cancel)",
        "Retrieve Job": f"{HOOK} (get_job)",
        "List Jobs": f"{HOOK} (list_jobs, job lookup by name)",
        "Retrieve Account": f"{HOOK} (get_account)",
        "List Accounts": f"{HOOK} (list_accounts)",
    },
}

#: ``system -> what -> why it is not checked``.
UNVALIDATED: dict[str, dict[str, str]] = {
    "databricks": {
        "error bodies": "the SDK has no classes for error answers; the emulator answers Databricks' "
        "documented shape ({error_code, message}) by hand",
        "single-task submit format": "runs/submit's top-level task fields (notebook_task, new_cluster, …), "
        "which the provider builds and documents, are not in the SDK's Jobs API 2.2: accepted and checked "
        "as SubmitTask's fields instead",
        "jobs/list include_user_names": "sent by DatabricksHook.list_jobs, not an argument of the SDK's "
        "JobsAPI.list: accepted",
        "life_cycle_state / result_state values": "tests script states the client never heard of on "
        "purpose; the SDK loads an unknown value as None",
        "idempotency token error code": "the Jobs API documents that a deleted run's token answers an error, "
        "not which: the emulator answers 400 INVALID_PARAMETER_VALUE",
        "runs/list page tokens and limit errors": "documented as opaque strings, and limit as 'greater than "
        "0 and less than 25' (the schema: at most 25): the emulator's tokens are cursors past the page's "
        "last (or before its first) run, limit 25 is accepted, and a bad limit, offset or token answers 400 "
        "INVALID_PARAMETER_VALUE (the code is not documented). The operators send limit 24 and only tokens "
        "the service gave them",
    },
    "snowflake": {
        "error bodies other than 422": "sqlapi.yaml describes 400/401/403/404/429/5xx without a body schema",
        "retry=true semantics": "documented on the 'Submitting requests' page only, not in sqlapi.yaml; what "
        "a retry returns for a failed or cancelled statement, and for how long a requestId deduplicates, is "
        "not documented",
        "statementHandles": "documented on the docs pages for multi-statement requests, not in sqlapi.yaml",
        "pageSize, resultSetMetaData in the request": "sent by SnowflakeSqlApiHook, documented nowhere: "
        "accepted",
        "GET / cancel requestId": "accepted as the document declares it, with no effect in the emulator",
        "QUERY_HISTORY rows": "the lookup's answer is a result set, validated as any; its rows (columns, "
        "EXECUTION_STATUS values, RESULT_LIMIT 1..10000, 7 days) are checked against "
        "`contracts/snowflake_query_history.json`, written by hand from the QUERY_HISTORY function's page "
        "(it publishes no schema). The emulator evaluates the lookup's own SQL shape only (a select list of "
        "columns, DATE_PART, COUNT/COUNT_IF OVER (); QUALIFY/WHERE of CONTAINS(col, ?) and ROW_NUMBER() = "
        "1), "
        "and keeps no end time (an ended statement ended as it started); SILENT: the message of the 7-day "
        "error, and the order among running statements under RESULT_LIMIT (newest first here)",
    },
    "bigquery": {
        "error bodies": "the discovery document describes no error shape; the emulator answers Google's "
        "{error: {code, message, errors, status}}",
        "jobs.get/jobs.cancel projection": "google-cloud-bigquery sends projection=full; the discovery "
        "document declares projection for jobs.list only: accepted",
        "statistics and configuration contents": "checked against the document's schemas like everything "
        "else; the emulator fills only what the provider reads",
    },
    "redshift-data": {"error bodies": "AWS error shapes are not in botocore's output shapes"},
    "batch": {
        "error bodies": "AWS error shapes are not in botocore's output shapes",
        "DescribeJobs startedAt": "the model marks JobDetail.startedAt required; Batch leaves it out until "
        "a job starts (getmoto/moto#2202, brendanhay/amazonka#561): the emulator follows the service",
    },
    "emr": {"error bodies": "AWS error shapes are not in botocore's output shapes"},
    "emr-serverless": {"error bodies": "AWS error shapes are not in botocore's output shapes"},
    "emr-containers": {"error bodies": "AWS error shapes are not in botocore's output shapes"},
    "dbt_cloud": {
        "nulls": "openapi-v2.yaml marks no field nullable, yet the API answers null where a value is absent "
        "and the provider sends nulls: a null is accepted anywhere",
        "GET / (the hook's bare base URL)": "not an operation of openapi-v2.yaml: served, not checked",
        "cause length": "openapi-v2.yaml gives no maximum; the emulator enforces the provider's 255",
    },
}

#: The systems, in the order the page lists them, with their titles.
SYSTEMS: dict[str, str] = {
    "databricks": "Databricks Jobs API",
    "snowflake": "Snowflake SQL API",
    "bigquery": "BigQuery",
    "redshift-data": "Redshift Data API",
    "batch": "AWS Batch",
    "emr": "Amazon EMR (steps)",
    "emr-serverless": "EMR Serverless",
    "emr-containers": "EMR on EKS",
    "dbt_cloud": "dbt Cloud",
}


def declared(system: str) -> frozenset[str] | None:
    """The operations ``system``'s emulator declares (``None``: a system this module does not know)."""
    routes = ROUTES.get(system)
    return None if routes is None else frozenset(routes)
