"""``make explore``: run the model long, per family, and report every distinct violation, shrunk.

    python -m tests.model.explore [--steps 10000] [--families databricks,batch] [--json out.json]

For each family it runs hypothesis state machines until at least ``--steps`` rule steps ran (the steps
of shrinking runs count too: they are real steps). Every violation key fails an example the first time it
is seen, so hypothesis shrinks it to a minimal rule sequence; after that the key is only counted, and the
search goes on for others. Violations listed in ``tests.model.known`` are reported like the rest (marked
known), so the list of findings on today's engine comes out of the same run.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
import traceback
from dataclasses import dataclass, field
from typing import Any

import tests.conftest  # noqa: F401  (a throwaway AIRFLOW_HOME, offline settings: before Airflow imports)


@dataclass
class Found:
    key: str
    invariant: str
    message: str
    log: list[str]
    example: str
    known: str | None
    seen: int = 1


@dataclass
class FamilyReport:
    family: str
    steps: int = 0
    shrink_steps: int = 0
    examples: int = 0
    seconds: float = 0.0
    transitions: dict[str, int] = field(default_factory=dict)
    found: dict[str, Found] = field(default_factory=dict)
    model_errors: list[str] = field(default_factory=list)


def _known(key: str) -> str | None:
    from tests.model.known import explain

    return explain(key)


def explore_family(family: str, steps: int, examples_per_batch: int, step_count: int) -> FamilyReport:
    from hypothesis import HealthCheck, Phase, settings
    from hypothesis.errors import HypothesisException
    from hypothesis.stateful import run_state_machine_as_test

    from tests.model import machine
    from tests.model.coop import ModelError
    from tests.model.runtime import hypothesis_storage, quiet_logs
    from tests.model.systems import EmulatorHost, cases_of

    report = FamilyReport(family)
    cases = cases_of(family)
    if not cases:
        report.model_errors.append("no operator of this family runs with the installed provider")
        return report
    host = EmulatorHost(cases[0].emulator_fixture)
    started = time.monotonic()
    machine.STEPS[family] = machine.SHRINK_STEPS[family] = 0
    with host.running(), quiet_logs(), hypothesis_storage():
        while machine.STEPS.get(family, 0) - machine.SHRINK_STEPS.get(family, 0) < steps:
            seen_keys = set(report.found)

            def raise_gated(key: str, seen: set[str] = seen_keys) -> bool:
                # Shrink each new violation once (a shrink costs thousands of steps); listed ones are
                # recorded with the example that first showed them (scenarios.py has them minimal).
                return key not in seen and _known(key) is None

            Machine = machine.machine_for(family, host, raise_gated=raise_gated)
            try:
                run_state_machine_as_test(
                    Machine,
                    settings=settings(
                        max_examples=examples_per_batch,
                        stateful_step_count=step_count,
                        deadline=None,
                        database=None,
                        suppress_health_check=list(HealthCheck),
                        report_multiple_bugs=False,
                        phases=[Phase.generate, Phase.shrink],
                    ),
                )
                report.examples += examples_per_batch
            except machine.ViolationFound as err:
                key = err.violation.key
                notes = "\n".join(getattr(err, "__notes__", []) or [])
                report.found[key] = Found(
                    key, err.violation.invariant, err.violation.message, err.log, notes, _known(key)
                )
                print(f"[{family}] {key} ({machine.STEPS.get(family, 0)} steps)", file=sys.stderr)
            except (ModelError, HypothesisException, BaseExceptionGroup) as err:
                # A bug of the model (or an example that did not replay alike): reported, never a finding.
                report.model_errors.append(f"{err}\n{''.join(traceback.format_exception(err))[-3000:]}")
                print(f"[{family}] MODEL ERROR {err}", file=sys.stderr)
                if len(report.model_errors) > 3:
                    break
            machine.SHRINKING[family] = False
            for key, (violation, log) in machine.GATED.pop(family, {}).items():
                if key in report.found:
                    report.found[key].seen += 1
                else:
                    report.found[key] = Found(
                        key, violation.invariant, violation.message, log, "(not shrunk)", _known(key)
                    )
    report.steps = machine.STEPS.get(family, 0)
    report.shrink_steps = machine.SHRINK_STEPS.get(family, 0)
    report.transitions = dict(machine.TRANSITIONS.get(family, {}))
    report.seconds = time.monotonic() - started
    return report


def render(reports: list[FamilyReport]) -> str:
    lines = ["# Model exploration", ""]
    lines.append(f"{'family':<16} {'steps':>7} {'shrinking':>9} {'steps/s':>8} {'violations':>10} {'new':>4}")
    for r in reports:
        rate = r.steps / r.seconds if r.seconds else 0.0
        new = sum(1 for f in r.found.values() if not f.known)
        lines.append(
            f"{r.family:<16} {r.steps:>7} {r.shrink_steps:>9} {rate:>8.1f} {len(r.found):>10} {new:>4}"
        )
    for r in reports:
        lines += ["", f"## {r.family}: {r.steps} steps ({r.shrink_steps} shrinking) in {r.seconds:.0f} s", ""]
        lines.append("transitions: " + ", ".join(f"{k} {v}" for k, v in sorted(r.transitions.items())))
        for error in r.model_errors:
            lines += ["", "MODEL ERROR (a bug of the model, not a finding):", error]
        for found in r.found.values():
            lines += [
                "",
                f"### ({found.invariant}) {found.key}" + (f"  [{found.known}]" if found.known else ""),
            ]
            lines += [found.message, "", "minimal sequence:", *found.log]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    from tests.model.systems import FAMILIES

    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument(
        "--steps", type=int, default=10_000, help="rule steps per family (at least; shrinking not counted)"
    )
    parser.add_argument("--families", default=",".join(FAMILIES), help="comma-separated families")
    parser.add_argument("--examples", type=int, default=20, help="examples per hypothesis batch")
    parser.add_argument("--step-count", type=int, default=40, help="rules per example")
    parser.add_argument("--json", help="also write the findings as JSON here")
    args = parser.parse_args(argv)
    reports = []
    for family in [f for f in args.families.split(",") if f]:
        if family not in FAMILIES:
            parser.error(f"unknown family {family!r}; known: {', '.join(FAMILIES)}")
        reports.append(explore_family(family, args.steps, args.examples, args.step_count))
        print(render(reports[-1:]), flush=True)
    print("\n\n" + render(reports))
    if args.json:
        with open(args.json, "w") as out:
            json.dump([_as_json(r) for r in reports], out, indent=1, default=str)
    unknown = [f for r in reports for f in r.found.values() if not f.known]
    errors = [e for r in reports for e in r.model_errors]
    return 1 if unknown or errors else 0


def _as_json(report: FamilyReport) -> dict[str, Any]:
    return {
        "family": report.family,
        "steps": report.steps,
        "shrink_steps": report.shrink_steps,
        "seconds": round(report.seconds, 1),
        "transitions": report.transitions,
        "violations": [vars(f) for f in report.found.values()],
        "model_errors": report.model_errors,
    }


if __name__ == "__main__":
    sys.exit(main())
