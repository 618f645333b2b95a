"""pytest fixtures for testing DAGs against the offline service emulators.

pytest loads this plugin automatically once ``airflow-durable`` is installed (``pytest11`` entry
point). It only defines fixtures: nothing changes in a test session unless a test asks for one,
and loading it imports neither Airflow nor any provider.

Fixtures:

``durable_ledger``
    A fresh :class:`~airflow_durable.testing.Ledger` shared by every emulator of the test.

``databricks_emulator``
    A started :class:`~airflow_durable.testing.DatabricksEmulator` recording into ``durable_ledger``,
    with the ``databricks_default`` connection pointing at it (through ``monkeypatch``, so it is
    undone at teardown); stopped at teardown.

Example::

    from airflow.providers.databricks.hooks.databricks import DatabricksHook

    def test_my_dag_submits_once(databricks_emulator, durable_ledger):
        databricks_emulator.lifecycle = ["PENDING", "RUNNING", "TERMINATED:SUCCESS"]
        databricks_emulator.faults.add(path_contains="runs/get", status=503, times=2)
        ...  # run the DAG / operator under test, e.g. dag.test()
        assert len(durable_ledger.submissions("databricks")) == 1

``emr_emulator`` / ``emr_serverless_emulator`` / ``emr_containers_emulator``
    A started :class:`~airflow_durable.testing.emr.EmrEmulator` (steps on the cluster
    ``emr_emulator.cluster_id``), :class:`~airflow_durable.testing.emr.EmrServerlessEmulator`
    (application ``.application_id``) or :class:`~airflow_durable.testing.emr.EmrContainersEmulator`
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
    from airflow_durable.testing import DatabricksEmulator, Ledger
    from airflow_durable.testing.aws import AwsEmulator
    from airflow_durable.testing.emr import EmrContainersEmulator, EmrEmulator, EmrServerlessEmulator


@pytest.fixture
def durable_ledger() -> Ledger:
    """A fresh ledger of every mutating call the test's emulators receive."""
    from airflow_durable.testing._core import Ledger

    return Ledger()


@pytest.fixture
def databricks_emulator(
    durable_ledger: Ledger, monkeypatch: pytest.MonkeyPatch
) -> Iterator[DatabricksEmulator]:
    """A running Databricks Jobs API emulator installed as the ``databricks_default`` connection."""
    # Imported here so that merely loading the plugin stays cheap for every pytest run.
    from airflow_durable.testing.databricks import DatabricksEmulator

    with DatabricksEmulator(ledger=durable_ledger) as emulator:
        emulator.install_connection(monkeypatch.setenv, conn_id="databricks_default")
        yield emulator
        errors = list(emulator.server.errors)
    # An exception inside the emulator is a bug in it, never a scripted fault: don't let it hide.
    if errors:
        raise AssertionError(f"the Databricks emulator raised while serving the test: {errors!r}")


def _serve_aws(emulator: AwsEmulator, monkeypatch: pytest.MonkeyPatch) -> Iterator[Any]:
    with emulator:
        emulator.install_connection(monkeypatch.setenv, conn_id="aws_default")
        yield emulator
        errors = list(emulator.server.errors)
    if errors:
        raise AssertionError(f"the {emulator.system} emulator raised while serving the test: {errors!r}")


@pytest.fixture
def emr_emulator(durable_ledger: Ledger, monkeypatch: pytest.MonkeyPatch) -> Iterator[EmrEmulator]:
    """EMR steps on an emulated cluster, installed as the ``aws_default`` connection."""
    from airflow_durable.testing.emr import EmrEmulator

    yield from _serve_aws(EmrEmulator(ledger=durable_ledger), monkeypatch)


@pytest.fixture
def emr_serverless_emulator(
    durable_ledger: Ledger, monkeypatch: pytest.MonkeyPatch
) -> Iterator[EmrServerlessEmulator]:
    """EMR Serverless job runs on an emulated application, installed as the ``aws_default`` connection."""
    from airflow_durable.testing.emr import EmrServerlessEmulator

    yield from _serve_aws(EmrServerlessEmulator(ledger=durable_ledger), monkeypatch)


@pytest.fixture
def emr_containers_emulator(
    durable_ledger: Ledger, monkeypatch: pytest.MonkeyPatch
) -> Iterator[EmrContainersEmulator]:
    """EMR on EKS job runs on an emulated virtual cluster, installed as the ``aws_default`` connection."""
    from airflow_durable.testing.emr import EmrContainersEmulator

    yield from _serve_aws(EmrContainersEmulator(ledger=durable_ledger), monkeypatch)
