"""Every emulator answers to the same names; the old ones still work for a release and warn."""

from __future__ import annotations

import json
from typing import Any

import pytest

from airflow_durable.testing import BigQueryEmulator, DatabricksEmulator, DbtCloudEmulator, SnowflakeEmulator

HTTP_EMULATORS = [DatabricksEmulator, SnowflakeEmulator, BigQueryEmulator, DbtCloudEmulator]


@pytest.mark.parametrize("cls", HTTP_EMULATORS, ids=lambda c: c.__name__)
def test_the_shared_names(cls: type[Any]) -> None:
    with cls(lifecycle=["RUNNING"]) as emulator:
        assert emulator.jobs == {} and emulator.lifecycle == ["RUNNING"]
        with pytest.raises(KeyError, match=f"the {emulator.title} emulator has no"):
            emulator.latest_job()
        with pytest.raises(KeyError, match="; "):
            emulator.job("404")
        env: dict[str, str] = {}
        name = emulator.install_connection(env)
        assert name == f"AIRFLOW_CONN_{emulator.default_conn_id.upper()}"
        assert json.loads(env[name]) == emulator.connection()
        assert emulator.install_connection(env, conn_id="other") == "AIRFLOW_CONN_OTHER"
        with pytest.raises(ValueError):
            emulator.lifecycle = []


def test_job_records_share_the_time_unit_and_reads(databricks_emulator: DatabricksEmulator) -> None:
    import time

    import requests

    before = time.time()
    url = f"{databricks_emulator.url}/api/2.2/jobs/runs/"
    headers = {"Authorization": f"Bearer {databricks_emulator.token}"}
    run_ids = [
        requests.post(url + "submit", json={"run_name": "x"}, headers=headers, timeout=10).json()["run_id"]
        for _ in range(2)
    ]
    first, second = (databricks_emulator.job(i) for i in run_ids)
    assert before <= first.created_at < second.created_at <= time.time()  # seconds, strictly ordered
    assert first.start_time == int(first.created_at * 1000)  # the API's own field stays milliseconds
    assert databricks_emulator.latest_job() is second
    requests.get(url + "get", params={"run_id": first.id}, headers=headers, timeout=10)
    assert first.reads == 1 and first.state == "RUNNING"


def test_the_old_names_warn_and_still_work(tmp_path: Any) -> None:
    dbx = DatabricksEmulator()
    with pytest.warns(DeprecationWarning, match=r"DatabricksEmulator\.runs is deprecated, use \.jobs"):
        assert dbx.runs is dbx.jobs
    with pytest.warns(DeprecationWarning, match="latest_run"), pytest.raises(KeyError):
        dbx.latest_run()
    sf = SnowflakeEmulator()
    with pytest.warns(DeprecationWarning, match="statements"):
        assert sf.statements is sf.jobs
    with pytest.warns(DeprecationWarning, match="certificates"):
        assert sf.certificates is sf.ca
    with BigQueryEmulator() as bq:
        env: dict[str, str] = {}
        with pytest.warns(DeprecationWarning, match="install_connection"):
            bq.install(env)
        assert env["BIGQUERY_EMULATOR_HOST"] == bq.url and "AIRFLOW_CONN_GOOGLE_CLOUD_DEFAULT" in env
