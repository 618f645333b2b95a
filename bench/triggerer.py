"""Section "triggerer": deferred tasks on one real ``airflow triggerer`` process, and the reconnect storm.

Scale (a real triggerer): per size N and side (ours / upstream), a fresh SQLite metadata DB (copied from one
migrated template) gets N deferred task instances and their trigger rows (``bench/triggerer_setup.py``: the
operators' own ``execute()`` submits each run to the Databricks emulator and defers; the rows are written as
the execution API writes them), then ``airflow triggerer`` starts against that DB and the emulator (which
runs in this process: out of the triggerer's process tree). Its process tree (the triggerer and its
trigger-runner subprocess) is sampled with psutil every ``SAMPLE`` s for CPU seconds and peak RSS, through
three phases: start until every trigger has polled its run at least once ("all running"), ``WINDOW`` s of
steady waiting (every run stays RUNNING, polled every ``POLL`` s), then every run turns
``TERMINATED:SUCCESS`` and the phase ends when no task instance is ``deferred`` any more (every trigger
fired and the triggerer wrote its event to the task instance).

The reconnect storm (N deferred tasks whose tries all die at once are all retried): ``--storm-mode real``
(the default) runs it on a real deployment per side (``bench/storm.py``: an outage of the Databricks API
fails every trigger, the scheduler runs the retries on the executor); ``--storm-mode in-process`` runs the
retries one after another in this process (seconds; the time is the sum of the retries' own work, not what
parallel workers would see). Both count the API calls from the emulator's log.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import sqlite3
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
POLL = 10  # the trigger's polling_period_seconds
WINDOW = 30.0  # seconds of steady waiting measured once every trigger runs
SAMPLE = 0.5
PHASE_TIMEOUT = 900.0


def _deferred(make: Any, store: Any, run_id: str = "scale", try_number: int = 1) -> Any:
    from airflow.sdk.exceptions import TaskDeferred

    from tests.harness import FakeTaskInstance

    ti = FakeTaskInstance("bench", run_id, "job", 3)
    ti.try_number = try_number
    op = make()
    try:
        op.execute(
            {"ti": ti, "task_instance": ti, "run_id": ti.run_id, "task": op, "task_state_store": store}
        )
    except TaskDeferred as deferred:
        return deferred.trigger
    raise RuntimeError("the operator did not defer")


class _Tree:
    """CPU seconds and peak RSS of a process and its descendants, sampled (children's times kept after
    they exit: the last sample of each pid counts)."""

    def __init__(self, pid: int) -> None:
        import psutil  # type: ignore[import-untyped]

        self.root = psutil.Process(pid)
        self.cpu: dict[int, float] = {}
        self.peak_rss = 0

    def sample(self) -> None:
        import psutil  # type: ignore[import-untyped]

        try:
            procs = [self.root, *self.root.children(recursive=True)]
        except psutil.NoSuchProcess:
            return
        rss = 0
        for proc in procs:
            try:
                times = proc.cpu_times()
                self.cpu[proc.pid] = times.user + times.system
                rss += proc.memory_info().rss
            except psutil.NoSuchProcess:
                continue
        self.peak_rss = max(self.peak_rss, rss)

    def cpu_s(self) -> float:
        return sum(self.cpu.values())


def _deferred_left(db: Path) -> int:
    with sqlite3.connect(f"file:{db}?mode=ro", uri=True, timeout=30) as conn:
        return int(conn.execute("select count(*) from task_instance where state = 'deferred'").fetchone()[0])


def _real_one(side: str, n: int, env: dict[str, str], emulator: Any, template: Path, work: Path) -> dict:
    home = Path(tempfile.mkdtemp(prefix=f"{side}-{n}-", dir=work))
    (home / "dags").mkdir()
    db = home / "airflow.db"
    shutil.copy(template, db)
    run_env = dict(env)
    run_env.update(
        {
            "AIRFLOW_HOME": str(home),
            "AIRFLOW__DATABASE__SQL_ALCHEMY_CONN": f"sqlite:///{db}",
            "AIRFLOW__CORE__DAGS_FOLDER": str(home / "dags"),
            "AIRFLOW__TRIGGERER__CAPACITY": str(max(1000, n)),
            # Parsing a 1,000-task DAG file on a loaded 2-core machine takes longer than the default 30 s.
            "AIRFLOW__CORE__DAGBAG_IMPORT_TIMEOUT": "900",
        }
    )
    emulator.install_connection(run_env.__setitem__, conn_id="databricks_default")
    runs_before = set(emulator.runs)
    t0 = time.perf_counter()
    setup = subprocess.run(
        [sys.executable, "-m", "bench.triggerer_setup"],
        input=json.dumps({"side": side, "tasks": n, "poll": POLL, "dags_folder": str(home / "dags")}),
        env=run_env,
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=PHASE_TIMEOUT * 2,
        check=False,
    )
    if setup.returncode != 0:
        raise RuntimeError(f"triggerer setup ({side}, {n}) failed: {setup.stderr[-3000:]}")
    made = json.loads(setup.stdout.strip().splitlines()[-1])
    setup_s = time.perf_counter() - t0
    runs = [r for rid, r in emulator.runs.items() if rid not in runs_before]
    if len(runs) != n or _deferred_left(db) != n:  # a task left not deferred (n > 10: a partial last run)
        raise RuntimeError(f"setup made {len(runs)} runs and {_deferred_left(db)} deferred tasks, not {n}")
    baseline = {r.run_id: r.lifecycle.reads for r in runs}
    log0 = len(emulator.server.log)
    airflow = str(Path(sys.executable).with_name("airflow"))
    out = open(home / "triggerer.log", "wb")  # noqa: SIM115 - closed below, after the process
    proc = subprocess.Popen(
        [airflow, "triggerer", "--skip-serve-logs"],
        env=run_env,
        cwd=home,
        stdout=out,
        stderr=subprocess.STDOUT,
        start_new_session=True,
    )
    tree = _Tree(proc.pid)
    marks: dict[str, float] = {}
    cpu: dict[str, float] = {}
    started = time.perf_counter()
    try:
        while True:
            tree.sample()
            now = time.perf_counter() - started
            if proc.poll() is not None:
                raise RuntimeError(f"airflow triggerer exited {proc.returncode} after {now:.0f} s")
            if "running" not in marks:
                if all(r.lifecycle.reads > baseline[r.run_id] for r in runs):
                    marks["running"], cpu["running"] = now, tree.cpu_s()
                elif now > PHASE_TIMEOUT:
                    break
            elif "released" not in marks:
                if now - marks["running"] >= WINDOW:
                    marks["released"], cpu["released"] = now, tree.cpu_s()
                    for r in runs:
                        emulator.set_state(r.run_id, "TERMINATED:SUCCESS")
            elif _deferred_left(db) == 0:
                marks["fired"], cpu["fired"] = now, tree.cpu_s()
                break
            elif now - marks["released"] > PHASE_TIMEOUT:
                break
            time.sleep(SAMPLE)
    finally:
        tree.sample()
        try:
            os.killpg(proc.pid, signal.SIGTERM)
            proc.wait(timeout=90)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait(timeout=30)
        except ProcessLookupError:
            pass
        out.close()
    left = _deferred_left(db)
    log = emulator.server.log[log0:]
    row = {
        "tasks": n,
        "side": side,
        "trigger": made["classpath"].rpartition(".")[2],
        "setup_s": setup_s,
        "cpu_s_to_running": cpu.get("running"),
        "cpu_s_window": None if "released" not in cpu else cpu["released"] - cpu["running"],
        "cpu_s_to_fired": None if "fired" not in cpu else cpu["fired"] - cpu["released"],
        "cpu_s_total": tree.cpu_s(),
        "rss_mib": tree.peak_rss / 2**20,
        "s_to_running": marks.get("running"),
        "s_to_fired": None if "fired" not in marks else marks["fired"] - marks["released"],
        "still_deferred": left,
        "api_calls": len(log),
        "store_rows_per_task": made["rows_per_task"],
        "store_writes_per_task": made["writes_per_task"],
        "store_reads_per_task": made["reads_per_task"],
        "store_bytes_per_task": made["bytes_per_task"],
        "trigger_row_bytes_per_task": made["trigger_row_bytes_per_task"],
        "load": [round(x, 2) for x in os.getloadavg()],
    }
    if "fired" not in marks:
        tail = (home / "triggerer.log").read_text(errors="replace")[-3000:]
        row["error"] = f"not every trigger fired (marks {marks}); triggerer log tail: {tail}"
    shutil.rmtree(home, ignore_errors=True)
    return row


def run(settings: dict[str, Any], env: dict[str, str]) -> list[dict[str, Any]]:
    os.environ.update({k: v for k, v in env.items() if k.startswith("AIRFLOW")})
    from airflow_durable.testing import DatabricksEmulator

    sizes = [int(n) for n in str(settings["triggerer_sizes"]).split(",") if n]
    storm = int(settings["storm"])
    rows: list[dict[str, Any]] = []
    storms: list[dict[str, Any]] = []
    emulator = DatabricksEmulator(lifecycle=["RUNNING"])
    emulator.start()
    work = Path(tempfile.mkdtemp(prefix="bench-triggerer-"))
    try:
        if sizes:
            template = work / "template.db"
            migrate_env = {**env, "AIRFLOW__DATABASE__SQL_ALCHEMY_CONN": f"sqlite:///{template}"}
            airflow = str(Path(sys.executable).with_name("airflow"))
            mig = subprocess.run(
                [airflow, "db", "migrate"], env=migrate_env, capture_output=True, text=True, timeout=900
            )
            if mig.returncode != 0:
                raise RuntimeError(f"airflow db migrate failed: {mig.stderr[-2000:]}")
        for i, n in enumerate(sizes):
            # Interleaved: upstream first at one size, ours first at the next.
            for side in ("upstream", "ours") if i % 2 == 0 else ("ours", "upstream"):
                print(f">> bench: real triggerer, {n} tasks, {side}", file=sys.stderr, flush=True)
                try:
                    rows.append(_real_one(side, n, env, emulator, template, work))
                except Exception as err:  # one size that cannot run leaves the others' rows
                    rows.append({"tasks": n, "side": side, "error": f"{type(err).__name__}: {err}"})
                if os.environ.get("BENCH_TRIGGERER_ROWS"):  # rows so far, for a run stopped early
                    Path(os.environ["BENCH_TRIGGERER_ROWS"]).write_text(json.dumps(rows, indent=1))
        if storm > 0 and settings.get("storm_mode", "in-process") == "real":
            from bench import storm as real_storm

            storms = real_storm.run(storm, runs=int(settings.get("storm_runs", 1)))
        elif storm > 0:
            storms = _storm_in_process(storm, emulator)
    finally:
        emulator.stop()
        shutil.rmtree(work, ignore_errors=True)
    return [
        {
            "section": "triggerer",
            "ran": True,
            "mode": "real airflow triggerer (SQLite metadata DB, deferred rows written directly)",
            "storm_mode": _storm_mode(settings),
            "window": WINDOW,
            "poll": POLL,
            "rows": rows,
            "storm": storms,
        }
    ]


def _storm_mode(settings: dict[str, Any]) -> str:
    if settings.get("storm_mode", "in-process") == "real":
        from bench import storm as real_storm

        return real_storm.describe()
    return "in-process harness, retries one after another"


def _storm_in_process(storm: int, emulator: Any) -> list[dict[str, Any]]:
    """`storm` tasks deferred, every try dies, all are retried (try 2), one after another in this process."""
    from airflow.providers.databricks.operators.databricks import DatabricksSubmitRunOperator

    from airflow_durable.operators.databricks import DurableDatabricksSubmitRunOperator
    from tests.harness import MemoryStateStore

    job = {
        "new_cluster": {"spark_version": "15.4.x-scala2.12", "num_workers": 1},
        "notebook_task": {"notebook_path": "/Shared/etl"},
    }
    emulator.install_connection(os.environ.__setitem__, conn_id="databricks_default")
    classes = {"upstream": DatabricksSubmitRunOperator, "ours": DurableDatabricksSubmitRunOperator}
    storms: list[dict[str, Any]] = []
    for side in ("upstream", "ours"):
        cls = classes[side]
        stores = [MemoryStateStore() for _ in range(storm)]
        for i, store in enumerate(stores):
            _deferred(lambda cls=cls: cls(task_id="job", json=job, deferrable=True), store, f"s{i}")
        log0, ledger0 = len(emulator.server.log), len(emulator.ledger.submissions())
        before = [len(store.calls) for store in stores]
        t0 = time.perf_counter()
        for i, store in enumerate(stores):  # every try died: the retries (try 2)
            _deferred(lambda cls=cls: cls(task_id="job", json=job, deferrable=True), store, f"s{i}", 2)
        seconds = time.perf_counter() - t0
        storms.append(
            {
                "side": side,
                "tasks": storm,
                "api_calls": len(emulator.server.log) - log0,
                "submissions": len(emulator.ledger.submissions()) - ledger0,
                "seconds": seconds,
                "store_gets_per_task": sum(
                    1 for s, b in zip(stores, before, strict=True) for c in s.calls[b:] if c.op == "get"
                )
                / storm,
                "store_sets_per_task": sum(
                    1 for s, b in zip(stores, before, strict=True) for c in s.calls[b:] if c.op == "set"
                )
                / storm,
            }
        )
    return storms
