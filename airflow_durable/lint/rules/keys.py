"""What a key or a value *means*, judged from its literal text (data, not code)."""

from __future__ import annotations

_WATERMARK_WORDS = (
    "watermark",
    "last_processed",
    "last_run",
    "last_success",
    "last_sync",
    "last_load",
    "last_updated",
    "last_modified",
    "last_seen",
    "last_ts",
    "last_timestamp",
    "high_water",
    "processed_at",
    "processed_until",
    "cursor",
    "checkpoint",
    "offset",
    "bookmark",
    "since",
)
_ID_NOUNS = (
    "job",
    "run",
    "query",
    "statement",
    "step",
    "application",
    "app",
    "execution",
    "external",
    "remote",
    "batch",
    "cluster",
    "submission",
    "operation",
    "workflow",
    "request",
)
# Parts of a key that tie it to one run or one task instance: such a Variable is per-run state.
_RUN_SCOPED_PLACEHOLDERS = (
    "run_id",
    "ds",
    "ts",
    "logical_date",
    "execution_date",
    "task_id",
    "map_index",
    "dag_run",
    "ti",
    "try_number",
    "data_interval",
)


def _norm(text: str) -> str:
    return text.lower().replace("-", "_").replace(" ", "_").replace(".", "_")


def is_watermark_key(text: str | None) -> bool:
    return text is not None and any(w in _norm(text) for w in _WATERMARK_WORDS)


# Words that make an id a position in the data rather than a handle on a job: "last_batch_id",
# "max_order_id", "next_page_token" name how far the data was read, carried to the next run (ADR002).
_POSITION_QUALIFIERS = frozenset({"last", "latest", "max", "prev", "previous", "next", "newest", "highest"})


def names_a_position(text: str | None) -> bool:
    """A key that names how far the data was processed (a high-water mark), whatever noun follows."""
    return text is not None and bool(_POSITION_QUALIFIERS & set(_norm(text).split("_")))


def is_external_id_key(text: str | None) -> bool:
    if text is None:
        return False
    key = _norm(text)
    if key in {"id", "job", "run"}:
        return False
    if key.endswith(("_id", "_ids", "id")) or key.endswith("_arn"):
        return any(noun in key for noun in _ID_NOUNS)
    return False


def is_run_scoped_placeholder(names: set[str]) -> bool:
    return any(n in _RUN_SCOPED_PLACEHOLDERS for n in names)


SUBMIT_METHODS = frozenset(
    {
        "submit",
        "submit_run",
        "submit_job",
        "run_now",
        "start_job_run",
        "add_job_flow_steps",
        "insert_job",
        "execute_query",
        "execute_statement",
        "trigger_job_run",
        "start_query_execution",
        "create_job_run",
        "start_run",
        "submit_batch",
        "start_pipeline",
        "run_job",
        "submit_step",
        "start_job",
    }
)
WAIT_METHODS = frozenset(
    {
        "wait",
        "wait_for_job",
        "wait_for_completion",
        "wait_for_termination",
        "poll",
        "poll_until_complete",
        "wait_for_job_run_status",
        "wait_for_pipeline_state",
        "result",
        "get_waiter",
        "wait_for_run",
    }
)


def is_submit_call_name(name: str | None) -> bool:
    return name is not None and (name in SUBMIT_METHODS or name.startswith("submit_"))
