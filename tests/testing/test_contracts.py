"""The emulators' contract checks can fail: a wrong field in an answer is caught, for every system.

Each negative test makes one emulator answer a real call with a member its service's published contract
does not have, then checks that strict mode turns the answer into a 500 naming the member and records the
violation, and that record mode lets the answer through but still records it.
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Callable
from typing import Any

import pytest
import requests

from airflow_durable.testing import contracts
from airflow_durable.testing._core import Response
from airflow_durable.testing.contracts import expect_violations

BOGUS = "notInTheContract"


def _break_answers(monkeypatch: pytest.MonkeyPatch, emulator: Any, where: Callable[[Any], dict]) -> None:
    """Make the emulator's handler add ``BOGUS`` to the object ``where(body)`` of every 2xx answer."""
    handle = emulator.server._handle

    def broken(request: Any) -> Response:
        response = handle(request)
        if response.status >= 300:
            return response
        body = json.loads(response.raw) if response.raw is not None else response.json
        where(body)[BOGUS] = 1
        return Response(response.status, body, headers=response.headers)

    monkeypatch.setattr(emulator.server, "_handle", broken)


def _check_both_modes(monkeypatch: pytest.MonkeyPatch, call: Callable[[], Any], system: str) -> None:
    monkeypatch.setenv(contracts.ENV, "strict")
    with expect_violations() as found:
        with pytest.raises(Exception, match="500|Internal|InternalServer"):
            call()
    assert found and all(v.system == system and v.direction == "response" for v in found), found
    assert BOGUS in str(found[0])
    monkeypatch.setenv(contracts.ENV, "record")
    with expect_violations() as found:
        call()  # served as it is
    assert found and BOGUS in str(found[0])


# --------------------------------------------------------------------------- HTTP emulators
def test_databricks_answer_with_a_field_the_sdk_lacks_fails(databricks_emulator, monkeypatch):
    databricks_emulator.add_job(job_id=42)
    _break_answers(monkeypatch, databricks_emulator, lambda body: body)
    url = f"{databricks_emulator.url}/api/2.2/jobs/list"
    headers = {"Authorization": f"Bearer {databricks_emulator.token}"}

    def call() -> Any:
        answer = requests.get(url, headers=headers, timeout=10)
        answer.raise_for_status()
        return answer

    _check_both_modes(monkeypatch, call, "databricks")


def test_bigquery_answer_with_a_property_the_discovery_document_lacks_fails(bigquery_emulator, monkeypatch):
    _break_answers(monkeypatch, bigquery_emulator, lambda body: body["status"])
    url = f"{bigquery_emulator.url}/bigquery/v2/projects/p/jobs"

    def call() -> Any:
        body = {
            "jobReference": {"jobId": f"j_{uuid.uuid4().hex}"},
            "configuration": {"query": {"query": "x"}},
        }
        answer = requests.post(url, json=body, timeout=10)
        answer.raise_for_status()
        return answer

    _check_both_modes(monkeypatch, call, "bigquery")


def test_snowflake_answer_with_a_field_the_document_lacks_fails(snowflake_emulator, monkeypatch):
    _break_answers(monkeypatch, snowflake_emulator, lambda body: body)
    headers = {"Authorization": f"Bearer {snowflake_emulator.token}"}

    def call() -> Any:
        answer = requests.post(
            f"{snowflake_emulator.url}/api/v2/statements",
            params={"requestId": str(uuid.uuid4()), "async": "true"},
            json={"statement": "select 1"},
            headers=headers,
            timeout=10,
        )
        answer.raise_for_status()
        return answer

    _check_both_modes(monkeypatch, call, "snowflake")


def test_dbt_cloud_answer_with_a_field_the_document_lacks_fails(dbt_cloud_emulator, monkeypatch):
    _break_answers(monkeypatch, dbt_cloud_emulator, lambda body: body["data"])
    url = f"https://{dbt_cloud_emulator.host}/api/v2/accounts/{dbt_cloud_emulator.account_id}/"
    headers = {"Authorization": f"Token {dbt_cloud_emulator.token}"}

    def call() -> Any:
        answer = requests.get(url, headers=headers, timeout=10, verify=str(dbt_cloud_emulator.ca.ca_file))
        answer.raise_for_status()
        return answer

    _check_both_modes(monkeypatch, call, "dbt_cloud")


# --------------------------------------------------------------------------- AWS emulators
AWS_CALLS: dict[str, tuple[str, Callable[[Any, Any], Any]]] = {
    "batch_emulator": ("batch", lambda emu, client: client.list_jobs(jobQueue=emu.job_queue)),
    "redshift_data_emulator": ("redshift-data", lambda emu, client: client.list_statements()),
    "emr_emulator": ("emr", lambda emu, client: client.list_steps(ClusterId=emu.cluster_id)),
    "emr_serverless_emulator": (
        "emr-serverless",
        lambda emu, client: client.get_application(applicationId=emu.application_id),
    ),
    "emr_containers_emulator": (
        "emr-containers",
        lambda emu, client: client.list_job_runs(virtualClusterId=emu.virtual_cluster_id),
    ),
}


@pytest.mark.parametrize("fixture", list(AWS_CALLS))
def test_aws_answer_with_a_member_the_botocore_model_lacks_fails(fixture, request, monkeypatch):
    pytest.importorskip("moto")
    emulator = request.getfixturevalue(fixture)
    system, list_call = AWS_CALLS[fixture]
    _break_answers(monkeypatch, emulator, lambda body: body)
    client = emulator.client(max_attempts=1)
    _check_both_modes(monkeypatch, lambda: list_call(emulator, client), system)


def test_aws_answer_missing_a_required_member_fails(redshift_data_emulator, monkeypatch):
    handle = redshift_data_emulator.server._handle

    def without_statements(request: Any) -> Response:
        response = handle(request)
        body = json.loads(response.raw) if response.raw is not None else response.json
        body.pop("Statements", None)
        return Response(response.status, body, headers=response.headers)

    monkeypatch.setattr(redshift_data_emulator.server, "_handle", without_statements)
    client = redshift_data_emulator.client(max_attempts=1)
    with expect_violations() as found, pytest.raises(Exception, match="InternalServer"):
        client.list_statements()
    assert "Missing required parameter" in str(found[0]) and "Statements" in str(found[0])


# --------------------------------------------------------------------------- requests, routes
def test_a_request_the_sdk_does_not_know_is_recorded(databricks_emulator):
    url = f"{databricks_emulator.url}/api/2.2/jobs/runs/submit"
    headers = {"Authorization": f"Bearer {databricks_emulator.token}"}
    with expect_violations() as found:
        requests.post(url, json={"run_name": "x", "no_such_argument": 1}, headers=headers, timeout=10)
    assert [(v.operation, v.direction) for v in found] == [("jobs/runs/submit", "request")]
    assert "no_such_argument" in str(found[0])
    assert databricks_emulator.contract_violations == found


def test_off_mode_checks_nothing(databricks_emulator, monkeypatch):
    monkeypatch.setenv(contracts.ENV, "off")
    url = f"{databricks_emulator.url}/api/2.2/jobs/runs/submit"
    headers = {"Authorization": f"Bearer {databricks_emulator.token}"}
    with expect_violations() as found:
        requests.post(url, json={"run_name": "x", "no_such_argument": 1}, headers=headers, timeout=10)
    assert found == []


def test_a_bad_mode_is_a_clear_error(monkeypatch):
    monkeypatch.setenv(contracts.ENV, "lenient")
    with pytest.raises(ValueError, match="off, record, strict"):
        contracts.mode()


# --------------------------------------------------------------------------- token windows and deletion
def test_a_lapsed_token_no_longer_deduplicates(databricks_emulator):
    from airflow.providers.databricks.hooks.databricks import DatabricksHook

    hook = DatabricksHook(retry_limit=1)
    payload = {"run_name": "x", "tasks": [{"task_key": "a"}], "idempotency_token": "afd-t"}
    first = hook.submit_run(payload)
    assert hook.submit_run(payload) == first
    databricks_emulator.forget_token("afd-t")
    assert hook.submit_run(payload) != first
    databricks_emulator.token_window = 0.0
    assert len({hook.submit_run(payload) for _ in range(2)}) == 2


def test_a_deleted_runs_token_answers_an_error(databricks_emulator):
    from airflow.exceptions import AirflowException
    from airflow.providers.databricks.hooks.databricks import DatabricksHook

    hook = DatabricksHook(retry_limit=1)
    payload = {"run_name": "x", "tasks": [{"task_key": "a"}], "idempotency_token": "afd-d"}
    run_id = hook.submit_run(payload)
    databricks_emulator.delete(run_id)
    with pytest.raises(AirflowException, match="was deleted"):
        hook.submit_run(payload)
    assert databricks_emulator.ledger.count(created=True) == 1


def test_an_aws_token_window_lapses(redshift_data_emulator):
    client = redshift_data_emulator.client()
    kwargs = dict(Sql="select 1", ClusterIdentifier="c", Database="d", ClientToken="afd-w")
    first = client.execute_statement(**kwargs)["Id"]
    assert client.execute_statement(**kwargs)["Id"] == first
    redshift_data_emulator.forget_token("afd-w")
    assert client.execute_statement(**kwargs)["Id"] != first


# --------------------------------------------------------------------------- a contract's library missing
# Each case runs in a fresh interpreter where the contract's library cannot be imported (``None`` in
# sys.modules, as Python treats a module that is absent), so the process-wide caches start empty.
_MISSING = {
    # system: (emulator class, the library's top-level module, a request: method, path, body)
    "databricks": ("DatabricksEmulator", "databricks", ("GET", "/api/2.2/jobs/list", None)),
    "bigquery": (
        "BigQueryEmulator",
        "googleapiclient",
        ("POST", "/bigquery/v2/projects/p/jobs", {"configuration": {"query": {"query": "x"}}}),
    ),
}
_PROBE = """
import json, os, sys, warnings, urllib.error, urllib.request
sys.modules[{module!r}] = None
os.environ[{env!r}] = {start_mode!r}
warnings.simplefilter("always")
from airflow_durable.testing import {cls}
from airflow_durable.testing import contracts
out = {{}}
try:
    emulator = {cls}().start()
except contracts.ContractViolation as err:
    print(json.dumps({{"raised": str(err)}}))
    raise SystemExit(0)
os.environ[{env!r}] = {then_mode!r}
method, path, body = {call!r}
statuses = []
with warnings.catch_warnings(record=True) as caught:
    warnings.simplefilter("always")
    for _ in range(2):
        request = urllib.request.Request(
            emulator.url + path, method=method, data=None if body is None else json.dumps(body).encode(),
            headers={{"Authorization": "Bearer " + getattr(emulator, "token", ""),
                     "Content-Type": "application/json"}},
        )
        try:
            with urllib.request.urlopen(request, timeout=10) as answer:
                statuses.append(answer.status)
        except urllib.error.HTTPError as err:
            statuses.append(err.code)
            out["body"] = err.read().decode()
emulator.stop()
out["statuses"] = statuses
out["warnings"] = [f"{{w.category.__name__}}: {{w.message}}" for w in caught]
out["violations"] = [str(v) for v in contracts.strict_failures()]
print(json.dumps(out))
"""


def _without_library(system: str, start_mode: str, then_mode: str) -> dict[str, Any]:
    import subprocess
    import sys

    cls, module, call = _MISSING[system]
    code = _PROBE.format(
        module=module, env=contracts.ENV, start_mode=start_mode, then_mode=then_mode, cls=cls, call=call
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr[-3000:]
    return json.loads(done.stdout.strip().splitlines()[-1])


@pytest.mark.parametrize("system", sorted(_MISSING))
def test_strict_mode_refuses_to_start_an_emulator_whose_contract_library_is_missing(system):
    found = _without_library(system, "strict", "strict")
    assert "raised" in found, found
    assert f"the {system} emulator cannot check its service's contract" in found["raised"]
    assert 'pip install "airflow-durable[testing]"' in found["raised"]


@pytest.mark.parametrize("system", sorted(_MISSING))
def test_strict_mode_fails_each_call_when_switched_on_after_the_start(system):
    found = _without_library(system, "record", "strict")
    assert found["statuses"] == [500, 500], found
    assert "cannot check its service's contract" in found["body"], found
    assert len(found["violations"]) == 2 and 'airflow-durable[testing]"' in found["violations"][0], found


@pytest.mark.parametrize("system", sorted(_MISSING))
def test_record_mode_serves_unchecked_and_warns_once(system):
    found = _without_library(system, "record", "record")
    assert all(status < 300 for status in found["statuses"]), found
    assert found["violations"] == []
    (warning,) = found["warnings"]
    assert warning.startswith("ContractUnavailableWarning: the ") and "[testing]" in warning, warning
