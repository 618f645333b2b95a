"""The catalogue: every durable operator, the provider operator it replaces, and how it closes the window.

This is the one list of what airflow-durable ships. Everything else that enumerates systems or
operators is generated from it or checked against it by a test (``tests/test_catalogue.py``):
``get_provider_info``, the README and docs capability tables, the ``check``/``migrate`` drop-in table,
the demo's systems, the jobs CLI's systems and the conformance registry.

Plain data, no imports beyond the standard library: the CLI, the provider-discovery entry point and
the lint read it on machines where no provider package is installed.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

__all__ = [
    "DOC_BLOCKS",
    "IDEMPOTENCY",
    "Idempotency",
    "LOOKUPS",
    "Lookup",
    "OPERATORS",
    "SYSTEMS",
    "SYSTEM_NAMES",
    "Operator",
    "System",
    "docs_url",
    "integration",
    "kind_title",
    "main",
    "operator",
    "operators_of",
    "render_block",
    "sync_docs",
    "sync_text",
]


@dataclass(frozen=True)
class System:
    """One integration: a provider package, one durable operator module, one docs page."""

    #: Stable short name of the integration (the docs page name).
    name: str
    #: What a user calls it, in tables and in ``airflow providers list``.
    title: str
    #: ``pip install "airflow-durable[<extra>]"``.
    extra: str
    #: The provider distribution the extra installs.
    provider_package: str
    #: The durable operator module of this system.
    module: str
    #: The docs page, relative to ``docs/``.
    doc: str


#: What a fact is when the provider's documentation does not state it.
SILENT = "not documented"


@dataclass(frozen=True)
class Idempotency:
    """What the system documents about resubmitting a job with the same token (issue 25).

    Every text field is the documentation's answer, or starts with `SILENT` and then says what the
    emulator assumes. The emulators enforce these facts and ``tests/test_catalogue.py`` checks they agree.
    """

    #: Where the token travels: the request parameter, or where a system without one carries it.
    carrier: str
    #: True when the system itself deduplicates a resubmission with the same token.
    native: bool
    #: The most characters the carrier takes (``None``: no documented limit).
    max_length: int | None
    #: The characters the carrier accepts, in words (the pattern, where the model gives one).
    characters: str
    #: How long a token deduplicates.
    window: str
    #: What a resubmission with the token returns when the earlier job finished (succeeded), failed,
    #: was cancelled, was deleted, or has expired from the system's history.
    on_finished: str
    on_failed: str
    on_cancelled: str
    on_deleted: str
    on_expired: str
    #: The pages (and model files) the facts come from.
    sources: tuple[str, ...]
    #: True when the documentation does not tie the window to the job's life, so the token may stop
    #: deduplicating while its job still runs. The engine then looks the token up by the task instance's
    #: identity before resending it (where the system has that lookup); False where the window outlasts the
    #: job (BigQuery's id stays taken) or there is no native key (the lookup is the only protection).
    lapses: bool = False


@dataclass(frozen=True)
class Lookup:
    """Where a system's job carries its task instance's identity, and how a client finds it again (issue 23).

    The identity is `airflow_durable.identity_tags.task_identity` (``afd-ti-<16 hex>``, 23 characters); the
    operator's ``durable_find(identity)`` lists the task instance's jobs of every generation and clear epoch
    with the call named here. Every text field is the documentation's answer, or starts with `SILENT` and
    then says what the emulator assumes. ``tests/test_catalogue.py`` checks the emulators agree.
    """

    #: Where the identity travels in the submit request (merged with what the user set, never replacing it).
    carrier: str
    #: The most characters the carrier takes (``None``: no documented limit, or not implemented).
    max_length: int | None
    #: The characters the carrier accepts, in words.
    characters: str
    #: The list call ``durable_find`` makes, and what it filters on server-side (the rest: client-side).
    list_call: str
    #: Whether the list is eventually consistent, and its documented lag.
    consistency: str
    #: How long a finished job stays listable.
    listed_for: str
    #: What the task's connection must be allowed for the list call (a try that finds no record where
    #: Airflow shows an earlier lifetime of its task instance fails without it: `DurableLookupError`).
    permission: str = ""
    #: ``False``: the system offers no way (then ``reason`` says why, and a test asserts the gap).
    implemented: bool = True
    reason: str = ""
    #: The pages (and model files) the facts come from.
    sources: tuple[str, ...] = ()


@dataclass(frozen=True)
class Operator:
    """One durable operator and the provider operator it replaces with the same arguments."""

    #: The `System` (integration) it belongs to.
    integration: str
    #: Stable short name of the job kind: ``--system`` in the CLI and the demo, the record's ``system``
    #: field, the operator's ``durable_system``.
    system: str
    #: The operator's own short name (a system may have several operators).
    title: str
    durable_module: str
    durable_class: str
    provider_module: str
    provider_class: str
    #: The provider trigger the deferrable path defers to (a name in ``provider_module``'s namespace).
    trigger: str
    #: The task-state-store key. Fixed forever once released.
    key: str
    #: How the submit→persist window is closed, in words (the README's column).
    window: str
    #: The argument that turns "submit and wait" into "submit only"; ``None`` when it always waits.
    no_wait_kwarg: str | None = None
    #: False when the provider operator does not wait unless told to (``EmrAddStepsOperator``).
    waits_by_default: bool = True
    #: The system's API call that starts the job (the system pages' "submits with" column).
    submit_call: str = ""

    @property
    def idempotency(self) -> Idempotency:
        """What the system documents about resubmitting this operator's job with the same token."""
        return IDEMPOTENCY[self.key]

    @property
    def lookup(self) -> Lookup:
        """Where this operator's jobs carry their task instance's identity, and how they are found again."""
        return LOOKUPS[self.key]

    @property
    def provider_qualname(self) -> str:
        return f"{self.provider_module}.{self.provider_class}"

    @property
    def durable_qualname(self) -> str:
        return f"{self.durable_module}.{self.durable_class}"


_OPS = "airflow_durable.operators"
_DBX = "airflow.providers.databricks.operators.databricks"
_EMR = "airflow.providers.amazon.aws.operators.emr"
_DOCS_URL = "https://airflow-durable.readthedocs.io/en/latest/"

SYSTEMS: tuple[System, ...] = (
    System(
        "databricks",
        "Databricks",
        "databricks",
        "apache-airflow-providers-databricks",
        f"{_OPS}.databricks",
        "systems/databricks.md",
    ),
    System(
        "snowflake",
        "Snowflake",
        "snowflake",
        "apache-airflow-providers-snowflake",
        f"{_OPS}.snowflake",
        "systems/snowflake.md",
    ),
    System(
        "bigquery",
        "BigQuery",
        "google",
        "apache-airflow-providers-google",
        f"{_OPS}.bigquery",
        "systems/bigquery.md",
    ),
    System(
        "redshift",
        "Redshift Data",
        "amazon",
        "apache-airflow-providers-amazon",
        f"{_OPS}.redshift",
        "systems/redshift.md",
    ),
    System("emr", "Amazon EMR", "amazon", "apache-airflow-providers-amazon", f"{_OPS}.emr", "systems/emr.md"),
    System(
        "batch", "AWS Batch", "amazon", "apache-airflow-providers-amazon", f"{_OPS}.batch", "systems/batch.md"
    ),
    System(
        "dbt-cloud",
        "dbt Cloud",
        "dbt-cloud",
        "apache-airflow-providers-dbt-cloud",
        f"{_OPS}.dbt_cloud",
        "systems/dbt-cloud.md",
    ),
)

OPERATORS: tuple[Operator, ...] = (
    Operator(
        "databricks",
        "databricks",
        "submit run",
        f"{_OPS}.databricks",
        "DurableDatabricksSubmitRunOperator",
        _DBX,
        "DatabricksSubmitRunOperator",
        "DatabricksExecutionTrigger",
        "airflow_durable.databricks_submit_run",
        "closed: native `idempotency_token`, `runs/list` lookup of the token in the run name",
        "wait_for_termination",
        submit_call="`runs/submit`",
    ),
    Operator(
        "databricks",
        "databricks",
        "run now",
        f"{_OPS}.databricks",
        "DurableDatabricksRunNowOperator",
        _DBX,
        "DatabricksRunNowOperator",
        "DatabricksExecutionTrigger",
        "airflow_durable.databricks_run_now",
        "closed: native `idempotency_token`, held while a run with it exists (no lookup: run-now names "
        "no task instance)",
        "wait_for_termination",
        submit_call="`run-now`",
    ),
    Operator(
        "snowflake",
        "snowflake",
        "SQL API",
        f"{_OPS}.snowflake",
        "DurableSnowflakeSqlApiOperator",
        "airflow.providers.snowflake.operators.snowflake",
        "SnowflakeSqlApiOperator",
        "SnowflakeSqlApiTrigger",
        "airflow_durable.snowflake_sql_api",
        "closed: native `requestId` + `retry=true`",
        submit_call="`POST /api/v2/statements`",
    ),
    Operator(
        "bigquery",
        "bigquery",
        "insert job",
        f"{_OPS}.bigquery",
        "DurableBigQueryInsertJobOperator",
        "airflow.providers.google.cloud.operators.bigquery",
        "BigQueryInsertJobOperator",
        "BigQueryInsertJobTrigger",
        "airflow_durable.bigquery_insert_job",
        "closed: caller-chosen job id from the token, 409 adopts the job "
        "(`force_rerun=False`: only for the states in `reattach_states`)",
        submit_call="`jobs.insert`",
    ),
    Operator(
        "redshift",
        "redshift",
        "Data API statement",
        f"{_OPS}.redshift",
        "DurableRedshiftDataOperator",
        "airflow.providers.amazon.aws.operators.redshift_data",
        "RedshiftDataOperator",
        "RedshiftDataTrigger",
        "airflow_durable.redshift_data",
        "closed: native `ClientToken`; past its window, a `ListStatements` lookup of the token",
        "wait_for_completion",
        submit_call="`ExecuteStatement` / `BatchExecuteStatement`",
    ),
    Operator(
        "emr",
        "emr-steps",
        "steps",
        f"{_OPS}.emr",
        "DurableEmrAddStepsOperator",
        _EMR,
        "EmrAddStepsOperator",
        "EmrAddStepsTrigger",
        "airflow_durable.emr_add_steps",
        "closed: token in the step names, `ListSteps` lookup; two tries adding at once converge on the "
        "earliest set, the other is cancelled",
        "wait_for_completion",
        waits_by_default=False,
        submit_call="`AddJobFlowSteps`",
    ),
    Operator(
        "emr",
        "emr-serverless",
        "Serverless",
        f"{_OPS}.emr",
        "DurableEmrServerlessStartJobOperator",
        _EMR,
        "EmrServerlessStartJobOperator",
        "EmrServerlessStartJobTrigger",
        "airflow_durable.emr_serverless_start_job",
        "closed: native `clientToken`; past its window, a `ListJobRuns` lookup of the token",
        "wait_for_completion",
        submit_call="`StartJobRun`",
    ),
    Operator(
        "emr",
        "emr-eks",
        "on EKS",
        f"{_OPS}.emr",
        "DurableEmrContainerOperator",
        _EMR,
        "EmrContainerOperator",
        "EmrContainerTrigger",
        "airflow_durable.emr_container",
        "closed: native `clientToken`, `ListJobRuns(name=…)` lookup",
        "wait_for_completion",
        submit_call="`StartJobRun`",
    ),
    Operator(
        "batch",
        "batch",
        "job",
        f"{_OPS}.batch",
        "DurableBatchOperator",
        "airflow.providers.amazon.aws.operators.batch",
        "BatchOperator",
        "BatchJobTrigger",
        "airflow_durable.batch",
        "closed: token in job tag, looked up (`ListJobs` by name + tags) before resubmitting; two tries "
        "submitting at once converge on the earliest job, the other is terminated",
        "wait_for_completion",
        submit_call="`SubmitJob`",
    ),
    Operator(
        "dbt-cloud",
        "dbt-cloud",
        "run job",
        f"{_OPS}.dbt_cloud",
        "DurableDbtCloudRunJobOperator",
        "airflow.providers.dbt.cloud.operators.dbt",
        "DbtCloudRunJobOperator",
        "DbtCloudRunJobTrigger",
        "airflow_durable.dbt_cloud_run_job",
        "closed by lookup: token in the run's `cause`, found before resubmitting (open for a "
        "`retry_from_failure` `/rerun/`, which takes no cause)",
        "wait_for_termination",
        submit_call="`POST …/jobs/{job_id}/run/`",
    ),
)

_DBX_DOCS = (
    "https://docs.databricks.com/api/workspace/jobs/submit",
    "https://docs.databricks.com/api/workspace/jobs/runnow",
    "databricks-sdk JobsAPI.submit / run_now docstrings (idempotency_token), JobsAPI.get_run (60 days)",
    "https://learn.microsoft.com/en-us/azure/databricks/kb/jobs/jobs-idempotency",
)
_DATABRICKS = Idempotency(
    carrier="`idempotency_token`",
    native=True,
    max_length=64,
    characters=f"{SILENT} (any string)",
    window=f"as long as a run with the token exists; {SILENT} as a duration (runs are removed after 60 days)",
    on_finished="the existing run's id (no new run)",
    on_failed="the existing run's id (no new run)",
    on_cancelled="the existing run's id (no new run)",
    on_deleted='an error ("If a run with the provided token is deleted, an error is returned"; '
    f"{SILENT}: its code; the emulator answers 400 INVALID_PARAMETER_VALUE naming the token as deleted, "
    "and the engine submits the next generation on that answer alone)",
    on_expired=f"{SILENT}: whether a run removed after 60 days counts as deleted; "
    "the emulator forgets the token",
    sources=_DBX_DOCS,
    # Documented to hold while a run with the token exists, so not while the run still runs.
    lapses=False,
)
_AWS_MODEL = "botocore service model (data/<service>/*/service-2.json)"
IDEMPOTENCY: dict[str, Idempotency] = {
    "airflow_durable.databricks_submit_run": _DATABRICKS,
    "airflow_durable.databricks_run_now": _DATABRICKS,
    "airflow_durable.snowflake_sql_api": Idempotency(
        carrier="`requestId` query parameter, with `retry=true`",
        native=True,
        max_length=36,
        characters="a UUID",
        window=SILENT,
        on_finished="the statement already executed, not executed again (with `retry=true`)",
        on_failed=f"{SILENT}; the emulator returns the earlier statement",
        on_cancelled=f"{SILENT}; the emulator returns the earlier statement",
        on_deleted="not applicable: statements cannot be deleted",
        on_expired=f"{SILENT}; the emulator executes anew once the statement is forgotten",
        sources=(
            "https://docs.snowflake.com/en/developer-guide/sql-api/reference",
            "https://docs.snowflake.com/en/developer-guide/sql-api/submitting-requests",
            "snowflakedb/snowflake-rest-api-specs specifications/sqlapi.yaml (requestId: format uuid)",
        ),
        lapses=True,
    ),
    "airflow_durable.bigquery_insert_job": Idempotency(
        carrier="caller-chosen `jobReference.jobId`",
        native=True,
        max_length=1024,
        characters="letters, numbers, underscores and dashes",
        window="as long as the job is in the project's job history; the id then stays taken: "
        f"{SILENT} whether it can be reused",
        on_finished="409 duplicate (Already Exists); the job stays readable with jobs.get",
        on_failed="409 duplicate (Already Exists)",
        on_cancelled="409 duplicate (Already Exists)",
        on_deleted=f"{SILENT} (jobs.delete removes the job's metadata); "
        "the emulator answers 409 while it holds the job",
        on_expired=f"{SILENT}; the emulator accepts the id again once the job is forgotten",
        sources=(
            "BigQuery v2 discovery document (google-api-python-client), JobReference.jobId",
            "https://cloud.google.com/bigquery/docs/running-jobs#generate-job-id",
        ),
    ),
    "airflow_durable.redshift_data": Idempotency(
        carrier="`ClientToken`",
        native=True,
        max_length=64,
        characters="any, case-sensitive (model: min 1, max 64, no pattern)",
        window=SILENT,
        on_finished=f"{SILENT}; the emulator returns the earlier statement",
        on_failed=f"{SILENT}; the emulator returns the earlier statement",
        on_cancelled=f"{SILENT}; the emulator returns the earlier statement",
        on_deleted="not applicable: statements cannot be deleted",
        on_expired=f"{SILENT} (statement metadata is kept 24 hours); the emulator forgets the token with it",
        sources=(
            _AWS_MODEL,
            "https://docs.aws.amazon.com/redshift-data/latest/APIReference/API_ExecuteStatement.html",
        ),
        lapses=True,
    ),
    "airflow_durable.emr_add_steps": Idempotency(
        carrier="step name (`[afd-… step i/n]` suffix); looked up with `ListSteps`",
        native=False,
        max_length=256,
        characters="the model's XML-safe characters",
        window="no native deduplication: the lookup finds the steps while the cluster lists them",
        on_finished="a new step set (no deduplication); the engine's lookup finds the earlier one",
        on_failed="a new step set (no deduplication)",
        on_cancelled="a new step set (no deduplication)",
        on_deleted="not applicable: steps cannot be deleted",
        on_expired=f"{SILENT}: how long a cluster lists its steps",
        sources=(_AWS_MODEL, "https://docs.aws.amazon.com/emr/latest/APIReference/API_AddJobFlowSteps.html"),
    ),
    "airflow_durable.emr_serverless_start_job": Idempotency(
        carrier="`clientToken`",
        native=True,
        max_length=64,
        characters="[A-Za-z0-9._-]+",
        window=SILENT,
        on_finished=f"{SILENT}; the emulator returns the earlier job run",
        on_failed=f"{SILENT}; the emulator returns the earlier job run",
        on_cancelled=f"{SILENT}; the emulator returns the earlier job run",
        on_deleted="not applicable: job runs cannot be deleted",
        on_expired=f"{SILENT}; the emulator forgets the token with the job run",
        sources=(
            _AWS_MODEL,
            "https://docs.aws.amazon.com/emr-serverless/latest/APIReference/API_StartJobRun.html",
        ),
        lapses=True,
    ),
    "airflow_durable.emr_container": Idempotency(
        carrier="`clientToken` (and the job run name, for the `ListJobRuns` lookup)",
        native=True,
        max_length=64,
        characters="at least one non-space character (model pattern .*\\S.*)",
        window=SILENT,
        on_finished=f"{SILENT}; the emulator returns the earlier job run",
        on_failed=f"{SILENT}; the emulator returns the earlier job run",
        on_cancelled=f"{SILENT}; the emulator returns the earlier job run",
        on_deleted="not applicable: job runs cannot be deleted",
        on_expired=f"{SILENT}; the emulator forgets the token with the job run",
        sources=(
            _AWS_MODEL,
            "https://docs.aws.amazon.com/emr-on-eks/latest/APIReference/API_StartJobRun.html",
        ),
        lapses=True,
    ),
    "airflow_durable.batch": Idempotency(
        carrier="job tag `airflow-durable-token`; looked up with `ListJobs`",
        native=False,
        max_length=256,
        characters="any (tag values: model max 256)",
        window="no native deduplication: the lookup finds the job while `ListJobs` lists it",
        on_finished="a new job (no deduplication); the engine's lookup finds the earlier one",
        on_failed="a new job (no deduplication)",
        on_cancelled="a new job (no deduplication)",
        on_deleted="not applicable: jobs cannot be deleted",
        on_expired=f"{SILENT}: how long `ListJobs` lists a finished job",
        sources=(_AWS_MODEL, "https://docs.aws.amazon.com/batch/latest/APIReference/API_SubmitJob.html"),
    ),
    "airflow_durable.dbt_cloud_run_job": Idempotency(
        carrier="the run's `cause`; looked up with `List Runs`",
        native=False,
        max_length=255,
        characters=f"any ({SILENT}: the limit is the provider's DBT_CAUSE_MAX_LENGTH, "
        "the API documents none)",
        window="no native deduplication: the lookup finds the run while `List Runs` lists it",
        on_finished="a new run (no deduplication); the engine's lookup finds the earlier one",
        on_failed="a new run (no deduplication)",
        on_cancelled="a new run (no deduplication)",
        on_deleted="not applicable: runs cannot be deleted",
        on_expired=f"{SILENT}: how long a run is listed",
        sources=(
            "dbt-labs/dbt-cloud-openapi-spec openapi-v2.yaml (TriggerRunRequestRequest.cause)",
            "https://docs.getdbt.com/dbt-cloud/api-v2#/operations/Trigger%20Job%20Run",
        ),
    ),
}


_NO_LAG = f"{SILENT}; the emulator lists a job at once (a test may set a lag)"
LOOKUPS: dict[str, Lookup] = {
    "airflow_durable.databricks_submit_run": Lookup(
        carrier="`run_name` suffix ` [afd-ti-…]` (runs/submit takes no run tags)",
        max_length=None,
        characters=f"{SILENT} (any string)",
        list_call="`GET jobs/runs/list?run_type=SUBMIT_RUN&start_time_from=…` (pages of 24, `page_token`), "
        "read newest first back to the earlier of the DAG run's `run_after` and `start_date` less 10 "
        "minutes (60 days without a DAG run), run names matched client-side: one call per 24 one-time runs "
        "the workspace started since then; more than `durable_lookup_runs` (2400) there fails the try "
        "with `DurableLookupError`",
        permission="listing the workspace's job runs (`GET /api/2.2/jobs/runs/list`) with the connection's "
        "token",
        consistency=_NO_LAG,
        listed_for="60 days (runs are removed after 60 days)",
        sources=(
            "databricks-sdk JobsAPI.submit (run_name), JobsAPI.list_runs (limit, page_token, run_type, "
            "start_time_from)",
            "https://docs.databricks.com/api/workspace/jobs/listruns",
        ),
    ),
    "airflow_durable.databricks_run_now": Lookup(
        carrier="none",
        max_length=None,
        characters="",
        list_call="`GET jobs/runs/list?job_id=…` lists the job's runs, but nothing in them names the task "
        "instance",
        consistency=SILENT,
        listed_for="60 days (runs are removed after 60 days)",
        implemented=False,
        reason="run-now takes no run name and no tags; its only per-run field, `idempotency_token`, is "
        "neither listed nor filterable (the run's parameters are the job's inputs: changing them changes "
        "the job)",
        sources=(
            "databricks-sdk JobsAPI.run_now, BaseRun",
            "https://docs.databricks.com/api/workspace/jobs/runnow",
        ),
    ),
    "airflow_durable.snowflake_sql_api": Lookup(
        carrier="`parameters.query_tag` of `POST /api/v2/statements` (`<identity> <token>`, after a "
        "`QUERY_TAG` the hook's session parameters set)",
        max_length=2000,
        characters="any (QUERY_TAG: a string of up to 2000 characters)",
        list_call="`INFORMATION_SCHEMA.QUERY_HISTORY_BY_USER` (`END_TIME_RANGE_START`, `RESULT_LIMIT` "
        "10000), "
        "one statement sent through the SQL API on the connection's warehouse, the query tag filtered in SQL "
        "(`CONTAINS`); a multi-statement request's queries grouped by tag and session",
        permission="a default warehouse and database on the connection (the Information Schema function "
        "runs on the warehouse); the user reads its own history, no extra grant",
        consistency=f"{SILENT} for the Information Schema function (`ACCOUNT_USAGE.QUERY_HISTORY`, not "
        "used: up to 45 minutes of latency); the emulator lists a statement at once",
        listed_for="7 days (`INFORMATION_SCHEMA.QUERY_HISTORY*`: the last 7 days; a running statement is "
        "always inside them: `STATEMENT_TIMEOUT_IN_SECONDS` is at most 604800)",
        sources=(
            "snowflakedb/snowflake-rest-api-specs specifications/sqlapi.yaml (parameters.query_tag)",
            "https://docs.snowflake.com/en/sql-reference/parameters#query-tag",
            "https://docs.snowflake.com/en/sql-reference/functions/query_history",
        ),
    ),
    "airflow_durable.bigquery_insert_job": Lookup(
        carrier="job labels `airflow-durable-ti` (the identity) and `airflow-durable-token`, merged into the "
        "configuration's labels",
        max_length=63,
        characters="label keys and values: lowercase letters, digits, underscores, dashes (keys start with "
        "a letter); at most 64 labels",
        list_call="`jobs.list` (`projection=full`, `minCreationTime`, pages by `pageToken`): it filters no "
        "labels, so labels are matched client-side; bounded by `durable_lookup_jobs`",
        permission="the IAM permission `bigquery.jobs.list` on the project (`jobs.list`)",
        consistency=_NO_LAG,
        listed_for=f"{SILENT} in the discovery document; the console shows six months of job history",
        sources=(
            "BigQuery v2 discovery document (google-api-python-client): jobs.list, JobConfiguration.labels",
            "https://cloud.google.com/bigquery/docs/labels-intro#requirements",
        ),
    ),
    "airflow_durable.redshift_data": Lookup(
        carrier="`StatementName`: `<identity> <token>`, then the statement name you set",
        max_length=2048,
        characters="any (model: StatementNameString, max 2048; the operator keeps names within 500)",
        list_call="`ListStatements(StatementName=<identity>, Status=ALL)`: a prefix match, so the identity "
        "leads the name",
        permission="the IAM action `redshift-data:ListStatements`",
        consistency=_NO_LAG,
        listed_for="24 hours (statement metadata is kept 24 hours)",
        sources=(
            _AWS_MODEL,
            "https://docs.aws.amazon.com/redshift-data/latest/APIReference/API_ListStatements.html",
        ),
    ),
    "airflow_durable.emr_add_steps": Lookup(
        carrier="every step's `Name`: `<your name> <identity> [<token> step i/n]`",
        max_length=256,
        characters="the model's XML-safe characters",
        list_call="`ListSteps(ClusterId)`: newest first, 50 a page (`Marker`), names matched client-side",
        permission="the IAM action `elasticmapreduce:ListSteps` on the cluster",
        consistency=_NO_LAG,
        listed_for=f"{SILENT}: while the cluster lists its steps",
        sources=(_AWS_MODEL, "https://docs.aws.amazon.com/emr/latest/APIReference/API_ListSteps.html"),
    ),
    "airflow_durable.emr_serverless_start_job": Lookup(
        carrier="tags `airflow-durable-ti` and `airflow-durable-token`, and the identity at the end of the "
        "job run's `name`",
        max_length=256,
        characters="name: 1-256 characters (pattern `.*\\S.*`); tag values: up to 256",
        list_call="`ListJobRuns(applicationId, createdAtAfter)` (50 a page, `nextToken`): it filters no name "
        "or tag, so names are matched client-side, then `GetJobRun` reads the tags of a match",
        permission="the IAM actions `emr-serverless:ListJobRuns` and `emr-serverless:GetJobRun` on the "
        "application",
        consistency=_NO_LAG,
        listed_for=SILENT,
        sources=(
            _AWS_MODEL,
            "https://docs.aws.amazon.com/emr-serverless/latest/APIReference/API_ListJobRuns.html",
        ),
    ),
    "airflow_durable.emr_container": Lookup(
        carrier="tags `airflow-durable-ti` and `airflow-durable-token`",
        max_length=256,
        characters="tag keys up to 128, values up to 256 characters",
        list_call="`ListJobRuns(virtualClusterId, name)`: the job runs of the operator's name (their tags "
        "and `clientToken` come with them), tags matched client-side",
        permission="the IAM action `emr-containers:ListJobRuns` on the virtual cluster",
        consistency=_NO_LAG,
        listed_for=SILENT,
        sources=(
            _AWS_MODEL,
            "https://docs.aws.amazon.com/emr-on-eks/latest/APIReference/API_ListJobRuns.html",
        ),
    ),
    "airflow_durable.batch": Lookup(
        carrier="job tags `airflow-durable-ti` (beside the token's `airflow-durable-token`)",
        max_length=256,
        characters="tag keys up to 128, values up to 256 characters; at most 50 tags",
        list_call="`ListJobs(jobQueue, filters=[JOB_NAME])` (every status), then `DescribeJobs` for the tags",
        permission="the IAM actions `batch:ListJobs` and `batch:DescribeJobs`",
        consistency=_NO_LAG,
        listed_for=f"{SILENT}: Batch keeps finished jobs for a while (about 7 days in practice)",
        sources=(_AWS_MODEL, "https://docs.aws.amazon.com/batch/latest/APIReference/API_ListJobs.html"),
    ),
    "airflow_durable.dbt_cloud_run_job": Lookup(
        carrier="the run's `cause`: `<your reason> [<identity> <token>]` (a JSON cause gets two more keys)",
        max_length=255,
        characters=f"any ({SILENT}: the limit is the provider's DBT_CAUSE_MAX_LENGTH)",
        list_call="`List Runs` (`job_definition_id`, `order_by=-created_at`, `include_related=trigger`, "
        "pages of 100 by `offset`), causes matched client-side; bounded by `durable_lookup_runs`",
        permission="reading the job's runs (`List Runs`: `GET /api/v2/accounts/{account_id}/runs/`) with the "
        "connection's API token",
        consistency=_NO_LAG,
        listed_for=SILENT,
        sources=(
            "dbt-labs/dbt-cloud-openapi-spec openapi-v2.yaml (List Runs)",
            "https://docs.getdbt.com/dbt-cloud/api-v2#/operations/List%20Runs",
        ),
    ),
}

_SYSTEMS_BY_NAME = {s.name: s for s in SYSTEMS}
_OPERATORS_BY_CLASS = {o.durable_class: o for o in OPERATORS}
#: Every job kind (``--system`` value), in catalogue order.
SYSTEM_NAMES: tuple[str, ...] = tuple(dict.fromkeys(o.system for o in OPERATORS))


def integration(name: str) -> System:
    """The integration called ``name``; ``KeyError`` naming the known ones otherwise."""
    try:
        return _SYSTEMS_BY_NAME[name]
    except KeyError:
        raise KeyError(f"unknown system {name!r}; known: {', '.join(_SYSTEMS_BY_NAME)}") from None


def operator(durable_class: str) -> Operator:
    """The catalogue row of a durable operator class name."""
    try:
        return _OPERATORS_BY_CLASS[durable_class]
    except KeyError:
        raise KeyError(f"{durable_class!r} is not a durable operator in the catalogue") from None


def docs_url(sys: System) -> str:
    """The published docs page of a system."""
    return _DOCS_URL + sys.doc.removesuffix(".md") + "/"


def operators_of(system_name: str) -> tuple[Operator, ...]:
    """The operators of one job kind (``databricks`` has two); ``KeyError`` for an unknown one."""
    found = tuple(o for o in OPERATORS if o.system == system_name)
    if not found:
        raise KeyError(f"unknown system {system_name!r}; known: {', '.join(SYSTEM_NAMES)}")
    return found


def kind_title(system_name: str) -> str:
    """What a user calls a job kind: the integration's title, plus the operator's when it has several kinds.

    ``databricks`` → "Databricks" (two operators, one kind); ``emr-eks`` → "Amazon EMR on EKS".
    """
    first = operators_of(system_name)[0]
    kinds = {o.system for o in OPERATORS if o.integration == first.integration}
    title = integration(first.integration).title
    return title if len(kinds) == 1 else f"{title} {first.title}"


# --------------------------------------------------------------------------- generated docs text
# Tables in the README and the docs pages are written between marker comments by
# ``python -m airflow_durable.catalogue --write-docs`` (``make catalogue-docs``); ``--check-docs`` and
# tests/test_catalogue.py fail when the committed text differs from what the catalogue generates.

#: Files (relative to the repository root) and the generated blocks each must carry.
DOC_BLOCKS: dict[str, tuple[str, ...]] = {
    "README.md": ("capabilities",),
    "docs/index.md": ("capabilities",),
    "docs/compatibility.md": ("system-pages",),
    **{f"docs/{s.doc}": (f"system:{s.name}",) for s in SYSTEMS},
}

_BEGIN = "<!-- catalogue:{name} (generated by `python -m airflow_durable.catalogue --write-docs`) -->"
_END = "<!-- /catalogue:{name} -->"


def _table(header: Sequence[str], rows: Sequence[Sequence[str]]) -> str:
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    lines += ["| " + " | ".join(row) + " |" for row in rows]
    return "\n".join(lines)


def render_block(name: str) -> str:
    """The Markdown text of one generated block (between its markers, without them)."""
    if name == "capabilities":
        header = (
            "system",
            "operator",
            "sync path",
            "deferrable path",
            "submit→persist window",
            "key in `task_state_store`",
        )
        rows = [
            (
                kind_title(o.system),
                f"`{o.durable_class}`",
                "durable",
                f"durable (provider `{o.trigger}`)",
                o.window,
                f"`{o.key}`",
            )
            for o in OPERATORS
        ]
        return _table(header, rows)
    if name == "system-pages":
        links = ", ".join(f"[{s.title}]({s.doc})" for s in SYSTEMS)
        intro = "Each system page says how its submit→persist window is closed, what it stores and its limits"
        return f"{intro}: {links}."
    if name.startswith("system:"):
        sys_ = integration(name.removeprefix("system:"))
        page_header = (
            "durable operator",
            "drop-in for",
            "submits with",
            "submit→persist window",
            "key in `task_state_store`",
        )
        page_rows = [
            (f"`{o.durable_class}`", f"`{o.provider_class}`", o.submit_call, o.window, f"`{o.key}`")
            for o in OPERATORS
            if o.integration == sys_.name
        ]
        return _table(page_header, page_rows)
    raise KeyError(f"no generated block called {name!r}")


def sync_text(text: str, names: tuple[str, ...], path: str = "<text>") -> str:
    """``text`` with each named block between its markers replaced by what the catalogue generates.

    ``ValueError`` when a block's markers are missing: where a table goes is the page's decision.
    """
    for name in names:
        begin, end = _BEGIN.format(name=name), _END.format(name=name)
        start = text.find(begin)
        stop = text.find(end, start + 1)
        if start < 0 or stop < 0:
            raise ValueError(f"{path}: no generated block {name!r}; add the lines\n{begin}\n{end}")
        text = text[: start + len(begin)] + "\n" + render_block(name) + "\n" + text[stop:]
    return text


def sync_docs(root: str, write: bool) -> list[str]:
    """Regenerate every block of `DOC_BLOCKS` under ``root``; return the files that changed (or would)."""
    from pathlib import Path

    stale = []
    for rel, names in DOC_BLOCKS.items():
        path = Path(root) / rel
        old = path.read_text(encoding="utf-8")
        new = sync_text(old, names, rel)
        if new != old:
            stale.append(rel)
            if write:
                path.write_text(new, encoding="utf-8")
    return stale


def main(argv: list[str] | None = None) -> int:
    """``python -m airflow_durable.catalogue --write-docs | --check-docs [--root DIR]``."""
    import argparse

    parser = argparse.ArgumentParser(prog="python -m airflow_durable.catalogue", description=main.__doc__)
    mode = parser.add_mutually_exclusive_group(required=True)
    mode.add_argument("--write-docs", action="store_true", help="rewrite the generated tables")
    mode.add_argument("--check-docs", action="store_true", help="exit 1 when a generated table is stale")
    parser.add_argument("--root", default=".", help="the repository root (default: the current directory)")
    args = parser.parse_args(argv)
    try:
        stale = sync_docs(args.root, write=args.write_docs)
    except (OSError, ValueError) as err:
        print(f"error: {err}")
        return 2
    for rel in stale:
        print(f"{'rewrote' if args.write_docs else 'stale'}: {rel}")
    if stale and args.check_docs:
        print("run `python -m airflow_durable.catalogue --write-docs` and commit the result")
        return 1
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
