"""How the demo shows itself: progress while it runs, the side-by-side table, JSON, failures."""

from __future__ import annotations

import json
import time
from typing import IO, Any

from rich.console import Console
from rich.status import Status
from rich.table import Table
from rich.text import Text

from airflow_durable.demo.runner import DemoResult, DemoStepError, SideResult

__all__ = [
    "PlainReporter",
    "RichReporter",
    "failure_json",
    "print_failure",
    "print_result",
    "result_heading",
    "result_json",
    "result_table",
]

#: Width used when stdout is not a terminal, so the table never wraps in a log or a README.
PLAIN_WIDTH = 118


class PlainReporter:
    """Progress as plain lines (``[  12.3s] ...``): for logs, CI and pipes."""

    def __init__(self, stream: IO[str]) -> None:
        self.stream = stream
        self.t0 = time.monotonic()

    def _line(self, text: str) -> None:
        self.stream.write(f"[{time.monotonic() - self.t0:6.1f}s] {text}\n")
        self.stream.flush()

    def start(self, step: str) -> None:
        self._line(f"{step} ...")

    def done(self, step: str, seconds: float, detail: str = "") -> None:
        self._line(f"{step}: done in {seconds:.1f}s" + (f" ({detail})" if detail else ""))

    def failed(self, step: str, seconds: float) -> None:
        self._line(f"{step}: FAILED after {seconds:.1f}s")

    def note(self, text: str) -> None:
        self._line(text)


class RichReporter:
    """Progress on a terminal: a spinner on the running step, a tick line per finished step."""

    def __init__(self, console: Console) -> None:
        self.console = console
        self.t0 = time.monotonic()
        self._status: Status | None = None

    def _stamp(self) -> str:
        return f"[dim]{time.monotonic() - self.t0:6.1f}s[/dim]"

    def start(self, step: str) -> None:
        self._stop_status()
        self._status = self.console.status(f"{step} ...", spinner="dots")
        self._status.start()

    def _stop_status(self) -> None:
        if self._status is not None:
            self._status.stop()
            self._status = None

    def done(self, step: str, seconds: float, detail: str = "") -> None:
        self._stop_status()
        extra = f" [dim]({detail})[/dim]" if detail else ""
        self.console.print(f"{self._stamp()} [green]✓[/green] {step} [dim]{seconds:.1f}s[/dim]{extra}")

    def failed(self, step: str, seconds: float) -> None:
        self._stop_status()
        self.console.print(f"{self._stamp()} [red]✗ {step}[/red] [dim]after {seconds:.1f}s[/dim]")

    def note(self, text: str) -> None:
        self.console.print(f"{self._stamp()} [yellow]•[/yellow] {text}")


def _jobs(side: SideResult) -> str:
    ids = ", ".join(j.id for j in side.jobs)
    return f"{side.submissions} ({ids})" if ids else str(side.submissions)


def _retry(side: SideResult, noun: str) -> str:
    if side.tries < 2 or not side.jobs:
        return "–"
    if len(side.jobs) > 1:
        return f"submitted {noun} {side.jobs[-1].id}"
    return f"reconnected to {side.jobs[0].id}"


def _tries(side: SideResult) -> str:
    detail = ", ".join(str(s) for _, s in side.try_states)
    return f"{side.tries} ({detail})" if detail else str(side.tries)


def _state_text(state: str | None) -> Text:
    return Text(str(state), style="green" if state == "success" else "red")


def result_heading(result: DemoResult) -> list[str]:
    """What ran: the system, the Airflow, and the two operators compared."""
    degraded = "" if result.durable_runtime else "  (degraded below Airflow 3.3)"
    return [
        f"{result.title} on Airflow {result.airflow_version}: try 1 SIGKILLed after its {result.job_noun} "
        "started, Airflow retried",
        f"  upstream: {result.upstream.operator}({result.operator_args})",
        f"  durable:  {result.durable.operator}({result.operator_args}){degraded}",
    ]


def result_table(result: DemoResult) -> Table:
    """The side-by-side table: upstream operator vs durable operator (fits 80 columns)."""
    table = Table()
    up, du = result.upstream, result.durable
    noun = result.job_noun
    table.add_column("", style="bold", no_wrap=True)
    table.add_column("upstream", no_wrap=True)
    table.add_column("durable" if result.durable_runtime else "durable (degraded)", no_wrap=True)
    table.add_row(
        f"{noun}s submitted",
        Text(_jobs(up), style="red" if up.submissions > 1 else "green"),
        Text(_jobs(du), style="red" if du.submissions > 1 else "green"),
    )
    table.add_row("try 2", _retry(up, noun), _retry(du, noun))
    table.add_row("final task state", _state_text(up.final_state), _state_text(du.final_state))
    table.add_row("tries", _tries(up), _tries(du))
    table.add_row("kill → try 2 waiting", _seconds(up.recovery_seconds), _seconds(du.recovery_seconds))
    table.add_row("wall time", _seconds(up.wall_seconds), _seconds(du.wall_seconds))
    return table


def _seconds(value: float | None) -> str:
    return "–" if value is None else f"{value:.1f} s"


def print_result(result: DemoResult, console: Console) -> None:
    """The heading, the table, the cost line, and where the kept home is."""
    for line in result_heading(result):
        console.print(line, highlight=False, soft_wrap=True, markup=False)
    console.print(result_table(result))
    console.print(result.cost_statement(), highlight=False, soft_wrap=True)
    if not result.durable_runtime:
        console.print(
            f"Note: Airflow {result.airflow_version} has no task_state_store (needs 3.3): the durable "
            "operator degrades to submitting a fresh job on every try, like upstream.",
            highlight=False,
            soft_wrap=True,
        )
    if not result.as_expected:
        console.print(
            "[yellow]Unexpected outcome[/yellow]: see the table; rerun with --keep to inspect the logs.",
            highlight=False,
            soft_wrap=True,
        )
    console.print(f"Demo took {result.total_seconds:.0f} s.", highlight=False)
    if result.airflow_home:
        console.print(f"Kept AIRFLOW_HOME: {result.airflow_home}", highlight=False, soft_wrap=True)


def result_json(result: DemoResult) -> str:
    """The result for scripts, as one JSON document."""
    return json.dumps(result.to_json(), indent=2)


def failure_json(error: DemoStepError, system: str) -> str:
    """A failed run for scripts: ``ok`` false, the step and the reason (logs go to stderr)."""
    payload: dict[str, Any] = {"ok": False, "system": system, "step": error.step, "error": error.reason}
    return json.dumps(payload, indent=2)


def print_failure(error: DemoStepError, console: Console, log_chars: int = 30000) -> None:
    """Which step failed, why, and the tail of the logs that show it."""
    # soft_wrap: long reasons and log lines stay whole lines (greppable, copyable).
    console.print(
        f"[red]airflow-durable demo failed at step:[/red] {error.step}", highlight=False, soft_wrap=True
    )
    console.print(f"reason: {error.reason}", highlight=False, markup=False, soft_wrap=True)
    if error.logs:
        console.print("logs (tail):", highlight=False)
        console.print(error.logs[-log_chars:], highlight=False, markup=False, soft_wrap=True)
    console.print("Rerun with --keep to keep the AIRFLOW_HOME for inspection.", highlight=False)
