"""docs/dev/emulator-fidelity.md is generated from the contract declarations and is never stale."""

from __future__ import annotations

from pathlib import Path

from airflow_durable.testing.contracts import fidelity
from airflow_durable.testing.contracts.routes import ROUTES, SYSTEMS, UNVALIDATED

ROOT = Path(__file__).resolve().parents[2]


def test_the_fidelity_page_is_fresh():
    assert fidelity.main(["--check", "--root", str(ROOT)]) == 0, (
        "run `python -m airflow_durable.testing.contracts.fidelity --write`"
    )


def test_a_hand_edited_page_is_stale(tmp_path):
    page = tmp_path / fidelity.PAGE
    page.parent.mkdir(parents=True)
    page.write_text(fidelity.render().replace("ListSteps", "ListStepz"))
    assert fidelity.main(["--check", "--root", str(tmp_path)]) == 1
    assert fidelity.main(["--write", "--root", str(tmp_path)]) == 0
    assert fidelity.main(["--check", "--root", str(tmp_path)]) == 0


def test_every_system_has_routes_and_says_what_is_unvalidated():
    assert set(ROUTES) == set(SYSTEMS) == set(UNVALIDATED)
    assert all(ROUTES[s] and UNVALIDATED[s] for s in SYSTEMS)


def test_every_emulator_route_is_declared():
    # The HTTP emulators' own routes: each is an operation of its contract, declared on the page (or,
    # for dbt Cloud's bare base URL, listed as unvalidated).
    from airflow_durable.testing._core import Request
    from airflow_durable.testing.bigquery import BigQueryEmulator
    from airflow_durable.testing.databricks import DatabricksEmulator
    from airflow_durable.testing.dbt_cloud import DbtCloudEmulator
    from airflow_durable.testing.snowflake import SnowflakeEmulator

    for cls in (DatabricksEmulator, SnowflakeEmulator, BigQueryEmulator, DbtCloudEmulator):
        emulator = cls()
        contract = emulator.server.contract.contract
        for method, pattern, _handler in cls.ROUTES:
            path = pattern.replace("{", "").replace("}", "")
            if path == "/api/v2/accounts":
                path += "/"
            operation = contract.operation(Request(method, path, {}, None, {}, "sync"))
            if path == "/":
                assert operation is None and "GET / (the hook's bare base URL)" in UNVALIDATED["dbt_cloud"]
                continue
            assert operation in ROUTES[contract.system], (cls.__name__, method, pattern, operation)
