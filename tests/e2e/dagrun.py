"""What every ``dag.test()`` test shares: a migrated throwaway Airflow home, a subprocess that prints JSON
summaries, and the reads of a finished DAG run from the metadata DB (tries, XComs, engine decisions).

Used by the end-to-end runner (``tests/e2e/runner.py``) and the example-DAG runner
(``tests/examples/run_example.py``). The DB reads run inside the subprocess that ran ``dag.test()``.
"""

from __future__ import annotations

import io
import json
import os
import subprocess
import sys
from contextlib import redirect_stderr, redirect_stdout
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]

#: The engine logs each decision once at INFO as "task <id> [<decision>]: ...".
DECISIONS = (
    "fresh_submit",
    "resume_submit",
    "reconnect",
    "already_succeeded",
    "terminal_resubmit",
    "not_durable",
)


def migrated_home(home: Path, dags_folder: Path) -> dict[str, str]:
    """The environment of a fresh SQLite Airflow home in ``home`` (migrated here) whose dags folder is
    ``dags_folder``: ``dag.test()`` needs the DAG file inside a configured bundle."""
    env = {
        **os.environ,
        "AIRFLOW_HOME": str(home),
        "AIRFLOW__CORE__DAGS_FOLDER": str(dags_folder),
        "AIRFLOW__CORE__LOAD_EXAMPLES": "False",
        "AIRFLOW__DATABASE__SQL_ALCHEMY_CONN": f"sqlite:///{home}/airflow.db",
        "PYTHONPATH": os.pathsep.join([str(ROOT), str(dags_folder)]),
        "PYTHONWARNINGS": "ignore",
    }
    import airflow

    command = ["db", "migrate"] if int(airflow.__version__.split(".")[0]) >= 3 else ["db", "init"]
    done = subprocess.run(
        [sys.executable, "-m", "airflow", *command], env=env, capture_output=True, text=True, timeout=600
    )
    assert done.returncode == 0, done.stderr[-3000:]
    return env


def summaries(
    cmd: list[str], env: dict[str, str], prefix: str, expected: int | None = None
) -> tuple[list[Any], str]:
    """Run ``cmd`` (a module of this repo); return the JSON of every stdout line starting ``prefix``,
    and the tail of its stderr (the DAG runs' logs) for a failing test to show."""
    done = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=900, cwd=ROOT)
    lines = [line for line in done.stdout.splitlines() if line.startswith(prefix)]
    ok = done.returncode == 0 and lines and (expected is None or len(lines) == expected)
    assert ok, (done.stdout[-3000:], done.stderr[-8000:])
    return [json.loads(line.removeprefix(prefix)) for line in lines], done.stderr[-4000:]


def run_dag(dag: Any, tail: int = 8000, **test_kwargs: Any) -> tuple[Any, str]:
    """``dag.test()`` with its log captured; the log's tail goes to stderr (shown when a test fails)."""
    log = io.StringIO()
    with redirect_stdout(log), redirect_stderr(log):
        dag_run = dag.test(**test_kwargs)
    output = log.getvalue()
    sys.stderr.write(output[-tail:])
    return dag_run, output


def decisions(output: str) -> list[str]:
    return [d for line in output.splitlines() for d in DECISIONS if f"[{d}]" in line]


def tries(dag_id: str, run_id: str, task_id: str) -> list[dict[str, Any]]:
    """Every try of one task in one DAG run, failed ones (``task_instance_history``) first."""
    rows = _query(
        "SELECT try_number, state FROM task_instance_history WHERE dag_id=:dag AND task_id=:task "
        "AND run_id=:run UNION ALL SELECT try_number, state FROM task_instance "
        "WHERE dag_id=:dag AND task_id=:task AND run_id=:run ORDER BY 1",
        dag=dag_id,
        task=task_id,
        run=run_id,
    )
    return [{"try": r[0], "state": r[1]} for r in rows]


def task_states(dag_id: str, run_id: str) -> dict[str, str]:
    rows = _query(
        "SELECT task_id, state FROM task_instance WHERE dag_id=:dag AND run_id=:run", dag=dag_id, run=run_id
    )
    return {task_id: state for task_id, state in rows}


def xcoms(dag_id: str, run_id: str) -> dict[str, dict[str, Any]]:
    """``{task_id: {key: value}}`` of one DAG run, values decoded from JSON where they are JSON."""
    rows = _query(
        "SELECT task_id, key, value FROM xcom WHERE dag_id=:dag AND run_id=:run", dag=dag_id, run=run_id
    )
    out: dict[str, dict[str, Any]] = {}
    for task_id, key, value in rows:
        if isinstance(value, bytes):
            value = value.decode(errors="replace")
        try:
            value = json.loads(value)
        except (TypeError, ValueError):
            pass
        out.setdefault(task_id, {})[key] = value
    return out


def _query(sql: str, **params: str) -> list[Any]:
    from airflow.settings import Session
    from sqlalchemy import text

    with Session() as session:
        return list(session.execute(text(sql), params).all())
