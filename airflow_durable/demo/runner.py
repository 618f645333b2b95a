"""What ``airflow-durable demo`` does, step by step, and the result it measures.

One real Airflow deployment (`airflow_durable.demo.deployment`) runs the system's upstream DAG
and durable DAG at the same time against the system's emulator. In each DAG, try 1 submits its job
and is SIGKILLed (task process and its supervisor) while the job runs; Airflow notices the missing
heartbeat and retries. The demo then lets the jobs finish and reads what happened from the emulator
(submissions, jobs, their run times) and from Airflow's metadata DB (states, tries).

Nothing here imports Airflow: the components run as subprocesses and the DB is read with sqlite3.
"""

from __future__ import annotations

import contextlib
import importlib.metadata
import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Protocol

from airflow_durable.demo.deployment import Deployment, DeploymentError, venv_bin
from airflow_durable.demo.systems import DemoBackend, DemoSystem, JobRun, Side

__all__ = [
    "DemoResult",
    "DemoStepError",
    "Reporter",
    "SideResult",
    "Timeouts",
    "airflow_version",
    "run_demo",
]

#: How the demo's deployment differs from the test deployment's defaults: a killed worker is
#: noticed within seconds (missing heartbeat for 6 s, checked every second) instead of 5 minutes.
DEMO_SETTINGS = {
    "AIRFLOW__SCHEDULER__TASK_INSTANCE_HEARTBEAT_TIMEOUT": "6",
    "AIRFLOW__SCHEDULER__TASK_INSTANCE_HEARTBEAT_TIMEOUT_DETECTION_INTERVAL": "1",
    "AIRFLOW__WORKERS__MIN_HEARTBEAT_INTERVAL": "1",
    "AIRFLOW__CORE__PARALLELISM": "4",
}
#: How long the emulator holds try 1's first status read (the demo kills the worker well before).
HOLD_SECONDS = 120.0


@dataclass(frozen=True)
class Timeouts:
    """Upper bounds, in seconds, of each wait (generous: the demo may share a busy machine)."""

    migrate: float = 180.0
    healthy: float = 150.0
    dags: float = 120.0
    trigger: float = 90.0
    submit: float = 120.0
    retry: float = 120.0
    finish: float = 120.0
    stop_grace: float = 3.0


class DemoStepError(Exception):
    """A step of the demo failed: `step` names it, `reason` says why, `logs`
    holds the tails of the relevant logs (Airflow components, task attempts)."""

    def __init__(self, step: str, reason: str, logs: str = "") -> None:
        super().__init__(f"step '{step}' failed: {reason}")
        self.step = step
        self.reason = reason
        self.logs = logs


class Reporter(Protocol):
    """Where progress goes (a rich status line on a terminal, plain lines otherwise)."""

    def start(self, step: str) -> None: ...

    def done(self, step: str, seconds: float, detail: str = "") -> None: ...

    def failed(self, step: str, seconds: float) -> None: ...

    def note(self, text: str) -> None: ...


class _Silent:
    def start(self, step: str) -> None:
        pass

    def done(self, step: str, seconds: float, detail: str = "") -> None:
        pass

    def failed(self, step: str, seconds: float) -> None:
        pass

    def note(self, text: str) -> None:
        pass


@dataclass
class SideResult:
    """What happened on one side (upstream or durable) of the comparison."""

    side: str
    operator: str
    dag_id: str
    run_id: str
    #: Submit calls that reached the emulator.
    submissions: int
    #: The jobs the emulator started, oldest first.
    jobs: list[JobRun]
    #: The task's final state and try number (``None`` if it never ran).
    final_state: str | None
    tries: int
    #: ``(try_number, state)`` of every try, oldest first.
    try_states: list[tuple[int, str | None]]
    dag_run_state: str | None
    #: From triggering the DAG run to seeing it end.
    wall_seconds: float
    #: From the SIGKILL of try 1 to try 2 waiting on the job again (deferred).
    recovery_seconds: float | None
    killed_pids: int = 0

    @property
    def duplicate_jobs(self) -> list[JobRun]:
        """Every job after the first: started by a retry while the first one was still running."""
        return self.jobs[1:]

    @property
    def retry_action(self) -> str:
        """What try 2 did, read from the emulator: ``"submitted"`` a new job or ``"reconnected"``."""
        if self.tries < 2:
            return "no retry"
        return "submitted" if len(self.jobs) > 1 else "reconnected"

    def to_json(self) -> dict[str, Any]:
        data = asdict(self)
        data["jobs"] = [{**asdict(j), "seconds": j.seconds} for j in self.jobs]
        data["try_states"] = [list(t) for t in self.try_states]
        data["retry_action"] = self.retry_action
        data["duplicate_jobs"] = len(self.duplicate_jobs)
        return data


@dataclass
class DemoResult:
    """The measured comparison: what ``airflow-durable demo`` prints as a table or as JSON."""

    system: str
    title: str
    job_noun: str
    cost_unit: str
    operator_args: str
    airflow_version: str
    #: False below Airflow 3.3: the durable operator degrades to submitting fresh on every try.
    durable_runtime: bool
    upstream: SideResult
    durable: SideResult
    total_seconds: float
    #: The kept ``AIRFLOW_HOME`` (``--keep``), else ``None``.
    airflow_home: str | None = None
    steps: list[dict[str, Any]] = field(default_factory=list)

    @property
    def duplicate_seconds(self) -> float:
        """Run time of the upstream side's duplicate jobs in this demo."""
        return sum(j.seconds or 0.0 for j in self.upstream.duplicate_jobs)

    @property
    def as_expected(self) -> bool:
        """Upstream duplicated the job; durable did not (or degraded, below Airflow 3.3); both succeeded."""
        durable_expected = 1 if self.durable_runtime else 2
        return (
            self.upstream.submissions == 2
            and self.durable.submissions == durable_expected
            and self.upstream.final_state == "success"
            and self.durable.final_state == "success"
        )

    def cost_statement(self) -> str:
        """One line: what the difference costs, here and at real job durations."""
        dups = self.upstream.duplicate_jobs
        noun = self.job_noun
        if not dups:
            return f"No duplicate {self.title} {noun} on the upstream side this time: nothing to compare."
        ids = ", ".join(j.id for j in dups)
        many = len(dups) > 1
        durable_dups = len(self.durable.duplicate_jobs)
        durable_part = (
            "Durable: none."
            if durable_dups == 0
            else f"Durable: {durable_dups} too (degraded: Airflow {self.airflow_version} "
            "has no task_state_store)."
        )
        return (
            f"Cost: upstream ran {len(dups)} duplicate {self.title} {noun}{'s' if many else ''} ({ids}) "
            f"next to {noun} {self.upstream.jobs[0].id}, which went on untracked; here "
            f"{'they' if many else 'it'} ran {self.duplicate_seconds:.1f} s, with a real 1 h job it is "
            f"{len(dups)} h of extra {self.cost_unit} per crash like this one. {durable_part}"
        )

    def to_json(self) -> dict[str, Any]:
        return {
            "ok": True,
            "system": self.system,
            "airflow_version": self.airflow_version,
            "durable_runtime": self.durable_runtime,
            "operator_args": self.operator_args,
            "upstream": self.upstream.to_json(),
            "durable": self.durable.to_json(),
            "cost": {
                "duplicate_jobs": len(self.upstream.duplicate_jobs),
                "duplicate_seconds": round(self.duplicate_seconds, 3),
                "statement": self.cost_statement(),
            },
            "as_expected": self.as_expected,
            "total_seconds": round(self.total_seconds, 3),
            "airflow_home": self.airflow_home,
            "steps": self.steps,
        }


#: Run in the components' interpreter (not in the demo process, which never imports Airflow).
_PROBE = """
import importlib.metadata, importlib.util, json, sys
out = {"version": importlib.metadata.version("apache-airflow")}
from airflow_durable import shims
out["durable_runtime"] = shims.DURABLE_RUNTIME
out["airflow3"] = importlib.util.find_spec("airflow.api_fastapi") is not None
out["provider"] = not sys.argv[1] or importlib.util.find_spec(sys.argv[1]) is not None
print("AFD-PROBE " + json.dumps(out))
"""


def airflow_version() -> str:
    """The installed ``apache-airflow`` version, from package metadata (imports nothing)."""
    try:
        return importlib.metadata.version("apache-airflow")
    except importlib.metadata.PackageNotFoundError:
        return "not installed"


class _Run:
    """One demo run: the steps, in order, with the state they share."""

    def __init__(
        self,
        system: DemoSystem,
        keep: bool,
        reporter: Reporter,
        timeouts: Timeouts,
        durable_runtime: bool | None,
    ) -> None:
        self.system = system
        self.keep = keep
        self.reporter = reporter
        self.timeouts = timeouts
        self.durable_runtime = durable_runtime
        self.backend: DemoBackend | None = None
        self.dep: Deployment | None = None
        self.sides = {"upstream": system.upstream, "durable": system.durable}
        self.run_ids: dict[str, str] = {}
        self.triggered_at: dict[str, float] = {}
        self.ended_at: dict[str, float] = {}
        self.recovered_after: dict[str, float] = {}
        self.killed: dict[str, int] = {}
        self.steps: list[dict[str, Any]] = []
        self.version = airflow_version()
        self._migrating: ThreadPoolExecutor | None = None
        self._migrate: Any = None

    # ------------------------------------------------------------------ step machinery
    @contextlib.contextmanager
    def step(self, name: str) -> Iterator[dict[str, str]]:
        """Run one named step; any failure becomes a `DemoStepError` naming it."""
        started = time.monotonic()
        self.reporter.start(name)
        info: dict[str, str] = {}
        try:
            yield info
        except DemoStepError:
            self.reporter.failed(name, time.monotonic() - started)
            raise
        except DeploymentError as err:
            self.reporter.failed(name, time.monotonic() - started)
            raise DemoStepError(name, err.reason, err.logs or self._logs()) from err
        except Exception as err:  # the step's own bug or an OS error: still say which step
            self.reporter.failed(name, time.monotonic() - started)
            raise DemoStepError(name, f"{type(err).__name__}: {err}", self._logs()) from err
        seconds = time.monotonic() - started
        self.steps.append({"step": name, "seconds": round(seconds, 3)})
        self.reporter.done(name, seconds, info.get("detail", ""))

    def _logs(self) -> str:
        if self.dep is None:
            return ""
        parts = [self.dep.log_tails()]
        parts += [self.dep.task_logs(side.dag_id, chars=3000) for side in self.sides.values()]
        return "\n".join(p for p in parts if p)

    def _ti(self, key: str) -> Any:
        assert self.dep is not None
        return self.dep.task_instance(self.sides[key].dag_id, self.run_ids[key], self.system.task_id)

    def _dag_run_state(self, key: str) -> str | None:
        assert self.dep is not None
        return self.dep.dag_run_state(self.sides[key].dag_id, self.run_ids[key])

    def wait_both(self, what: str, timeout: float, condition: Callable[[str], Any]) -> dict[str, Any]:
        """Wait until ``condition(side)`` is truthy for both sides; a DAG run that ends first fails.

        Each side's value is kept from the first time it held (the two DAGs progress independently).
        """
        assert self.dep is not None
        found: dict[str, Any] = {}

        def check() -> bool:
            for key in self.sides:
                if key in found:
                    continue
                value = condition(key)
                if value:
                    found[key] = value
                    continue
                state = self._dag_run_state(key)
                if state in ("success", "failed"):
                    ti = self._ti(key)
                    raise DeploymentError(
                        f"the {key} DAG run ({self.sides[key].dag_id}) ended {state} while waiting for "
                        f"{what}; task try {getattr(ti, 'try_number', None)} is {getattr(ti, 'state', None)}",
                        logs=self._logs(),
                    )
            return len(found) == len(self.sides)

        try:
            self.dep.wait_for(check, timeout, what)
        except DeploymentError as err:
            if err.reason.startswith("timed out"):
                states = {
                    k: (getattr(self._ti(k), "try_number", None), getattr(self._ti(k), "state", None))
                    for k in self.sides
                    if k not in found
                }
                raise DeploymentError(
                    f"{err.reason}; still waiting for {', '.join(states)} (try, state): {states}",
                    logs=self._logs(),
                ) from None
            raise
        return found

    # ------------------------------------------------------------------ the steps
    def run(self) -> DemoResult:
        started = time.monotonic()
        try:
            self.prepare()
            self.start_airflow()
            self.trigger()
            self.kill_try_one()
            self.wait_retry()
            self.finish_jobs()
            result = self.collect(started)
        finally:
            self.teardown()
        result.total_seconds = time.monotonic() - started
        result.steps = self.steps
        return result

    def prepare(self) -> None:
        system = self.system
        with self.step(f"start the {system.title} emulator") as info:
            self.backend = system.start()
            for side in self.sides.values():
                self.backend.hold_after_submit(side.dag_id, HOLD_SECONDS)
            info["detail"] = "loopback only, no credentials"
        with self.step("create a temporary AIRFLOW_HOME") as info:
            self.dep = Deployment(
                extra_env={**DEMO_SETTINGS, **self.backend.environment()},
                keep_home=self.keep,
                home_prefix="airflow-durable-demo-",
            )
            dag_file = self.dep.dags_folder / f"airflow_durable_demo_{system.name}.py"
            dag_file.write_text(system.dag_source())
            _write_env_file(self.dep)
            info["detail"] = str(self.dep.home)
        dep = self.dep
        with self.step("check the installation") as info:
            # `db migrate` needs no answer from the check: run both at once, report them in order.
            probe = self._start_probe()
            self._migrating = ThreadPoolExecutor(max_workers=1)
            self._migrate = self._migrating.submit(dep.migrate, timeout=self.timeouts.migrate)
            found = self._read_probe(probe)
            self.version = str(found["version"])
            if not found["airflow3"]:
                raise DeploymentError(
                    f"the demo runs Airflow 3's components (api-server, dag-processor, triggerer); "
                    f"Airflow {self.version} has no api-server: install apache-airflow>=3.0"
                )
            if not found["provider"]:
                raise DeploymentError(
                    f"{system.provider_module} is not installed: "
                    f"pip install 'airflow-durable[{system.extra}]'"
                )
            if self.durable_runtime is None:
                self.durable_runtime = bool(found["durable_runtime"])
            info["detail"] = f"Airflow {self.version}" + (
                ", durable runtime"
                if self.durable_runtime
                else ", no task_state_store: durable side degrades"
            )
        if not self.durable_runtime:
            self.reporter.note(
                f"Airflow {self.version} has no task_state_store (needs 3.3): the durable operator degrades "
                "to submitting a fresh job on every try, like upstream. Running anyway."
            )

    def _start_probe(self) -> subprocess.Popen[str]:
        assert self.dep is not None
        python = venv_bin() / "python"
        home = self.dep.home / "probe-home"  # its own home: it must not race `db migrate` on airflow.cfg
        home.mkdir()
        env = {**self.dep.env, "AIRFLOW_HOME": str(home)}
        return subprocess.Popen(
            [str(python) if python.exists() else sys.executable, "-c", _PROBE, self.system.provider_module],
            env=env,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            start_new_session=True,
        )

    def _read_probe(self, probe: subprocess.Popen[str]) -> dict[str, Any]:
        try:
            out, err = probe.communicate(timeout=self.timeouts.migrate)
        except subprocess.TimeoutExpired:
            probe.kill()
            raise DeploymentError("importing Airflow in the components' interpreter did not finish") from None
        for line in out.splitlines():
            if line.startswith("AFD-PROBE "):
                return dict(json.loads(line.removeprefix("AFD-PROBE ")))
        raise DeploymentError(
            f"the components' interpreter cannot import Airflow and airflow_durable "
            f"(exit {probe.returncode})",
            logs=f"----- {venv_bin()}/python (tail) -----\n{out[-2000:]}\n{err[-4000:]}",
        )

    def start_airflow(self) -> None:
        assert self.dep is not None
        with self.step("airflow db migrate (SQLite)"):
            self._migrate.result()
        with self.step("start api-server, scheduler, dag-processor, triggerer"):
            self.dep.start_components()
            self.dep.wait_healthy(self.timeouts.healthy)
        with self.step("import the DAGs") as info:
            self.dep.wait_dags(self.system.dag_ids, self.timeouts.dags)
            info["detail"] = ", ".join(self.system.dag_ids)

    def trigger(self) -> None:
        assert self.dep is not None
        dep = self.dep
        with self.step("trigger both DAG runs"):
            stamp = int(time.time() * 1000)
            self.run_ids = {key: f"demo__{key}__{stamp}" for key in self.sides}

            def one(key: str) -> None:
                dep.trigger(self.sides[key].dag_id, self.run_ids[key])
                self.triggered_at[key] = time.monotonic()

            with ThreadPoolExecutor(max_workers=len(self.sides)) as pool:
                for future in [pool.submit(one, key) for key in self.sides]:
                    future.result(timeout=self.timeouts.trigger)

    def kill_try_one(self) -> None:
        assert self.dep is not None and self.backend is not None
        dep, backend = self.dep, self.backend

        def submitted_and_running(key: str) -> Any:
            ti = self._ti(key)
            if ti is None or ti.try_number != 1 or ti.state != "running":
                return None
            if not backend.held(self.sides[key].dag_id):
                return None
            return dep.worker_pids(ti.id) or None

        noun = self.system.job_noun
        with self.step(f"try 1 submits its {noun} (the {noun} is running)"):
            pids = self.wait_both(f"try 1 to submit its {noun}", self.timeouts.submit, submitted_and_running)
        with self.step("SIGKILL try 1's worker (task process and supervisor)") as info:
            for key, found in pids.items():
                for pid in found:
                    with contextlib.suppress(ProcessLookupError):
                        os.kill(pid, signal.SIGKILL)
                self.killed[key] = len(found)
            self.killed_at = time.monotonic()
            info["detail"] = f"{sum(self.killed.values())} processes"

    def wait_retry(self) -> None:
        def deferred_again(key: str) -> Any:
            ti = self._ti(key)
            if ti is not None and ti.try_number >= 2 and ti.state == "deferred":
                self.recovered_after.setdefault(key, time.monotonic() - self.killed_at)
                return ti
            return None

        with self.step("Airflow notices the dead worker and retries (try 2)") as info:
            self.wait_both("try 2 to wait on the job (deferred)", self.timeouts.retry, deferred_again)
            info["detail"] = ", ".join(
                f"{k} {v:.1f} s after the kill" for k, v in self.recovered_after.items()
            )

    def finish_jobs(self) -> None:
        assert self.backend is not None
        backend = self.backend
        seen = {key: backend.status_reads(side.dag_id) for key, side in self.sides.items()}
        noun = self.system.job_noun
        with self.step(f"the {noun}s finish; the tasks complete"):
            # Let the retry's trigger poll the job first, so the demo shows it waiting on it.
            self.wait_both(
                "the triggerer polling the job",
                self.timeouts.finish,
                lambda key: backend.status_reads(self.sides[key].dag_id) >= seen[key] + 2,
            )
            for side in self.sides.values():
                backend.finish(side.dag_id)

            def ended(key: str) -> Any:
                state = self._dag_run_state(key)
                if state in ("success", "failed"):
                    self.ended_at.setdefault(key, time.monotonic())
                    return state
                return None

            assert self.dep is not None
            self.dep.wait_for(
                lambda: all(ended(key) for key in self.sides), self.timeouts.finish, "both DAG runs to end"
            )

    def collect(self, started: float) -> DemoResult:
        assert self.dep is not None and self.backend is not None
        results = {}
        for key, side in self.sides.items():
            results[key] = self._side_result(key, side)
        system = self.system
        return DemoResult(
            system=system.name,
            title=system.title,
            job_noun=system.job_noun,
            cost_unit=system.cost_unit,
            operator_args=system.operator_args,
            airflow_version=self.version,
            durable_runtime=bool(self.durable_runtime),
            upstream=results["upstream"],
            durable=results["durable"],
            total_seconds=time.monotonic() - started,
            airflow_home=str(self.dep.home) if self.keep else None,
        )

    def _side_result(self, key: str, side: Side) -> SideResult:
        assert self.dep is not None and self.backend is not None
        ti = self._ti(key)
        history: list[tuple[int, str | None]] = list(
            self.dep.try_history(side.dag_id, self.run_ids[key], self.system.task_id)
        )
        if ti is not None:
            history.append((ti.try_number, ti.state))
        return SideResult(
            side=key,
            operator=side.operator,
            dag_id=side.dag_id,
            run_id=self.run_ids[key],
            submissions=self.backend.submissions(side.dag_id),
            jobs=self.backend.jobs(side.dag_id),
            final_state=ti.state if ti else None,
            tries=ti.try_number if ti else 0,
            try_states=history,
            dag_run_state=self._dag_run_state(key),
            wall_seconds=self.ended_at[key] - self.triggered_at[key],
            recovery_seconds=self.recovered_after.get(key),
            killed_pids=self.killed.get(key, 0),
        )

    def teardown(self) -> None:
        if self._migrating is not None:  # a failed check: let `db migrate` end before removing its home
            self._migrating.shutdown(wait=True)
        with contextlib.ExitStack() as stack:
            if self.backend is not None:
                stack.callback(self.backend.stop)
            if self.dep is not None:
                dep = self.dep
                with self.step("stop Airflow" + ("" if not self.keep else " (keeping AIRFLOW_HOME)")):
                    dep.stop(grace=self.timeouts.stop_grace)


def _write_env_file(dep: Deployment) -> None:
    """``airflow-env.sh`` in the home: the settings every component got, to rerun one by hand (--keep)."""
    lines = ["# Source this to run an Airflow CLI against this demo deployment (kept with --keep)."]
    for name in sorted(dep.env):
        if name.startswith("AIRFLOW") or name in ("PYTHONPATH",):
            value = dep.env[name].replace("'", "'\\''")
            lines.append(f"export {name}='{value}'")
    (Path(dep.home) / "airflow-env.sh").write_text("\n".join(lines) + "\n")


def run_demo(
    system: DemoSystem,
    *,
    keep: bool = False,
    reporter: Reporter | None = None,
    timeouts: Timeouts | None = None,
    durable_runtime: bool | None = None,
) -> DemoResult:
    """Run the demo for ``system`` and return what it measured.

    Args:
        keep: keep the temporary ``AIRFLOW_HOME`` (its path is in `DemoResult.airflow_home`).
        reporter: receives progress; silent if omitted.
        durable_runtime: whether this Airflow gives the durable operator its task state store
            (if omitted, the shim answers, in the components' interpreter).
    :raises DemoStepError: a step failed; it names the step and carries the logs that show why.
    """
    run = _Run(system, keep, reporter or _Silent(), timeouts or Timeouts(), durable_runtime)
    return run.run()
