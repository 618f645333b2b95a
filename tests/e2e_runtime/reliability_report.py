"""Render ``docs/reliability.md`` from the runtime tier's results (``docs/reliability.json``).

``python -m tests.e2e_runtime.reliability_report`` writes the page; ``--check`` exits 1 when the
committed page differs from what the committed results render to; ``--publish <results.json>`` makes a
finished run's results the published ones (docs/reliability.json) and renders the page from them, only if
they hold every cell of the matrix from that one run at one commit (``make reliability`` runs the whole
matrix into build/, then this). Pure: reads JSON, writes Markdown, imports nothing from Airflow.
"""

from __future__ import annotations

import json
import shutil
import sys
from pathlib import Path
from typing import Any

from tests.e2e_runtime.matrix import (
    CELERY_DEPLOYMENT,
    CI_PHASE_SETS,
    EXECUTION_TIMEOUT,
    FAULTS,
    POD_GRACE,
    SCHED_STOP_GRACE,
    STORE_DELAY,
    SYSTEMS,
    UNMEASURED,
    deployment_of,
    parse_dag_id,
    pending,
    rescheduled_jobs,
    unexplained_jobs,
)
from tests.e2e_runtime.matrix import cells as matrix_cells

ROOT = Path(__file__).resolve().parents[2]
#: How the page counts CI's phase sets.
_NUMBERS = {1: "one", 2: "two", 3: "three", 4: "four", 5: "five"}
RESULTS = ROOT / "docs" / "reliability.json"
PAGE = ROOT / "docs" / "reliability.md"

SYSTEM_TITLES = {
    "databricks": "Databricks",
    "dbrunnow": "Databricks run-now",
    "snowflake": "Snowflake",
    "bigquery": "BigQuery",
    "dbtcloud": "dbt Cloud",
    "redshift": "Redshift Data",
    "batch": "AWS Batch",
    "emreks": "EMR on EKS",
    "emr": "EMR steps",
    "emrserverless": "EMR Serverless",
}
FAULT_TITLES = {
    "workerkill": "worker death right after submit (SIGKILL supervisor + task)",
    "taskkill": "SIGKILL the task process mid-poll",
    "supkill": "SIGKILL only the supervisor: try 1 runs on beside try 2",
    "celerykill": "SIGKILL every Celery worker after submit, restart them",
    "trigkill": "SIGKILL one of two triggerers mid-deferral",
    "schedrestart": "SIGKILL the scheduler mid-run, start a new one",
    "completekill": "SIGKILL supervisor + task inside execute_complete, after the success event",
    "clear": "a user clears the finished task (a new logical job)",
    "markfailed": "a user marks the running task failed",
    "clear34": "Airflow 3.4's default clear while the task waits on its job (its state discarded)",
    "keepstate": "Airflow 3.4's clear with `keep_task_state` while the task waits on its job (carry on)",
    "exectimeout": f"`execution_timeout` ({EXECUTION_TIMEOUT} s, no retries) runs out while deferred",
    "storeread": "task-state store down (503 for 60 s) at the read before deciding",
    "storeintent": "task-state store down at the write of the submission intent",
    "storeid": "task-state store down at the write of the job id, after submit",
    "storeslow": f"slow task-state store (every call of try 1 {STORE_DELAY} s late)",
    "podstop": f"a pod stop while try 1 is on its worker (SIGTERM, SIGKILL {POD_GRACE} s later)",
    "podcomplete": f"a pod stop inside execute_complete (SIGTERM, SIGKILL {POD_GRACE} s later)",
    "warmstop": "Celery warm shutdown (SIGTERM to the worker) while try 1 runs on it",
    "coldstop": "Celery cold shutdown (SIGTERM, then SIGQUIT) while try 1 runs on it",
    "schedstop": (
        f"a scheduler restart with the LocalExecutor while try 1 polls (SIGTERM to its process group, "
        f"SIGKILL {SCHED_STOP_GRACE} s later, a new scheduler)"
    ),
    "failover": (
        "a scheduler failover with the LocalExecutor while try 1 polls (the scheduler alone SIGKILLed, a new "
        "one resets the orphaned task instances)"
    ),
}
#: The graceful stops: listed together, under an introduction of their own.
GRACEFUL_FAULTS = ("podstop", "podcomplete", "warmstop", "coldstop", "schedstop", "failover")
GRACEFUL_INTRO = [
    "### Graceful stops",
    "",
    "Production stops workers gracefully: Kubernetes sends a pod SIGTERM (on an eviction, a drain, a",
    f"deploy, a scale-in) and SIGKILL after its grace period (30 s by default; {POD_GRACE} s here),",
    "`systemctl restart` does the same to a service, and Celery's own shutdown is warm (SIGTERM: stop",
    "consuming, let the running tasks finish; the task gets no signal) or cold (SIGQUIT: Celery sends",
    "its pool processes SIGTERM). Airflow's task supervisor forwards a SIGTERM it gets to the task, so",
    "the operator's `on_kill` runs; with retries left the task is then retried.",
    "A stop is not a cancel: nobody asked for the job to end. The provider's `on_kill` cancels the job",
    "and its retry starts another; the durable operator leaves the job running and recorded while",
    "Airflow still shows this try running, and the retry reconnects to it.",
    "",
    "A scheduler with the LocalExecutor runs its tasks' supervisors as its own worker processes: stopping",
    "it (SIGTERM to its process group) stops them too, and they forward the SIGTERM to their tasks. A",
    "scheduler that dies alone (a crash; a standby takes over) leaves them supervising their tries until a",
    "new scheduler resets the orphaned task instances: the old try's next heartbeat is refused and its",
    "supervisor sends it SIGTERM. A reset is not a clear either: the task runs again and reconnects. These",
    "two ran on a second deployment with the LocalExecutor (named below the page's heading).",
    "",
]

FAULT_ORDER = list(FAULT_TITLES)


def _jobs(cell: dict[str, Any]) -> int:
    """The jobs the cell's fault calls for (a clear: two logical jobs); more are duplicates."""
    return FAULTS[cell["fault"]].expected_jobs(cell.get("system", "")) if cell["fault"] in FAULTS else 1


def _duplicates(cell: dict[str, Any]) -> int:
    """Jobs the fault made the operator start twice: not those no fault explains (`unexplained_jobs`), nor
    those of a start Airflow rescheduled (`rescheduled_jobs`)."""
    if unexplained_jobs(cell) or cell.get("reschedules"):
        return 0
    return max(0, cell["jobs"] - _jobs(cell))


RESCHEDULE_NOTE = (
    "↻ Airflow rescheduled a start of this task: its DAG file's import ran past `dagbag_import_timeout` on "
    "the loaded machine, and Airflow 3.3 reschedules a task whose DAG it cannot load "
    "(`[workers] missing_dag_retries`, same try). The reschedule clears a deferral's `next_method`, so a "
    "start after the trigger fired runs `execute()` again: the provider operator submits its job again, the "
    "durable one finds the job it already has. A fault Airflow added, not the test's: jobs it started are "
    "not counted as duplicates above."
)


def _unexplained_summary(cells: list[dict[str, Any]]) -> str:
    parts = []
    for count, mark, why in (
        (unexplained_jobs, "‡", "that no fault explains"),
        (rescheduled_jobs, "↻", "where Airflow rescheduled a start"),
    ):
        runs = [c for c in cells if count(c)]
        jobs = sum(count(c) for c in runs)
        if jobs:
            plural = "s" if len(runs) != 1 else ""
            parts.append(
                f" {jobs} more job{'s' if jobs != 1 else ''} in {len(runs)} run{plural} "
                f"{why} (marked {mark}) {'is' if jobs == 1 else 'are'} not counted."
            )
    return "".join(parts)


def _unexplained_note(cell: dict[str, Any]) -> str:
    extra = unexplained_jobs(cell)
    what = "a second job" if extra == 1 else f"{extra} jobs beyond the first"
    text = (
        f"‡ {SYSTEM_TITLES.get(cell['system'], cell['system'])}, {cell['side']}: {what} in a run whose store "
        "fault never reached the try (no store call of it was failed): nothing the test did asked for "
        f"{'it' if extra == 1 else 'them'}, so {'it is' if extra == 1 else 'they are'} not counted as a "
        "duplicate above."
    )
    if cell.get("evidence"):
        starts = ", ".join(f"+{s:.0f} s" for s in cell.get("job_starts", []))
        tries = ", ".join(f"try {t} +{s:.0f} s" for t, s in cell.get("try_starts", []))
        return (
            text
            + f" Jobs created at {starts} after the trigger ({tries}); logs kept in `{cell['evidence']}`."
        )
    return text + (
        f" Measured at `{cell.get('commit') or '?'}` by a run that kept no logs. The one cause found since: "
        "under load the DAG file's import at the start after the trigger fired ran past "
        "`dagbag_import_timeout`, Airflow rescheduled the start (same try) and cleared the deferral's "
        "`next_method`, so `execute()` ran again (see "
        "[the reliability run notes]"
        "(dev/reliability-runs.md#provider-duplicates-in-a-try-where-no-fault-fired))."
    )


def _promise(fault: str) -> str:
    f = FAULTS[fault]
    text = f"{f.jobs} job{'s' if f.jobs != 1 else ''}, task `{f.final}`, nothing untracked"
    if f.log:
        text += f", and try 1's log says why (“{f.log}”)"
    return text


def _measured_on(cells: dict[str, Any]) -> list[str]:
    """One line per commit: which faults (and systems) were measured on it."""
    by_commit: dict[str, dict[str, set[str]]] = {}
    for c in cells.values():
        faults = by_commit.setdefault(c.get("commit") or "", {})
        faults.setdefault(c["fault"], set()).add(c["system"])
    lines = []
    everyone = {c["system"] for c in cells.values()}
    for commit in sorted(by_commit, key=lambda k: (k == "", k)):
        parts = []
        order = sorted(by_commit[commit], key=lambda f: FAULT_ORDER.index(f) if f in FAULT_ORDER else 99)
        for fault in order:
            systems = by_commit[commit][fault]
            which = "" if systems == everyone else f" ({', '.join(sorted(systems))})"
            parts.append(f"`{fault}`{which}")
        name = (
            f"commit `{commit}`"
            if commit
            else "no commit recorded per cell (committed in `0f19c5c`: the engine before issue 11)"
        )
        lines.append(f"- {name}: {', '.join(parts)}")
    return lines


def _commits(cells: dict[str, Any]) -> set[str]:
    return {c.get("commit") or "" for c in cells.values()}


def _provenance(data: dict[str, Any], cells: dict[str, Any]) -> list[str]:
    """The page's first statement: the one run at one commit its results come from, or plainly not."""
    run = data.get("run")
    commits = _commits(cells)
    if run and commits == {run["commit"]}:
        dirty = " (with uncommitted changes)" if run.get("dirty") else ""
        return [
            f"**Every result below comes from one run of `make reliability` at commit `{run['commit']}`"
            f"{dirty}**, {run['date']}: {run['seconds'] / 60:.0f} min on {run['cores']} cores (1-minute load",
            f"average {run['load_before'][0]:.1f} at the start, median {run['load_median'] or 0:.1f} and "
            f"at most {run['load_max']:.1f} while it ran; the matrix itself keeps both cores busy).",
            "",
        ]
    named = ", ".join(f"`{c}`" if c else "no commit recorded" for c in sorted(commits))
    return [
        f"**Not one run: the results below were measured on {len(commits)} commits** ({named}; which",
        "fault on which, under *Measured on*). `make reliability` replaces them with one run.",
        "",
    ]


def _other_deployment(entry: dict[str, Any]) -> str:
    """The sentence naming a second deployment of the run and the faults whose cells ran on it."""
    env = entry["environment"]
    order = sorted({c["fault"] for c in entry["cells"].values()}, key=_fault_index)
    names = [f"`{f}`" for f in order]
    faults = ", ".join(names[:-1]) + " and " + names[-1] if len(names) > 1 else "".join(names)
    plural = "s" if env["triggerers"] != 1 else ""
    return (
        f"The cells of {faults} ran on a second deployment, {env['database']} with the {env['executor']} and "
        f"{env['triggerers']} triggerer{plural}, started once the first one was stopped."
    )


def _fault_index(fault: str) -> int:
    return FAULT_ORDER.index(fault) if fault in FAULT_ORDER else len(FAULT_ORDER)


def _outcome(cell: dict[str, Any] | None) -> str:
    if cell is None:
        return "not run"
    if cell.get("error"):
        return f"not measured ({cell['error']})"
    untracked = cell["untracked"]
    text = f"{cell['jobs']} job{'s' if cell['jobs'] != 1 else ''}, {cell['final_state']}"
    if untracked:
        text += f", **{untracked} untracked**"
    if cell["fault"] in ("storeread", "storeintent", "storeid") and not cell.get("store_failed"):
        text += " (no store call of this try was hit)"
    if unexplained_jobs(cell):
        text += " ‡"
    if cell.get("reschedules"):
        text += " ↻"
    return text


def render(data: dict[str, Any]) -> str:
    lines = [
        "# Reliability report",
        "",
        "<!-- Generated by `make reliability` (tests/e2e_runtime/reliability_report.py) from",
        "     docs/reliability.json. Do not edit: a test fails when this page is stale. -->",
        "",
        *_provenance(
            data, {k: c for e in data.get("configurations", {}).values() for k, c in e["cells"].items()}
        ),
    ]
    configurations = data.get("configurations", {})
    # One section: the cells of every deployment of the run (each fault's cells ran on one, `deployment_of`),
    # under the heading of the main one; the others are named below it.
    main_key = CELERY_DEPLOYMENT if CELERY_DEPLOYMENT in configurations else min(configurations, default=None)
    for _key, entry in [(main_key, configurations[main_key])] if main_key is not None else []:
        env = entry["environment"]
        cells: Any = {k: c for e in configurations.values() for k, c in e["cells"].items()}
        others = [_other_deployment(e) for key, e in sorted(configurations.items()) if key != main_key]
        durable = [c for c in cells.values() if c["side"] == "durable"]
        upstream = [c for c in cells.values() if c["side"] == "upstream"]
        kept = sum(1 for c in durable if c.get("durable_ok"))
        measured = [c for c in durable if not c.get("error")]
        unmeasured = len(cells) - sum(1 for c in cells.values() if not c.get("error"))
        up_dups = sum(_duplicates(c) for c in upstream if not c.get("error"))
        up_orphans = sum(c["untracked"] for c in upstream if not c.get("error"))
        up_cells_dup = sum(1 for c in upstream if not c.get("error") and _duplicates(c))
        unexplained = [c for c in cells.values() if unexplained_jobs(c) or rescheduled_jobs(c)]
        lines += [
            f"## Apache Airflow {env['airflow']} on {env['database']} with the {env['executor']}, "
            f"{env['triggerers']} triggerers, {env.get('celery_workers', 0)} Celery workers",
            "",
            "**In short.** Each row is one real DAG run on a real deployment (api-server, scheduler,",
            "dag-processor, triggerers, Celery workers) against the system's offline emulator, with one",
            "Airflow process killed, a user's action or a task-state-store fault at the moment named.",
            *others,
            "The durable operator and the provider's own ran",
            f"side by side in the same deployment. **Durable kept its promise in {kept} of the "
            f"{len(measured)} measured runs** ({len(durable)} in the matrix;",
            "one job on the service, the task `success` with the provider's XComs, nothing left",
            "running untracked; under a user's action the promise is what the user asked for, stated",
            f"under each table). The provider's operators started **{up_dups} duplicate job"
            f"{'s' if up_dups != 1 else ''}** in {up_cells_dup} of their "
            f"{sum(1 for c in upstream if not c.get('error'))} measured runs and left "
            f"**{up_orphans}** running that no task tracked." + _unexplained_summary(unexplained),
            "",
            *(
                [
                    f"{unmeasured} of the {len(cells)} runs are *not measured*: the harness could not",
                    "drive them to the moment of the fault or to their end within its budget (the reason is",
                    "in the cell); they say nothing for or against either operator and are rerun by",
                    "`make reliability`.",
                ]
                if unmeasured
                else [f"Every one of the {len(cells)} runs was measured."]
            ),
            "",
            "A *job* is what the service started for that DAG run (a Databricks run, a Snowflake",
            "statement, a BigQuery job...); *untracked* counts jobs still running, besides the one the",
            "task waited on, when the test let the jobs finish: those run on, and cost, with nothing",
            "watching them.",
            "",
        ]
        # Cells of systems added to the matrix since the results were recorded: listed as not run, under
        # the faults whose tables the results hold. (Not `matrix_cells(systems=())`, which is every system:
        # with none awaited, no cell is. A fault with no recorded cell, such as one awaited in
        # matrix.UNMEASURED_FAULTS, gets no table yet: the page shows it once recorded.)
        recorded = {c["fault"] for c in cells.values()}
        awaited = (
            [c for c in matrix_cells(systems=UNMEASURED) if c.dag_id not in cells and c.fault in recorded]
            if UNMEASURED
            else []
        )
        if awaited:
            names = sorted({c.system for c in awaited}, key=list(SYSTEM_TITLES).index)
            lines += [
                f"{len(awaited)} more runs are *not run* yet: the cells of "
                f"{' and '.join(SYSTEM_TITLES[n] for n in names)}, added to the matrix since.",
                "",
            ]
        for fault in FAULT_ORDER:
            rows = sorted(
                {(c["system"], c["path"]) for c in cells.values() if c["fault"] == fault}
                | {(c.system, c.path) for c in awaited if c.fault == fault},
                key=lambda sp: (list(SYSTEM_TITLES).index(sp[0]) if sp[0] in SYSTEM_TITLES else 99, sp[1]),
            )
            if not rows:
                continue
            graceful = fault in GRACEFUL_FAULTS
            if graceful and not any(
                c["fault"] in GRACEFUL_FAULTS[: GRACEFUL_FAULTS.index(fault)] for c in cells.values()
            ):
                lines += GRACEFUL_INTRO  # before the first graceful stop the results hold
            lines += [
                f"{'####' if graceful else '###'} {FAULT_TITLES.get(fault, fault)}",
                "",
                f"Durable's promise here: {_promise(fault)}.",
                "",
                "| system | path | upstream operator | upstream | durable | durable tries |",
                "|---|---|---|---|---|---|",
            ]
            notes: set[str] = set()
            for system, path in rows:
                up = cells.get(f"rt_{system}_{fault}_upstream_{path}")
                du = cells.get(f"rt_{system}_{fault}_durable_{path}")
                tries = ", ".join(f"{t}:{s}" for t, s in (du or {}).get("tries", []))
                mark = "" if du is None or du.get("durable_ok") else " ✗"
                known = pending(parse_dag_id(f"rt_{system}_{fault}_durable_{path}"))
                if mark and known and not du.get("error"):
                    mark += " (known engine bug †)"
                    notes.add(known)
                operator = (up or du or {}).get("operator") or SYSTEMS.get(system, ("", "", ""))[1]
                lines.append(
                    f"| {SYSTEM_TITLES.get(system, system)} | {path} | `{operator}` "
                    f"| {_outcome(up)} | {_outcome(du)}{mark} | {tries} |"
                )
            lines += [""] + [f"† {note}." for note in sorted(notes)] + ([""] if notes else [])
            shown = [
                cells.get(f"rt_{system}_{fault}_{side}_{path}")
                for system, path in rows
                for side in ("upstream", "durable")
            ]
            lines += [line for c in shown if c and unexplained_jobs(c) for line in (_unexplained_note(c), "")]
            if any(c and c.get("reschedules") for c in shown):
                lines += [RESCHEDULE_NOTE, ""]
            if FAULTS[fault].limit:
                lines += [f"Not covered: {FAULTS[fault].limit}.", ""]
        if len(_commits(cells)) > 1:
            lines += ["### Measured on", "", *_measured_on(cells), ""]
    run = data.get("run")
    took = (
        f"The run above took {run['seconds'] / 60:.0f} minutes on {run['cores']} cores."
        if run
        else "A run takes about 40 minutes on 2 cores."
    )
    lines += [
        "## How to reproduce",
        "",
        "`make reliability` runs the whole matrix on this machine in one deployment (a private PostgreSQL",
        "and Redis from the Debian packages, real Celery workers), then rewrites `docs/reliability.json`",
        f"and this page from that run. {took}",
        "The cells whose fault strikes one task run side by side; a fault that strikes the whole",
        "deployment (a Celery-worker, triggerer or scheduler kill) runs its cells alone; the scheduler's",
        "own stops with the LocalExecutor run last, on a second deployment of that executor. CI runs one",
        f"system and one of {_NUMBERS[len(CI_PHASE_SETS)]} phase sets per push, chosen by the commit hash",
        "(see [Testing](testing.md#the-runtime-tier)).",
        "",
    ]
    return "\n".join(lines)


def incomplete(data: dict[str, Any]) -> list[str]:
    """Why a run's results cannot be published as they are (``[]``: they can): every cell of the matrix,
    all from the run the file names, on one commit, without uncommitted changes."""
    run = data.get("run")
    if not run:
        return ["the results name no run (they were not written by `make reliability`)"]
    problems = []
    configurations = data.get("configurations", {})
    cells = {k: c for e in configurations.values() for k, c in e["cells"].items()}
    missing = [
        c.dag_id
        for c in matrix_cells()
        if c.dag_id not in configurations.get(deployment_of(c.fault), {}).get("cells", {})
    ]
    if missing:
        problems.append(f"{len(missing)} cells have no result, e.g. {', '.join(missing[:5])}")
    if _commits(cells) - {run["commit"]}:
        problems.append(f"cells from other commits than the run's ({sorted(_commits(cells))})")
    if run.get("dirty"):
        problems.append(f"the run was on uncommitted changes to {run['commit']}")
    return problems


def main(argv: list[str]) -> int:
    if "--publish" in argv:
        source = Path(argv[argv.index("--publish") + 1])
        problems = incomplete(json.loads(source.read_text()))
        if problems:
            print(f"not published ({source}): " + "; ".join(problems), file=sys.stderr)
            return 1
        shutil.copyfile(source, RESULTS)
        print(f"wrote {RESULTS}")
    data = json.loads(RESULTS.read_text())
    page = render(data)
    if "--check" in argv:
        if not PAGE.exists() or PAGE.read_text() != page:
            print(f"{PAGE} is stale: run `python -m tests.e2e_runtime.reliability_report`", file=sys.stderr)
            return 1
        return 0
    PAGE.write_text(page)
    print(f"wrote {PAGE}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
