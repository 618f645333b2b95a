"""pytest fixtures for testing DAGs against the offline service emulators.

pytest loads this plugin automatically once ``airflow-durable`` is installed (``pytest11`` entry
point). It only defines fixtures: nothing changes in a test session unless a test asks for one,
and loading it imports neither Airflow nor any provider.

Fixtures:

``durable_ledger``
    A fresh `Ledger` shared by every emulator of the test.

``databricks_emulator``
    A started `DatabricksEmulator` recording into ``durable_ledger``,
    with the ``databricks_default`` connection pointing at it (through ``monkeypatch``, so it is
    undone at teardown); stopped at teardown.

``snowflake_emulator``
    A started `SnowflakeEmulator` recording into ``durable_ledger``,
    with the ``snowflake_default`` connection pointing at it and this process (and its child
    processes, through the environment) routing ``*.snowflakecomputing.com`` to it over TLS with a
    throwaway CA (all through ``monkeypatch``, undone at teardown); stopped at teardown.

``bigquery_emulator``
    A started `BigQueryEmulator` recording into ``durable_ledger``,
    with ``BIGQUERY_EMULATOR_HOST`` and the ``google_cloud_default`` connection (anonymous
    credentials) pointing at it through ``monkeypatch``; stopped at teardown.

``redshift_data_emulator`` / ``batch_emulator``
    A started `RedshiftDataEmulator` /
    `BatchEmulator` recording into ``durable_ledger``, with the
    ``aws_default`` connection (fake credentials, ``endpoint_url`` → the emulator) installed through
    ``monkeypatch``. They share one moto server per test process (started on first use, reset for
    every test), so only the first AWS test of a worker pays moto's start-up. ``AWS_DATA_PATH`` points
    at a trimmed botocore endpoints file (see ``AwsEmulator.install_fast_botocore``).

Example::

    from airflow.providers.databricks.hooks.databricks import DatabricksHook

    def test_my_dag_submits_once(databricks_emulator, durable_ledger):
        databricks_emulator.lifecycle = ["PENDING", "RUNNING", "TERMINATED:SUCCESS"]
        databricks_emulator.faults.add(path_contains="runs/get", status=503, times=2)
        ...  # run the DAG / operator under test, e.g. dag.test()
        assert len(durable_ledger.submissions("databricks")) == 1

``dbt_cloud_emulator``
    A started `DbtCloudEmulator` (HTTPS on loopback with a throwaway
    CA) recording into ``durable_ledger``, with the ``dbt_cloud_default`` connection and the CA
    variables (``REQUESTS_CA_BUNDLE``, ``SSL_CERT_FILE``) set through ``monkeypatch``; stopped at teardown.

``emr_emulator`` / ``emr_serverless_emulator`` / ``emr_containers_emulator``
    A started `EmrEmulator` (steps on the cluster
    ``emr_emulator.cluster_id``), `EmrServerlessEmulator`
    (application ``.application_id``) or `EmrContainersEmulator`
    (virtual cluster ``.virtual_cluster_id``) recording into ``durable_ledger``, with the
    ``aws_default`` connection pointing at it; stopped at teardown.

To use another connection id, install it yourself:
``databricks_emulator.install_connection(monkeypatch.setenv, conn_id="my_dbx")``.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import TYPE_CHECKING, Any

import pytest

if TYPE_CHECKING:
    from airflow_durable.testing import (
        BatchEmulator,
        BigQueryEmulator,
        DatabricksEmulator,
        DbtCloudEmulator,
        Ledger,
        RedshiftDataEmulator,
        SnowflakeEmulator,
    )
    from airflow_durable.testing.aws import AwsEmulator
    from airflow_durable.testing.emr import EmrContainersEmulator, EmrEmulator, EmrServerlessEmulator


@pytest.fixture(autouse=True)
def _durable_emulator_contracts() -> Iterator[None]:
    """In strict contract mode, fail the test during which an emulator broke its service's contract.

    Nothing is recorded (and nothing imported) unless a test started an emulator; see
    `airflow_durable.testing.contracts`.
    """
    import sys

    contracts = sys.modules.get("airflow_durable.testing.contracts")
    start = contracts.recorded_count() if contracts is not None else 0
    yield
    contracts = sys.modules.get("airflow_durable.testing.contracts")
    if contracts is None or contracts.mode() != "strict":
        return
    failures = contracts.strict_failures(start)
    if failures:
        listed = "\n".join(f"  - {v}" for v in failures)
        pytest.fail(
            f"an emulator met {len(failures)} contract violation(s) during this test:\n{listed}\n"
            "(fix the emulator, or wrap a deliberate one in airflow_durable.testing.contracts."
            "expect_violations())",
            pytrace=False,
        )


def pytest_sessionfinish(session: pytest.Session) -> None:
    """With ``AIRFLOW_DURABLE_CONTRACT_LOG=<dir>``, write the operations the emulators served there."""
    import json
    import os
    import sys

    target = os.environ.get("AIRFLOW_DURABLE_CONTRACT_LOG")
    contracts = sys.modules.get("airflow_durable.testing.contracts")
    if not target or contracts is None:
        return
    os.makedirs(target, exist_ok=True)
    seen = sorted([*key, source] for key, source in contracts.seen_operations().items())
    with open(os.path.join(target, f"seen-{os.getpid()}.json"), "w") as f:
        json.dump(seen, f)


@pytest.fixture
def durable_ledger() -> Ledger:
    """A fresh ledger of every mutating call the test's emulators receive."""
    from airflow_durable.testing._core import Ledger

    return Ledger()


def _installed(emulator: Any, monkeypatch: pytest.MonkeyPatch, conn_id: str) -> Iterator[Any]:
    """``emulator`` started, its connection installed through ``monkeypatch``; stopped at teardown."""
    with emulator:
        emulator.install_connection(monkeypatch.setenv, conn_id=conn_id)
        if hasattr(emulator, "install_fast_botocore"):
            emulator.install_fast_botocore(monkeypatch.setenv)
        yield emulator
        errors = list(emulator.server.errors)
    # An exception inside the emulator is a bug in it, never a scripted fault: don't let it hide.
    if errors:
        name = emulator.title or emulator.system
        raise AssertionError(f"the {name} emulator raised while serving the test: {errors!r}")


# The emulator modules are imported in the fixtures, so that merely loading the plugin stays cheap.
@pytest.fixture
def databricks_emulator(
    durable_ledger: Ledger, monkeypatch: pytest.MonkeyPatch
) -> Iterator[DatabricksEmulator]:
    """A running Databricks Jobs API emulator installed as the ``databricks_default`` connection."""
    from airflow_durable.testing.databricks import DatabricksEmulator

    yield from _installed(DatabricksEmulator(ledger=durable_ledger), monkeypatch, "databricks_default")


@pytest.fixture
def snowflake_emulator(
    durable_ledger: Ledger, monkeypatch: pytest.MonkeyPatch
) -> Iterator[SnowflakeEmulator]:
    """A running Snowflake SQL API emulator installed as the ``snowflake_default`` connection."""
    from airflow_durable.testing.snowflake import SnowflakeEmulator

    yield from _installed(SnowflakeEmulator(ledger=durable_ledger), monkeypatch, "snowflake_default")


@pytest.fixture
def dbt_cloud_emulator(durable_ledger: Ledger, monkeypatch: pytest.MonkeyPatch) -> Iterator[DbtCloudEmulator]:
    """A running dbt Cloud v2 API emulator installed as the ``dbt_cloud_default`` connection."""
    from airflow_durable.testing.dbt_cloud import DbtCloudEmulator

    yield from _installed(DbtCloudEmulator(ledger=durable_ledger), monkeypatch, "dbt_cloud_default")


@pytest.fixture
def bigquery_emulator(durable_ledger: Ledger, monkeypatch: pytest.MonkeyPatch) -> Iterator[BigQueryEmulator]:
    """A running BigQuery jobs API emulator installed as the ``google_cloud_default`` connection."""
    from airflow_durable.testing.bigquery import BigQueryEmulator

    yield from _installed(BigQueryEmulator(ledger=durable_ledger), monkeypatch, "google_cloud_default")


def _aws_emulator(emulator: AwsEmulator, monkeypatch: pytest.MonkeyPatch) -> Iterator[Any]:
    yield from _installed(emulator, monkeypatch, "aws_default")


@pytest.fixture
def redshift_data_emulator(
    durable_ledger: Ledger, monkeypatch: pytest.MonkeyPatch
) -> Iterator[RedshiftDataEmulator]:
    """A running Redshift Data API emulator installed as the ``aws_default`` connection."""
    from airflow_durable.testing.redshift_data import RedshiftDataEmulator

    yield from _aws_emulator(RedshiftDataEmulator(ledger=durable_ledger), monkeypatch)


@pytest.fixture
def batch_emulator(durable_ledger: Ledger, monkeypatch: pytest.MonkeyPatch) -> Iterator[BatchEmulator]:
    """A running AWS Batch emulator (moto behind the front) installed as the ``aws_default`` connection."""
    from airflow_durable.testing.batch import BatchEmulator

    yield from _aws_emulator(BatchEmulator(ledger=durable_ledger), monkeypatch)


@pytest.fixture
def emr_emulator(durable_ledger: Ledger, monkeypatch: pytest.MonkeyPatch) -> Iterator[EmrEmulator]:
    """EMR steps on an emulated cluster, installed as the ``aws_default`` connection."""
    from airflow_durable.testing.emr import EmrEmulator

    yield from _aws_emulator(EmrEmulator(ledger=durable_ledger), monkeypatch)


@pytest.fixture
def emr_serverless_emulator(
    durable_ledger: Ledger, monkeypatch: pytest.MonkeyPatch
) -> Iterator[EmrServerlessEmulator]:
    """EMR Serverless job runs on an emulated application, installed as the ``aws_default`` connection."""
    from airflow_durable.testing.emr import EmrServerlessEmulator

    yield from _aws_emulator(EmrServerlessEmulator(ledger=durable_ledger), monkeypatch)


@pytest.fixture
def emr_containers_emulator(
    durable_ledger: Ledger, monkeypatch: pytest.MonkeyPatch
) -> Iterator[EmrContainersEmulator]:
    """EMR on EKS job runs on an emulated virtual cluster, installed as the ``aws_default`` connection."""
    from airflow_durable.testing.emr import EmrContainersEmulator

    yield from _aws_emulator(EmrContainersEmulator(ledger=durable_ledger), monkeypatch)
