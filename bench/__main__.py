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
    p.add_argument("--md", default=str(ROOT / "docs" / "benchmarks.md"))
    p.add_argument("--json", default=str(ROOT / "docs" / "benchmarks.json"))
    p.add_argument("--charts", default=str(ROOT / "docs" / "img" / "benchmarks"))
    return p.parse_args(argv)


def main(argv: list[str] | None = None) -> int:
    args = parse_args(sys.argv[1:] if argv is None else argv)
    if args.report_only:
        from bench import report

        document = _merge([json.loads(Path(p).read_text()) for p in args.report_only])
        _attach_baseline(document, args)
        if args.note:
            document["note"] = args.note
        Path(args.json).write_text(json.dumps(document, indent=1, default=str) + "\n")
        report.write(document, Path(args.md), Path(args.charts), json_name=Path(args.json).name)
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
        "command": "python -m bench " + " ".join(sys.argv[1:] if argv is None else argv),
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
            Path(args.json).parent.mkdir(parents=True, exist_ok=True)
            Path(args.json).write_text(json.dumps(partial, indent=1, default=str) + "\n")
    finally:
        shutil.rmtree(home, ignore_errors=True)
    meta["load_after"] = machine.load()
    meta["duration_s"] = time.time() - started
    document = {"meta": meta, "settings": settings, "failures": failures, "records": records}
    _attach_baseline(document, args)
    Path(args.json).parent.mkdir(parents=True, exist_ok=True)
    Path(args.json).write_text(json.dumps(document, indent=1, default=str) + "\n")
    from bench import report

    report.write(document, Path(args.md), Path(args.charts), json_name=Path(args.json).name)
    print(f">> bench: wrote {args.md} and {args.json} in {meta['duration_s']:.0f} s", file=sys.stderr)
    return 1 if failures else 0


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
