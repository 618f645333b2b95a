"""Drop-in for users' tests: patching a name in the provider operator's module patches ours too.

Users test DAGs by patching the provider module's names, e.g.
``mock.patch("airflow.providers.google.cloud.operators.bigquery.BigQueryHook")``. Upstream looks those names
up at call time, so such a patch reaches the provider operator; it must reach the durable one as well. For
every registered operator, each name its code path uses is replaced there by a spy that still does the real
work (a subclass recording its construction, or a ``Mock(wraps=...)``), the task runs against its emulator
(try 1 dies after persisting the id, so try 2 reconnects: submit, reconnect and wait all run), and the test
asserts the spy was used.
"""

from __future__ import annotations

import contextlib
import importlib
from typing import Any
from unittest import mock

import pytest

from tests.conformance.systems import SYSTEMS, SystemCase
from tests.harness import DURABLE, TaskRunner, record_state

pytestmark = pytest.mark.skipif(
    not DURABLE, reason="Airflow < 3.3: no reconnect to exercise; the names are the same code either way"
)

_DATABRICKS = "airflow.providers.databricks.operators.databricks"
_SNOWFLAKE = "airflow.providers.snowflake.operators.snowflake"
_BIGQUERY = "airflow.providers.google.cloud.operators.bigquery"
_REDSHIFT = "airflow.providers.amazon.aws.operators.redshift_data"
_BATCH = "airflow.providers.amazon.aws.operators.batch"
_EMR = "airflow.providers.amazon.aws.operators.emr"
_EMR_HOOKS = "airflow.providers.amazon.aws.hooks.emr"
_DBT = "airflow.providers.dbt.cloud.operators.dbt"

SYNC, DEFERRABLE, BOTH = frozenset({False}), frozenset({True}), frozenset({False, True})

#: case id → ``(module, name, paths[, uses])``: the names each durable operator looks up in the provider's
#: module (where upstream looks them up too), on which path (``deferrable`` value) the task uses them, and
#: how many uses at least (default 1; more where the provider's own code we call uses the name as well).
PATCHES: dict[str, list[tuple[Any, ...]]] = {
    "databricks_submit_run": [
        (_DATABRICKS, "DatabricksHook", BOTH),
        (_DATABRICKS, "DatabricksExecutionTrigger", DEFERRABLE),
        # Ours in durable_event_id, then the provider's execute_complete.
        (_DATABRICKS, "validate_trigger_event", DEFERRABLE, 2),
        (_DATABRICKS, "RunState", DEFERRABLE),
    ],
    "databricks_run_now": [
        (_DATABRICKS, "DatabricksHook", BOTH),
        (_DATABRICKS, "DatabricksExecutionTrigger", DEFERRABLE),
        # Ours in durable_event_id, then the provider's execute_complete.
        (_DATABRICKS, "validate_trigger_event", DEFERRABLE, 2),
        (_DATABRICKS, "RunState", DEFERRABLE),
    ],
    "snowflake_sql_api": [
        (_SNOWFLAKE, "SnowflakeSqlApiHook", BOTH),
        (_SNOWFLAKE, "SnowflakeSqlApiTrigger", DEFERRABLE),
    ],
    "bigquery_insert_job": [
        (_BIGQUERY, "BigQueryHook", BOTH),
        (_BIGQUERY, "BigQueryInsertJobTrigger", DEFERRABLE),
    ],
    # The AWS operators build their hook from the class attribute ``aws_hook_class``, upstream and ours.
    "redshift_data": [(_REDSHIFT, "RedshiftDataTrigger", DEFERRABLE)],
    "batch": [
        (_BATCH, "BatchJobTrigger", DEFERRABLE),
        (_BATCH, "BatchJobDetailsLink", BOTH),
    ],
    "emr_add_steps": [
        (_EMR, "EmrAddStepsTrigger", DEFERRABLE),
        (_EMR, "EmrClusterLink", BOTH),
        (_EMR_HOOKS, "wait", SYNC),  # upstream's sync wait is EmrHook.add_job_flow_steps'
    ],
    "emr_serverless_start_job": [
        (_EMR, "EmrServerlessStartJobTrigger", DEFERRABLE),
        (_EMR, "wait", SYNC),
    ],
    "emr_container": [(_EMR, "EmrContainerTrigger", DEFERRABLE)],
    "dbt_cloud_run_job": [
        (_DBT, "DbtCloudHook", BOTH),
        (_DBT, "DbtCloudRunJobTrigger", DEFERRABLE),
        (_DBT, "validate_execute_complete_event", DEFERRABLE),
    ],
}


def test_every_registered_operator_lists_its_provider_names():
    assert sorted(PATCHES) == sorted(case.id for case in SYSTEMS)


class _Spy:
    """Records that the code under test used the patched object."""

    def __init__(self, real: Any) -> None:
        self.real = real
        self.uses: list[Any] = []
        if isinstance(real, type) and not hasattr(real, "persist") and not hasattr(real, "from_json"):
            spy = self

            class Recording(real):  # type: ignore[misc, valid-type]
                def __init__(self, *args: Any, **kwargs: Any) -> None:
                    spy.uses.append((args, kwargs))
                    super().__init__(*args, **kwargs)

            # Serializes (triggers: ``classpath``) and logs as the real class.
            Recording.__module__, Recording.__qualname__ = real.__module__, real.__qualname__
            Recording.__name__ = real.__name__
            self.replacement: Any = Recording
        else:  # a function, or a class used through a classmethod (a link's persist, RunState.from_json)
            self.replacement = mock.Mock(wraps=real)

    @property
    def used(self) -> int:
        if isinstance(self.replacement, mock.Mock):
            return len(self.replacement.mock_calls)
        return len(self.uses)


@pytest.mark.parametrize("deferrable", [pytest.param(False, id="sync"), pytest.param(True, id="deferrable")])
def test_patching_the_provider_modules_names_patches_ours(case: SystemCase, emulator: Any, deferrable: bool):
    wanted = {
        f"{module}.{name}": (uses or [1])[0]
        for module, name, paths, *uses in PATCHES[case.id]
        if deferrable in paths
    }
    spies: dict[str, _Spy] = {}
    with contextlib.ExitStack() as patches:
        for path in wanted:
            module, _, name = path.rpartition(".")
            spy = spies[path] = _Spy(getattr(importlib.import_module(module), name))
            patches.enter_context(mock.patch(path, spy.replacement))
        runner = TaskRunner(lambda: case.make(emulator, deferrable))
        runner.store.crash_when(record_state("submitted"), before=False)  # try 2 reconnects
        outcome = runner.run()
    assert [o.state for o in runner.outcomes] == ["crashed", "success"], outcome.error
    uses = {path: spy.used for path, spy in spies.items()}
    short = {path: n for path, n in uses.items() if n < wanted[path]}
    assert not short, (
        f"{case.id} used the patched provider names fewer times than expected: {short} of {wanted}"
    )
