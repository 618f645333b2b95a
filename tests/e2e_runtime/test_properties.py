"""Property-based tests (hypothesis) of what a durable operator does with whatever it finds.

* Any JSON value stored under an operator's durable key yields a record (or nothing) or a clear
  ``DurableStateError`` naming the task and the key — never another exception, and so never a
  submission (the decision reads the record before anything is submitted). Every record the engine
  writes parses back to itself.
* Any JSON trigger event: the operator's ``durable_event_id`` returns, or ``execute_complete`` turns
  its failure into a ``DurableEventError`` naming the task, keeping the job reference.

Fast (no deployment, no emulator): runs in ``make test``. The operators are the real ones; the state
store is the conformance harness's faithful in-memory one.
"""

from __future__ import annotations

from typing import Any

import pytest

hypothesis = pytest.importorskip("hypothesis")
from hypothesis import HealthCheck, given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402

from airflow_durable import shims  # noqa: E402
from airflow_durable.engine import RECORD_SCHEMA, DurableEventError, DurableStateError, JobRecord  # noqa: E402
from tests.conformance.systems import SYSTEMS  # noqa: E402
from tests.harness import MemoryStateStore  # noqa: E402

pytestmark = pytest.mark.skipif(not shims.DURABLE_RUNTIME, reason="the durable record exists on Airflow 3.3+")

json_values = st.recursive(
    st.none()
    | st.booleans()
    | st.integers(min_value=-(2**70), max_value=2**70)
    | st.floats(allow_nan=False)
    | st.text(max_size=30),
    lambda children: (
        st.lists(children, max_size=4) | st.dictionaries(st.text(max_size=12), children, max_size=5)
    ),
    max_leaves=12,
)
#: Values shaped like a record, with any field possibly wrong: reaches deeper than random JSON.
record_like = st.fixed_dictionaries(
    {
        "schema": st.sampled_from([RECORD_SCHEMA, RECORD_SCHEMA + "x", 1, None]),
        "generation": st.one_of(st.integers(-2, 5), st.booleans(), st.text(max_size=3), st.none()),
        "token": st.one_of(st.just("afd-abc-g1"), st.text(max_size=5), st.integers(), st.none()),
        "state": st.sampled_from(["submitting", "submitted", "done", "running", "", None]),
    },
    optional={
        "external_id": json_values,
        "epoch": st.one_of(st.integers(-1, 9), st.booleans(), st.text(max_size=2)),
    },
)


class _Ids:
    """Resource ids the constructors read from an emulator (cluster, queue, application...)."""

    def __getattr__(self, name: str) -> Any:
        return _Id()


class _Id(str):
    def __new__(cls) -> _Id:
        return str.__new__(cls, "res-1")

    def __call__(self, *args: Any, **kwargs: Any) -> int:
        return 4242

    def __contains__(self, item: object) -> bool:
        return True

    def __getattr__(self, name: str) -> Any:
        return self


def _operator(case: Any) -> Any:
    return case.make(_Ids(), True)


CASES = [pytest.param(case, id=case.id) for case in SYSTEMS]
FAST = settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])


@pytest.mark.parametrize("case", CASES)
@FAST
@given(value=st.one_of(json_values, record_like))
def test_any_stored_value_is_a_record_or_a_clear_error(case: Any, value: Any) -> None:
    op = _operator(case)
    store = MemoryStateStore()
    store.data[op.external_id_key] = value
    try:
        record = op._read_record(store)
    except DurableStateError as err:
        assert op.task_id in str(err) and op.external_id_key in str(err), str(err)
        return
    # Accepted: nothing stored, or a well-formed record of this engine.
    assert record is None or isinstance(record, JobRecord), record
    if record is None:
        assert value is None
    else:
        assert isinstance(value, dict) and value.get("schema") == RECORD_SCHEMA
    # Reading never wrote anything (no intent, no submission happened on the way).
    assert [c.op for c in store.calls] == ["get"]


@pytest.mark.parametrize("case", CASES)
@FAST
@given(
    generation=st.integers(1, 10**6),
    state=st.sampled_from(["submitting", "submitted", "done"]),
    epoch=st.one_of(st.none(), st.integers(0, 50)),
)
def test_every_written_record_reads_back(case: Any, generation: int, state: str, epoch: int | None) -> None:
    op = _operator(case)
    external_id = None if state == "submitting" else case.stored_id(_valid_id(case))
    record = JobRecord(
        generation, f"afd-x-g{generation}", state, external_id, epoch if state == "done" else None
    )
    store = MemoryStateStore()
    op._write_record(store, record, "a record")
    assert op._read_record(store) == JobRecord(
        generation,
        record.token,
        state,
        op.durable_parse_id(external_id) if external_id is not None else None,
        record.epoch,
    )


def _valid_id(case: Any) -> Any:
    return {
        "databricks_submit_run": 1001,
        "databricks_run_now": 1001,
        "dbt_cloud_run_job": 70001,
        "bigquery_insert_job": "airflow_job_1",
        "snowflake_sql_api": ["01b2c3d4-0000-4000-8000-000000000001"],
        "emr_add_steps": "s-ABC,s-DEF",
    }.get(case.id, "job-0001")


class _TI:
    dag_id, run_id, task_id, map_index, try_number, max_tries = "dag", "run", "job", -1, 1, 2

    def xcom_push(self, *args: Any, **kwargs: Any) -> None:
        raise AssertionError("a malformed event must not push XComs")


@pytest.mark.parametrize("case", CASES)
@FAST
@given(
    event=st.one_of(
        json_values,
        st.dictionaries(
            st.sampled_from(
                ["status", "run_id", "job_id", "message", "statement_query_ids", "id", "run_state"]
            ),
            json_values,
            max_size=4,
        ),
    )
)
def test_any_trigger_event_is_validated_or_refused_clearly(case: Any, event: Any) -> None:
    op = _operator(case)
    try:
        op.durable_event_id(event)
    except Exception:  # noqa: BLE001 - any failure: the engine must turn it into a clear error
        store = MemoryStateStore()
        stored = case.stored_id(_valid_id(case))
        record = JobRecord(1, "afd-x-g1", "submitted", stored)
        store.data[op.external_id_key] = record.to_json()
        with pytest.raises(DurableEventError, match=op.task_id):
            op.execute_complete({"task_state_store": store, "ti": _TI()}, event)
        assert store.data[op.external_id_key] == record.to_json()  # the job reference is kept
