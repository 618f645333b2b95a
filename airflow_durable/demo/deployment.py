"""A real Airflow 3.x deployment on one machine: api-server, scheduler, dag-processor, triggerer.

Used by ``airflow-durable demo`` and by the real-deployment tests (``tests/e2e_runtime``).
LocalExecutor on SQLite in a throwaway ``AIRFLOW_HOME`` that `Deployment` creates and removes. Every
component starts in its own session (``setsid``) with an explicit environment; `Deployment.stop`
always ends them: SIGTERM to each process group, SIGKILL after a grace period, then a sweep of any
process that still carries this deployment's unique ``AIRFLOW_HOME`` (the task processes put
themselves into their own process group, so killing the component groups alone would miss them).

Nothing here imports Airflow: the components are driven through their CLI and the metadata DB is
read with `sqlite3` (or `psycopg2`).

Besides that embedded default, ``Deployment(database="postgres", executor="celery", triggerers=2)``
is the deployment teams run in production: a private PostgreSQL server (initdb into the home, loopback
port) and a private Redis broker, both started from the Debian packages' binaries and stopped with the
deployment, ``airflow celery worker`` processes instead of the LocalExecutor, and two triggerers.
"""

from __future__ import annotations

import contextlib
import glob
import json
import os
import pwd
import random
import shutil
import signal
import socket
import sqlite3
import subprocess
import sys
import tempfile
import time
import urllib.request
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

__all__ = [
    "COMPONENTS",
    "Deployment",
    "DeploymentError",
    "PostgresServer",
    "RedisServer",
    "TaskInstanceRow",
    "venv_bin",
]

COMPONENTS = ("api-server", "scheduler", "dag-processor", "triggerer")
#: The CeleryExecutor by its full path (the short alias is not resolved in Airflow 3.3).
CELERY_EXECUTOR = "airflow.providers.celery.executors.celery_executor.CeleryExecutor"
#: The directory holding the ``airflow_durable`` package: the components import this same copy.
PACKAGE_PARENT = Path(__file__).resolve().parents[2]
#: Seconds a SIGSTOPped process may take to show as stopped (the kernel stops it when it next runs).
STOP_GRACE = 10.0


def venv_bin() -> Path:
    """Where the ``airflow`` executable is looked up first: ``$AIRFLOW_DURABLE_RUNTIME_BIN``, else the
    directory of the running interpreter (so the components are the Airflow this process imports)."""
    return Path(os.environ.get("AIRFLOW_DURABLE_RUNTIME_BIN") or Path(sys.executable).parent)


class DeploymentError(RuntimeError):
    """A component did not come up, or a bounded wait ran out.

    `reason` says what went wrong, `logs` holds the tails of the logs that show why
    (component logs, task logs); ``str()`` is both.
    """

    def __init__(self, reason: str, logs: str = "") -> None:
        super().__init__(f"{reason}\n{logs}" if logs else reason)
        self.reason = reason
        self.logs = logs


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _airflow_bin() -> str:
    candidate = venv_bin() / "airflow"
    if candidate.exists():
        return str(candidate)
    found = shutil.which("airflow")
    if found is None:
        raise DeploymentError(f"no `airflow` executable in {venv_bin()} or on PATH")
    return found


def _server_binary(name: str) -> str:
    """A server binary of the Debian packages: ``/usr/lib/postgresql/<v>/bin`` first (not on PATH)."""
    for candidate in sorted(glob.glob(f"/usr/lib/postgresql/*/bin/{name}"), reverse=True):
        return candidate
    found = shutil.which(name)
    if found is None:
        raise DeploymentError(f"no `{name}` executable: apt-get install -y postgresql redis-server")
    return found


def _wait_port(port: int, proc: subprocess.Popen[bytes], what: str, log: Path, timeout: float = 60) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise DeploymentError(
                f"{what} exited with {proc.returncode}", logs=log.read_text(errors="replace")[-3000:]
            )
        with socket.socket() as s:
            s.settimeout(0.5)
            if s.connect_ex(("127.0.0.1", port)) == 0:
                return
        time.sleep(0.2)
    raise DeploymentError(f"{what} did not listen on 127.0.0.1:{port} within {timeout:.0f}s")


def _stop_server(proc: subprocess.Popen[bytes] | None, sig: signal.Signals, grace: float = 15) -> None:
    if proc is None or proc.poll() is not None:
        return
    try:
        os.killpg(proc.pid, sig)
        proc.wait(timeout=grace)
    except (ProcessLookupError, PermissionError):
        pass
    except subprocess.TimeoutExpired:
        try:
            os.killpg(proc.pid, signal.SIGKILL)
        except (ProcessLookupError, PermissionError):
            pass
        proc.wait(timeout=10)


class PostgresServer:
    """A private PostgreSQL cluster: ``initdb`` into ``root/pgdata``, one loopback port, trust auth.

    Run as root (CI), the cluster belongs to the ``postgres`` user the Debian package creates
    (``initdb`` refuses root); ``root`` is then opened for traversal only. Durability is switched off
    (``fsync``): the cluster lives as long as one test session.
    """

    def __init__(self, root: Path, database: str = "airflow") -> None:
        self.root = root
        self.data = root / "pgdata"
        self.database = database
        self.port = _free_port()
        self.log = root / "component-logs" / "postgres.log"
        self.proc: subprocess.Popen[bytes] | None = None

    @property
    def url(self) -> str:
        return f"postgresql+psycopg2://postgres@127.0.0.1:{self.port}/{self.database}"

    def _as_owner(self) -> dict[str, Any]:
        if os.geteuid() != 0:
            return {}
        owner = pwd.getpwnam("postgres")
        return {"user": owner.pw_uid, "group": owner.pw_gid, "extra_groups": []}

    def start(self, timeout: float = 60) -> PostgresServer:
        self.data.mkdir(mode=0o700)
        owner = self._as_owner()
        if owner:
            os.chmod(self.root, 0o711)
            os.chown(self.data, owner["user"], owner["group"])
        done = subprocess.run(
            [
                _server_binary("initdb"),
                "-D",
                str(self.data),
                "-U",
                "postgres",
                "--auth=trust",
                "--no-sync",
                "-E",
                "UTF8",
                "--locale=C",
            ],
            capture_output=True,
            text=True,
            timeout=timeout,
            cwd="/",
            **owner,
        )
        if done.returncode != 0:
            raise DeploymentError(f"initdb failed (exit {done.returncode})", logs=done.stdout + done.stderr)
        self.log.parent.mkdir(exist_ok=True)
        with open(self.log, "wb") as log:
            self.proc = subprocess.Popen(
                [
                    _server_binary("postgres"),
                    "-D",
                    str(self.data),
                    "-p",
                    str(self.port),
                    "-k",
                    str(self.data),
                    "-c",
                    "listen_addresses=127.0.0.1",
                    "-c",
                    "fsync=off",
                    "-c",
                    "synchronous_commit=off",
                    "-c",
                    "full_page_writes=off",
                    "-c",
                    "max_connections=200",
                ],
                stdin=subprocess.DEVNULL,
                stdout=log,
                stderr=subprocess.STDOUT,
                cwd="/",
                start_new_session=True,
                **owner,
            )
        _wait_port(self.port, self.proc, "postgres", self.log, timeout)
        deadline = time.monotonic() + timeout
        while True:  # the port opens before the server accepts connections
            done = subprocess.run(
                [
                    _server_binary("psql"),
                    "-h",
                    "127.0.0.1",
                    "-p",
                    str(self.port),
                    "-U",
                    "postgres",
                    "-d",
                    "postgres",
                    "-c",
                    f"CREATE DATABASE {self.database}",
                ],
                capture_output=True,
                text=True,
                timeout=30,
                cwd="/",
            )
            if done.returncode == 0:
                return self
            if time.monotonic() > deadline:
                raise DeploymentError("CREATE DATABASE failed", logs=done.stdout + done.stderr)
            time.sleep(0.3)

    def stop(self) -> None:
        _stop_server(self.proc, signal.SIGINT)  # SIGINT: "fast" shutdown


class RedisServer:
    """A private Redis (the Celery broker): loopback port, no persistence, working dir ``root/redis``."""

    def __init__(self, root: Path) -> None:
        self.dir = root / "redis"
        self.port = _free_port()
        self.log = root / "component-logs" / "redis.log"
        self.proc: subprocess.Popen[bytes] | None = None

    def url(self, db: int = 0) -> str:
        return f"redis://127.0.0.1:{self.port}/{db}"

    def start(self, timeout: float = 30) -> RedisServer:
        self.dir.mkdir()
        self.log.parent.mkdir(exist_ok=True)
        with open(self.log, "wb") as log:
            self.proc = subprocess.Popen(
                [
                    _server_binary("redis-server"),
                    "--port",
                    str(self.port),
                    "--bind",
                    "127.0.0.1",
                    "--save",
                    "",
                    "--appendonly",
                    "no",
                    "--dir",
                    str(self.dir),
                    "--daemonize",
                    "no",
                ],
                stdin=subprocess.DEVNULL,
                stdout=log,
                stderr=subprocess.STDOUT,
                cwd=self.dir,
                start_new_session=True,
            )
        _wait_port(self.port, self.proc, "redis-server", self.log, timeout)
        return self

    def stop(self) -> None:
        _stop_server(self.proc, signal.SIGTERM)


@dataclass
class TaskInstanceRow:
    id: str
    state: str | None
    try_number: int
    next_method: str | None


class Deployment:
    """One real deployment. Use as a context manager, or call `start` / `stop`.

    Args:
        dags_folder: the DAG bundle the components parse (default: ``dags/`` in the new home).
        extra_env: environment for every component, on top of the defaults (``AIRFLOW__*``
            settings, emulator connections as ``AIRFLOW_CONN_*``).
        keep_home: keep the ``AIRFLOW_HOME`` (logs, DB, config) after `stop`; also set by
            the ``AFD_RUNTIME_KEEP_HOME`` environment variable.
        home_prefix: name prefix of the temporary ``AIRFLOW_HOME``.
        database: ``"sqlite"`` (the embedded default: a file in the home) or ``"postgres"`` (a
            private PostgreSQL server started from the Debian package, data directory in the home).
        executor: ``"local"`` (LocalExecutor inside the scheduler) or ``"celery"`` (CeleryExecutor,
            a private Redis broker and ``celery_workers`` ``airflow celery worker`` processes).
        triggerers: how many ``airflow triggerer`` processes (the second one is ``triggerer-2``).
        celery_workers: Celery worker processes (``celery-worker-1``...), with ``worker_concurrency``
            task slots each.
    """

    def __init__(
        self,
        dags_folder: Path | None = None,
        extra_env: Mapping[str, str] | None = None,
        *,
        keep_home: bool = False,
        home_prefix: str = "afd-runtime-home-",
        database: str = "sqlite",
        executor: str = "local",
        triggerers: int = 1,
        celery_workers: int = 2,
        worker_concurrency: int = 4,
    ) -> None:
        if database not in ("sqlite", "postgres"):
            raise ValueError(f"database must be 'sqlite' or 'postgres', not {database!r}")
        if executor not in ("local", "celery"):
            raise ValueError(f"executor must be 'local' or 'celery', not {executor!r}")
        if executor == "celery" and database == "sqlite":
            raise ValueError("the CeleryExecutor needs database='postgres' (SQLite is single-host only)")
        if triggerers < 1 or celery_workers < 1:
            raise ValueError("triggerers and celery_workers must be at least 1")
        self.keep_home = keep_home or bool(os.environ.get("AFD_RUNTIME_KEEP_HOME"))
        self.database = database
        self.executor = executor
        self.triggerers = triggerers
        self.celery_workers = celery_workers if executor == "celery" else 0
        self.worker_concurrency = worker_concurrency
        self.home = Path(tempfile.mkdtemp(prefix=home_prefix))
        self.dags_folder = Path(dags_folder) if dags_folder is not None else self.home / "dags"
        self.dags_folder.mkdir(exist_ok=True)
        self.logs = self.home / "component-logs"
        self.logs.mkdir()
        # The components' temporary files (multiprocessing's pymp-* directories, ...) live in the home, so a
        # component killed by a test leaves nothing behind in the system's temporary directory.
        self.tmp = self.home / "tmp"
        self.tmp.mkdir()
        self.db_path = self.home / "airflow.db"
        self.postgres = PostgresServer(self.home) if database == "postgres" else None
        self.redis = RedisServer(self.home) if executor == "celery" else None
        self.api_port = _free_port()
        self.procs: dict[str, subprocess.Popen[bytes]] = {}
        self._sessions: list[int] = []  # component pids = their session ids, kept after stop()
        self._component_env: dict[str, dict[str, str]] = {}  # per-component overrides (log ports)
        self._pg: Any = None
        self.env = self._environment(extra_env or {})

    @property
    def components(self) -> list[str]:
        """The names of this deployment's Airflow processes, in start order."""
        names = ["api-server", "scheduler", "dag-processor", "triggerer"]
        names += [f"triggerer-{i}" for i in range(2, self.triggerers + 1)]
        names += [f"celery-worker-{i}" for i in range(1, self.celery_workers + 1)]
        return names

    def describe(self) -> str:
        """``"PostgreSQL 15 + CeleryExecutor, 2 triggerers"``-style summary of the configuration."""
        db = "PostgreSQL" if self.database == "postgres" else "SQLite"
        ex = "CeleryExecutor" if self.executor == "celery" else "LocalExecutor"
        return f"{db} + {ex}, {self.triggerers} triggerer{'s' if self.triggerers > 1 else ''}"

    # ------------------------------------------------------------------ environment
    def _environment(self, extra: Mapping[str, str]) -> dict[str, str]:
        # Inherit the basics (PATH, HOME, locale, the emulator's AIRFLOW_CONN_*), never the test
        # process's own Airflow settings (tests/conftest.py points those at another home).
        base = {k: v for k, v in os.environ.items() if not k.startswith("AIRFLOW__") and k != "AIRFLOW_HOME"}
        base.pop("PYTEST_CURRENT_TEST", None)
        api = f"http://127.0.0.1:{self.api_port}"
        env = {
            **base,
            "PATH": os.pathsep.join([str(venv_bin()), base.get("PATH", "")]),
            "PYTHONPATH": os.pathsep.join(p for p in (str(PACKAGE_PARENT), base.get("PYTHONPATH")) if p),
            "PYTHONWARNINGS": "ignore",
            "TMPDIR": str(self.tmp),
            "AIRFLOW_HOME": str(self.home),
            "AIRFLOW__CORE__DAGS_FOLDER": str(self.dags_folder),
            "AIRFLOW__DATABASE__SQL_ALCHEMY_CONN": f"sqlite:///{self.db_path}",
            "AIRFLOW__CORE__LOAD_EXAMPLES": "False",
            "AIRFLOW__CORE__EXECUTOR": "LocalExecutor",
            "AIRFLOW__CORE__PARALLELISM": "3",
            "AIRFLOW__CORE__DAGS_ARE_PAUSED_AT_CREATION": "False",
            "AIRFLOW__CORE__SIMPLE_AUTH_MANAGER_ALL_ADMINS": "True",
            "AIRFLOW__CORE__EXECUTION_API_SERVER_URL": f"{api}/execution/",
            "AIRFLOW__API__BASE_URL": api,
            "AIRFLOW__API__HOST": "127.0.0.1",
            "AIRFLOW__API__PORT": str(self.api_port),
            "AIRFLOW__API__WORKERS": "1",
            "AIRFLOW__LOGGING__WORKER_LOG_SERVER_PORT": str(_free_port()),
            "AIRFLOW__LOGGING__TRIGGER_LOG_SERVER_PORT": str(_free_port()),
            "AIRFLOW__SCHEDULER__TASK_INSTANCE_HEARTBEAT_TIMEOUT": "20",
            "AIRFLOW__SCHEDULER__TASK_INSTANCE_HEARTBEAT_TIMEOUT_DETECTION_INTERVAL": "2",
            "AIRFLOW__SCHEDULER__SCHEDULER_IDLE_SLEEP_TIME": "0.5",
            "AIRFLOW__WORKERS__MIN_HEARTBEAT_INTERVAL": "2",
            "AIRFLOW__DAG_PROCESSOR__REFRESH_INTERVAL": "5",
            "AIRFLOW__DAG_PROCESSOR__MIN_FILE_PROCESS_INTERVAL": "5",
            "AIRFLOW__OPENLINEAGE__DISABLED": "True",
            "SCARF_ANALYTICS": "false",
            "DO_NOT_TRACK": "1",
        }
        if self.postgres is not None:
            env["AIRFLOW__DATABASE__SQL_ALCHEMY_CONN"] = self.postgres.url
        if self.redis is not None:
            env.update(
                {
                    "AIRFLOW__CORE__EXECUTOR": CELERY_EXECUTOR,
                    "AIRFLOW__CELERY__BROKER_URL": self.redis.url(0),
                    "AIRFLOW__CELERY__RESULT_BACKEND": "db+" + self.postgres.url if self.postgres else "",
                    "AIRFLOW__CELERY__WORKER_CONCURRENCY": str(self.worker_concurrency),
                    "AIRFLOW__CELERY__SYNC_PARALLELISM": "1",
                    "AIRFLOW__CELERY__OPERATION_TIMEOUT": "10",
                    # A lost worker's message comes back after this long (not the 24 h default).
                    "AIRFLOW__CELERY_BROKER_TRANSPORT_OPTIONS__VISIBILITY_TIMEOUT": "120",
                    "AIRFLOW__CORE__PARALLELISM": str(max(3, self.worker_concurrency * self.celery_workers)),
                }
            )
        env.update(extra)
        # An emulator's PYTHONPATH (e.g. Snowflake's routing sitecustomize) goes in front of ours:
        # replacing it would drop this package's parent, which the components import the DAGs from.
        if extra.get("PYTHONPATH"):
            parts = [*extra["PYTHONPATH"].split(os.pathsep), str(PACKAGE_PARENT)]
            parts += (base.get("PYTHONPATH") or "").split(os.pathsep)
            env["PYTHONPATH"] = os.pathsep.join(dict.fromkeys(p for p in parts if p))
        return env

    # ------------------------------------------------------------------ lifecycle
    def __enter__(self) -> Deployment:
        try:
            if not self.procs:
                self.start()
        except BaseException:
            self.stop()
            raise
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def start(self, dag_ids: Iterable[str] = (), timeout: float = 90) -> Deployment:
        """Migrate the DB, start every component, wait until all are healthy and ``dag_ids`` serialized."""
        deadline = time.monotonic() + timeout
        self.start_servers()
        self.migrate(timeout=max(10.0, deadline - time.monotonic()))
        self.start_components()
        self.wait_healthy(deadline - time.monotonic())
        self.wait_dags(dag_ids, deadline - time.monotonic())
        return self

    def start_servers(self) -> None:
        """Start the private PostgreSQL and Redis servers this configuration needs (none for SQLite)."""
        if self.postgres is not None and self.postgres.proc is None:
            self.postgres.start()
        if self.redis is not None and self.redis.proc is None:
            self.redis.start()

    def migrate(self, timeout: float = 90) -> None:
        """``airflow db migrate`` on the fresh DB (also writes ``airflow.cfg``)."""
        self.start_servers()
        try:
            done = self.cli("db", "migrate", timeout=timeout)
        except subprocess.TimeoutExpired:
            raise DeploymentError(f"airflow db migrate did not finish within {timeout:.0f}s") from None
        except OSError as err:
            raise DeploymentError(f"airflow db migrate could not start: {err}") from None
        if done.returncode != 0:
            raise DeploymentError(
                f"airflow db migrate failed (exit {done.returncode})",
                logs=f"----- airflow db migrate (tail) -----\n{done.stdout[-2000:]}\n{done.stderr[-4000:]}",
            )

    def start_components(self) -> None:
        """Start api-server, scheduler, dag-processor, the triggerer(s) and any Celery workers, each in
        its own session."""
        if self.procs:
            raise RuntimeError("this deployment is already started")
        for component in self.components:
            self.start_component(component)

    def _command(self, component: str) -> list[str]:
        if component.startswith("triggerer"):
            return [_airflow_bin(), "triggerer"]
        if component.startswith("celery-worker-"):
            index = component.rsplit("-", 1)[1]
            return [
                _airflow_bin(),
                "celery",
                "worker",
                "--celery-hostname",
                f"w{index}@%h",
                "--concurrency",
                str(self.worker_concurrency),
                "--skip-serve-logs",
                "--without-mingle",
                "--without-gossip",
            ]
        return [_airflow_bin(), component]

    def start_component(self, component: str) -> subprocess.Popen[bytes]:
        """(Re)start one component by name (see `components`), e.g. after `kill_component`."""
        if component in self.procs and self.procs[component].poll() is None:
            raise RuntimeError(f"{component} is already running")
        env = dict(self.env)
        if self.postgres is not None:
            env["PGAPPNAME"] = component  # names its DB sessions in pg_stat_activity (see `paused`)
        if component.startswith("triggerer-"):  # each triggerer serves its logs on its own port
            overrides = self._component_env.setdefault(
                component, {"AIRFLOW__LOGGING__TRIGGER_LOG_SERVER_PORT": str(_free_port())}
            )
            env.update(overrides)
        log = open(self.logs / f"{component}.log", "ab")  # noqa: SIM115 - closed by the child's exit
        try:
            proc = subprocess.Popen(
                self._command(component),
                env=env,
                stdin=subprocess.DEVNULL,
                stdout=log,
                stderr=subprocess.STDOUT,
                cwd=self.home,
                start_new_session=True,  # setsid: its own session and process group
            )
        finally:
            log.close()
        self.procs[component] = proc
        self._sessions.append(proc.pid)
        return proc

    def kill_component(
        self, component: str, sig: signal.Signals = signal.SIGKILL, tree: bool = False
    ) -> None:
        """Send ``sig`` to one component's process group and wait for the component itself to end.

        Task processes put themselves in a process group of their own, so they outlive a kill of the
        group (like a task whose worker process was killed); ``tree=True`` signals every descendant
        too, as when the worker's machine or container dies (a Celery worker with its pool and tasks).
        """
        proc = self.procs[component]
        if tree:
            for pid in self.descendants(proc.pid):
                self._signal(pid, sig)
        self._signal_group(proc.pid, sig)
        try:
            proc.wait(timeout=60)
        except subprocess.TimeoutExpired:
            self._signal_group(proc.pid, signal.SIGKILL)
            proc.wait(timeout=10)

    def wait_healthy(self, timeout: float = 90) -> None:
        """Wait until ``/api/v2/monitor/health`` reports every component healthy."""
        self.wait_for(self._healthy, timeout, "all components healthy")

    def wait_dags(self, dag_ids: Iterable[str], timeout: float = 60) -> None:
        """Wait until the dag-processor serialized ``dag_ids``; an import error fails at once."""
        wanted = set(dag_ids)
        if not wanted:
            return

        def ready() -> bool:
            if wanted <= self.serialized_dag_ids():
                return True
            errors = self.import_errors()
            if errors:
                text = "\n".join(f"{name}:\n{trace}" for name, trace in errors.items())
                raise DeploymentError("the dag-processor could not import the DAG file(s)", logs=text)
            return False

        self.wait_for(ready, timeout, f"DAGs {sorted(wanted)} serialized")

    def stop(self, grace: float = 20.0) -> None:
        """End every process of this deployment: SIGTERM, then SIGKILL after ``grace`` seconds; then
        the PostgreSQL and Redis servers."""
        try:
            self._stop_components(grace)
        finally:
            if self._pg is not None:
                try:
                    self._pg.close()
                except Exception:  # noqa: BLE001 - the server may already be gone
                    pass
                self._pg = None
            for server in (self.redis, self.postgres):
                if server is not None:
                    server.stop()
            self._remove_home()

    def _stop_components(self, grace: float) -> None:
        try:
            for pid in self.stray_pids():  # task processes sit in their own process group
                self._signal(pid, signal.SIGTERM)
            for proc in self.procs.values():
                self._signal_group(proc.pid, signal.SIGTERM)
            deadline = time.monotonic() + grace
            for proc in self.procs.values():
                try:
                    proc.wait(timeout=max(0.1, deadline - time.monotonic()))
                except subprocess.TimeoutExpired:
                    pass
            for proc in self.procs.values():
                self._signal_group(proc.pid, signal.SIGKILL)
                try:
                    proc.wait(timeout=5)
                except subprocess.TimeoutExpired:
                    pass
            # Anything left in the components' sessions, e.g. children reparented to init.
            for _ in range(10):
                strays = self.stray_pids()
                if not strays:
                    break
                for pid in strays:
                    self._signal(pid, signal.SIGKILL)
                time.sleep(0.3)
        finally:
            self.procs.clear()

    def _remove_home(self) -> None:
        if self.keep_home:  # for inspection: logs, DB, airflow.cfg
            if os.environ.get("AFD_RUNTIME_KEEP_HOME"):  # the caller did not ask: say where it is
                print(f"[deployment] kept AIRFLOW_HOME {self.home}", file=sys.stderr)
        else:
            shutil.rmtree(self.home, ignore_errors=True)

    @staticmethod
    def _signal(pid: int, sig: signal.Signals) -> None:
        try:
            os.kill(pid, sig)
        except (ProcessLookupError, PermissionError):
            pass

    @staticmethod
    def _signal_group(pgid: int, sig: signal.Signals) -> None:
        try:
            os.killpg(pgid, sig)
        except (ProcessLookupError, PermissionError):
            pass

    def session_pids(self, component: str) -> list[int]:
        """Live processes of one component's session: e.g. a triggerer and its trigger runner, which
        sits in a process group of its own (so ``killpg`` on the component alone would miss it)."""
        proc = self.procs.get(component)
        if proc is None:
            raise KeyError(f"no component {component!r}; running: {sorted(self.procs)}")
        found = []
        for entry in Path("/proc").iterdir():
            if not entry.name.isdigit():
                continue
            try:
                stat = (entry / "stat").read_text()
            except OSError:
                continue
            fields = stat[stat.rindex(")") + 2 :].split()  # "pid (comm) state ppid pgrp session ..."
            if fields[0] != "Z" and int(fields[3]) == proc.pid:
                found.append(int(entry.name))
        return found

    @contextlib.contextmanager
    def paused(self, component: str, timeout: float = 30) -> Iterator[int]:
        """SIGSTOP one component's session for the block (a stalled triggerer, say); SIGCONT whatever
        happens. Yields how many stops it took.

        On PostgreSQL the stop holds only at a moment when none of the component's DB sessions has a
        transaction open: stopped inside one, it would keep its row locks (the triggerer's locks on the
        task instances whose events it submits), and the scheduler and the api-server would wait on
        them. That is a deadlocked deployment, not the slow component the caller means. On SQLite, where
        one connection cannot see another's transaction, it holds only at a moment when nobody holds the
        database's write lock.
        """
        deadline = time.monotonic() + timeout
        attempts = 0
        while True:
            attempts += 1
            pids = self.session_pids(component)
            for pid in pids:
                self._signal(pid, signal.SIGSTOP)
            # kill() returns before the signal is delivered: on a busy machine a process runs on (and may
            # take the write lock or open a transaction) until the kernel schedules it to stop. That wait has
            # its own grace: a deadline spent on the checks before must not pass for "did not stop".
            self._wait_stopped(pids, max(deadline, time.monotonic() + STOP_GRACE))
            if not self._in_transaction(component):
                break
            for pid in pids:
                self._signal(pid, signal.SIGCONT)
            if time.monotonic() > deadline:
                raise DeploymentError(
                    f"{component} held a DB transaction open at each of {attempts} stops in {timeout:.0f}s",
                    logs=self.database_activity(),
                )
            # jitter: a fixed step could stay in phase with the component's own loop
            time.sleep(random.uniform(0.01, 0.1))
        try:
            yield attempts
        finally:
            for pid in pids:
                self._signal(pid, signal.SIGCONT)

    @staticmethod
    def _wait_stopped(pids: list[int], deadline: float) -> None:
        """Wait until every process in ``pids`` is stopped (``T`` in ``/proc/<pid>/stat``) or gone."""
        waiting = list(pids)
        while waiting:
            still = []
            for pid in waiting:
                try:
                    stat = Path(f"/proc/{pid}/stat").read_text()
                except OSError:
                    continue  # gone
                if stat[stat.rindex(")") + 2] not in "Tt":
                    still.append(pid)
            if not still:
                return
            if time.monotonic() > deadline:
                raise DeploymentError(f"processes {still} did not stop after SIGSTOP")
            waiting = still
            time.sleep(0.005)

    def _in_transaction(self, component: str) -> bool:
        if self.postgres is None:
            # SQLite shows no other connection's transaction, but its write lock is one per database: if
            # it is taken, the stopped component may hold it (and every writer would wait on it).
            return self._sqlite_write_locked()
        rows = self._query_postgres(
            "SELECT count(*) FROM pg_stat_activity WHERE application_name = ? AND xact_start IS NOT NULL",
            (component,),
        )
        return bool(rows and rows[0][0])

    def _sqlite_write_locked(self) -> bool:
        """Whether a connection holds the SQLite database's write lock now (``BEGIN IMMEDIATE``, no wait)."""
        if not self.db_path.exists():
            return False
        conn = sqlite3.connect(self.db_path, timeout=0)
        try:
            conn.execute("BEGIN IMMEDIATE")
            conn.rollback()
            return False
        except sqlite3.OperationalError as err:
            if "locked" in str(err) or "busy" in str(err):
                return True
            raise
        finally:
            conn.close()

    def stray_pids(self) -> list[int]:
        """Live (non-zombie) processes in the sessions of this deployment's components.

        Every component is a session leader (``setsid``) and nothing below it starts a new session
        (the task supervisor only ``setpgid``s its task process), so the session id finds them all,
        also after they were reparented to init. Process titles and environments cannot be used:
        ``setproctitle`` overwrites both.
        """
        sessions = set(self._sessions)
        found = []
        for entry in Path("/proc").iterdir():
            if not entry.name.isdigit():
                continue
            try:
                stat = (entry / "stat").read_text()
            except OSError:
                continue
            # "pid (comm) state ppid pgrp session ..." — comm may contain spaces and parentheses.
            fields = stat[stat.rindex(")") + 2 :].split()
            if fields[0] != "Z" and int(fields[3]) in sessions:
                found.append(int(entry.name))
        return found

    # ------------------------------------------------------------------ health and waits
    def _healthy(self) -> bool:
        for name, proc in self.procs.items():
            if proc.poll() is not None:
                raise DeploymentError(f"{name} exited with {proc.returncode}", logs=self.log_tails())
        try:
            with urllib.request.urlopen(
                f"http://127.0.0.1:{self.api_port}/api/v2/monitor/health", timeout=2
            ) as resp:
                health = json.load(resp)
        except (OSError, ValueError):
            return False
        statuses = [
            (health.get(key) or {}).get("status")
            for key in ("metadatabase", "scheduler", "triggerer", "dag_processor")
        ]
        return all(s == "healthy" for s in statuses)

    def wait_for(self, condition: Callable[[], Any], timeout: float, what: str, interval: float = 0.5) -> Any:
        deadline = time.monotonic() + max(0.0, timeout)
        while True:
            value = condition()
            if value:
                return value
            if time.monotonic() >= deadline:
                raise DeploymentError(
                    f"timed out after {timeout:.0f}s waiting for {what}", logs=self.log_tails()
                )
            time.sleep(interval)

    def log_tails(self, chars: int = 2500) -> str:
        parts = []
        for path in sorted(self.logs.glob("*.log")):
            try:
                text = path.read_text(errors="replace")
            except OSError:
                continue
            parts.append(f"----- {path.name} (tail) -----\n{text[-chars:]}")
        return "\n".join(parts)

    def task_logs(self, dag_id: str, chars: int = 6000) -> str:
        parts = []
        for path in sorted((self.home / "logs").glob(f"dag_id={dag_id}/**/*")):
            if path.is_file():
                parts.append(
                    f"----- {path.relative_to(self.home)} -----\n{path.read_text(errors='replace')[-chars:]}"
                )
        return "\n".join(parts)

    # ------------------------------------------------------------------ CLI and DB
    def cli(self, *args: str, timeout: float = 60) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [_airflow_bin(), *args],
            env=self.env,
            capture_output=True,
            text=True,
            timeout=timeout,
            cwd=self.home,
            start_new_session=True,
        )

    def trigger(self, dag_id: str, run_id: str) -> None:
        """Create a manual DAG run: through the REST API (instant), else ``airflow dags trigger``.

        The API needs no token here: with ``simple_auth_manager_all_admins`` every request is admin.
        """
        request = urllib.request.Request(
            f"http://127.0.0.1:{self.api_port}/api/v2/dags/{dag_id}/dagRuns",
            data=json.dumps({"dag_run_id": run_id, "logical_date": None}).encode(),
            headers={"Content-Type": "application/json"},
            method="POST",
        )
        try:
            with urllib.request.urlopen(request, timeout=30) as resp:
                if resp.status in (200, 201):
                    return
        except (OSError, ValueError):
            pass  # an API without the all-admins middleware, or another answer: the CLI says why
        done = self.cli("dags", "trigger", dag_id, "--run-id", run_id)
        if done.returncode != 0:
            raise DeploymentError(
                f"airflow dags trigger {dag_id} failed (exit {done.returncode})",
                logs=f"{done.stdout[-2000:]}\n{done.stderr[-3000:]}",
            )

    def query(self, sql: str, params: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
        """Read the metadata DB (``?`` placeholders); SQLite: retries while a component holds the lock."""
        if self.postgres is not None:
            return self._query_postgres(sql, params)
        if not self.db_path.exists():
            return []
        deadline = time.monotonic() + 15
        while True:
            conn = sqlite3.connect(f"file:{self.db_path}?mode=ro", uri=True, timeout=5)
            try:
                return conn.execute(sql, params).fetchall()
            except sqlite3.OperationalError as err:
                if "no such table" in str(err):  # before `db migrate` created it
                    return []
                if "locked" not in str(err) or time.monotonic() > deadline:
                    raise
            finally:
                conn.close()
            time.sleep(0.2)

    def write(self, sql: str, params: tuple[Any, ...] = ()) -> int:
        """One write to the metadata DB (``?`` placeholders), committed; returns the rows it changed.

        For tests that stand in for the passing of time (e.g. a record's retention running out)."""
        if self.postgres is not None:
            import psycopg2  # the [runtime] extra; only the test side writes the DB this way

            pg = psycopg2.connect(
                host="127.0.0.1", port=self.postgres.port, user="postgres", dbname=self.postgres.database
            )
            try:
                with pg, pg.cursor() as pg_cursor:
                    pg_cursor.execute(sql.replace("?", "%s"), params)
                    return int(pg_cursor.rowcount)
            finally:
                pg.close()
        conn = sqlite3.connect(self.db_path, timeout=30)
        try:
            changed = conn.execute(sql, params).rowcount
            conn.commit()
            return changed
        finally:
            conn.close()

    def database_activity(self) -> str:
        """PostgreSQL: every session that is not idle, and who blocks whom, as text for a failure's
        report (a stalled component that holds a transaction open blocks the others); else ``""``."""
        if self.postgres is None:
            return ""
        try:
            rows = self._query_postgres(
                "SELECT pid, pg_blocking_pids(pid), state, wait_event_type, wait_event, "
                "round(extract(epoch FROM now() - xact_start)::numeric, 1), left(query, 300) "
                "FROM pg_stat_activity WHERE datname = current_database() AND pid <> pg_backend_pid() "
                "AND state IS DISTINCT FROM 'idle' ORDER BY xact_start",
                (),
            )
        except Exception as err:  # a report must not hide the failure it reports
            return f"----- PostgreSQL activity: unreadable ({err}) -----\n"
        lines = [
            f"pid={pid} blocked_by={blocking} state={state} wait={kind}/{event} xact_s={age} query={query!r}"
            for pid, blocking, state, kind, event, age, query in rows
        ]
        return "----- PostgreSQL activity (not idle) -----\n" + "\n".join(lines) + "\n"

    def _query_postgres(self, sql: str, params: tuple[Any, ...]) -> list[tuple[Any, ...]]:
        import psycopg2  # the [runtime] extra; only the test side reads the DB this way

        assert self.postgres is not None
        for attempt in range(2):
            if self._pg is None:
                self._pg = psycopg2.connect(
                    host="127.0.0.1", port=self.postgres.port, user="postgres", dbname=self.postgres.database
                )
                self._pg.autocommit = True
            try:
                with self._pg.cursor() as cur:
                    cur.execute(sql.replace("?", "%s"), params)
                    rows = cur.fetchall()
                return [tuple(bytes(v) if isinstance(v, memoryview) else v for v in row) for row in rows]
            except psycopg2.errors.UndefinedTable:
                return []  # before `db migrate` created it
            except psycopg2.OperationalError:
                self._pg = None
                if attempt:
                    raise
        return []

    def serialized_dag_ids(self) -> set[str]:
        return {row[0] for row in self.query("SELECT dag_id FROM serialized_dag")}

    def import_errors(self) -> dict[str, str]:
        """``{file name: stack trace}`` of the DAG files the dag-processor failed to import."""
        return {str(f): str(t) for f, t in self.query("SELECT filename, stacktrace FROM import_error")}

    def task_instance(self, dag_id: str, run_id: str, task_id: str) -> TaskInstanceRow | None:
        rows = self.query(
            "SELECT id, state, try_number, next_method FROM task_instance "
            "WHERE dag_id=? AND run_id=? AND task_id=? AND map_index=-1",
            (dag_id, run_id, task_id),
        )
        return TaskInstanceRow(*rows[0]) if rows else None

    def try_history(self, dag_id: str, run_id: str, task_id: str) -> list[tuple[int, str]]:
        """``(try_number, state)`` of the finished earlier tries, oldest first."""
        return [
            (int(t), s)
            for t, s in self.query(
                "SELECT try_number, state FROM task_instance_history "
                "WHERE dag_id=? AND run_id=? AND task_id=? ORDER BY try_number",
                (dag_id, run_id, task_id),
            )
        ]

    def dag_run_state(self, dag_id: str, run_id: str) -> str | None:
        rows = self.query("SELECT state FROM dag_run WHERE dag_id=? AND run_id=?", (dag_id, run_id))
        return rows[0][0] if rows else None

    def xcoms(self, dag_id: str, run_id: str, task_id: str) -> dict[str, Any]:
        rows = self.query(
            "SELECT key, value FROM xcom WHERE dag_id=? AND run_id=? AND task_id=? AND map_index=-1",
            (dag_id, run_id, task_id),
        )
        out: dict[str, Any] = {}
        for key, value in rows:
            if isinstance(value, bytes):
                value = value.decode()
            try:
                out[key] = json.loads(value) if isinstance(value, str) else value
            except ValueError:
                out[key] = value
        return out

    def worker_pids(self, ti_id: str) -> list[int]:
        """The supervisor and task process running ``ti_id`` (``airflow worker -- ... <ti_id>``)."""
        wanted = ti_id.replace("-", "").lower()  # the DB stores the uuid without dashes
        pids = []
        for pid in self.stray_pids():
            try:
                cmdline = (
                    Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
                )
            except OSError:
                continue
            if "worker" in cmdline and wanted in cmdline.replace("-", "").lower():
                pids.append(pid)
        if self.executor == "celery":  # the supervisor is a Celery pool process, titled without the id
            pids += [p for p in (self.supervisor_pid(pid) for pid in pids) if p and p not in pids]
        return pids

    def task_pid(self, ti_id: str) -> int | None:
        """The task process running ``ti_id`` (titled ``airflow worker -- <ti_id>``), if any."""
        wanted = ti_id.replace("-", "").lower()
        for pid in self.stray_pids():
            try:
                cmdline = (
                    Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
                )
            except OSError:
                continue
            if (
                cmdline.startswith("airflow worker -- ")
                and cmdline.split()[-1].replace("-", "").lower() == wanted
            ):
                return pid
        return None

    def descendants(self, pid: int) -> list[int]:
        """Every live process below ``pid`` in the process tree (children, their children...)."""
        children: dict[int, list[int]] = {}
        for entry in Path("/proc").iterdir():
            if not entry.name.isdigit():
                continue
            try:
                stat = (entry / "stat").read_text()
            except OSError:
                continue
            fields = stat[stat.rindex(")") + 2 :].split()
            if fields[0] != "Z":
                children.setdefault(int(fields[1]), []).append(int(entry.name))
        found, todo = [], [pid]
        while todo:
            for child in children.get(todo.pop(), []):
                found.append(child)
                todo.append(child)
        return found

    @staticmethod
    def supervisor_pid(task_pid: int) -> int | None:
        """The parent of a task process: its supervisor (LocalExecutor worker or Celery pool process)."""
        try:
            stat = Path(f"/proc/{task_pid}/stat").read_text()
        except OSError:
            return None
        ppid = int(stat[stat.rindex(")") + 2 :].split()[1])
        return ppid if ppid > 1 else None
