"""Issue 11 on a real deployment: a logical job begins and ends where the user thinks it does (DESIGN §8).

Each scenario drives a real Airflow 3.3 (api-server, scheduler, dag-processor, triggerer, LocalExecutor
on PostgreSQL) against the Databricks emulator, with the user's actions made through the public REST API
(``tests/e2e_runtime/actions.py``), and reads the outcome from the emulator (runs created, runs
cancelled, runs left running) and from the metadata DB (task state, tries, the task-state-store row).

1. A new logical job never receives an older job: the DAG run deleted and re-created with the same
   run_id (a), ``[state_store] clear_on_success`` then a clear (b), the record removed by
   ``airflow state-store clean`` after its retention, then a clear (c).
2. A user's clear or mark starts a new logical job and never fails the task: clear while deferred (a),
   mark success while the triggerer is stalled then clear (b), ``retries`` lowered in the DAG file
   then clear (c), the same while the task is deferred (d). For each clear, who cancelled the old job
   and how long after the clear's request (`cancel_account`).
3. Only the owner cancels: a zombie try's ``on_kill`` (a), a triggerer that lost its trigger to another
   triggerer (b, apache/airflow#73454).
4. ``execution_timeout`` is enforced while deferred.

Three deployments, one after the other: the main one runs every scenario but 1b and 3b concurrently;
the second has ``clear_on_success = True`` (a global setting) and a fast triggerer health check, for
1b and then 3b (stalling a triggerer would disturb the other scenarios' triggers); the third is always on
SQLite, for 2a's variant where the new try's trigger gets the old trigger's id (issue 22, finding A).

The metadata DB is a private PostgreSQL server (the tier's, from the Debian package) where its binaries
are installed, else SQLite; ``AFD_LJ_DATABASE=sqlite|postgres`` chooses. On SQLite every concurrent write
waits on one file lock: under CI's load the api-server answered a user's clear or mark "Database error"
after its busy wait, a failure of the test bed, not of what it tests.

All scenarios of a deployment run at once in threads; the test functions only assert on the
results, which are plain data. Under xdist the results are computed once per test run (a file lock
in pytest's shared temp directory), whichever worker asks first.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import re
import shutil
import signal
import sqlite3
import threading
import time
import traceback
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from datetime import datetime
from pathlib import Path
from typing import Any

import airflow
import pytest

if int(airflow.__version__.split(".")[0]) < 3:
    pytest.skip("real-runtime harness is written for Airflow 3.x component CLI", allow_module_level=True)

from airflow_durable import shims  # noqa: E402

if not shims.DURABLE_RUNTIME:
    pytest.skip("a logical job's edges need the task state store (Airflow >= 3.3)", allow_module_level=True)

from airflow_durable.demo.deployment import Deployment, DeploymentError  # noqa: E402
from airflow_durable.testing.databricks import DatabricksEmulator  # noqa: E402
from tests.e2e_runtime import actions  # noqa: E402
from tests.e2e_runtime.conftest import SUMMARIES  # noqa: E402

pytestmark = pytest.mark.runtime

DAG_FILE = Path(__file__).resolve().parent / "dags" / "logical_job.py"
TASK_ID = "submit_run"
LOWER_RETRIES_DAG = "lj_lower_retries"
#: Scenario 2d: ``retries`` lowered while the task is deferred, then the deferred task cleared.
LOWER_RETRIES_DEFERRED_DAG = "lj_lower_retries_deferred"
MAIN_DAGS = (
    "lj_rerun_deleted",
    "lj_retention_clean",
    "lj_clear_deferred",
    "lj_clear_deferred_upstream",
    "lj_mark_running",
    "lj_mark_finished",
    "lj_zombie_sync",
    "lj_zombie_sync_upstream",
    "lj_exec_timeout",
    "lj_exec_timeout_upstream",
)
SECOND_DAGS = ("lj_clear_on_success", "lj_triggerer_takeover", "lj_triggerer_takeover_upstream")
#: Issue 22 (A): one DAG per repetition of "clear while deferred" on SQLite; the first NATURAL_REUSE run
#: the race as it comes, the others make the new trigger take the old one's id (see `s2a_trigger_id`).
REUSE_DAGS = tuple(f"lj_trigger_id_{i}" for i in range(4))
NATURAL_REUSE = 2
#: Issue 22 (C), in the SQLite deployment: the triggerer's first mark (before the repetitions above) and a
#: later one (after them).
MARK_DAGS = ("lj_mark_failed_first", "lj_mark_failed_later")
#: Seconds from a user's "mark failed" of a deferred task to the job's cancel. Airflow's own path takes
#: about 2 s (the triggerer's clean_unused at the end of one loop, its load_triggers on the next, then the
#: runner's cancel); before the fix the triggerer's first answer took 9-16 s more.
MARK_TO_CANCEL_LIMIT = 6.0
#: Seconds the emulator holds a forced repetition's second submit (the test acts meanwhile).
HELD_SUBMIT = 8.0

#: Each bounded wait of a scenario; the whole module must stay within ~6 minutes.
WAIT = 100.0
#: Scenario 4: the Databricks job takes this long; the task's execution_timeout is 12 s.
JOB_SECONDS = 60.0
EXECUTION_TIMEOUT = 12.0
#: Seconds between the starts of two scenario drivers.
STAGGER = 2.0
#: How often a scenario looks at the DB and the emulator (a dozen scenarios poll at once).
POLL = 1.0
#: runs/get calls the provider's deferrable path makes before it defers (job id, page url, state).
SYNC_GETS_BEFORE_DEFER = 3
DECISIONS = (
    "fresh_submit",
    "resume_submit",
    "reconnect",
    "already_succeeded",
    "terminal_resubmit",
    "new_epoch",
    "not_durable",
)
_DECISION_RE = re.compile(r"\[(" + "|".join(DECISIONS) + r")\]")

#: Shared tuning: fast heartbeats and timeout checks, room for stalled tries next to running ones.
BASE_ENV = {
    # A burst of task starts on 2 cores: the execution API can take longer than its 5 s default, and a
    # retried "start" is refused (the first one went through), which fails the try before it ran.
    "AIRFLOW__WORKERS__EXECUTION_API_TIMEOUT": "60",
    "AIRFLOW__CORE__PARALLELISM": "8",
    "AIRFLOW__SCHEDULER__TASK_INSTANCE_HEARTBEAT_TIMEOUT": "12",
    "AIRFLOW__SCHEDULER__TRIGGER_TIMEOUT_CHECK_INTERVAL": "2",
    # Logs as they happen, so a failure's log tails are current. (It once seemed to cure scenario 2b's
    # unscheduled try; that was Airflow's clear-vs-scheduler race, see `settled_after_mark`, whose odds
    # only moved with the timing.)
    "PYTHONUNBUFFERED": "1",
}
#: SQLite only: a longer busy wait than the default 5 s (see ``actions.SQLITE_CONNECT_ARGS``).
SQLITE_ENV = {"AIRFLOW__DATABASE__SQL_ALCHEMY_CONNECT_ARGS": "tests.e2e_runtime.actions.SQLITE_CONNECT_ARGS"}


DATABASE = actions.chosen_database("AFD_LJ_DATABASE")
MAIN_ENV = {**BASE_ENV, "AFD_LJ_DAGS": ",".join(MAIN_DAGS)}
REUSE_ENV = {**BASE_ENV, "AFD_LJ_DAGS": ",".join((*REUSE_DAGS, *MARK_DAGS))}
SECOND_ENV = {
    **BASE_ENV,
    "AFD_LJ_DAGS": ",".join(SECOND_DAGS),
    "AIRFLOW__STATE_STORE__CLEAR_ON_SUCCESS": "True",
    "AIRFLOW__TRIGGERER__TRIGGERER_HEALTH_CHECK_THRESHOLD": "10",
    "AIRFLOW__TRIGGERER__JOB_HEARTBEAT_SEC": "2",
}

LOWER_RETRIES_TEMPLATE = '''"""An Airflow DAG generated by test_logical_job.py, which rewrites ``retries``."""

from logical_job import build_dag

{dag_id} = build_dag("{dag_id}", retries={retries})
'''


# =========================================================================== one DAG run, observed
class Case:
    """One DAG run of one scenario DAG, what the emulator saw of it, and a result dict to fill."""

    def __init__(self, dep: Deployment, dbx: DatabricksEmulator, dag_id: str, operator: str = "durable"):
        self.dep = dep
        self.dbx = dbx
        self.dag_id = dag_id
        self.run_id = f"lj__{dag_id}"
        self.started = time.monotonic()
        self.result: dict[str, Any] = {"dag_id": dag_id, "operator": operator, "notes": []}

    # -- the emulator's view
    def runs(self) -> list[Any]:
        return sorted(
            (r for r in list(self.dbx.runs.values()) if r.run_name.partition(" [afd-ti-")[0] == self.dag_id),
            key=lambda r: r.run_id,
        )

    def latest(self) -> Any:
        runs = self.runs()
        return runs[-1] if runs else None

    def _mine(self, entry: Any) -> bool:
        return actions.named_for(entry.payload.get("run_name"), self.dag_id)

    def created(self) -> list[Any]:
        return [e for e in self.dbx.ledger.submissions(operation="runs/submit") if self._mine(e)]

    def replays(self) -> list[Any]:
        """Submits that Databricks answered with an existing run (same idempotency token)."""
        return [e for e in self.dbx.ledger.select(operation="runs/submit", created=False) if self._mine(e)]

    def cancel_calls(self) -> list[Any]:
        ids = {r.run_id for r in self.runs()}
        return [e for e in self.dbx.ledger.select(operation="runs/cancel") if e.external_id in ids]

    def finish_latest(self) -> int | None:
        """The job the task tracks (the newest run) ends successfully, as Databricks would."""
        run = self.latest()
        if run is not None and not run.is_terminal:
            self.dbx.set_state(run.run_id, "TERMINATED:SUCCESS")
            return int(run.run_id)
        return None

    # -- Airflow's view
    def trigger(self) -> None:
        actions.trigger_dag_run(self.dep, self.dag_id, self.run_id)
        self.note("triggered")

    def clear(self, **options: Any) -> None:
        """The user's clear of the task (REST API), timed: `cancel_account` counts from its request."""
        self.result["cleared_at"] = time.time()
        actions.clear_task(self.dep, self.dag_id, self.run_id, TASK_ID, **options)

    def ti(self) -> dict[str, Any] | None:
        rows = self.dep.query(
            "SELECT id, state, try_number, max_tries, start_date, end_date, trigger_id FROM task_instance "
            "WHERE dag_id=? AND run_id=? AND task_id=? AND map_index=-1",
            (self.dag_id, self.run_id, TASK_ID),
        )
        if not rows:
            return None
        keys = ("id", "state", "try_number", "max_tries", "start_date", "end_date", "trigger_id")
        return dict(zip(keys, rows[0], strict=True))

    def dag_state(self) -> str | None:
        return self.dep.dag_run_state(self.dag_id, self.run_id)

    def ended(self) -> bool:
        return self.dag_state() in ("success", "failed")

    def store_rows(self) -> list[tuple[Any, ...]]:
        return self.dep.query(
            "SELECT key, value, expires_at FROM task_state_store WHERE dag_id=? AND run_id=? AND task_id=?",
            (self.dag_id, self.run_id, TASK_ID),
        )

    def record(self) -> dict[str, Any] | None:
        for key, value, _ in self.store_rows():
            if str(key).startswith("airflow_durable."):
                try:
                    return json.loads(value)
                except ValueError:
                    return {"unparsable": value}
        return None

    def trigger_row(self) -> tuple[Any, ...] | None:
        rows = self.dep.query(
            "SELECT t.id, t.triggerer_id FROM trigger t JOIN task_instance ti ON ti.trigger_id = t.id "
            "WHERE ti.dag_id=? AND ti.run_id=? AND ti.task_id=?",
            (self.dag_id, self.run_id, TASK_ID),
        )
        return rows[0] if rows else None

    def decisions(self) -> list[list[Any]]:
        """``[try, decision]`` as each try logged it (the engine logs ``task <id> [<decision>]: ...``)."""
        root = (
            self.dep.home / "logs" / f"dag_id={self.dag_id}" / f"run_id={self.run_id}" / f"task_id={TASK_ID}"
        )
        found = []
        for path in sorted(root.glob("attempt=*.log")):
            name = re.fullmatch(r"attempt=(\d+)\.log", path.name)
            if name is None:  # e.g. attempt=1.log.trigger.<id>.log: the trigger's part
                continue
            attempt = int(name.group(1))
            text = path.read_text(errors="replace")
            found += [[attempt, m.group(1)] for m in _DECISION_RE.finditer(text)]
        return found

    def tries(self) -> list[list[Any]]:
        ti = self.ti()
        history = [[t, s] for t, s in self.dep.try_history(self.dag_id, self.run_id, TASK_ID)]
        return [*history, [ti["try_number"], ti["state"]]] if ti else history

    # -- waiting
    def wait(
        self, condition: Callable[[], Any], what: str, timeout: float = WAIT, *, until_end: bool = False
    ) -> Any:
        """Wait for ``condition``; the DAG run ending first is an error unless ``until_end``."""

        def check() -> Any:
            value = condition()
            if not value and not until_end and self.ended():
                raise DeploymentError(
                    f"{self.dag_id}: the DAG run ended {self.dag_state()} while waiting for {what}"
                )
            return value

        try:
            return self.dep.wait_for(check, timeout, f"{self.dag_id}: {what}", interval=POLL)
        except DeploymentError as err:
            seen = f"----- {self.dag_id}: notes, then its task instance -----\n" + "\n".join(
                [*self.result["notes"], str(self.ti())]
            )
            raise DeploymentError(
                err.reason, logs=f"{seen}\n{self.dep.database_activity()}{err.logs}"
            ) from None

    def wait_deferred(self, try_number: int) -> dict[str, Any]:
        """Try ``try_number`` deferred, and its trigger polling the run (not just created)."""

        def ready() -> Any:
            ti = self.ti()
            run = self.latest()
            return (
                ti is not None
                and ti["try_number"] == try_number
                and ti["state"] == "deferred"
                and run is not None
                and run.gets >= SYNC_GETS_BEFORE_DEFER + 2
                and ti
            )

        return self.wait(ready, f"try {try_number} deferred and polled")

    def wait_defer_exit_drained(self, try_number: int) -> None:
        """The scheduler has processed the executor's event for the process of ``try_number`` that
        deferred ("TaskInstance Finished: ... state=deferred"). A trigger event that resumes the task
        instance before then races Airflow 3.3.2's ``_process_executor_events``: the stale success of the
        deferring process, drained while the resumed try is already queued, fails it as "killed
        externally" (apache/airflow#67287, #72716; seen here 2 times in 9 runs under load 7-9)."""
        self.wait_exit_drained(try_number, "deferred")

    def wait_exit_drained(self, try_number: int, state: str) -> None:
        """The scheduler has processed the executor's event for the process of ``try_number`` that
        ended in ``state``. The executor keys its events by (dag_id, task_id, run_id, try_number), so an
        event still in flight also matches any task instance that takes that key later (a resumed try, or
        a deleted DAG run triggered again under its run_id), and the scheduler fails that one as "killed
        externally" (runtime findings A2 and A3)."""
        drained = re.compile(
            rf"TaskInstance Finished: dag_id={re.escape(self.dag_id)},.* state={state},.* "
            rf"try_number={try_number}\b"
        )
        log = self.dep.logs / "scheduler.log"

        def seen() -> bool:
            with contextlib.suppress(OSError):
                return drained.search(log.read_text(errors="replace")) is not None
            return False

        self.wait(seen, f"the scheduler to process try {try_number}'s exit ({state})", until_end=True)

    def wait_decided(self, try_number: int) -> dict[str, Any]:
        """Try ``try_number`` past its decision: deferred, running a poll, or already finished."""
        return self.wait(
            lambda: (
                (ti := self.ti()) is not None
                and ti["try_number"] >= try_number
                and ti["state"] in ("deferred", "success", "failed", "up_for_retry")
                and ti
            ),
            f"try {try_number} decided",
            until_end=True,
        )

    def wait_end(self, timeout: float = WAIT, tick: Callable[[], None] | None = None) -> str:
        def done() -> Any:
            if tick is not None:
                tick()
            return self.ended() and self.dag_state()

        return self.wait(done, "the DAG run to end", timeout, until_end=True)

    def finish_and_wait_end(self) -> str:
        """Let the newest run (if the task waits on one) succeed, then wait for the DAG run to end."""
        if not self.ended():
            run = self.latest()
            if run is not None and not run.is_terminal:
                seen = run.gets
                # let the current waiter poll it, so the event races nothing
                with contextlib.suppress(DeploymentError):
                    self.wait(
                        lambda: run.gets >= seen + 2 or self.ended(), "the waiter polling", 20, until_end=True
                    )
            self.result["finished_run"] = self.finish_latest()
        return self.wait_end()

    # -- the result
    def note(self, what: str) -> None:
        self.result["notes"].append(f"{time.monotonic() - self.started:6.1f}s {what}")

    def conclude(self) -> dict[str, Any]:
        runs = self.runs()
        ti = self.ti()
        self.result.update(
            {
                "final_state": ti["state"] if ti else None,
                "dag_run_state": self.dag_state(),
                "tries": self.tries(),
                "runs": [r.run_id for r in runs],
                "created": len(self.created()),
                "replays": len(self.replays()),
                "replayed_runs": sorted({e.external_id for e in self.replays()}),
                "tokens": [r.token for r in runs],
                "cancelled": [r.run_id for r in runs if r.cancelled],
                "cancel_calls": [[e.external_id, e.payload.get("changed")] for e in self.cancel_calls()],
                "run_states": {str(r.run_id): r.state for r in runs},
                "left_running": [r.run_id for r in runs if not r.is_terminal],
                "decisions": self.decisions(),
                "xcom_run_id": self.dep.xcoms(self.dag_id, self.run_id, TASK_ID).get("run_id"),
                "seconds": round(time.monotonic() - self.started, 1),
            }
        )
        if runs and "cleared_at" in self.result:
            self.result.update(cancel_account(self, runs[0].run_id, self.result["cleared_at"]))
        return self.result

    def logs(self) -> str:
        return self.dep.task_logs(self.dag_id, chars=3000)


def _signal_all(pids: list[int], sig: signal.Signals) -> None:
    for pid in pids:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.kill(pid, sig)


@contextlib.contextmanager
def _stopped(pids: list[int]) -> Iterator[None]:
    """SIGSTOP these processes for the block; SIGCONT them whatever happens."""
    _signal_all(pids, signal.SIGSTOP)
    try:
        yield
    finally:
        _signal_all(pids, signal.SIGCONT)


# =========================================================================== scenario drivers
# Each driver returns {key: result}; an exception becomes {"error": ...} for that driver's keys.


def s1a_rerun_deleted(dep: Deployment, dbx: DatabricksEmulator) -> dict[str, Any]:
    c = Case(dep, dbx, "lj_rerun_deleted")
    c.trigger()
    c.wait_deferred(1)
    c.result["first_run_state"] = c.finish_and_wait_end()
    first = c.latest()
    c.result["first_decisions"] = c.decisions()
    # The old run's last process may still be exiting; its executor event would fail the re-created
    # run's try 1, whose key is the same (runtime findings A3). That Airflow race is not the scenario.
    c.wait_exit_drained(1, "success")
    actions.delete_dag_run(dep, c.dag_id, c.run_id)
    c.wait(lambda: c.dag_state() is None, "the DAG run deleted", until_end=True)
    c.result["store_rows_after_delete"] = len(c.store_rows())
    c.note(f"deleted the DAG run (run {first.run_id} succeeded); triggering the same run_id again")
    c.trigger()
    c.wait(
        lambda: c.ended() or ((ti := c.ti()) and ti["state"] == "deferred" and len(c.runs()) > 1),
        "the re-created run deferred on a new job, or ended",
        until_end=True,
    )
    c.finish_and_wait_end()
    c.result["first_run"] = first.run_id
    return {"1a": c.conclude()}


def s1c_retention_clean(dep: Deployment, dbx: DatabricksEmulator) -> dict[str, Any]:
    c = Case(dep, dbx, "lj_retention_clean")
    c.trigger()
    c.wait_deferred(1)
    c.result["first_run_state"] = c.finish_and_wait_end()
    rows = c.store_rows()
    c.result["expires_at"] = [str(r[2]) for r in rows]
    if rows and all(r[2] is None for r in rows):
        c.note("the record never expires (expires_at NULL): retention cannot remove it")
        c.result["never_expires"] = True
    else:
        # Retention passing: move expires_at into the past (default_retention_days is whole days).
        moved = dep.write(
            "UPDATE task_state_store SET expires_at='2000-01-01 00:00:00.000000' "
            "WHERE dag_id=? AND run_id=? AND task_id=?",
            (c.dag_id, c.run_id, TASK_ID),
        )
        c.note(f"expired {moved} task_state_store row(s)")
    done = dep.cli("state-store", "clean", timeout=90)
    c.result["clean_rc"] = done.returncode
    if done.returncode != 0:
        c.result["clean_output"] = (done.stdout + done.stderr)[-2000:]
    c.result["store_rows_after_clean"] = len(c.store_rows())
    actions.clear_task(dep, c.dag_id, c.run_id, TASK_ID)
    c.note("cleared the finished task")
    c.wait_decided(2)
    c.finish_and_wait_end()
    return {"1c": c.conclude()}


def s2a_clear_deferred(
    dep: Deployment, dbx: DatabricksEmulator, triggerer_quiet: threading.Lock
) -> dict[str, Any]:
    """Clear while deferred, with the triggerer slow to react (stalled until the new try decided): the
    old trigger's on_kill lands after the new try chose its job, as whenever the retry starts faster
    than the triggerer cancels (a busy triggerer, a slow Databricks API)."""
    cases = [Case(dep, dbx, "lj_clear_deferred"), Case(dep, dbx, "lj_clear_deferred_upstream", "upstream")]
    for c in cases:
        c.trigger()
    for c in cases:
        c.wait_deferred(1)
    with triggerer_quiet, dep.paused("triggerer") as stops:
        for c in cases:
            c.result["triggerer_stops"] = stops
            c.clear()
            c.note("cleared the deferred task (triggerer stalled)")
        for c in cases:
            c.wait_decided(2)
            c.note(f"try 2 decided: {c.ti()}")
    for c in cases:
        run1 = c.runs()[0]
        with contextlib.suppress(DeploymentError):
            c.wait(lambda run1=run1: run1.cancelled, f"run {run1.run_id} cancelled", 30, until_end=True)
        c.note(f"run {run1.run_id} cancelled={run1.cancelled}")
    for c in cases:
        c.finish_and_wait_end()
    return {"2a": cases[0].conclude(), "2a_upstream": cases[1].conclude()}


def s2a_trigger_id(dep: Deployment, dbx: DatabricksEmulator, dag_id: str, forced: bool) -> dict[str, Any]:
    """Issue 22 (A), on SQLite: clear while deferred, and the new try's trigger may get the old trigger's
    id. ``Trigger.id`` is an Integer primary key, a rowid there, so a trigger row inserted after the newest
    one was deleted takes its id (``tests/e2e/test_airflow_assumptions.py``). The triggerer deletes the
    old row (``Trigger.clean_unused``) once the cleared task instance left state None, and cancels the
    old trigger on its next loop (``update_triggers``: running minus assigned); if the new try defers in
    between, the new row has the same id, the triggerer counts it as the trigger it already runs, never
    starts the new one, and the old trigger's event (its job, cancelled by the new try) goes to the new
    deferral (``Trigger.submit_event`` selects deferred task instances by trigger id).

    ``forced``: the race made certain. The triggerer is stalled (between transactions) from the clear
    until the new try deferred; the emulator holds the new try's submit (after it cancelled the old job)
    for a few seconds, and meanwhile the test performs the triggerer's own ``clean_unused`` (its SQL, on
    this task instance), as the triggerer would on its next loop: the old trigger's row is gone before
    the new try defers, and the triggerer resumes without having seen the gap. Else the race as it comes
    (the new try defers within a loop of the deletion now and then on a busy machine: 1 in 3 reported,
    0 of 6 seen on an idle one).
    """
    c = Case(dep, dbx, dag_id)
    c.trigger()
    c.wait_deferred(1)
    old = c.ti()
    c.result["old_trigger_id"] = old["trigger_id"] if old else None
    if forced:
        hold = dbx.faults.add(
            method="POST",
            path_contains="runs/submit",
            status=None,
            latency=HELD_SUBMIT,
            times=1,
            predicate=lambda request: (
                isinstance(request.json, dict) and actions.named_for(request.json.get("run_name"), dag_id)
            ),
        )
        with dep.paused("triggerer") as stops:
            c.result["triggerer_stops"] = stops
            c.clear()
            c.note("cleared the deferred task (triggerer stalled)")
            c.wait(lambda: hold.hits == 1, "try 2's submit (held)", until_end=True)
            c.note(f"try 2 submits (held {HELD_SUBMIT:.0f}s): {c.ti()}")
            # Trigger.clean_unused (models/trigger.py), as the triggerer runs it on its next loop.
            dep.write(
                "UPDATE task_instance SET trigger_id = NULL WHERE state != 'deferred' "
                "AND trigger_id IS NOT NULL AND dag_id = ? AND run_id = ?",
                (c.dag_id, c.run_id),
            )
            deleted = dep.write(
                "DELETE FROM trigger WHERE id = ? AND NOT EXISTS "
                "(SELECT 1 FROM task_instance WHERE trigger_id = ?)",
                (old["trigger_id"], old["trigger_id"]),
            )
            c.note(f"the triggerer's clean_unused: deleted {deleted} trigger row {old['trigger_id']}")
            c.wait_decided(2)
            c.note(f"try 2 decided while the triggerer is stalled: {c.ti()}")
            # The old trigger fires as soon as the triggerer resumes: Airflow's own race with the
            # deferring process's exit event is not what this scenario tests (wait_defer_exit_drained).
            c.wait_defer_exit_drained(2)
            c.note("the scheduler processed try 2's deferral exit")
    else:
        c.clear()
        c.note("cleared the deferred task")
        c.wait_decided(2)
    new = c.ti()
    c.result["new_trigger_id"] = new["trigger_id"] if new else None
    c.note(f"trigger ids: try 1 {c.result['old_trigger_id']}, try 2 {c.result['new_trigger_id']}")
    run1 = c.runs()[0]
    with contextlib.suppress(DeploymentError):
        c.wait(lambda: run1.cancelled, f"run {run1.run_id} cancelled", 30, until_end=True)
    c.finish_and_wait_end()
    return {dag_id: c.conclude()}


def sC_mark_failed(dep: Deployment, dbx: DatabricksEmulator, dag_id: str) -> dict[str, Any]:
    """Issue 22 (C): a user marks a deferred task failed; the owned trigger's ``on_kill`` asks Airflow
    which try is current and cancels the job. Timed from the user's request to the cancel reaching
    Databricks (the emulator's ledger), on SQLite with one triggerer, as the finding was measured."""
    c = Case(dep, dbx, dag_id)
    c.trigger()
    c.wait_deferred(1)
    run = c.latest()
    marked = time.time()
    actions.mark_task(dep, c.dag_id, c.run_id, TASK_ID, "failed")
    c.result["mark_request_seconds"] = round(time.time() - marked, 2)
    c.note("marked failed")
    with contextlib.suppress(DeploymentError):
        c.wait(lambda: run.cancelled, f"run {run.run_id} cancelled", 30, until_end=True)
    cancels = [e.at for e in dbx.ledger.select(operation="runs/cancel") if e.external_id == run.run_id]
    c.result["mark_to_cancel_seconds"] = round(min(cancels) - marked, 2) if cancels else None
    c.note(f"run {run.run_id} cancelled after {c.result['mark_to_cancel_seconds']}s")
    c.wait_end()
    return {dag_id: c.conclude()}


#: What the owned trigger logs (`airflow_durable.triggers.owned`): its note's and its kill answer's cost.
_NOTED_RE = re.compile(r"noted try \d+ of task \S+ in (\d+) ms")
_ANSWERED_RE = re.compile(r"job \S+ of task \S+: .*?\(answered in (\d+) ms\)")


def trigger_timings(dep: Deployment) -> dict[str, list[int]]:
    """Milliseconds of every owned trigger's note (one per deferral) and kill answer in the deployment's
    trigger logs (``attempt=<n>.log.trigger.<id>.log``)."""
    notes: list[int] = []
    answers: list[int] = []
    for path in sorted((dep.home / "logs").glob("dag_id=*/**/attempt=*.log.trigger.*.log")):
        text = path.read_text(errors="replace")
        notes += [int(m) for m in _NOTED_RE.findall(text)]
        answers += [int(m) for m in _ANSWERED_RE.findall(text)]
    return {"note_ms": notes, "answer_ms": answers}


_STAMP_RE = re.compile(r"\d{4}-\d\d-\d\d[T ]\d\d:\d\d:\d\d(?:\.\d+)?(?:Z|[+-]\d\d:?\d\d)")


def _stamp(line: str) -> float | None:
    """The epoch seconds a log line was written at (its first zoned ISO timestamp), if it has one."""
    found = _STAMP_RE.search(line)
    if found is None:
        return None
    try:
        return datetime.fromisoformat(found.group(0).replace(" ", "T")).timestamp()
    except ValueError:
        return None


def cancel_account(c: Case, job: int, since: float) -> dict[str, Any]:
    """Who ended job ``job`` after the user's action at ``since`` (epoch seconds), and when.

    The emulator's ledger has every cancel call's time but not its caller (the trigger and the task both
    cancel through the hook's sync client), so the callers come from the logs: the owned trigger's kill
    verdict ("cancelling job N of task T: <reason> (answered in X ms)", in the trigger's log file or, once
    Airflow closed it, only in the triggerer's own log) and a try's "cancelled job N: <why>".
    """
    root = c.dep.home / "logs" / f"dag_id={c.dag_id}" / f"run_id={c.run_id}" / f"task_id={TASK_ID}"
    verdict_re = re.compile(rf"(not )?cancelling job {job} of task {TASK_ID}: (.*?) \(answered in (\d+) ms\)")
    cancelled_re = re.compile(rf"task {TASK_ID}: cancell(?:ed|ing) job {job}(?::| on kill:?) ?([^\"]*)")

    def after(line: str) -> float | None:
        at = _stamp(line)
        return round(at - since, 2) if at is not None else None

    verdicts: dict[tuple[bool, str], dict[str, Any]] = {}
    for path in [*sorted(root.glob("attempt=*.log.trigger.*.log")), c.dep.logs / "triggerer.log"]:
        with contextlib.suppress(OSError):
            for line in path.read_text(errors="replace").splitlines():
                if (m := verdict_re.search(line)) is not None:
                    verdicts.setdefault(
                        (m.group(1) is None, m.group(2)),
                        {
                            "cancel": m.group(1) is None,
                            "reason": m.group(2),
                            "answer_ms": int(m.group(3)),
                            "after_action": after(line),
                        },
                    )
    tries: list[dict[str, Any]] = []
    for path in sorted(root.glob("attempt=*.log")):
        name = re.fullmatch(r"attempt=(\d+)\.log", path.name)
        if name is not None:
            for line in path.read_text(errors="replace").splitlines():
                if (m := cancelled_re.search(line)) is not None:
                    tries.append(
                        {"try": int(name.group(1)), "why": m.group(1)[:200], "after_action": after(line)}
                    )
    calls = sorted(e.at for e in c.dbx.ledger.select(operation="runs/cancel") if e.external_id == job)
    by = (["trigger"] if any(v["cancel"] for v in verdicts.values()) else []) + sorted(
        {f"try {t['try']}" for t in tries}
    )
    return {
        "old_run_cancelled_by": "+".join(by) or None,
        "action_to_cancel_seconds": round(calls[0] - since, 2) if calls else None,
        "cancel_calls_after_action": [round(at - since, 2) for at in calls],
        "trigger_verdicts": list(verdicts.values()),
        "try_cancels": tries,
    }


def settled_after_mark(c: Case) -> None:
    """Wait until the scheduler ended the DAG run whose only task a user marked (success or failed).

    A clear must not race the scheduler's ``DagRun.update_state`` of that run: ``clear_task_instances``
    reads the run's state without a lock (``models/taskinstance.py``) and resets only a *finished* run to
    ``queued``; if the scheduler commits "success" just after that read, the run stays "success" with the
    task instance cleared (state None, try 1, the old ``trigger_id``) and is never examined again. Airflow's
    race (a lost update under PostgreSQL's READ COMMITTED), seen in this module as try 2 "not decided
    within 100 s" while the triggerer was stalled: the API's clear had landed 0.1 s before the scheduler
    committed the run's success. A user clearing from the UI sees the run end first.
    """
    c.wait(lambda: c.ended(), "the scheduler to end the marked DAG run", until_end=True)
    c.note(f"the DAG run ended {c.dag_state()} after the mark")


def s2b_mark(dep: Deployment, dbx: DatabricksEmulator, triggerer_quiet: threading.Lock) -> dict[str, Any]:
    """Mark success while the triggerer is stalled: ``running`` is cleared at once (the new try decides
    before the stalled triggerer runs the old trigger's on_kill); ``finished``'s job succeeds during
    the stall, and it is cleared after the triggerer caught up."""
    running = Case(dep, dbx, "lj_mark_running")
    finished = Case(dep, dbx, "lj_mark_finished")
    for c in (running, finished):
        c.trigger()
    for c in (running, finished):
        c.wait_deferred(1)
    with triggerer_quiet, dep.paused("triggerer") as stops:
        stalled = time.monotonic()
        for c in (running, finished):
            c.result["triggerer_stops"] = stops
        dbx.set_state(finished.latest().run_id, "TERMINATED:SUCCESS")
        finished.note("job succeeded while the triggerer is stalled")
        for c in (running, finished):
            actions.mark_task(dep, c.dag_id, c.run_id, TASK_ID, "success")
            c.note("marked success (triggerer stalled)")
        # As a user would see it before clearing: the run ended. Cleared while the scheduler is still
        # finishing it, the run can stay "success" with the task instance cleared and never scheduled
        # (Airflow's race, see `settled_after_mark`).
        settled_after_mark(running)
        running.clear()
        running.note("cleared (triggerer stalled)")
        running.wait_decided(2)
        running.note(f"try 2 decided while the triggerer is stalled: {running.ti()}")
        running.result["stalled_seconds"] = round(time.monotonic() - stalled, 1)
    running.note("triggerer resumed")
    run1 = running.runs()[0]
    with contextlib.suppress(DeploymentError):
        running.wait(lambda: run1.cancelled, f"run {run1.run_id} cancelled", 20, until_end=True)
    running.note(f"run {run1.run_id} cancelled={run1.cancelled}")
    # finished: the triggerer drops the old trigger (the task is no longer deferred), then the user clears.
    finished.wait(lambda: finished.ti()["trigger_id"] is None, "the old trigger dropped", 30, until_end=True)
    settled_after_mark(finished)
    actions.clear_task(dep, finished.dag_id, finished.run_id, TASK_ID)
    finished.note("cleared after the triggerer caught up")
    finished.wait_decided(2)
    for c in (running, finished):
        c.finish_and_wait_end()
    return {"2b_running": running.conclude(), "2b_finished": finished.conclude()}


def s2c_lower_retries(dep: Deployment, dbx: DatabricksEmulator) -> dict[str, Any]:
    c = Case(dep, dbx, LOWER_RETRIES_DAG)
    c.trigger()
    c.wait_deferred(1)
    c.result["first_run_state"] = c.finish_and_wait_end()
    c.result["max_tries_before"] = c.ti()["max_tries"]
    versions = dep.query("SELECT count(*) FROM dag_version WHERE dag_id=?", (c.dag_id,))[0][0]
    (dep.dags_folder / f"{LOWER_RETRIES_DAG}.py").write_text(
        LOWER_RETRIES_TEMPLATE.format(dag_id=LOWER_RETRIES_DAG, retries=1)
    )
    c.note("rewrote the DAG file: retries 2 -> 1")
    c.wait(
        lambda: dep.query("SELECT count(*) FROM dag_version WHERE dag_id=?", (c.dag_id,))[0][0] > versions,
        "the dag-processor to serialize the new version",
        60,
        until_end=True,
    )
    actions.clear_task(dep, c.dag_id, c.run_id, TASK_ID, run_on_latest_version=True)
    c.note("cleared the finished task on the latest DAG version")
    c.result["max_tries_after"] = c.ti()["max_tries"]
    c.wait_decided(2)
    c.finish_and_wait_end()
    return {"2c": c.conclude()}


def s2d_lower_retries_deferred(dep: Deployment, dbx: DatabricksEmulator) -> dict[str, Any]:
    """``retries`` lowered (2 -> 1) while try 1 is deferred on a running job, then the deferred task
    cleared on the latest DAG version. Airflow sets ``max_tries = try_number + retries`` = 1 + 1, the
    same 2 as before, and the run's ``clear_number`` is what a retry sees too: by that arithmetic the
    next try looks like a retry of the same logical job and reconnected to the old run (model finding
    N8). The task instance's trace carrier, which the clear renews, tells it apart."""
    c = Case(dep, dbx, LOWER_RETRIES_DEFERRED_DAG)
    c.trigger()
    c.wait_deferred(1)
    c.result["max_tries_before"] = c.ti()["max_tries"]
    versions = dep.query("SELECT count(*) FROM dag_version WHERE dag_id=?", (c.dag_id,))[0][0]
    (dep.dags_folder / f"{LOWER_RETRIES_DEFERRED_DAG}.py").write_text(
        LOWER_RETRIES_TEMPLATE.format(dag_id=LOWER_RETRIES_DEFERRED_DAG, retries=1)
    )
    c.note("rewrote the DAG file: retries 2 -> 1 (try 1 deferred)")
    c.wait(
        lambda: dep.query("SELECT count(*) FROM dag_version WHERE dag_id=?", (c.dag_id,))[0][0] > versions,
        "the dag-processor to serialize the new version",
        60,
    )
    c.result["state_before_clear"] = c.ti()["state"]
    c.clear(run_on_latest_version=True)
    c.note("cleared the deferred task on the latest DAG version")
    c.result["max_tries_after"] = c.ti()["max_tries"]
    c.wait_decided(2)
    run1 = c.runs()[0]
    with contextlib.suppress(DeploymentError):
        c.wait(lambda: run1.cancelled, f"run {run1.run_id} cancelled", 30, until_end=True)
    c.note(f"run {run1.run_id} cancelled={run1.cancelled}")
    c.finish_and_wait_end()
    return {"2d": c.conclude()}


def s3a_zombie(dep: Deployment, dbx: DatabricksEmulator, dag_id: str, operator: str) -> dict[str, Any]:
    c = Case(dep, dbx, dag_id, operator)
    c.trigger()
    ti = c.wait(
        lambda: (
            (ti := c.ti()) is not None
            and ti["state"] == "running"
            and (run := c.latest()) is not None
            and run.gets >= 3
            and ti
        ),
        "try 1 polling its run",
    )
    pids = c.wait(lambda: dep.worker_pids(ti["id"]), "try 1's supervisor and task process")
    run1 = c.latest()
    with _stopped(pids):
        c.note(f"SIGSTOP try 1 (pids {pids})")
        c.wait(
            lambda: (
                (t := c.ti()) is not None
                and t["try_number"] >= 2
                and t["state"] in ("running", "success", "failed")
            ),
            "try 2 started (try 1 a zombie)",
            until_end=True,
        )
        seen = run1.gets
        c.wait(
            lambda: run1.gets > seen + 1 or len(c.runs()) > 1 or c.ended(),
            "try 2 polling a run",
            until_end=True,
        )
        c.note(f"try 2 running: {c.ti()}; SIGCONT try 1")
    # The supervisor learns from its next heartbeat that try 1 is over and SIGTERMs it (on_kill runs).
    c.wait(lambda: not dep.worker_pids(ti["id"]), "try 1's processes to end", 60, until_end=True)
    c.note("try 1's processes exited")
    time.sleep(2)  # a cancel sent on the way out has landed by now
    c.result["run1_cancelled_before_finish"] = run1.cancelled
    c.finish_and_wait_end()
    return {f"3a{'_upstream' if operator == 'upstream' else ''}": c.conclude()}


def s4_execution_timeout(dep: Deployment, dbx: DatabricksEmulator) -> dict[str, Any]:
    cases = [Case(dep, dbx, "lj_exec_timeout"), Case(dep, dbx, "lj_exec_timeout_upstream", "upstream")]
    for c in cases:
        c.trigger()

    def job_clock() -> None:
        # A JOB_SECONDS job: every run of these DAGs succeeds that long after it started.
        for c in cases:
            for run in c.runs():
                if not run.is_terminal and time.time() - run.start_time / 1000 >= JOB_SECONDS:
                    dbx.set_state(run.run_id, "TERMINATED:SUCCESS")

    out = {}
    for c, key in zip(cases, ("4", "4_upstream"), strict=True):
        c.wait_end(timeout=JOB_SECONDS + 60, tick=job_clock)
        out[key] = c.conclude()
        ti = c.ti()
        if ti and ti["start_date"] and ti["end_date"]:
            start, end = (datetime.fromisoformat(str(ti[k])) for k in ("start_date", "end_date"))
            out[key]["task_seconds"] = round((end - start).total_seconds(), 1)
    return out


def s1b_clear_on_success(dep: Deployment, dbx: DatabricksEmulator) -> dict[str, Any]:
    c = Case(dep, dbx, "lj_clear_on_success")
    c.trigger()
    c.wait_deferred(1)
    c.result["first_run_state"] = c.finish_and_wait_end()
    c.result["store_rows_after_success"] = len(c.store_rows())
    actions.clear_task(dep, c.dag_id, c.run_id, TASK_ID)
    c.note("cleared the finished task")
    c.wait_decided(2)
    c.finish_and_wait_end()
    return {"1b": c.conclude()}


def s3b_triggerer_takeover(
    dep: Deployment, dbx: DatabricksEmulator, may_stall: threading.Event
) -> dict[str, Any]:
    cases = [
        Case(dep, dbx, "lj_triggerer_takeover"),
        Case(dep, dbx, "lj_triggerer_takeover_upstream", "upstream"),
    ]
    for c in cases:
        c.trigger()
    for c in cases:
        c.wait_deferred(1)
    first = {
        c.dag_id: c.wait(lambda c=c: (row := c.trigger_row()) and row[1], "the trigger assigned")
        for c in cases
    }
    second = "triggerer-2"
    dep.start_component(second)
    known = set(first.values())
    new_id = cases[0].wait(
        lambda: next(
            (
                r[0]
                for r in dep.query("SELECT id FROM job WHERE job_type='TriggererJob' AND state='running'")
                if r[0] not in known
            ),
            None,
        ),
        f"{second} to register",
        60,
    )
    may_stall.wait(timeout=WAIT)  # the other scenario of this deployment no longer needs a triggerer
    with dep.paused("triggerer") as stops:
        stalled = time.monotonic()
        for c in cases:
            c.result["triggerer_stops"] = stops
            c.note(f"stalled triggerer job {first[c.dag_id]}; {second} is job {new_id}")
        for c in cases:
            c.wait(
                lambda c=c: (row := c.trigger_row()) and row[1] == new_id,
                f"{second} took the trigger over",
                60,
            )
            run = c.latest()
            seen = run.gets
            c.wait(lambda run=run, seen=seen: run.gets > seen, f"{second} polling run {run.run_id}", 30)
            c.note("taken over")
        for c in cases:
            c.result["stalled_seconds"] = round(time.monotonic() - stalled, 1)
    for c in cases:
        c.note("first triggerer resumed")
    upstream_run = cases[1].runs()[0]
    with contextlib.suppress(DeploymentError):  # on_kill of the lost triggers, upstream's cancels for sure
        cases[1].wait(lambda: upstream_run.cancelled, "the resumed triggerer's on_kill", 20, until_end=True)
    time.sleep(3)
    for c in cases:
        c.result["cancelled_before_finish"] = [r.run_id for r in c.runs() if r.cancelled]
        c.finish_and_wait_end()
    return {"3b": cases[0].conclude(), "3b_upstream": cases[1].conclude()}


# =========================================================================== running them
def _run_concurrently(
    drivers: dict[str, tuple[Callable[..., dict[str, Any]], tuple[Any, ...]]],
) -> dict[str, Any]:
    results: dict[str, Any] = {}

    def staggered(delay: float, fn: Callable[..., dict[str, Any]], args: tuple[Any, ...]) -> dict[str, Any]:
        time.sleep(delay)  # not every task start at the same second: 2 cores, one api-server worker
        return fn(*args)

    with ThreadPoolExecutor(max_workers=len(drivers)) as pool:
        futures = {
            name: pool.submit(staggered, STAGGER * i, fn, args)
            for i, (name, (fn, args)) in enumerate(drivers.items())
        }
        for name, future in futures.items():
            try:
                results.update(future.result())
            except Exception as err:
                results[f"driver:{name}"] = {
                    "error": f"{type(err).__name__}: {getattr(err, 'reason', err)}",
                    "trace": traceback.format_exc(),
                    "logs": getattr(err, "logs", "")[-20000:],
                }
    return results


def _attach_logs(dep: Deployment, results: dict[str, Any]) -> None:
    for value in results.values():
        dag_id = value.get("dag_id") if isinstance(value, dict) else None
        if dag_id:
            value["logs"] = dep.task_logs(dag_id, chars=2500)[-12000:]
            value["component_lines"] = _component_lines(dep, dag_id)


def _component_lines(dep: Deployment, dag_id: str, limit: int = 60) -> list[str]:
    """The scheduler's and triggerer's log lines about one DAG (a state change the task logs do not show,
    such as a heartbeat timeout that failed a try), for a failure's write-up."""
    lines: list[str] = []
    for component in ("scheduler", "triggerer"):
        path = dep.logs / f"{component}.log"
        with contextlib.suppress(OSError):
            lines += [
                f"{component}: {line[:400]}"
                for line in path.read_text(errors="replace").splitlines()
                if dag_id in line
            ]
    return lines[-limit:]


def _deploy(env: dict[str, str], extra_files: dict[str, str], database: str = DATABASE) -> Deployment:
    env = {**env, **(SQLITE_ENV if database == "sqlite" else {})}
    dep = Deployment(extra_env=env, home_prefix="afd-lj-home-", database=database)
    shutil.copy(DAG_FILE, dep.dags_folder / DAG_FILE.name)
    for name, text in extra_files.items():
        (dep.dags_folder / name).write_text(text)
    return dep


def _start(dep: Deployment, dag_ids: tuple[str, ...], timeout: float = 180) -> None:
    """``Deployment.start``; on SQLite with the DB in WAL mode: the test's readers never block the
    components' writers (with the default rollback journal, a read holds off every writer)."""
    deadline = time.monotonic() + timeout
    dep.migrate(timeout=90)
    if dep.postgres is None:
        conn = sqlite3.connect(dep.db_path)
        try:
            conn.execute("PRAGMA journal_mode=WAL")  # persistent: stored in the DB file
        finally:
            conn.close()
    dep.start_components()
    dep.wait_healthy(deadline - time.monotonic())
    dep.wait_dags(dag_ids, deadline - time.monotonic())


def run_main_deployment() -> dict[str, Any]:
    started = time.monotonic()
    with actions.installed_databricks_emulator() as dbx:
        dep = _deploy(
            MAIN_ENV,
            {
                f"{name}.py": LOWER_RETRIES_TEMPLATE.format(dag_id=name, retries=2)
                for name in (LOWER_RETRIES_DAG, LOWER_RETRIES_DEFERRED_DAG)
            },
        )
        try:
            _start(dep, (*MAIN_DAGS, LOWER_RETRIES_DAG, LOWER_RETRIES_DEFERRED_DAG))
            up = time.monotonic() - started
            quiet = threading.Lock()
            results = _run_concurrently(
                {
                    "1a": (s1a_rerun_deleted, (dep, dbx)),
                    "1c": (s1c_retention_clean, (dep, dbx)),
                    "2a": (s2a_clear_deferred, (dep, dbx, quiet)),
                    "2b": (s2b_mark, (dep, dbx, quiet)),
                    "2c": (s2c_lower_retries, (dep, dbx)),
                    "2d": (s2d_lower_retries_deferred, (dep, dbx)),
                    "3a": (s3a_zombie, (dep, dbx, "lj_zombie_sync", "durable")),
                    "3a_upstream": (s3a_zombie, (dep, dbx, "lj_zombie_sync_upstream", "upstream")),
                    "4": (s4_execution_timeout, (dep, dbx)),
                }
            )
            _attach_logs(dep, results)
            results["deployment"] = {"start_seconds": round(up, 1), **trigger_timings(dep)}
        finally:
            stopping = time.monotonic()
            dep.stop()
            strays = dep.stray_pids()
        results["deployment"] = {
            **results.get("deployment", {}),
            "stop_seconds": round(time.monotonic() - stopping, 1),
            "total_seconds": round(time.monotonic() - started, 1),
            "stray_pids": strays,
        }
    return results


def run_second_deployment() -> dict[str, Any]:
    started = time.monotonic()
    with actions.installed_databricks_emulator() as dbx:
        dep = _deploy(SECOND_ENV, {})
        try:
            _start(dep, SECOND_DAGS)
            up = time.monotonic() - started
            first_done = threading.Event()

            def clear_on_success() -> dict[str, Any]:
                try:
                    return s1b_clear_on_success(dep, dbx)
                finally:
                    first_done.set()

            results = _run_concurrently(
                {
                    "1b": (clear_on_success, ()),
                    "3b": (s3b_triggerer_takeover, (dep, dbx, first_done)),
                }
            )
            _attach_logs(dep, results)
            results["deployment"] = {"start_seconds": round(up, 1), **trigger_timings(dep)}
        finally:
            stopping = time.monotonic()
            dep.stop()
            strays = dep.stray_pids()
        results["deployment"] = {
            **results.get("deployment", {}),
            "stop_seconds": round(time.monotonic() - stopping, 1),
            "total_seconds": round(time.monotonic() - started, 1),
            "stray_pids": strays,
        }
    return results


def run_reuse_deployment() -> dict[str, Any]:
    """Issue 22 (A): SQLite, one triggerer; the repetitions one after the other (a forced one stalls the
    triggerer, which would stall the others' triggers too)."""
    started = time.monotonic()
    with actions.installed_databricks_emulator() as dbx:
        dep = _deploy(REUSE_ENV, {}, database="sqlite")
        results: dict[str, Any] = {}
        timings: dict[str, list[int]] = {}
        try:
            _start(dep, (*REUSE_DAGS, *MARK_DAGS))
            results.update(_run_concurrently({MARK_DAGS[0]: (sC_mark_failed, (dep, dbx, MARK_DAGS[0]))}))
            for i, dag_id in enumerate(REUSE_DAGS):
                results.update(
                    _run_concurrently({dag_id: (s2a_trigger_id, (dep, dbx, dag_id, i >= NATURAL_REUSE))})
                )
            results.update(_run_concurrently({MARK_DAGS[1]: (sC_mark_failed, (dep, dbx, MARK_DAGS[1]))}))
            _attach_logs(dep, results)
            timings = trigger_timings(dep)
        finally:
            stopping = time.monotonic()
            dep.stop()
            strays = dep.stray_pids()
        results["deployment"] = {
            "stop_seconds": round(time.monotonic() - stopping, 1),
            "total_seconds": round(time.monotonic() - started, 1),
            "stray_pids": strays,
            **timings,
        }
    return results


def _once_per_test_run(
    name: str, compute: Callable[[], dict[str, Any]], tmp_path_factory: Any
) -> dict[str, Any]:
    """``compute()`` once per test run: under xdist the first worker computes, the others read.

    With ``AFD_LJ_RESULTS_DIR`` set, the results are also written there as ``<name>.json`` (every
    scenario's notes, timings and log excerpts, passing or not), for a run's write-up.
    """
    uid = os.environ.get("PYTEST_XDIST_TESTRUNUID")
    if not uid:
        return _kept(name, compute())
    shared = tmp_path_factory.getbasetemp().parent
    data = shared / f"logical_job-{name}-{uid}.json"
    with open(shared / f"logical_job-{name}-{uid}.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if data.exists():
            return json.loads(data.read_text())
        results = _kept(name, compute())
        data.write_text(json.dumps(results, default=str))
        return results


def _kept(name: str, results: dict[str, Any]) -> dict[str, Any]:
    folder = os.environ.get("AFD_LJ_RESULTS_DIR")
    if folder:
        Path(folder).mkdir(parents=True, exist_ok=True)
        (Path(folder) / f"{name}.json").write_text(json.dumps(results, indent=1, default=str))
    return results


def _summarised(results: dict[str, Any], title: str) -> dict[str, Any]:
    """A deployment's results, its time and trigger timings added to the session's summary."""
    SUMMARIES.append(
        {
            "scenario": title,
            "seconds": results["deployment"]["total_seconds"],
            "note_ms": results["deployment"].get("note_ms"),
            "answer_ms": results["deployment"].get("answer_ms"),
        }
    )
    return results


@pytest.fixture(scope="module")
def main(tmp_path_factory: Any) -> dict[str, Any]:
    return _summarised(
        _once_per_test_run("main", run_main_deployment, tmp_path_factory), "logical job: main deployment"
    )


@pytest.fixture(scope="module")
def second(tmp_path_factory: Any) -> dict[str, Any]:
    return _summarised(
        _once_per_test_run("second", run_second_deployment, tmp_path_factory),
        "logical job: second deployment",
    )


@pytest.fixture(scope="module")
def reuse(tmp_path_factory: Any) -> dict[str, Any]:
    return _summarised(
        _once_per_test_run("reuse", run_reuse_deployment, tmp_path_factory),
        "logical job: SQLite trigger-id deployment",
    )


# =========================================================================== assertions
def _get(results: dict[str, Any], key: str) -> dict[str, Any]:
    errors = {k: v for k, v in results.items() if k.startswith("driver:")}
    if key not in results:
        pytest.fail(
            f"scenario {key} produced no result; driver errors: {json.dumps(errors, indent=1)[:6000]}"
        )
    r = results[key]
    shown = (
        "final_state",
        "runs",
        "cancelled",
        "decisions",
        "triggerer_stops",
        "mark_to_cancel_seconds",
        "old_run_cancelled_by",
        "action_to_cancel_seconds",
    )
    SUMMARIES.append(
        {
            "scenario": f"logical job {key}",
            "operator": r["operator"],
            "submissions": r["created"],
            "tries": r["tries"],
            "seconds": r["seconds"],
            **{k: r[k] for k in shown if k in r},
        }
    )
    return r


def _why(r: dict[str, Any]) -> str:
    shown = {k: v for k, v in r.items() if k != "logs"}
    return f"\n{json.dumps(shown, indent=1, default=str)}\n----- task logs -----\n{r.get('logs', '')[-6000:]}"


def _assert_new_job(r: dict[str, Any]) -> None:
    """The second logical job ran a job of its own, to success, and nothing is left running."""
    w = _why(r)
    assert r["created"] == 2, f"expected a new Databricks run for the new logical job{w}"
    assert len(set(r["tokens"])) == 2, f"the new logical job reused the old idempotency token{w}"
    assert r["final_state"] == "success", w
    assert r["xcom_run_id"] == r["runs"][-1], f"the task's run_id XCom is not the new run{w}"
    assert r["left_running"] == [], f"a run is left running untracked{w}"


# -- 1. a new logical job never receives an older job
def test_1a_rerun_of_a_deleted_dag_run_submits_a_new_job(main: dict[str, Any]) -> None:
    r = _get(main, "1a")
    assert r["first_run_state"] == "success" and r["store_rows_after_delete"] == 0, _why(r)
    assert r["first_run"] not in r["replayed_runs"], (
        f"Databricks handed the re-created DAG run the old run back (same token){_why(r)}"
    )
    # A resend of the new job's own token (a retry reconnecting) may replay only the new run.
    assert set(r["replayed_runs"]) <= {r["runs"][-1]}, _why(r)
    _assert_new_job(r)


def test_1c_clear_after_retention_cleanup_submits_a_new_job(main: dict[str, Any]) -> None:
    r = _get(main, "1c")
    assert r["clean_rc"] == 0, _why(r)
    if not r.get("never_expires"):
        assert r["store_rows_after_clean"] == 0, f"state-store clean left the expired record{_why(r)}"
    assert r["replays"] == 0, _why(r)
    _assert_new_job(r)
    assert "already_succeeded" not in [d for t, d in r["decisions"] if t >= 2], _why(r)


def test_1b_clear_after_clear_on_success_submits_a_new_job(second: dict[str, Any]) -> None:
    r = _get(second, "1b")
    assert r["first_run_state"] == "success" and r["store_rows_after_success"] == 0, _why(r)
    assert r["replays"] == 0, _why(r)
    _assert_new_job(r)


# -- 2. a user's clear or mark starts a new logical job and never fails the task
def test_2a_clear_while_deferred_runs_a_new_job(main: dict[str, Any]) -> None:
    r = _get(main, "2a")
    w = _why(r)
    first, *_ = r["runs"]
    assert first in r["cancelled"], f"the cleared try's run was not cancelled{w}"
    assert [t for t, _ in r["tries"]] == [1, 2], w
    _assert_new_job(r)
    assert "reconnect" not in [d for t, d in r["decisions"] if t == 2], f"try 2 reconnected to the old job{w}"


def test_2a_upstream_clear_while_deferred(main: dict[str, Any]) -> None:
    """The provider operator in the same deployment: its trigger's on_kill cancels run 1, try 2 submits."""
    r = _get(main, "2a_upstream")
    w = _why(r)
    assert r["final_state"] == "success", w
    assert r["created"] == 2 and r["runs"][0] in r["cancelled"], w
    assert r["left_running"] == [], w


def test_2a_forced_repetitions_give_the_new_trigger_the_old_trigger_id(reuse: dict[str, Any]) -> None:
    """The premise of the forced repetitions below (not an expected failure): the new try's trigger took
    the old trigger's id, so the old trigger's event could reach the new try."""
    for dag_id in REUSE_DAGS[NATURAL_REUSE:]:
        r = _get(reuse, dag_id)
        assert r["new_trigger_id"] == r["old_trigger_id"] is not None, _why(r)


def test_2a_clear_while_deferred_on_sqlite_never_fails_on_the_old_trigger_event(
    reuse: dict[str, Any],
) -> None:
    """Issue 22 (A): the old trigger's event about the old job may reach the new try (SQLite reuses the
    trigger id); the new try must go back to waiting on its own job, never fail. Every repetition, the
    natural ones and the forced ones, in one test: any of them failing is the finding."""
    for dag_id in REUSE_DAGS:
        r = _get(reuse, dag_id)
        w = _why(r)
        first, *_ = r["runs"]
        assert first in r["cancelled"], f"{dag_id}: the cleared try's run was not cancelled{w}"
        assert [t for t, _ in r["tries"]] == [1, 2], w
        _assert_new_job(r)


def test_C_mark_failed_while_deferred_cancels_the_job_within_seconds(reuse: dict[str, Any]) -> None:
    """Issue 22 (C): a user's mark failed of a deferred task ends its job within a few seconds, the
    triggerer's first mark too (it waited 9-16 s on the triggerer's lazily built execution API before)."""
    for dag_id in MARK_DAGS:
        r = _get(reuse, dag_id)
        w = _why(r)
        assert r["final_state"] == "failed" and r["created"] == 1, w
        assert r["runs"][0] in r["cancelled"], f"{dag_id}: the marked task's run was not cancelled{w}"
        assert r["left_running"] == [], w
        seconds = r["mark_to_cancel_seconds"]
        assert seconds is not None and seconds <= MARK_TO_CANCEL_LIMIT, (
            f"{dag_id}: {seconds}s from the mark to the cancel (limit {MARK_TO_CANCEL_LIMIT}s){w}"
        )


def test_2b_mark_success_while_triggerer_stalled_then_clear_runs_a_new_job(main: dict[str, Any]) -> None:
    r = _get(main, "2b_running")
    w = _why(r)
    assert r["runs"][0] in r["cancelled"], w
    _assert_new_job(r)
    assert "reconnect" not in [d for t, d in r["decisions"] if t >= 2], w


def test_2b_job_finished_during_stall_mark_then_clear_never_already_succeeded(main: dict[str, Any]) -> None:
    r = _get(main, "2b_finished")
    w = _why(r)
    assert "already_succeeded" not in [d for t, d in r["decisions"] if t >= 2], w
    _assert_new_job(r)


def test_2c_lower_retries_then_clear_runs_a_new_job(main: dict[str, Any]) -> None:
    r = _get(main, "2c")
    w = _why(r)
    # The premise: Airflow gives the cleared task the same max_tries as before (1 try + 1 retry = 2).
    assert r["max_tries_before"] == 2 and r["max_tries_after"] == 2, w
    assert "already_succeeded" not in [d for t, d in r["decisions"] if t >= 2], w
    _assert_new_job(r)


def test_2d_lower_retries_while_deferred_then_clear_runs_a_new_job(main: dict[str, Any]) -> None:
    """Model finding N8 on a real deployment: with max_tries unchanged by the clear, only the clear mark
    (the task instance's renewed trace carrier) tells the next try that the user started a new job."""
    r = _get(main, "2d")
    w = _why(r)
    assert r["state_before_clear"] == "deferred", w
    # The premise: the retries edit and the clear leave max_tries as it was (1 try + 1 retry = 2).
    assert r["max_tries_before"] == 2 and r["max_tries_after"] == 2, w
    assert [t for t, _ in r["tries"]] == [1, 2], w
    second = [d for t, d in r["decisions"] if t == 2]
    assert "reconnect" not in second, f"try 2 reconnected to the old run (N8){w}"
    assert "new_epoch" in second, f"try 2 did not decide new_epoch{w}"
    assert r["runs"][0] in r["cancelled"], f"the cleared try's run was not cancelled{w}"
    _assert_new_job(r)


# -- 3. only the owner cancels
def test_3a_zombie_try_does_not_cancel_the_job_its_successor_tracks(main: dict[str, Any]) -> None:
    r = _get(main, "3a")
    w = _why(r)
    assert r["created"] == 1 and r["cancelled"] == [], f"try 1's on_kill cancelled the run try 2 tracks{w}"
    assert r["final_state"] == "success", w
    assert [t for t, _ in r["tries"]] == [1, 2], w
    assert r["left_running"] == [], w


def test_3a_upstream_zombie_try(main: dict[str, Any]) -> None:
    """Upstream's sync path reconnects too (ResumableJobMixin), and try 1's on_kill cancels the run."""
    r = _get(main, "3a_upstream")
    assert r["created"] >= 1 and r["left_running"] == [], _why(r)


def test_3b_triggerer_that_lost_its_trigger_does_not_cancel_the_job(second: dict[str, Any]) -> None:
    r = _get(second, "3b")
    w = _why(r)
    assert r["created"] == 1 and r["cancelled"] == [], f"the stale triggerer's on_kill cancelled the run{w}"
    assert r["final_state"] == "success", w
    assert r["left_running"] == [], w


def test_3b_upstream_triggerer_takeover(second: dict[str, Any]) -> None:
    """apache/airflow#73454 on the provider's trigger: the resumed triggerer cancels the live run."""
    r = _get(second, "3b_upstream")
    assert r["left_running"] == [], _why(r)


# -- 4. execution_timeout while deferred
def test_4_execution_timeout_while_deferred_fails_the_task_and_cancels_the_job(main: dict[str, Any]) -> None:
    r = _get(main, "4")
    w = _why(r)
    assert r["final_state"] == "failed", w
    assert r["created"] == 1 and r["cancelled"] == r["runs"], f"the timed-out job was not cancelled{w}"
    # From the task's start to its end (the DB's start_date/end_date), not from the test's trigger call,
    # which can wait on SQLite under load: execution_timeout + the scheduler's timeout check + a resume.
    assert r["task_seconds"] < EXECUTION_TIMEOUT + 20, f"the task outlived its execution_timeout{w}"
    assert r["left_running"] == [], w


def test_4_upstream_execution_timeout_while_deferred(main: dict[str, Any]) -> None:
    """The provider operator defers without a timeout: the task waits the whole job out."""
    r = _get(main, "4_upstream")
    assert r["created"] == 1 and r["left_running"] == [], _why(r)


def test_deployments_leave_no_process(
    main: dict[str, Any], second: dict[str, Any], reuse: dict[str, Any]
) -> None:
    assert all(res["deployment"]["stray_pids"] == [] for res in (main, second, reuse))
    errors = {k: v for res in (main, second, reuse) for k, v in res.items() if k.startswith("driver:")}
    assert not errors, json.dumps(errors, indent=1)[:8000]
