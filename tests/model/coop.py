"""Cooperative scheduling of the real operator and trigger code, one actor at a time.

Every process the model plays (a task try, a resumed deferral, a SIGTERM handler's ``on_kill``, a trigger
running in a triggerer) is an `Actor`: real code on a thread of its own that runs only when the model
lets it. It stops (*parks*) at every point where it touches the world outside its process:

* a call through Airflow's supervisor channel (task-state-store reads and writes, ``GetTaskStates``),
  parked in `tests.model.airflow.ModelComms` before the call takes effect;
* an HTTP request to the emulated service, parked in the emulator's server thread before the request is
  handled (`gate_http`), so a parked actor is exactly "about to make that call".

Only one actor runs at any time, so every run is deterministic, and the model can kill, freeze or
interleave actors at any of these points: hypothesis then searches the interleavings.
"""

from __future__ import annotations

import contextlib
import ctypes
import socket
import threading
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

from tests.harness import WorkerCrash

#: How long the model waits for a released actor to reach its next gate before calling it hung.
HANG_TIMEOUT = 30.0
#: Gates a dead actor may pass (each refused) before it is stopped with an asynchronous WorkerCrash.
DEAD_GATE_LIMIT = 40


class ModelError(AssertionError):
    """The model itself broke (an actor hung, an unexpected message): a bug to fix, not a finding."""


@dataclass
class Park:
    """One stop of an actor: what it is about to do, and the model's verdict when it goes on."""

    kind: str  # "store_get" | "store_set" | "store_delete" | "task_states" | "http" | "sleep"
    detail: str
    released: bool = False
    refused: bool = False  # the actor died while parked here: the call must have no effect
    abandoned: bool = False
    #: Raised in the actor where it parked, instead of making the call (a signal handler's exception:
    #: `Coop.interrupt`).
    interrupt: BaseException | None = None
    #: For a park awaited on an event loop (`Coop.park_async`): wakes the coroutine.
    wake: Callable[[], Any] | None = None

    def release(self, refused: bool = False) -> None:
        if self.released:
            return
        self.refused = self.refused or refused
        self.released = True
        if self.wake is not None:
            self.wake()


@dataclass(eq=False)
class Actor:
    """Real code on its own thread, run step by step by `Coop`."""

    name: str
    body: Callable[[], Any]
    role: str  # "try" | "on_kill" | "trigger"
    owner: Any = None  # the model's process or trigger instance this actor belongs to
    thread: threading.Thread | None = None
    started: bool = False
    done: bool = False
    dead: bool = False
    result: Any = None
    error: BaseException | None = None
    parks: list[Park] = field(default_factory=list)
    gates: int = 0
    dead_gates: int = 0
    #: Points passed, for the step log: ("http", "GET .../runs/get") ...
    trail: list[tuple[str, str]] = field(default_factory=list)
    _go: bool = False

    @property
    def parked(self) -> Park | None:
        live = [p for p in self.parks if not p.released and not p.abandoned]
        return live[-1] if live else None

    @property
    def live(self) -> bool:
        return self.started and not self.done and not self.dead


class Coop:
    """Runs `Actor`\\ s one at a time; every gate of the current actor parks it and hands control back."""

    def __init__(self) -> None:
        self._cond = threading.Condition()
        self.current: Actor | None = None
        self.actors: list[Actor] = []

    # ------------------------------------------------------------------ the model's side
    def spawn(self, actor: Actor) -> Actor:
        """Start ``actor`` and run it to its first gate (or to its end)."""
        self.actors.append(actor)

        def main() -> None:
            with self._cond:
                while not actor._go:
                    self._cond.wait()
            try:
                actor.result = actor.body()
            except BaseException as err:  # noqa: BLE001 - the outcome of the actor, whatever it is
                actor.error = err
            finally:
                with self._cond:
                    actor.done = True
                    actor._go = False
                    if self.current is actor:
                        self.current = None
                    self._cond.notify_all()

        actor.thread = threading.Thread(target=main, name=f"model-{actor.name}", daemon=True)
        actor.started = True
        actor.thread.start()
        self._run(actor)
        return actor

    def step(self, actor: Actor) -> None:
        """Let a parked actor make the call it is parked at, and run on to its next gate (or its end)."""
        park = actor.parked
        if park is None:
            raise ModelError(f"{actor.name} is not parked")
        # Released under the same lock that marks the actor running: a woken coroutine may call out (and
        # park again) at once, and must find itself running, not parked.
        self._run(actor, kick=park.release)

    def abandon(self, actor: Actor) -> Park | None:
        """Detach the actor's current park (its caller stopped waiting, e.g. a cancelled coroutine): it is
        answered with a refusal later, by `refuse_abandoned`."""
        park = actor.parked
        if park is not None:
            park.abandoned = True
        return park

    def refuse_abandoned(self, actor: Actor, locked: bool = False) -> None:
        with contextlib.nullcontext() if locked else self._cond:
            for park in actor.parks:
                if park.abandoned and not park.released:
                    park.release(refused=True)
            self._cond.notify_all()

    def resume(self, actor: Actor, kick: Callable[[], Any]) -> None:
        """Make an actor that is neither parked nor done run, by ``kick`` (e.g. cancelling its coroutine
        from another thread), once it is the current actor, and run it to its next gate."""
        self._run(actor, kick=kick)

    def kill(self, actor: Actor, kick: Callable[[], Any] | None = None) -> None:
        """The actor's process dies here (SIGKILL): whatever it is parked at never takes effect; it is then
        drained (every later gate refused) so that its thread ends. ``kick`` runs once it is current."""
        if actor.done or not actor.started:
            actor.dead = True
            return

        def release() -> None:
            actor.dead = True
            for park in actor.parks:
                if not park.released:
                    park.release(refused=True)
            if kick is not None:
                kick()

        self._run(actor, draining=True, kick=release)

    def interrupt(self, actor: Actor, error: BaseException) -> None:
        """A signal handler raises ``error`` in the parked actor (SIGALRM's ``AirflowTaskTimeout``): the call
        it is parked at never takes effect, and ``error`` comes out where the actor waits for it. A channel
        call parks on the actor's own thread and raises it there; a request parks in the server thread, so
        it is refused and ``error`` comes out of the actor's read of that refusal (`interruptible_reads`),
        as a signal's exception comes out of the socket read it interrupted."""
        park = actor.parked
        if park is None:
            raise ModelError(f"{actor.name} is not parked")
        if park.kind == "http":
            # Not an asynchronous exception: the actor's thread may still be running the client's code
            # between its send and its read (the server parks as soon as it has the request), so one would
            # land at a bytecode that depends on timing, and the actor could reach its next gate before
            # `_run` marks it running. The read raises it instead, once the refusal arrives.
            assert actor.thread is not None and actor.thread.ident is not None
            if socket.SocketIO.readinto is not _interruptible_readinto:
                raise ModelError("interrupting a request needs `interruptible_reads()` installed")
            ident = actor.thread.ident
            _READ_INTERRUPTS[ident] = error
            try:
                self._run(actor, kick=lambda: park.release(refused=True))
            finally:
                unread = _READ_INTERRUPTS.pop(ident, None)
            if unread is not None and not actor.done:
                raise ModelError(f"{actor.name} went on without reading the answer to {park.detail}")
            return
        park.interrupt = error
        self._run(actor, kick=park.release)

    def _run(self, actor: Actor, draining: bool = False, kick: Callable[[], Any] | None = None) -> None:
        with self._cond:
            self.current = actor
            actor._go = True
            if kick is not None:
                kick()
            self._cond.notify_all()
            ok = self._cond.wait_for(
                lambda: actor.done or (actor.parked is not None and not actor._go), timeout=HANG_TIMEOUT
            )
        if not ok:
            import sys
            import traceback

            frames = sys._current_frames()
            stacks = []
            for t in sorted(threading.enumerate(), key=lambda t: t is not actor.thread):
                if t.ident not in frames:
                    continue
                stack = traceback.format_stack(frames[t.ident])
                if t is actor.thread or any(
                    "tests/model" in line or "asyncio" in line for line in stack[-6:]
                ):
                    stacks.append(f"--- {t.name}\n" + "".join(stack[-14:]))
            where = f"{actor.trail[-3:]} parks {actor.parks[-4:]} go={actor._go}\n" + "\n".join(stacks)
            raise ModelError(
                f"actor {actor.name} neither parked nor finished within {HANG_TIMEOUT}s; {where}"
            )
        if draining and not actor.done:
            raise ModelError(f"dead actor {actor.name} parked at {actor.parked}")

    # ------------------------------------------------------------------ the actor's side
    def park(self, kind: str, detail: str) -> Park:
        """Called by a gate in the current actor's context: stop until the model steps this actor.

        Returns the park; ``park.refused`` means the actor died meanwhile and the call must not happen.
        Outside any actor (no current one), the call passes at once.
        """
        with self._cond:
            actor = self.current
            if actor is None:
                return Park(kind, detail, released=True)
            if not actor._go and not actor.dead and kind == "http":
                # The current actor is parked: nobody the model runs made this call. It is a leftover of a
                # finished or cancelled actor (a client's retry on a thread of its own): refuse it.
                return Park(kind, detail, released=True, refused=True)
            actor.gates += 1
            actor.trail.append((kind, detail))
            if actor.dead:
                actor.dead_gates += 1
                if (
                    actor.dead_gates == DEAD_GATE_LIMIT
                    and actor.thread is not None
                    and actor.role != "trigger"
                ):
                    _async_raise(actor.thread, WorkerCrash)
                return Park(kind, detail, released=True, refused=True)
            park = Park(kind, detail)
            actor.parks.append(park)
            actor._go = False
            self._cond.notify_all()
            self._cond.wait_for(lambda: park.released)
            if not park.abandoned:
                actor._go = True
        if park.interrupt is not None:
            raise park.interrupt
        return park


async def park_async(coop: Coop, kind: str, detail: str) -> Park:
    """`Coop.park` for a coroutine: the actor stops, but its event loop stays free, so a cancellation
    (``task.cancel(msg)``) reaches the coroutine here with its message, as it does in ``asyncio.sleep``."""
    import asyncio

    loop = asyncio.get_running_loop()
    future: asyncio.Future[None] = loop.create_future()

    def wake() -> None:
        def resolve() -> None:
            if not future.done():
                future.set_result(None)

        # The loop closed: the trigger ended while parked here (its triggerer killed it), nothing to wake.
        with contextlib.suppress(RuntimeError):
            loop.call_soon_threadsafe(resolve)

    with coop._cond:
        actor = coop.current
        if actor is None:
            return Park(kind, detail, released=True)
        actor.gates += 1
        actor.trail.append((kind, detail))
        if actor.dead:
            return Park(kind, detail, released=True, refused=True)
        park = Park(kind, detail, wake=wake)
        actor.parks.append(park)
        actor._go = False
        coop._cond.notify_all()
    await future
    return park


#: Errors a thread's next read of an answer raises (`Coop.interrupt` of a request), by thread id.
_READ_INTERRUPTS: dict[int, BaseException] = {}
_plain_readinto = socket.SocketIO.readinto


def _interruptible_readinto(self: socket.SocketIO, b: Any) -> int | None:
    try:
        return _plain_readinto(self, b)
    finally:
        error = _READ_INTERRUPTS.pop(threading.get_ident(), None)
        if error is not None:
            raise error


@contextlib.contextmanager
def interruptible_reads() -> Iterator[None]:
    """While open, a `Coop.interrupt` of an actor parked at a request raises its error out of the actor's
    read of the answer (``socket.SocketIO.readinto``: http.client's, under requests, urllib3 and botocore),
    as a signal handler's exception comes out of the read it interrupted (EINTR, then the handler runs
    inside the read). Only a thread with an interrupt pending is affected."""
    socket.SocketIO.readinto = _interruptible_readinto  # type: ignore[method-assign]
    try:
        yield
    finally:
        socket.SocketIO.readinto = _plain_readinto  # type: ignore[method-assign]
        _READ_INTERRUPTS.clear()


def _async_raise(thread: threading.Thread, exc: type[BaseException]) -> None:
    """Raise ``exc`` in ``thread`` at its next bytecode: the last resort to end a dead actor's loop."""
    if thread.ident is not None:
        ctypes.pythonapi.PyThreadState_SetAsyncExc(ctypes.c_ulong(thread.ident), ctypes.py_object(exc))
