"""What the engine assumes of Airflow itself, checked against the installed Airflow with ``dag.test()``.

An Airflow release that changes one of these breaks a guarantee of DESIGN §8 without any of our code
changing: this is where it shows.
"""

from __future__ import annotations

import shutil
import sys
import tempfile
from pathlib import Path
from typing import Any

import pytest

from airflow_durable import shims
from tests.e2e.dagrun import summaries

pytestmark = pytest.mark.skipif(not shims.DURABLE_RUNTIME, reason="durable needs Airflow >= 3.3")


def test_an_older_try_cannot_touch_the_state_store_once_a_newer_try_began(
    airflow_home: dict[str, str],
) -> None:
    (found,), log = summaries(
        [sys.executable, "-m", "tests.e2e.assume", "assume_store_per_try"],
        airflow_home,
        "ASSUME ",
        expected=1,
    )
    assert [t["try"] for t in found["tries"]] == [1, 2], log
    seen = found["xcoms"]["job"]["return_value"]
    # Each try has its own task-instance id...
    assert seen["same_accessor"] is False
    # ...the older try's read finds nothing, its write is refused...
    assert seen["old_get"] == "<default>"
    assert seen["old_set"].startswith("refused"), seen["old_set"]
    # ...and the newer try still reads what the older one wrote in its turn.
    assert seen["new_get"] == "written by try 1"
    assert found["state"].endswith("success")


#: Three trigger rows through Airflow's own model on the DB at ``argv[1]``: A, then B (the newest), B
#: deleted (what ``Trigger.clean_unused`` does once no deferred task instance references it), then C.
#: ``argv[2] == "create"``: the tables first, as ``airflow db migrate`` creates them on an empty DB
#: (``_create_db_from_orm``). Nothing is kept: the transaction rolls back.
_TRIGGER_ID_PROBE = """
import json, sys
from sqlalchemy import create_engine, delete
from sqlalchemy.orm import Session
from airflow.models.team import Team
from airflow.models.trigger import Trigger

engine = create_engine(sys.argv[1])
if sys.argv[2] == "create":
    Trigger.metadata.create_all(engine, tables=[Team.__table__, Trigger.__table__])
with Session(engine) as session:
    ids = {}
    for name in ("a", "b"):
        row = Trigger(classpath="tests.e2e.Probe", kwargs={})
        session.add(row)
        session.flush()
        ids[name] = row.id
    session.execute(delete(Trigger).where(Trigger.id == ids["b"]))
    row = Trigger(classpath="tests.e2e.Probe", kwargs={})
    session.add(row)
    session.flush()
    ids["c"] = row.id
    session.rollback()
ddl = ""
if engine.dialect.name == "sqlite":
    with engine.connect() as conn:
        ddl = conn.exec_driver_sql("SELECT sql FROM sqlite_master WHERE name = 'trigger'").scalar()
print("TRIGGER_IDS " + json.dumps({**ids, "ddl": ddl}))
"""


def _trigger_ids(env: dict[str, str], url: str, create: bool) -> dict[str, Any]:
    (found,), _ = summaries(
        [sys.executable, "-c", _TRIGGER_ID_PROBE, url, "create" if create else "migrated"],
        env,
        "TRIGGER_IDS ",
        expected=1,
    )
    return found


def test_sqlite_gives_a_new_trigger_the_id_of_the_newest_deleted_one(airflow_home: dict[str, str]) -> None:
    """Issue 22 (A): ``Trigger.id`` is an ``Integer`` primary key, on SQLite a rowid without
    AUTOINCREMENT, so the next row takes max(id)+1: a deferral right after ``clean_unused`` deleted the
    newest trigger gets that trigger's id. A triggerer still running the old trigger under that id
    (``update_triggers`` counts it as known) never starts the new one, and the old one's event reaches
    the new deferral (``Trigger.submit_event`` selects the deferred task instances by trigger id)."""
    found = _trigger_ids(airflow_home, airflow_home["AIRFLOW__DATABASE__SQL_ALCHEMY_CONN"], create=False)
    assert "AUTOINCREMENT" not in found["ddl"].upper(), found["ddl"]
    assert found["b"] == found["a"] + 1
    assert found["c"] == found["b"], f"SQLite no longer reuses the newest deleted trigger id: {found}"


def test_postgresql_never_reuses_a_trigger_id(airflow_home: dict[str, str]) -> None:
    """The same rows on PostgreSQL: the id comes from a sequence, so a new trigger never takes a deleted
    one's id (the race of the test above cannot happen there)."""
    pytest.importorskip("psycopg2", reason="needs the runtime extra's PostgreSQL driver (psycopg2-binary)")
    from airflow_durable.demo.deployment import DeploymentError, PostgresServer

    # Not pytest's tmp_path: run as root, the cluster belongs to the postgres user, who cannot traverse
    # pytest's private base directory.
    root = Path(tempfile.mkdtemp(prefix="afd-assume-pg-"))
    server = PostgresServer(root)
    try:
        try:
            server.start()
        except DeploymentError as err:
            if "no `initdb` executable" in str(err):
                pytest.skip("PostgreSQL binaries not installed (apt-get install postgresql)")
            raise
        found = _trigger_ids(airflow_home, server.url, create=True)
    finally:
        server.stop()
        shutil.rmtree(root, ignore_errors=True)
    assert found["c"] == found["b"] + 1, found


@pytest.mark.parametrize(("state", "marked"), [("restarting", True), ("running", False)])
def test_airflow_failing_a_task_cleared_while_it_ran_marks_its_record(
    airflow_home: dict[str, str], state: str, marked: bool
) -> None:
    """Airflow's failure handling of a task the user cleared while it ran (its worker gone): the plugin's
    listener marks the record, so the retry Airflow starts begins a new logical job. A plain worker death
    (``running``) marks nothing: its retry reconnects."""
    (found,), log = summaries(
        [sys.executable, "-m", "tests.e2e.clear_listener", state], airflow_home, "CLEAR ", expected=1
    )
    assert found["state"].endswith("up_for_retry"), log
    assert ("cleared_while_running" in found["record"]) is marked, found["record"]
    if marked:
        assert found["record"]["cleared_while_running"]["try"] == 1


def test_a_clear_renews_the_trace_carrier_of_exactly_the_task_instances_it_clears(
    airflow_home: dict[str, str],
) -> None:
    """The clear epoch's mark (`airflow_durable.engine.identity.clear_mark_of`): a worker's try is handed its
    task instance's ``context_carrier``; ``clear_task_instances`` gives the cleared task instance a new one
    and leaves the other task of the run as it was (though the run's clear_number rises for both).
    ``dag.test()`` hands its tries none (it builds the task instance from five fields): there the engine
    falls back to ``max_tries`` and ``clear_number``."""
    from airflow_durable.engine.identity import clear_mark_of

    (found,), log = summaries(
        [sys.executable, "-m", "tests.e2e.clear_carrier"], airflow_home, "CARRIER ", expected=1
    )
    before, after = found["before"], found["after"]
    assert clear_mark_of(before["cleared"]) is not None, log
    assert found["workload"] == before["cleared"]
    assert clear_mark_of(after["cleared"]) != clear_mark_of(before["cleared"])
    assert clear_mark_of(after["other"]) == clear_mark_of(before["other"])
    assert found["seen"]["cleared"]["carrier"] is None  # dag.test()
