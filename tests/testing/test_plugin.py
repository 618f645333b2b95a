"""The pytest plugin and the import promises of ``airflow_durable.testing``."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap

from airflow_durable.testing import DatabricksEmulator, Ledger

pytest_plugins = ["pytester"]


def test_importing_the_package_and_plugin_imports_no_airflow_and_no_client_library():
    code = textwrap.dedent(
        """
        import sys
        import airflow_durable.testing
        import airflow_durable.testing.databricks
        import airflow_durable.testing.bigquery
        import airflow_durable.testing.pytest_plugin
        heavy = sorted(
            m for m in sys.modules if m.split(".")[0] in ("airflow", "requests", "aiohttp", "tenacity")
        )
        print(heavy)
        """
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]", out.stdout


def test_fixtures_share_the_ledger_and_install_the_connection(databricks_emulator, durable_ledger):
    assert isinstance(durable_ledger, Ledger)
    assert isinstance(databricks_emulator, DatabricksEmulator)
    assert databricks_emulator.ledger is durable_ledger
    assert databricks_emulator.server.running
    conn = json.loads(os.environ["AIRFLOW_CONN_DATABRICKS_DEFAULT"])
    assert conn["port"] == databricks_emulator.port


def test_plugin_in_a_user_session(pytester):
    """A user's test session gets the fixtures; the connection and server are gone at teardown."""
    pytester.makepyfile(
        textwrap.dedent(
            """
            import os
            import requests

            seen = {}

            def test_uses_it(databricks_emulator, durable_ledger):
                seen["url"] = databricks_emulator.url
                seen["emulator"] = databricks_emulator
                r = requests.post(
                    databricks_emulator.url + "/api/2.2/jobs/runs/submit",
                    json={"run_name": "x"},
                    headers={"Authorization": "Bearer " + databricks_emulator.token},
                )
                assert r.status_code == 200
                assert len(durable_ledger.submissions("databricks")) == 1

            def test_after():
                assert "AIRFLOW_CONN_DATABRICKS_DEFAULT" not in os.environ
                assert not seen["emulator"].server.running
                try:
                    requests.get(seen["url"], timeout=2)
                except requests.ConnectionError:
                    pass
                else:
                    raise AssertionError("the emulator still answers after teardown")

            def test_without_fixtures():
                assert "AIRFLOW_CONN_DATABRICKS_DEFAULT" not in os.environ
            """
        )
    )
    # The entry point loads the plugin once installed; load it explicitly otherwise.
    args = ["-p", "airflow_durable.testing.pytest_plugin"] if not _entry_point_installed() else []
    result = pytester.runpytest_subprocess(*args, "-p", "no:cacheprovider")
    result.assert_outcomes(passed=3)


def test_emulator_bug_surfaces_at_teardown(pytester):
    pytester.makepyfile(
        textwrap.dedent(
            """
            def test_bug(databricks_emulator):
                databricks_emulator.server.errors.append(RuntimeError("handler bug"))
            """
        )
    )
    args = ["-p", "airflow_durable.testing.pytest_plugin"] if not _entry_point_installed() else []
    result = pytester.runpytest_subprocess(*args, "-p", "no:cacheprovider")
    result.assert_outcomes(passed=1, errors=1)
    result.stdout.fnmatch_lines(["*handler bug*"])


def _entry_point_installed() -> bool:
    from importlib.metadata import entry_points

    return any(ep.value == "airflow_durable.testing.pytest_plugin" for ep in entry_points(group="pytest11"))
