"""``python -m bench``: run the benchmarks and write the report. See ``bench/__init__.py``.

Exit status: 0 when the report was written (whatever the numbers say), non-zero only when the benchmark
could not run (a section crashed, the environment is unusable). There are no timed assertions.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]

QUICK_CASES = "databricks_submit_run"
ALL_SECTIONS = ("calls", "slots", "parse", "dagtest", "triggerer")
#: Where the published report lives: only a full run (every section, every operator) writes it.
PUBLISHED = {
    "md": ROOT / "docs" / "benchmarks.md",
    "json": ROOT / "docs" / "benchmarks.json",
    "charts": ROOT / "docs" / "img" / "benchmarks",
}
#: Where every other run writes (gitignored): ``--quick``/``--tiny``, and partial runs.
QUICK_OUT = ROOT / "build" / "bench-quick"
PARTIAL_OUT = ROOT / "build" / "bench"


def parse_args(argv: list[str]) -> argparse.Namespace:
    p = argparse.ArgumentParser(prog="python -m bench", description=__doc__)
    p.add_argument(
        "--quick", action="store_true", help="a minute-long subset (no dag.test, no real triggerer)"
    )
    p.add_argument(
        "--tiny", action="store_true", help="the smallest run that exercises every quick section (tests)"
    )
    p.add_argument("--sections", default=None, help=f"comma list of {','.join(ALL_SECTIONS)}")
    p.add_argument("--cases", default=None, help="conformance case ids (default: all ten; quick: two)")
    p.add_argument(
        "--samples", type=int, default=None, help="interleaved pairs per timing (default 7, quick 1)"
    )
    p.add_argument("--parse-tasks", type=int, default=None, help="tasks per parsed DAG file (default 200)")
    p.add_argument("--triggerer-sizes", default="1,100,1000", help="deferred tasks on one real triggerer")
    p.add_argument("--storm", type=int, default=100, help="tasks in the reconnect storm (0: no storm)")
    p.add_argument(
        "--storm-runs",
        type=int,
        default=2,
        help="real storm runs per side, alternating which side goes first (default 2: A B, B A)",
    )
    p.add_argument(
        "--storm-mode",
        choices=("real", "in-process"),
        default=None,
        help="the storm on a real deployment per side (minutes: PostgreSQL, LocalExecutor, a task process "
        "per try; the default) or in this process, one retry after another (seconds, the time a serial "
        "sum; the default with --quick/--tiny)",
    )
    p.add_argument(
        "--report-only", metavar="JSON", nargs="+", help="rewrite the report from JSON, run nothing"
    )
    p.add_argument(
        "--baseline",
        metavar="JSON",
        help="an earlier run's JSON (e.g. on main): the report shows how our call counts changed since",
    )
    p.add_argument("--baseline-label", default="main", help="what the baseline ran on (default: main)")
    p.add_argument(
        "--note", default=None, help="a caveat printed at the top of the report (e.g. partial runs)"
    )
    p.add_argument(
        "--out",
        metavar="DIR",
        default=None,
        help="write benchmarks.md, benchmarks.json and img/ into DIR (default: docs/ for a full run, "
        "build/bench-quick/ for --quick and --tiny, build/bench/ for any other partial run)",
    )
    p.add_argument("--md", default=None, help="the report (overrides --out)")
    p.add_argument("--json", default=None, help="the raw results (overrides --out)")
    p.add_argument("--charts", default=None, help="the charts' directory (overrides --out)")
    return p.parse_args(argv)


def is_full_run(args: argparse.Namespace) -> bool:
    """Every section on every operator with the reconnect storm: the only run that may be published."""
    return (
        not (args.quick or args.tiny or args.report_only)
        and args.sections is None
        and args.cases is None
        and args.storm > 0
    )


def outputs(args: argparse.Namespace) -> tuple[Path, Path, Path]:
    """``(md, json, charts)`` of a run. The published report (docs/) is the default of a full run only,
    so a quick or partial run never overwrites it: those write under build/ (gitignored)."""
    if args.out is not None:
        out = Path(args.out)
        base = {"md": out / "benchmarks.md", "json": out / "benchmarks.json", "charts": out / "img"}
    elif is_full_run(args) or (args.report_only and len(args.report_only) == 1 and _published(args)):
        base = dict(PUBLISHED)
    else:
        out = QUICK_OUT if (args.quick or args.tiny) else PARTIAL_OUT
        base = {"md": out / "benchmarks.md", "json": out / "benchmarks.json", "charts": out / "img"}
    return (
        Path(args.md) if args.md else base["md"],
        Path(args.json) if args.json else base["json"],
        Path(args.charts) if args.charts else base["charts"],
    )


def _published(args: argparse.Namespace) -> bool:
    """``--report-only`` of one JSON re-renders the published report only when that JSON is a full run's."""
    try:
        settings = json.loads(Path(args.report_only[0]).read_text())["settings"]
    except (OSError, ValueError, KeyError):
        return False
    return bool(settings.get("full_run"))


def main(argv: list[str] | None = None) -> int:
    args = parse_args(sys.argv[1:] if argv is None else argv)
    md, js, charts = outputs(args)
    if args.report_only:
        from bench import report

        documents = [json.loads(Path(p).read_text()) for p in args.report_only]
        document = _merge(documents) if len(documents) > 1 else documents[0]
        _attach_baseline(document, args)
        if args.note:
            document["note"] = args.note
        js.parent.mkdir(parents=True, exist_ok=True)
        js.write_text(json.dumps(document, indent=1, default=str) + "\n")
        report.write(document, md, charts, json_name=js.name)
        print(f">> bench: wrote {md} and {js}", file=sys.stderr)
        return 0
    quick = args.quick or args.tiny
    sections = (args.sections or ("calls,slots,parse" if quick else ",".join(ALL_SECTIONS))).split(",")
    unknown = set(sections) - set(ALL_SECTIONS)
    if unknown:
        print(
            f"bench: unknown section(s) {sorted(unknown)}; known: {', '.join(ALL_SECTIONS)}", file=sys.stderr
        )
        return 2
    cases = args.cases if args.cases is not None else (QUICK_CASES if quick else "")
    samples = args.samples or (1 if quick else 7)
    settings = {
        "quick": quick,
        "tiny": args.tiny,
        "sections": sections,
        "cases": cases or "all",
        "samples": samples,
        "parse_tasks": args.parse_tasks or (20 if quick else 200),
        "slot_minutes": "1" if args.tiny else "1,10" if quick else "1,10,60",
        "slot_samples": 1,
        "triggerer_sizes": args.triggerer_sizes,
        "storm": args.storm,
        "storm_mode": args.storm_mode or ("in-process" if quick else "real"),
        "storm_runs": args.storm_runs,
        "command": "python -m bench " + " ".join(sys.argv[1:] if argv is None else argv),
        "full_run": is_full_run(args),
    }
    from bench import machine

    started = time.time()
    meta = machine.describe()
    records: list[dict[str, Any]] = []
    failures: list[str] = []
    home = tempfile.mkdtemp(prefix="bench-airflow-home-")
    try:
        env = _env(home)
        for section in sections:
            t0 = time.time()
            print(f">> bench: section {section}", file=sys.stderr, flush=True)
            try:
                records.extend(_run_section(section, settings, env, cases, home))
            except Exception as err:  # a section that cannot run is reported and fails the command
                failures.append(f"{section}: {type(err).__name__}: {err}")
                print(f"bench: section {section} could not run: {err}", file=sys.stderr)
            print(f">> bench: section {section} took {time.time() - t0:.0f} s", file=sys.stderr, flush=True)
            # Keep what is done so far: a run stopped later still leaves these sections' results.
            partial = {"meta": meta, "settings": settings, "failures": failures, "records": records}
            _partial_path(js).parent.mkdir(parents=True, exist_ok=True)
            _partial_path(js).write_text(json.dumps(partial, indent=1, default=str) + "\n")
    finally:
        shutil.rmtree(home, ignore_errors=True)
    meta["load_after"] = machine.load()
    meta["duration_s"] = time.time() - started
    document = {"meta": meta, "settings": settings, "failures": failures, "records": records}
    _attach_baseline(document, args)
    js.parent.mkdir(parents=True, exist_ok=True)
    js.write_text(json.dumps(document, indent=1, default=str) + "\n")
    _partial_path(js).unlink(missing_ok=True)
    from bench import report

    report.write(document, md, charts, json_name=js.name)
    print(f">> bench: wrote {md} and {js} in {meta['duration_s']:.0f} s", file=sys.stderr)
    return 1 if failures else 0


def _partial_path(js: Path) -> Path:
    """Where a run keeps its finished sections while it runs, never over the results themselves (a run
    stopped halfway leaves the published ones as they were): beside them, or under build/ for docs/."""
    if js.resolve() == PUBLISHED["json"].resolve():
        return PARTIAL_OUT / "benchmarks.partial.json"
    return js.with_name(js.stem + ".partial.json")


def _attach_baseline(document: dict[str, Any], args: argparse.Namespace) -> None:
    """Keep the baseline's call counts (the figures it is compared on) in the document."""
    if not args.baseline:
        return
    from bench import report

    base = json.loads(Path(args.baseline).read_text())
    document["baseline"] = {
        "label": f"{args.baseline_label} (`{base['meta'].get('commit', '?')}`)",
        "summary": [
            {"case": k[0], "path": k[1], "scenario": k[2], **v}
            for k, v in report.count_summary(base["records"]).items()
        ],
    }


def _merge(documents: list[dict[str, Any]]) -> dict[str, Any]:
    """One document from runs of different sections (the first one's machine description)."""
    merged = dict(documents[0])
    merged["records"] = [r for d in documents for r in d["records"]]
    ran = {r["section"] for r in merged["records"]}
    merged["failures"] = [f for d in documents for f in d["failures"] if f.split(":", 1)[0] not in ran]
    merged["settings"] = dict(documents[0]["settings"])
    sections = [s for d in documents for s in d["settings"]["sections"] if s in ran]
    merged["settings"]["sections"] = list(dict.fromkeys(sections))
    merged["settings"]["command"] = " + ".join(d["settings"]["command"].strip() for d in documents)
    merged["meta"] = dict(documents[0]["meta"])
    merged["meta"]["duration_s"] = max(d["meta"].get("duration_s", 0) for d in documents)
    merged["meta"]["load_after"] = documents[-1]["meta"].get("load_after")
    # Sections may come from runs on different commits (e.g. the engine changed between them): say which.
    # A document that is itself a merge keeps the commits it names for its sections.
    merged["meta"]["section_commits"] = {
        r["section"]: d["meta"].get("section_commits", {}).get(r["section"])
        or f"{d['meta'].get('commit')}{' (uncommitted changes)' if d['meta'].get('dirty') else ''}"
        for d in documents
        for r in d["records"]
    }
    return merged


def _env(home: str) -> dict[str, str]:
    env = dict(os.environ)
    env.update(
        {
            "AIRFLOW_HOME": home,
            "AIRFLOW__CORE__LOAD_EXAMPLES": "False",
            "AIRFLOW__DATABASE__SQL_ALCHEMY_CONN": f"sqlite:///{home}/airflow.db",
            "AIRFLOW__CORE__DAGS_FOLDER": str(ROOT / "bench" / "dags"),
            "AIRFLOW__OPENLINEAGE__DISABLED": "True",
            "SCARF_ANALYTICS": "false",
            "DO_NOT_TRACK": "1",
            "PYTHONPATH": os.pathsep.join(filter(None, [str(ROOT), env.get("PYTHONPATH", "")])),
        }
    )
    return env


def _pytest(
    module: str, env: dict[str, str], extra: dict[str, str], selector: str | None = None
) -> list[dict]:
    with tempfile.NamedTemporaryFile("r", suffix=".jsonl", prefix="bench-") as out:
        run_env = {**env, **extra, "BENCH_OUT": out.name}
        cmd = [
            sys.executable,
            "-m",
            "pytest",
            "-q",
            "-p",
            "no:cacheprovider",
            "-n",
            "0",
            "--timeout=900",
            "-W",
            "ignore",
            f"--rootdir={ROOT}",
            module,
        ]
        if selector:
            cmd += ["-k", selector]
        proc = subprocess.run(cmd, cwd=ROOT, env=run_env, capture_output=True, text=True, check=False)
        records = [json.loads(line) for line in Path(out.name).read_text().splitlines() if line.strip()]
    if proc.returncode not in (0, 1) or not records:
        raise RuntimeError(
            f"pytest {module} exited {proc.returncode}: {proc.stdout[-3000:]}{proc.stderr[-2000:]}"
        )
    if proc.returncode == 1:  # some scenarios failed: keep what ran, say which did not
        failed = [line for line in proc.stdout.splitlines() if line.startswith("FAILED")]
        records.append({"section": "errors", "module": module, "failed": failed})
    return records


def _run_section(section: str, s: dict[str, Any], env: dict[str, str], cases: str, home: str) -> list[dict]:
    if section == "calls":
        return _pytest("bench/scenarios.py", env, {"BENCH_CASES": cases}, selector="test_calls")
    if section == "slots":
        extra = {
            "BENCH_CASES": cases,
            "BENCH_SLOT_MINUTES": s["slot_minutes"],
            "BENCH_SLOT_SAMPLES": str(s["slot_samples"]),
        }
        return _pytest("bench/scenarios.py", env, extra, selector="test_slots")
    if section == "parse":
        from bench import parse

        modules = None
        if s["quick"]:
            modules = [] if s["tiny"] else ["airflow_durable.operators.redshift"]
        return parse.run(
            s["samples"], s["parse_tasks"], env, modules=modules, cold=not s["quick"], dags=not s["tiny"]
        )
    if section == "dagtest":
        _migrate(env)
        return _pytest(
            "bench/dagtest.py",
            env,
            {
                "BENCH_CASES": cases if not s["quick"] else cases.split(",")[0],
                "BENCH_DAGTEST_SAMPLES": str(s["samples"]),
            },
        )
    if section == "triggerer":
        from bench import triggerer

        return triggerer.run(s, env)
    raise ValueError(section)


def _migrate(env: dict[str, str]) -> None:
    airflow = Path(sys.executable).with_name("airflow")
    proc = subprocess.run(
        [str(airflow), "db", "migrate"], env=env, capture_output=True, text=True, check=False, timeout=600
    )
    if proc.returncode != 0:
        raise RuntimeError(f"airflow db migrate failed: {proc.stderr[-2000:]}")


if __name__ == "__main__":
    sys.exit(main())
