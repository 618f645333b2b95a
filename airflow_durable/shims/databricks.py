"""Databricks provider differences, in one place (imported only by ``operators.databricks``).

Provider 7.17+ (the ``ResumableJobMixin`` releases) builds the request body in ``_prepare_submit_json``
/ ``_prepare_run_now_json`` and raises ``DatabricksApiError`` with ``http_status_code``. Earlier releases
(tested floor: 7.16.1) build it inline in ``execute`` from ``json`` merged with the named arguments
(``_get_merged_json``, at execute time; older ones merged in ``__init__``) and raise a plain
``AirflowException("Response: …, Status Code: 404")``. We try the new API first and fall back here, so
the operator module and our behaviour are the same on both.
"""

from __future__ import annotations

import copy
import json
import re
from collections.abc import Mapping
from typing import Any

from airflow.providers.databricks.utils.databricks import normalise_json_content


def submit_payload(operator: Any, context: Any) -> dict[str, Any]:
    """The ``runs/submit`` body exactly as the installed provider would send it."""
    prepare = getattr(operator, "_prepare_submit_json", None)
    if prepare is not None:
        return dict(prepare(context))
    # Provider < 7.17: the body execute() builds inline, from json merged with the named arguments
    # (7.16.1 merges at execute time: idempotency_token=, tasks= ... are not in operator.json).
    from airflow.providers.databricks.operators.databricks import _inject_airflow_params_into_task

    json = copy.deepcopy(_merged(operator))
    validate = getattr(operator, "_validate_merged_json", None)
    if validate is not None:
        validate(json)
    pipeline_task = json.get("pipeline_task")
    if (
        isinstance(pipeline_task, Mapping)
        and pipeline_task.get("pipeline_id") is None
        and pipeline_task.get("pipeline_name")
    ):
        pipeline_task = json["pipeline_task"] = dict(pipeline_task)
        pipeline_task["pipeline_id"] = operator._hook.find_pipeline_id_by_name(pipeline_task["pipeline_name"])
        del pipeline_task["pipeline_name"]
    if operator.params:
        params = dict(operator.params)
        tasks = json.get("tasks")
        for task in tasks if isinstance(tasks, list) else [json]:
            if isinstance(task, dict):
                _inject_airflow_params_into_task(task, params)
    normalised: dict[str, Any] = normalise_json_content(json)  # type: ignore[assignment]  # a dict in, a dict out
    return dict(normalised)


def _merged(operator: Any) -> dict[str, Any]:
    """``json`` with the named arguments merged, where the provider merges at execute time."""
    merge = getattr(operator, "_get_merged_json", None)
    return dict(merge()) if merge is not None else operator.json


def run_now_payload(operator: Any, context: Any) -> dict[str, Any]:
    """The ``run-now`` body as the installed provider would send it (runs ``cancel_previous_runs``)."""
    prepare = getattr(operator, "_prepare_run_now_json", None)
    if prepare is not None:
        return dict(prepare(context))
    json = _merged(operator)
    validate = getattr(operator, "_validate_merged_json", None)
    if validate is not None:
        validate(json)
    json = _resolve_job_name(operator, json)
    if operator.cancel_previous_runs:
        if (job_id := json.get("job_id")) is None:
            raise ValueError("cancel_previous_runs=True requires either job_id or job_name to be provided.")
        operator._hook.cancel_all_runs(job_id)
    if not json.get("job_parameters") and operator.params:
        json["job_parameters"] = dict(operator.params)
    operator._merged_json = json  # the provider's repair path reads it
    return dict(json)


def prepare_run_now_reconnect(operator: Any, context: Any) -> None:
    """Give the provider's repair path the payload it reads, without cancelling any run."""
    build = getattr(operator, "_build_run_now_payload", None)
    if build is not None:
        if not getattr(operator, "_merged_json", None):
            operator._merged_json = build(context)
        return
    if hasattr(operator, "_get_merged_json"):  # 7.16.1: repair reads _merged_json
        if not getattr(operator, "_merged_json", None):
            operator._merged_json = _resolve_job_name(operator, _merged(operator))
        return
    _resolve_job_name(operator, operator.json)  # earlier releases read operator.json


def _resolve_job_name(operator: Any, json: dict[str, Any]) -> dict[str, Any]:
    if "job_name" in json:
        job_id = operator._hook.find_job_id_by_name(json["job_name"])
        if job_id is None:
            raise ValueError(f"Job ID for job name {json['job_name']} can not be found")
        json["job_id"] = job_id
        del json["job_name"]
    return json


_HOOK_ERROR = re.compile(r"Response: (\{.*\}), Status Code: (\d+)$", re.DOTALL)


def is_deleted_token(error: BaseException) -> bool:
    """Whether a submit error is the Jobs API refusing an idempotency token whose run was deleted ("If a
    run with the provided token is deleted, an error is returned"). The answer's code is not documented:
    a 400 ``INVALID_PARAMETER_VALUE`` whose message names the idempotency token as deleted qualifies, no
    other error (a rate limit, a bad payload) does."""
    found = _HOOK_ERROR.search(str(error))
    if found is None or int(found.group(2)) != 400:
        return False
    try:
        body = json.loads(found.group(1))
    except ValueError:
        return False
    if not isinstance(body, dict) or body.get("error_code") != "INVALID_PARAMETER_VALUE":
        return False
    message = str(body.get("message", "")).lower()
    return "idempotency token" in message and "deleted" in message


def is_not_found(error: BaseException) -> bool:
    """Whether a hook error means "the run does not exist" (deleted, or its history expired)."""
    status = getattr(error, "http_status_code", None)
    if status is not None:
        return status == 404
    return "Status Code: 404" in str(error)
