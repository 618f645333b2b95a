"""Test-session setup: a throwaway AIRFLOW_HOME before anything imports Airflow, fully offline."""

from __future__ import annotations

import atexit
import os
import shutil
import tempfile

# Airflow reads its home and config at import time, so this must run before any test module imports it.
_home = tempfile.mkdtemp(prefix="airflow-durable-tests-")
atexit.register(shutil.rmtree, _home, ignore_errors=True)  # each pytest process removes its own home
os.environ["AIRFLOW_HOME"] = _home
os.environ.setdefault("AIRFLOW__CORE__LOAD_EXAMPLES", "False")
os.environ.setdefault("AIRFLOW__CORE__DAGS_FOLDER", os.path.join(os.path.dirname(__file__), "e2e", "dags"))
os.environ.setdefault("AIRFLOW__DATABASE__SQL_ALCHEMY_CONN", f"sqlite:///{_home}/airflow.db")
# No OpenLineage / telemetry traffic from a test run.
os.environ.setdefault("AIRFLOW__OPENLINEAGE__DISABLED", "True")
os.environ.setdefault("SCARF_ANALYTICS", "false")
os.environ.setdefault("DO_NOT_TRACK", "1")
# The emulators check every request and answer against the services' published contracts; in this
# suite a violation fails the test (airflow_durable.testing.contracts).
os.environ.setdefault("AIRFLOW_DURABLE_EMULATOR_CONTRACTS", "strict")


def pytest_sessionstart(session):  # type: ignore[no-untyped-def]
    from tests.reporting import REPORT

    if not hasattr(session.config, "workerinput"):  # the controller, or a run without xdist
        REPORT.unlink(missing_ok=True)


def pytest_terminal_summary(terminalreporter):  # type: ignore[no-untyped-def]
    from tests.reporting import sections

    for title, lines in sections().items():
        terminalreporter.section(title)
        for line in sorted(lines):
            terminalreporter.write_line(line)
