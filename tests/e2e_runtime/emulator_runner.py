"""One system's emulator, out of the test process: ``python -m tests.e2e_runtime.emulator_runner <system>``.

The emulator lives in its own process (own session) so that no kill of a test-side or Airflow process
takes it down, and so that every AWS emulator gets its own moto server (the shared in-process one is
reset whenever another AWS emulator starts). It reuses the demo's backends
(:mod:`airflow_durable.demo.systems`): the same emulators, the same way of telling a DAG's jobs apart.

The parent drives it over a loopback JSON control API; the first line on stdout is
``READY <port>``. :class:`EmulatorProcess` is the parent's side.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

from tests.e2e_runtime.matrix import DEFINED_JOB_SYSTEMS, KEYS, KINDS, defined_job_id

REPO = Path(__file__).resolve().parents[2]
#: Words of a job state that mean it ended (across the systems' vocabularies).
_TERMINAL = (
    "SUCCESS",
    "SUCCEEDED",
    "TERMINATED",
    "FAILED",
    "CANCEL",
    "DONE",
    "FINISHED",
    "COMPLETED",
    "ABORTED",
    "ERROR",
    "SKIPPED",
    "INTERNAL",
)


def _running(state: Any) -> bool:
    text = str(state).upper()
    return not any(word in text for word in _TERMINAL)


def _backend(system: str, dag_ids: list[str]) -> Any:
    """The demo's backend of the matrix system ``system`` (its catalogue job kind), started."""
    from airflow_durable.demo import systems as demo

    if system not in KINDS:
        raise SystemExit(f"unknown system {system!r}; known: {', '.join(KINDS)}")
    demo_system = demo.get(KINDS[system])
    # A system that starts defined jobs gets one per DAG: the emulator tells their runs apart.
    job_ids = (
        {dag_id: defined_job_id(dag_id) for dag_id in dag_ids} if system in DEFINED_JOB_SYSTEMS else None
    )
    return demo_system.start(job_ids)


def _environment(system: str, backend: Any) -> dict[str, str]:
    """The backend's environment under the names the matrix DAGs read: the AWS connection as
    ``aws_<system>`` (every AWS emulator is its own endpoint: one connection each), the connection of a
    kind's second system as ``<conn>_<system>``, and the demo's Variables ``afd_demo_*`` as ``afd_rt_*``."""
    env = dict(backend.environment())
    if "AIRFLOW_CONN_AWS_DEFAULT" in env:
        env[f"AIRFLOW_CONN_AWS_{system.upper()}"] = env.pop("AIRFLOW_CONN_AWS_DEFAULT")
    if KEYS[KINDS[system]] != system:
        # A kind's second system runs its own emulator of the kind: its connection must not replace the
        # first's (``databricks_default`` -> ``databricks_dbrunnow``).
        for name in [n for n in env if n.startswith("AIRFLOW_CONN_") and n.endswith("_DEFAULT")]:
            env[name.removesuffix("_DEFAULT") + f"_{system.upper()}"] = env.pop(name)
    for name in list(env):
        if name.startswith(_DEMO_VAR):
            env[_RT_VAR + name.removeprefix(_DEMO_VAR)] = env.pop(name)
    return env


_DEMO_VAR, _RT_VAR = "AIRFLOW_VAR_AFD_DEMO_", "AIRFLOW_VAR_AFD_RT_"


def serve(system: str, dag_ids: list[str]) -> None:
    backend = _backend(system, dag_ids)
    env = _environment(system, backend)
    lock = threading.Lock()
    done = threading.Event()

    def state(dag_id: str) -> dict[str, Any]:
        jobs = backend.jobs(dag_id)
        return {
            "submissions": backend.submissions(dag_id),
            "jobs": [
                {"id": j.id, "state": str(j.state), "running": _running(j.state), "started_at": j.started_at}
                for j in jobs
            ],
            "held": backend.held(dag_id),
            "status_reads": backend.status_reads(dag_id),
        }

    trigger_faults: dict[str, Any] = {}

    def mentions(dag_id: str, request: Any) -> bool:
        """Is this request about one of the DAG's jobs (its id anywhere in the path, parameters or body)?"""
        text = " ".join(
            (
                str(request.path),
                json.dumps(request.params, default=str),
                json.dumps(request.path_params or {}, default=str),
                bytes(request.body or b"").decode(errors="replace"),
            )
        )
        return any(str(j.id) in text for j in backend._mine(dag_id))

    def handle(op: str, body: dict[str, Any]) -> Any:
        with lock:
            if op == "env":
                return env
            if op == "fail_trigger":
                # The next call about one of the DAG's jobs is refused (403: not retried, where AWS's 400 is
                # a throttle). Armed once the task deferred, it is its trigger's (BigQuery's trigger polls
                # over the sync client): the trigger fails and so does the task, while the job goes on.
                dag_id = body["dag_id"]
                trigger_faults[dag_id] = backend.emulator.faults.add(
                    status=403, times=1, predicate=lambda r: mentions(dag_id, r)
                )
                return True
            if op == "fault_hits":
                return {dag_id: fault.hits for dag_id, fault in trigger_faults.items()}
            if op == "ids":
                # The jobs' full ids (``state`` shortens long ones for the report) and whether each runs.
                return {
                    dag_id: [
                        {"id": str(j.id), "state": str(j.state), "running": _running(j.state)}
                        for j in backend._mine(dag_id)
                    ]
                    for dag_id in body["dag_ids"]
                }
            if op == "hold":
                backend.hold_after_submit(body["dag_id"], float(body["seconds"]))
                return True
            if op == "state":
                return {dag_id: state(dag_id) for dag_id in body["dag_ids"]}
            if op == "finish":
                backend.finish(body["dag_id"])
                return state(body["dag_id"])
            if op == "stop":
                done.set()
                return True
        raise KeyError(op)

    class Handler(BaseHTTPRequestHandler):
        def do_POST(self) -> None:  # noqa: N802 - http.server's name
            length = int(self.headers.get("Content-Length") or 0)
            try:
                body = json.loads(self.rfile.read(length) or b"{}")
                answer, status = json.dumps(handle(self.path.strip("/"), body)).encode(), 200
            except Exception as err:  # noqa: BLE001 - reported to the parent, which fails the test
                answer, status = json.dumps({"error": f"{type(err).__name__}: {err}"}).encode(), 500
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(answer)))
            self.end_headers()
            self.wfile.write(answer)

        def log_message(self, *args: Any) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    signal.signal(signal.SIGTERM, lambda *_: done.set())
    print(f"READY {server.server_address[1]}", flush=True)

    # The parent going away (even SIGKILLed) ends the emulator too: stdin closes.
    def watch_stdin() -> None:
        sys.stdin.read()
        done.set()

    threading.Thread(target=watch_stdin, daemon=True).start()
    done.wait()
    server.shutdown()
    backend.stop()


class EmulatorProcess:
    """The test's handle on one system's emulator subprocess."""

    def __init__(self, system: str, dag_ids: list[str], directory: Path) -> None:
        """Start the emulator; its log and its temporary files (CA, botocore data) go in ``directory``."""
        self.system = system
        self.log = directory / f"emulator-{system}.log"
        tmp = directory / f"tmp-{system}"
        tmp.mkdir()
        pythonpath = os.pathsep.join(p for p in (str(REPO), os.environ.get("PYTHONPATH")) if p)
        env = {**os.environ, "PYTHONPATH": pythonpath, "TMPDIR": str(tmp)}
        with open(self.log, "wb") as log:
            self.proc = subprocess.Popen(
                [sys.executable, "-m", "tests.e2e_runtime.emulator_runner", system, ",".join(dag_ids)],
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                stderr=log,
                cwd=REPO,
                env=env,
                start_new_session=True,
            )
        assert self.proc.stdout is not None
        line = self.proc.stdout.readline().decode()
        if not line.startswith("READY "):
            self.stop()
            raise RuntimeError(
                f"the {system} emulator did not start: {line!r}\n{self.log.read_text()[-3000:]}"
            )
        self.port = int(line.split()[1])

    def call(self, op: str, **body: Any) -> Any:
        import urllib.error
        import urllib.request

        request = urllib.request.Request(
            f"http://127.0.0.1:{self.port}/{op}",
            data=json.dumps(body).encode(),
            headers={"Content-Type": "application/json"},
            method="POST",
        )
        try:
            with urllib.request.urlopen(request, timeout=60) as resp:
                return json.load(resp)
        except urllib.error.HTTPError as err:
            raise RuntimeError(f"{self.system} emulator: {op} failed: {err.read().decode()}") from None

    def stop(self) -> None:
        if self.proc.poll() is None:
            try:
                self.call("stop")
            except Exception:  # noqa: BLE001 - fall through to the signals
                pass
            try:
                self.proc.wait(timeout=20)
            except subprocess.TimeoutExpired:
                os.killpg(self.proc.pid, signal.SIGKILL)
                self.proc.wait(timeout=10)
        for stream in (self.proc.stdin, self.proc.stdout):
            if stream is not None:
                stream.close()


def merge_environments(envs: list[dict[str, str]], directory: Path) -> dict[str, str]:
    """One environment for the Airflow components from every emulator's: connections side by side,
    the loopback-TLS routes merged, and one CA file / bundle trusting every emulator's CA."""
    from airflow_durable.testing._tls import CA_ENV, ROUTES_ENV

    merged: dict[str, str] = {}
    routes: dict[str, Any] = {}
    files: dict[str, list[str]] = {CA_ENV: [], "REQUESTS_CA_BUNDLE": [], "SSL_CERT_FILE": []}
    paths: list[str] = []
    for env in envs:
        for name, value in env.items():
            if name == ROUTES_ENV:
                routes.update(json.loads(value))
            elif name in files:
                files[name].append(value)
            elif name == "PYTHONPATH":
                paths += value.split(os.pathsep)
            elif name == "AWS_DATA_PATH":
                merged[name] = value.split(os.pathsep)[0]
            else:
                merged[name] = value
    if routes:
        merged[ROUTES_ENV] = json.dumps(routes)
    for name, sources in files.items():
        if not sources:
            continue
        target = directory / f"{name.lower()}.pem"
        target.write_bytes(b"\n".join(Path(s).read_bytes() for s in dict.fromkeys(sources)))
        merged[name] = str(target)
    if paths:
        merged["PYTHONPATH"] = os.pathsep.join(dict.fromkeys(p for p in paths if p))
    return merged


if __name__ == "__main__":
    serve(sys.argv[1], [d for d in sys.argv[2].split(",") if d] if len(sys.argv) > 2 else [])
