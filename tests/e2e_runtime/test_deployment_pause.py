"""``Deployment.paused`` against a private PostgreSQL server, and on SQLite: it stops a component only
between its DB transactions, so a stalled component never holds the locks the others wait on (the
logical-job scenarios stall the triggerer this way). No Airflow components: a small DB client stands in
for one. The PostgreSQL cases need its binaries (``.ci/run`` installs them)."""

from __future__ import annotations

import glob
import random
import shutil
import sys
import time
from collections.abc import Iterator

import pytest

from airflow_durable.demo.deployment import Deployment, DeploymentError

pytestmark = pytest.mark.runtime
needs_postgres = pytest.mark.skipif(
    not (glob.glob("/usr/lib/postgresql/*/bin/initdb") or shutil.which("initdb")),
    reason="needs the PostgreSQL server binaries (apt-get install -y postgresql)",
)

#: A component that is inside a transaction ``busy`` of every ``busy + idle`` seconds.
CLIENT = """
import os, sys, time
import psycopg2
busy, idle = float(sys.argv[1]), float(sys.argv[2])
conn = psycopg2.connect(os.environ["AFD_TEST_PG_DSN"])
while True:
    with conn, conn.cursor() as cur:
        cur.execute("SELECT 1")
        time.sleep(busy)
    time.sleep(idle)
"""


#: The same on SQLite: the write lock held ``busy`` of every ``busy + idle`` seconds.
SQLITE_CLIENT = """
import sqlite3, sys, time
busy, idle = float(sys.argv[1]), float(sys.argv[2])
conn = sqlite3.connect(sys.argv[3], timeout=30, isolation_level=None)
conn.execute("CREATE TABLE IF NOT EXISTS t (x)")
while True:
    conn.execute("BEGIN IMMEDIATE")
    conn.execute("INSERT INTO t VALUES (1)")
    time.sleep(busy)
    conn.execute("COMMIT")
    time.sleep(idle)
"""


class _ClientDeployment(Deployment):
    """A deployment whose components ``busy-<b>-<i>`` are the client above (busy ``b``, idle ``i``)."""

    def _command(self, component: str) -> list[str]:
        _, busy, idle = component.split("-")
        if self.postgres is None:
            return [sys.executable, "-c", SQLITE_CLIENT, busy, idle, str(self.db_path)]
        return [sys.executable, "-c", CLIENT, busy, idle]


@pytest.fixture
def dep() -> Iterator[_ClientDeployment]:
    d = _ClientDeployment(database="postgres", home_prefix="afd-pause-")
    try:
        d.start_servers()
        assert d.postgres is not None
        d.env["AFD_TEST_PG_DSN"] = f"host=127.0.0.1 port={d.postgres.port} user=postgres dbname=postgres"
        yield d
    finally:
        d.stop(grace=5)
    assert d.stray_pids() == []


@pytest.fixture
def sqlite_dep() -> Iterator[_ClientDeployment]:
    d = _ClientDeployment(database="sqlite", home_prefix="afd-pause-")
    try:
        yield d
    finally:
        d.stop(grace=5)
    assert d.stray_pids() == []


def test_paused_on_sqlite_stops_a_component_only_when_it_holds_no_write_lock(
    sqlite_dep: _ClientDeployment,
) -> None:
    component = "busy-0.2-0.05"  # holds the write lock 80% of the time
    sqlite_dep.start_component(component)
    sqlite_dep.wait_for(lambda: sqlite_dep._sqlite_write_locked(), 30, f"{component} writing")
    stops = []
    for _ in range(6):
        with sqlite_dep.paused(component) as attempts:
            stops.append(attempts)
            assert not sqlite_dep._sqlite_write_locked(), f"stopped holding the lock after {attempts} stop(s)"
            states = [_proc_state(pid) for pid in sqlite_dep.session_pids(component)]
            assert states and set(states) == {"T"}, states
        # Let it run on before the next stop: on a loaded machine a SIGCONT followed at once by a SIGSTOP
        # finds it where it was stopped (its idle phase, every time), and no stop would meet the lock.
        time.sleep(random.uniform(0.1, 0.3))
    assert max(stops) > 1, stops


def _connected(d: Deployment, component: str) -> None:
    sql = "SELECT count(*) FROM pg_stat_activity WHERE application_name = ?"
    d.wait_for(
        lambda: d.query(sql, (component,))[0][0],
        30,
        f"{component} connected under its own application_name",
    )


@needs_postgres
def test_paused_stops_a_component_only_between_its_transactions(dep: _ClientDeployment) -> None:
    component = "busy-0.2-0.05"  # in a transaction 80% of the time
    dep.start_component(component)
    _connected(dep, component)
    stops = []
    for _ in range(6):
        with dep.paused(component) as attempts:
            stops.append(attempts)
            open_transactions = dep.query(
                "SELECT count(*) FROM pg_stat_activity WHERE application_name = ? AND xact_start IS NOT NULL",
                (component,),
            )[0][0]
            states = [_proc_state(pid) for pid in dep.session_pids(component)]
            assert open_transactions == 0, f"stopped inside a transaction after {attempts} stop(s)"
            assert states and set(states) == {"T"}, states
        assert {_proc_state(pid) for pid in dep.session_pids(component)} <= {"S", "R"}
        time.sleep(random.uniform(0.1, 0.3))  # as above: a fresh phase of its loop for the next stop
    # 80% busy: some first stops land inside a transaction (6 first stops all between: 0.2**6 = 0.0064)
    assert max(stops) > 1, stops


@needs_postgres
def test_paused_gives_up_on_a_component_that_never_leaves_its_transaction(dep: _ClientDeployment) -> None:
    component = "busy-3600-0"
    dep.start_component(component)
    _connected(dep, component)
    dep.wait_for(lambda: dep._in_transaction(component), 30, f"{component} inside its transaction")
    started = time.monotonic()
    refused = pytest.raises(DeploymentError, match="held a DB transaction open at each of")
    with refused, dep.paused(component, 2):
        pytest.fail("paused a component inside its transaction")
    assert time.monotonic() - started < 10
    assert {_proc_state(pid) for pid in dep.session_pids(component)} <= {"S", "R"}, "left it stopped"


def _proc_state(pid: int) -> str:
    """The process state letter from ``/proc/<pid>/stat`` (``T``: stopped)."""
    with open(f"/proc/{pid}/stat") as f:
        stat = f.read()
    return stat[stat.rindex(")") + 2]
