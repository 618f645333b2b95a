"""The hypothesis state machine: Airflow's task-instance lifecycle as rules over `World`.

``machine_for(family, host)`` returns a `RuleBasedStateMachine` class whose examples each start a fresh
DAG run of one operator of the family (drawn: which operator, sync or deferrable, ``retries``, SQLite or
PostgreSQL trigger ids, ``clear_on_success``) against the family's emulator (reset between examples).
After every rule the invariants are checked; a violation not listed in `KNOWN_VIOLATIONS` fails the
example, and hypothesis shrinks it to a minimal sequence of rules.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, initialize, invariant, precondition, rule

from tests.model import airflow_side as af
from tests.model.known import gated
from tests.model.systems import EmulatorHost, cases_of
from tests.model.world import Violation, World

#: Steps run by every machine of this process, per family (the explore summary reads it).
STEPS: dict[str, int] = {}
TRANSITIONS: dict[str, dict[str, int]] = {}
#: Gated (known) violations seen, per family: key → (violation, the example's log).
GATED: dict[str, dict[str, tuple[Violation, list[str]]]] = {}
#: Of STEPS, those run while hypothesis shrank a failure (set by the first raise; the caller resets it).
SHRINK_STEPS: dict[str, int] = {}
SHRINKING: dict[str, bool] = {}


class ViolationFound(AssertionError):
    """An invariant broke. One subclass per violation key, so hypothesis shrinks each on its own."""

    violation: Violation
    log: list[str]


_CLASSES: dict[str, type[ViolationFound]] = {}


def violation_error(violation: Violation, log: list[str]) -> ViolationFound:
    name = "Violation_" + re.sub(r"\W+", "_", violation.key)
    cls = _CLASSES.setdefault(violation.key, type(name, (ViolationFound,), {}))
    err = cls(f"invariant ({violation.invariant}) {violation.key}: {violation.message}\n" + "\n".join(log))
    err.violation, err.log = violation, list(log)
    return err


def machine_for(family: str, host: EmulatorHost, raise_gated: Callable[[str], bool] | None = None) -> type:
    """The state machine of one family against a started ``host``.

    ``raise_gated(key)``: whether a violation listed in `KNOWN_VIOLATIONS` still fails the example (the
    explore run uses it to shrink every distinct violation once); by default gated ones only get recorded.
    """
    cases = cases_of(family)

    class Machine(RuleBasedStateMachine):
        world: World

        @initialize(
            case_index=st.integers(0, len(cases) - 1),
            deferrable=st.booleans(),
            retries=st.integers(0, 2),
            trigger_ids=st.sampled_from(["sqlite", "postgres"]),
            clear_on_success=st.booleans(),
            execution_timeout=st.sampled_from(EXECUTION_TIMEOUTS),
            retry_delay=st.sampled_from(RETRY_DELAYS),
        )
        def setup(
            self,
            case_index: int,
            deferrable: bool,
            retries: int,
            trigger_ids: str,
            clear_on_success: bool,
            execution_timeout: float | None,
            retry_delay: float,
        ) -> None:
            host.reset()
            case = cases[case_index]
            self.world = World(
                host,
                case,
                deferrable=deferrable,
                retries=retries,
                trigger_ids=trigger_ids,
                clear_on_success=clear_on_success,
                execution_timeout=execution_timeout,
                retry_delay=retry_delay,
            ).__enter__()
            self.world.log.append(
                f"  {case.id} {'deferrable' if deferrable else 'sync'}, retries={retries}, "
                f"{trigger_ids} trigger ids{', clear_on_success' if clear_on_success else ''}, "
                f"execution_timeout={execution_timeout}, retry_delay={retry_delay:g}"
            )

        def teardown(self) -> None:
            world = getattr(self, "world", None)
            if world is None:
                return
            world.__exit__(None, None, None)
            STEPS[family] = STEPS.get(family, 0) + world.step
            if SHRINKING.get(family):
                SHRINK_STEPS[family] = SHRINK_STEPS.get(family, 0) + world.step
            counts = TRANSITIONS.setdefault(family, {})
            for name, count in world.transitions.items():
                counts[name] = counts.get(name, 0) + count

        # -------------------------------------------------------------- helpers
        def _do(self, transition: str, text: str, action: Callable[[], Any]) -> Any:
            self.world.note(transition, text)
            try:
                result = action()
            except BaseException as err:
                self.world.log.append(f"    !! the model raised {type(err).__name__}: {str(err)[:6000]}")
                raise
            self.world.check()
            return result

        @invariant()
        def invariants_hold(self) -> None:
            world = getattr(self, "world", None)
            if world is None:
                return
            for violation in world.violations:
                if raise_gated is not None:
                    if raise_gated(violation.key):
                        SHRINKING[family] = True
                        raise violation_error(violation, world.log)
                elif not gated(violation.key):
                    SHRINKING[family] = True
                    raise violation_error(violation, world.log)
                GATED.setdefault(family, {}).setdefault(violation.key, (violation, list(world.log)))

        # -------------------------------------------------------------- progress
        @precondition(
            lambda self: (
                self.world.db.ti is not None
                and self.world.db.ti.state in (af.NONE, af.UP_FOR_RETRY, af.SCHEDULED, af.QUEUED)
                and self.world.retry_due()
            )
        )
        @rule()
        def try_start(self) -> None:
            """The scheduler queues the task instance (``DagRun.schedule_tis``) and a worker starts it
            (``ti_run``): a fresh try, or the resumption of a deferral / a ``__fail__``."""
            world = self.world

            def go() -> None:
                world.queue()
                world.start_try()

            ti = world.db.ti
            assert ti is not None
            what = (
                "resumes"
                if ti.next_method
                else f"try {ti.try_number + (0 if ti.state == af.QUEUED else 1)} starts"
            )
            self._do("try_start", f"scheduler: {what}", go)

        def _advance(self, which: int, gates: int) -> None:
            actors = self.world.steppable()
            actor = actors[which % len(actors)]
            self._do(
                "advance", f"{actor.name} runs {gates} call(s)", lambda: self.world.advance(actor, gates)
            )

        @precondition(lambda self: bool(self.world.steppable()))
        @rule(which=st.integers(0, 7), gates=st.integers(1, 6))
        def advance(self, which: int, gates: int) -> None:
            """An actor (a try's process, a SIGTERM handler, a trigger) makes its next call(s)."""
            self._advance(which, gates)

        # hypothesis picks rules uniformly: two more copies of ``advance`` and one of ``settle`` give
        # progress most of the steps, so examples get past the first try before a user acts.
        @precondition(lambda self: bool(self.world.steppable()))
        @rule(which=st.integers(0, 7), gates=st.integers(1, 6))
        def advance_again(self, which: int, gates: int) -> None:
            """The same as ``advance``."""
            self._advance(which, gates)

        @precondition(lambda self: bool(self.world.steppable()))
        @rule(which=st.integers(0, 7), gates=st.integers(1, 6))
        def advance_more(self, which: int, gates: int) -> None:
            """The same as ``advance``."""
            self._advance(which, gates)

        @rule()
        def settle_again(self) -> None:
            """The same as ``settle``."""
            self._do("settle", "settle: the machinery runs a while (the clock stands)", self._settle)

        # -------------------------------------------------------------- grouped transitions
        def _group(self, group: str, data: Any) -> None:
            world = self.world
            options = [t for t in TRANSITIONS_TABLE if t.group == group and t.applicable(world)]
            if not options:
                return
            transition = data.draw(st.sampled_from(options), label=group)
            param = (
                data.draw(transition.param, label=transition.name) if transition.param is not None else None
            )
            self._do(transition.name, transition.describe(world, param), lambda: transition.run(world, param))

        @rule(data=st.data())
        def airflow(self, data: Any) -> None:
            """Airflow's own machinery: heartbeats, the heartbeat timeout, SIGKILL escalation, triggerers,
            trigger cleanup and timeouts."""
            self._group("airflow", data)

        @rule(data=st.data())
        def user(self, data: Any) -> None:
            """A user acts: clear (this task or another), mark, edit the DAG, delete the record or the run."""
            self._group("user", data)

        @rule(data=st.data())
        def chaos(self, data: Any) -> None:
            """Things break or end: workers and triggerers die, freeze or stall, jobs end, the store fails."""
            self._group("chaos", data)

        @precondition(
            lambda self: any(t.group == "stop" and t.applicable(self.world) for t in TRANSITIONS_TABLE)
        )
        @rule(data=st.data())
        def stop(self, data: Any) -> None:
            """A graceful stop from outside the task's lifecycle: a worker's, pod's or scheduler's shutdown
            (a rule of its own: a try is alive for few steps, and these stops only matter then)."""
            self._group("stop", data)

        @rule(seconds=st.sampled_from(CLOCK_STEPS))
        def time_passes(self, seconds: float) -> None:
            """The clock moves on: a running try's execution_timeout may run out (SIGALRM), a deferral's
            timeout and an up-for-retry task instance's retry delay may come due."""
            self._do("time_passes", f"{seconds:g} s pass", lambda: self.world.time_passes(seconds))

        @rule()
        def settle(self) -> None:
            """Nobody acts for a while: the machinery runs (schedule, heartbeats, triggerers, every actor a
            few calls)."""
            self._do("settle", "settle: the machinery runs a while (the clock stands)", self._settle)

        def _settle(self) -> None:
            world = self.world
            for _ in range(4):
                ti = world.db.ti
                if ti is not None and ti.state in (af.NONE, af.UP_FOR_RETRY, af.SCHEDULED, af.QUEUED):
                    world.queue()
                    world.start_try()
                for process in list(world.processes):
                    world.heartbeat(process)
                for triggerer in world.triggerers.values():
                    world.triggerer_sync(triggerer)
                    world.triggerer_events(triggerer)
                world.clean_unused()
                for actor in world.steppable():
                    world.advance(actor, 2)
            # A while is longer than a shutdown's grace (30 s on Kubernetes, 90 s under systemd).
            for process in list(world.processes):
                if process.alive and process.doomed:
                    world.grace_expires(process)

    Machine.__name__ = Machine.__qualname__ = f"{family.title().replace('_', '')}Model"
    return Machine


# ---------------------------------------------------------------------------- the transition table
@dataclass(frozen=True)
class Transition:
    name: str
    group: str
    applicable: Callable[[World], bool]
    run: Callable[[World, Any], Any]
    describe: Callable[[World, Any], str]
    param: Any = None


def _live(world: World, pred: Callable[[Any], bool] = lambda p: True) -> list[Any]:
    return [p for p in world.processes if p.alive and pred(p)]


def _pick(items: list[Any], index: int) -> Any:
    return items[index % len(items)]


def _ti_state(world: World) -> str | None:
    return world.db.ti.state if world.db.ti is not None else "gone"


def _beatable(p: Any) -> bool:
    return not p.frozen and not p.node_lost and not p.sigterm


def _stoppable(p: Any) -> bool:
    """A task process a graceful stop can reach: alive, not frozen, its supervisor still there."""
    return not p.frozen and not p.node_lost and not p.doomed


def _escalable(p: Any) -> bool:
    """A SIGTERMed task process its supervisor escalates (``WatchedSubprocess.kill``): not one whose
    supervisor is itself stopping (the grace period decides its end: `grace_expires`)."""
    return p.sigterm and not p.doomed


#: ``execution_timeout`` of the task (seconds; ``None``: none), ``retry_delay`` (Airflow's default is 300 s),
#: and the steps the clock takes (`World.time_passes`): a step or two reach a deadline, so the search meets
#: the timeouts without many clock rules.
EXECUTION_TIMEOUTS: list[float | None] = [None, 600.0, 3600.0]
RETRY_DELAYS: list[float] = [0.0, 300.0]
CLOCK_STEPS: list[float] = [30.0, 300.0, 900.0, 3600.0]

#: ``reset_dag_runs`` of the REST clear: true by default (the UI), false now and then.
_RESET = st.sampled_from([True, True, True, False])

TRANSITIONS_TABLE: list[Transition] = [
    # Airflow's machinery.
    Transition(
        "heartbeat",
        "airflow",
        lambda w: bool(_live(w, _beatable)),
        lambda w, p: w.heartbeat(_pick(_live(w, _beatable), p[0]), in_call=p[1]),
        lambda w, p: (
            f"{_pick(_live(w, _beatable), p[0]).name} heartbeats"
            + (" (a SIGTERM would land inside a supervisor-channel call)" if p[1] else "")
        ),
        st.tuples(st.integers(0, 3), st.booleans()),
    ),
    Transition(
        "heartbeat_timeout",
        "airflow",
        lambda w: _ti_state(w) in (af.RUNNING, af.RESTARTING),
        lambda w, _: w.purge(),
        lambda w, _: "scheduler: heartbeat timeout check",
    ),
    Transition(
        "sigkill_after_sigterm",
        "airflow",
        lambda w: bool(_live(w, _escalable)),
        lambda w, i: w.escalate(_pick(_live(w, _escalable), i)),
        lambda w, i: f"supervisor escalates {_pick(_live(w, _escalable), i).name} to SIGKILL",
        st.integers(0, 3),
    ),
    Transition(
        # After a worker's, pod's or scheduler's graceful stop: World.grace_expires
        "grace_expires",
        "airflow",
        lambda w: bool(_live(w, lambda p: p.doomed)),
        lambda w, i: w.grace_expires(_pick(_live(w, lambda p: p.doomed), i)),
        lambda w, i: (
            f"the grace period ends: {_pick(_live(w, lambda p: p.doomed), i).name} and its supervisor "
            "SIGKILLed"
        ),
        st.integers(0, 3),
    ),
    Transition(
        # The new scheduler's adopt_or_reset_orphaned_tasks after a LocalExecutor restart: World.reset_orphans
        "reset_orphans",
        "airflow",
        lambda w: w.orphaned,
        lambda w, _: w.reset_orphans(),
        lambda w, _: "new scheduler: adopt_or_reset_orphaned_tasks",
    ),
    Transition(
        "triggerer_sync",
        "airflow",
        lambda w: any(t.alive for t in w.triggerers.values()),
        lambda w, name: w.triggerer_sync(w.triggerers[name]),
        lambda w, name: f"{name}: load triggers",
        st.sampled_from(["t1", "t2"]),
    ),
    Transition(
        "triggerer_events",
        "airflow",
        lambda w: any(t.alive and (t.events or t.failed) for t in w.triggerers.values()),
        lambda w, name: w.triggerer_events(w.triggerers[name]),
        lambda w, name: f"{name}: submit events",
        st.sampled_from(["t1", "t2"]),
    ),
    Transition(
        "clean_unused_triggers",
        "airflow",
        lambda w: bool(w.db.triggers),
        lambda w, _: w.clean_unused(),
        lambda w, _: "clean unused triggers",
    ),
    Transition(
        "trigger_timeout",
        "airflow",
        lambda w: w.trigger_due(),
        lambda w, _: w.trigger_timeout(),
        lambda w, _: "scheduler: the deferral timed out",
    ),
    # The user.
    Transition(
        "clear",
        "user",
        lambda w: w.db.ti is not None,
        lambda w, reset: w.clear(reset_dag_run=reset),
        lambda w, reset: (
            f"user clears the task ({_ti_state(w) or 'none'})"
            + ("" if reset else " with reset_dag_runs=false")
        ),
        _RESET,
    ),
    Transition(
        # Airflow 3.4's default clear, done on 3.3 as 3.4 does it: World.clear_discarding_state
        "clear_discarding_state",
        "user",
        lambda w: w.db.ti is not None,
        lambda w, reset: w.clear_discarding_state(reset_dag_run=reset),
        lambda w, reset: (
            f"user clears the task ({_ti_state(w) or 'none'}), Airflow 3.4's default: its state is discarded"
            + ("" if reset else " (reset_dag_runs=false)")
        ),
        _RESET,
    ),
    Transition(
        "clear_other_task",
        "user",
        lambda w: w.db.run is not None,
        lambda w, reset: w.clear_other(reset_dag_run=reset),
        lambda w, reset: (
            "user clears another task of the run" + ("" if reset else " with reset_dag_runs=false")
        ),
        _RESET,
    ),
    Transition(
        "mark",
        "user",
        lambda w: w.db.ti is not None,
        lambda w, state: w.mark(state),
        lambda w, state: f"user marks the task {state} ({_ti_state(w) or 'none'})",
        st.sampled_from([af.SUCCESS, af.FAILED]),
    ),
    Transition(
        "edit_retries",
        "user",
        lambda w: True,
        lambda w, n: w.edit_retries(n),
        lambda w, n: f"DAG edit: retries={n}",
        st.integers(0, 3),
    ),
    Transition(
        "delete_record",
        "user",
        lambda w: bool(w.db.store),
        lambda w, why: w.delete_record(why),
        lambda w, why: f"record deleted ({why})",
        st.sampled_from(["retention", "storage tab"]),
    ),
    Transition(
        "delete_run",
        "user",
        lambda w: w.db.run is not None,
        lambda w, _: w.delete_run(),
        lambda w, _: "user deletes the DAG run",
    ),
    Transition(
        "create_run",
        "user",
        lambda w: w.db.run is None,
        lambda w, _: w.create_run(),
        lambda w, _: "user triggers the run again (same run_id)",
    ),
    # Things break or end.
    Transition(
        "worker_dies",
        "chaos",
        lambda w: bool(_live(w)),
        lambda w, p: w.kill_process(_pick(_live(w), p[0]), p[1]),
        lambda w, p: f"SIGKILL {_pick(_live(w), p[0]).name}{' and its node' if p[1] else ''}",
        st.tuples(st.integers(0, 3), st.booleans()),
    ),
    Transition(
        # A graceful stop of the worker, pod or systemd service: World.worker_shutdown
        "worker_shutdown",
        "stop",
        lambda w: bool(_live(w, _stoppable)),
        lambda w, p: w.worker_shutdown(_pick(_live(w, _stoppable), p[0]), in_call=p[1]),
        lambda w, p: (
            f"{_pick(_live(w, _stoppable), p[0]).name}'s worker shuts down gracefully: SIGTERM forwarded"
            + (" (landing inside a supervisor-channel call)" if p[1] else "")
        ),
        st.tuples(st.integers(0, 3), st.booleans()),
    ),
    Transition(
        # The scheduler stops and a new one starts (LocalExecutor): World.scheduler_restart
        "scheduler_restart",
        "stop",
        lambda w: bool(_live(w, _stoppable)) or _ti_state(w) in (af.QUEUED, af.RUNNING, af.RESTARTING),
        lambda w, in_call: w.scheduler_restart("local", in_call=in_call),
        lambda w, in_call: (
            "the scheduler restarts (LocalExecutor): its workers get SIGTERM"
            + (" (landing inside a supervisor-channel call)" if in_call else "")
        ),
        st.booleans(),
    ),
    Transition(
        # The scheduler stops and a new one starts (CeleryExecutor): World.scheduler_restart
        "celery_adoption",
        "chaos",
        lambda w: _ti_state(w) in (af.QUEUED, af.RUNNING),
        lambda w, _: w.scheduler_restart("celery"),
        lambda w, _: "the scheduler restarts (CeleryExecutor): the new one adopts the task instance",
    ),
    Transition(
        "worker_freezes",
        "chaos",
        lambda w: bool(_live(w, lambda p: not p.frozen)),
        lambda w, i: setattr(_pick(_live(w, lambda p: not p.frozen), i), "frozen", True),
        lambda w, i: f"{_pick(_live(w, lambda p: not p.frozen), i).name} freezes",
        st.integers(0, 3),
    ),
    Transition(
        "worker_thaws",
        "chaos",
        lambda w: bool(_live(w, lambda p: p.frozen)),
        lambda w, i: setattr(_pick(_live(w, lambda p: p.frozen), i), "frozen", False),
        lambda w, i: f"{_pick(_live(w, lambda p: p.frozen), i).name} thaws",
        st.integers(0, 3),
    ),
    Transition(
        "triggerer_dies",
        "chaos",
        lambda w: any(t.alive for t in w.triggerers.values()),
        lambda w, name: w.kill_triggerer(w.triggerers[name]),
        lambda w, name: f"SIGKILL triggerer {name}",
        st.sampled_from(["t1", "t2"]),
    ),
    Transition(
        "triggerer_health",
        "chaos",
        lambda w: True,
        lambda w, p: _triggerer_health(w, *p),
        lambda w, p: f"triggerer {p[0]} {'healthy' if p[1] else 'stalls (heartbeat lost)'}",
        st.tuples(st.sampled_from(["t1", "t2"]), st.booleans()),
    ),
    Transition(
        "job_ends",
        "chaos",
        lambda w: any(w.active(j) for j in w.jobs.values()),
        lambda w, p: w.end_job(_pick([j for j in w.jobs.values() if w.active(j)], p[0]), p[1]),
        lambda w, p: f"job {_pick([j for j in w.jobs.values() if w.active(j)], p[0]).ledger_id} {p[1]}",
        st.tuples(st.integers(0, 3), st.sampled_from(["succeeded", "failed"])),
    ),
    Transition(
        "service_fault",
        "chaos",
        lambda w: True,
        lambda w, kind: w.service_fault(kind),
        lambda w, kind: {
            "status": "the service's next status read fails (5xx)",
            "cancel": "the service's next cancel fails (5xx)",
            "submit": "the service takes the next submission but its answer is lost",
        }[kind],
        st.sampled_from(["status", "cancel", "submit"]),
    ),
    Transition(
        # A system's deduplication window for a job's tokens passes while the job still runs (hours on the
        # systems that have one): a resend of the token is a new submission.
        "token_window_lapses",
        "chaos",
        lambda w: bool(_lapsable(w)),
        lambda w, i: w.token_window_lapses(_pick(_lapsable(w), i)),
        lambda w, i: f"the system's token window passes for job {_pick(_lapsable(w), i).ledger_id}",
        st.integers(0, 3),
    ),
    Transition(
        "store_fault",
        "chaos",
        lambda w: True,
        lambda w, op: w.comms.faults.__setitem__(op, w.comms.faults.get(op, 0) + 1),
        lambda w, op: f"the next task-state-store {op} fails (503)",
        st.sampled_from(["get", "set"]),
    ),
]


def _lapsable(world: World) -> list[Any]:
    return [j for j in world.jobs.values() if j.native_token and world.active(j)]


def _triggerer_health(world: World, name: str, healthy: bool) -> None:
    triggerer = world.triggerers[name]
    if healthy and not triggerer.alive:
        triggerer.alive = True  # restarted: empty
    triggerer.healthy = healthy
