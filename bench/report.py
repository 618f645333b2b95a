"""Turn the raw records of a benchmark run into ``docs/benchmarks.md`` and its charts."""

from __future__ import annotations

import statistics
from collections import defaultdict
from pathlib import Path
from typing import Any

#: Job length of the duplicate-job section (emulated minutes) and the virtual times of the retries.
JOB_MINUTES = 10.0

SYSTEM_OF = {
    "databricks_submit_run": "Databricks",
    "databricks_run_now": "Databricks",
    "snowflake_sql_api": "Snowflake",
    "bigquery_insert_job": "BigQuery",
    "redshift_data": "Redshift Data",
    "batch": "AWS Batch",
    "emr_add_steps": "EMR",
    "emr_serverless_start_job": "EMR",
    "emr_container": "EMR",
    "dbt_cloud_run_job": "dbt Cloud",
}

#: system → (USD per job-hour, what it assumes, where the list price comes from); None: no price used.
PRICES: dict[str, tuple[float, str, str] | None] = {
    "Databricks": (
        1.50,
        "a jobs cluster of 10 DBU/h at $0.15/DBU (Jobs Compute list rate, AWS; the cloud VMs are "
        "billed on top)",
        "https://databrickspricing.pages.dev/dbu-pricing-explained",
    ),
    "Snowflake": (
        2.00,
        "an X-Small warehouse, 1 credit/h (Snowflake docs), at $2/credit (Standard edition; list $2-4 by "
        "edition and region)",
        "https://docs.snowflake.com/en/user-guide/what-are-credits.html",
    ),
    "BigQuery": (
        4.00,
        "100 slots of Standard edition at $0.04/slot-hour (pay as you go)",
        "https://www.redresscompliance.com/google-bigquery-pricing-optimisation.html",
    ),
    "Redshift Data": (
        2.88,
        "Redshift Serverless at its 8-RPU base capacity, $0.36/RPU-hour (the low end of the quoted "
        "$0.36-0.50)",
        "https://awsnegotiations.com/redshift-serverless-pricing.html",
    ),
    "AWS Batch": (
        0.2331,
        "one Fargate job of 4 vCPU + 16 GB: $0.04048/vCPU-h + $0.004445/GB-h (Linux/x86, us-east-1)",
        "https://www.vantage.sh/blog/fargate-pricing",
    ),
    "EMR": None,
    "dbt Cloud": None,
}
NO_PRICE = {
    "EMR": "no EMR / EMR Serverless / EMR on EKS list price page was retrievable offline; job-minutes only",
    "dbt Cloud": "dbt Cloud bills seats and models built, not run time: a duplicate run costs its "
    "warehouse's "
    "time (e.g. the Snowflake row's rate)",
}

CASE_ORDER = list(SYSTEM_OF)
FAULTS = {
    "kill-mid-wait": "worker killed mid-poll at minute 5, retried",
    "kill-before-defer": "worker killed after submit, before deferring; retried at minute 5",
    "trigger-error": "trigger fails at minute 5 (status API errors past the provider's retries), retried",
    "kill-after-success": "worker killed after the job succeeded (minute 10), retried at minute 15",
}
LIMIT = "1 state-store read + 1 status call"


# --------------------------------------------------------------------------- helpers
def _med(xs: list[float]) -> float:
    return statistics.median(xs) if xs else float("nan")


def _ratio(ours: list[float], upstream: list[float]) -> tuple[float, float, float]:
    pairs = [o / u for o, u in zip(ours, upstream, strict=False) if u > 0]
    if not pairs:
        return (float("nan"),) * 3  # type: ignore[return-value]
    return statistics.median(pairs), min(pairs), max(pairs)


def _fmt_ratio(r: tuple[float, float, float]) -> str:
    med, lo, hi = r
    if med != med:  # nan
        return "–"
    return f"**{med:.2f}×** ({lo:.2f}–{hi:.2f})" if med > 1.05 else f"{med:.2f}× ({lo:.2f}–{hi:.2f})"


def _ms(xs: list[float]) -> str:
    return f"{_med(xs) * 1000:.0f} ({min(xs) * 1000:.0f}–{max(xs) * 1000:.0f})" if xs else "–"


def _s(xs: list[float]) -> str:
    return f"{_med(xs):.2f} ({min(xs):.2f}–{max(xs):.2f})" if xs else "–"


def _load(rs: list[dict[str, Any]]) -> str:
    """The median 1-minute load average the figures were measured under ("–" for older records)."""
    loads = [r["load"] for r in rs if r.get("load") is not None]
    return f"{_med(loads):.1f}" if loads else "–"


def _sort_key(case: str) -> int:
    return CASE_ORDER.index(case) if case in CASE_ORDER else len(CASE_ORDER)


def _arrow(up: Any, ours: Any) -> str:
    return f"{up} → {ours}" if up != ours else f"{ours}"


# --------------------------------------------------------------------------- the calls section
def _calls(records: list[dict[str, Any]]) -> dict[tuple[str, str, str, str], dict[str, Any]]:
    return {(r["case"], r["path"], r["scenario"], r["side"]): r for r in records if r["section"] == "calls"}


def job_minutes(record: dict[str, Any]) -> tuple[float, int]:
    """Job-minutes of every job the scenario created (each runs ``JOB_MINUTES`` unless the ledger shows it
    cancelled earlier) on the virtual clock: try 1 at minute 0, the retry at ``retry_minute``."""
    starts = [0.0, float(record["retry_minute"])]
    created: dict[str, float] = {}
    cancelled: dict[str, float] = {}
    for i, t in enumerate(record["tries"]):
        at = starts[min(i, 1)]
        for job in t["total"]["created"]:
            created.setdefault(job, at)
        for job in t["total"]["cancelled"]:
            cancelled.setdefault(job, at)
    total = 0.0
    for job, start in created.items():
        end = min(start + JOB_MINUTES, cancelled.get(job, float("inf")))
        total += max(0.0, end - start)
    return total, len(created)


def _happy_table(calls: dict) -> list[str]:
    lines = [
        "| operator | path | API calls | of which status | submits | store reads | store writes | "
        "bytes written | our store operations, in order |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    for (case, path, scenario, side), ours in sorted(
        calls.items(), key=lambda kv: (_sort_key(kv[0][0]), kv[0][1])
    ):
        if scenario != "happy" or side != "ours":
            continue
        up = calls.get((case, path, scenario, "upstream"))
        o, u = ours["tries"][0]["total"], up["tries"][0]["total"] if up else None
        if u is None:
            continue
        lines.append(
            f"| {case} | {path} | {_arrow(u['api'], o['api'])} | {_arrow(u['status'], o['status'])} | "
            f"{_arrow(u['submit'], o['submit'])} | {_arrow(u['store_get'], o['store_get'])} | "
            f"{_arrow(u['store_set'], o['store_set'])} | {_arrow(u['store_bytes'], o['store_bytes'])} | "
            f"{'; '.join(_short(op) for op in o['store_ops'])} |"
        )
    return lines


def _short(op: str) -> str:
    parts = op.split()
    return f"{parts[0]}" + (f" {parts[2]}" if len(parts) > 2 else "")


def _reconnect_table(calls: dict) -> tuple[list[str], list[dict[str, Any]]]:
    lines = [
        f"| operator | path | fault | ours before waiting: store reads / writes / status / other calls | "
        f"distance from the limit ({LIMIT}) | of it, the provider's own pre-wait reads | "
        "ours, whole retry: reads / writes / API calls | upstream retry: submits / API calls |",
        "|---|---|---|---|---|---|---|---|",
    ]
    rows = []
    for (case, path, scenario, side), ours in sorted(
        calls.items(), key=lambda kv: (_sort_key(kv[0][0]), kv[0][1])
    ):
        if side != "ours" or scenario not in ("kill-mid-wait", "kill-before-defer", "trigger-error"):
            continue
        if len(ours["tries"]) < 2:
            continue
        retry = ours["tries"][1]
        b = retry["before_wait"]
        up = calls.get((case, path, scenario, "upstream"))
        up_retry = up["tries"][1]["total"] if up and len(up["tries"]) > 1 else None
        happy_up = calls.get((case, path, "happy", "upstream"))
        provider_reads: Any = "–"
        if path == "deferrable" and happy_up and happy_up["tries"][0]["before_wait"]:
            provider_reads = happy_up["tries"][0]["before_wait"]["status"]
        if b is None:
            before, distance, extra = "no wait reached", "–", {}
        else:
            extra = {
                "reads": b["store_get"] - 1,
                "writes": b["store_set"],
                "status": b["status"] - 1,
                "other": b["other"] + b["submit"],
            }
            before = f"{b['store_get']} / {b['store_set']} / {b['status']} / {b['other'] + b['submit']}"
            distance = ", ".join(f"+{v} {k}" for k, v in extra.items() if v) or "**at the limit**"
        t = retry["total"]
        rows.append({"case": case, "path": path, "fault": scenario, "extra": extra, "state": retry["state"]})
        lines.append(
            f"| {case} | {path} | {scenario} | {before} | {distance} | {provider_reads} | "
            f"{t['store_get']} / {t['store_set']} / {t['api']} | "
            f"{up_retry['submit'] if up_retry else '–'} / {up_retry['api'] if up_retry else '–'} |"
        )
    return lines, rows


def _succeeded_table(calls: dict) -> list[str]:
    lines = [
        "| operator | path | ours, retry: store reads / writes / API calls / submits | "
        "upstream, retry: store reads / writes / API calls / submits | what upstream's rerun costs |",
        "|---|---|---|---|---|",
    ]
    for (case, path, scenario, side), ours in sorted(
        calls.items(), key=lambda kv: (_sort_key(kv[0][0]), kv[0][1])
    ):
        if side != "ours" or scenario != "kill-after-success" or len(ours["tries"]) < 2:
            continue
        up = calls.get((case, path, scenario, "upstream"))
        o = ours["tries"][1]["total"]
        u = up["tries"][1]["total"] if up and len(up["tries"]) > 1 else None
        cost = "–"
        if up:
            minutes, _ = job_minutes(up)
            dup = minutes - JOB_MINUTES
            cost = f"{dup:.0f} job-min{_price(case, dup)}" if dup > 0 else "nothing (it reconnects too)"
        lines.append(
            f"| {case} | {path} | {o['store_get']} / {o['store_set']} / {o['api']} / {o['submit']} | "
            + (f"{u['store_get']} / {u['store_set']} / {u['api']} / {u['submit']}" if u else "–")
            + f" | {cost} |"
        )
    return lines


def _ops_table(calls: dict) -> list[str]:
    """Our store operations per scenario and try (engine-level: the same for every operator; the first
    operator measured is shown, with how many operators differ from it)."""
    lines = [
        "| path | scenario | try 1 | try 2 (the retry) | operators with another sequence |",
        "|---|---|---|---|---|",
    ]
    seen: dict[tuple[str, str], list[tuple[str, ...]]] = defaultdict(list)
    for (_case, path, scenario, side), r in sorted(calls.items(), key=lambda kv: _sort_key(kv[0][0])):
        if side == "ours":
            seen[(path, scenario)].append(
                tuple("; ".join(_short(op) for op in t["total"]["store_ops"]) or "–" for t in r["tries"])
            )
    for (path, scenario), seqs in sorted(seen.items()):
        first = seqs[0]
        lines.append(
            f"| {path} | {scenario} | {first[0]} | {first[1] if len(first) > 1 else '–'} | "
            f"{sum(1 for q in seqs if q != first)} of {len(seqs)} |"
        )
    return lines


#: Why each state-store operation of ours exists (one round trip to the API server each).
STORE_REASONS: list[tuple[str, str, str]] = [
    (
        "`get` (first of a try)",
        "the decision: is there a job of an earlier try to reconnect to, one that already succeeded, or one "
        "of an older clear epoch, or is this a fresh submit",
        "required: nothing may be submitted before it",
    ),
    (
        "`set submitting`",
        "the intent (idempotency token, clear epoch, owner try), written before the submit call: a try "
        "killed between the submit and the id write finds its job by the token",
        "required by the contract",
    ),
    (
        "`set submitted` (try 1)",
        "the job id, written before waiting",
        "required by the contract",
    ),
    (
        "`set submitted` (a retry)",
        "the reconnecting try claims the job (owner try, deadline): only the owner cancels it on "
        "`execution_timeout` or kill, so an orphaned older try cannot cancel what this try waits on",
        "not in the contract's minimum: one write before waiting on a reconnect (the limit table shows it "
        "as +1 writes)",
    ),
    (
        "`get` (after the wait): removed",
        "it checked the trigger's event against the record (deferrable) and re-read the record after a long "
        "sync wait in case a newer try owned the job. Neither can happen on Airflow 3.3: a trigger's event "
        "reaches only the deferral that created it, and every new try (a retry, a clear) gets a new "
        "task-instance id whose store an older try cannot read or write "
        "(`tests/e2e/test_airflow_assumptions.py` checks it against the installed Airflow). The deferral "
        "now carries the record this try wrote to `execute_complete` in its kwargs",
        "gone: 0 reads after the wait (a task deferred by an earlier version of the package still reads)",
    ),
    (
        "`set done`",
        "the completion: a retry after success returns the result (and XComs) from the record without "
        "resubmitting, even once the system has forgotten the job (an expired run or statement handle "
        "would otherwise read as unknown, and be submitted again)",
        "kept: one write per success buys a success that outlives the system's job history",
    ),
]


def _reasons_table() -> list[str]:
    lines = ["| operation | why it exists | status |", "|---|---|---|"]
    lines += [f"| {op} | {why} | {status} |" for op, why, status in STORE_REASONS]
    return lines


def count_summary(records: list[dict[str, Any]]) -> dict[tuple[str, str, str], dict[str, Any]]:
    """Our store operations and API calls per operator, path and scenario (every try summed), and the
    retry's pre-wait reads / writes / status calls."""
    out: dict[tuple[str, str, str], dict[str, Any]] = {}
    for r in records:
        if r["section"] != "calls" or r["side"] != "ours":
            continue
        b = r["tries"][-1]["before_wait"] if len(r["tries"]) > 1 else None
        out[(r["case"], r["path"], r["scenario"])] = {
            "reads": sum(t["total"]["store_get"] for t in r["tries"]),
            "writes": sum(t["total"]["store_set"] for t in r["tries"]),
            "api": sum(t["total"]["api"] for t in r["tries"]),
            "before": None if b is None else (b["store_get"], b["store_set"], b["status"]),
        }
    return out


def _baseline_table(baseline: dict[str, Any], records: list[dict[str, Any]]) -> list[str]:
    before = {
        (r["case"], r["path"], r["scenario"]): {
            k: tuple(v) if isinstance(v, list) else v
            for k, v in r.items()
            if k not in ("case", "path", "scenario")
        }
        for r in baseline["summary"]
    }
    after = count_summary(records)
    lines = [
        f"Ours, {baseline['label']} → this run (every try of the scenario summed; the retry's pre-wait "
        "counts where there is a retry). Rows where nothing changed are left out.",
        "",
        "| operator | path | scenario | store reads | store writes | API calls | retry before waiting: "
        "reads / writes / status |",
        "|---|---|---|---|---|---|---|",
    ]
    same = 0
    for key in sorted(after, key=lambda k: (_sort_key(k[0]), k[1], k[2])):
        a, b = before.get(key), after[key]
        if a is None:
            continue
        if a == b:
            same += 1
            continue

        def bw(x: Any) -> str:
            return "–" if x is None else " / ".join(str(v) for v in x)

        lines.append(
            f"| {key[0]} | {key[1]} | {key[2]} | {_arrow(a['reads'], b['reads'])} | "
            f"{_arrow(a['writes'], b['writes'])} | {_arrow(a['api'], b['api'])} | "
            f"{_arrow(bw(a['before']), bw(b['before']))} |"
        )
    lines += ["", f"{same} of {len(after)} operator × path × scenario rows unchanged."]
    return lines


def _price(case: str, minutes: float) -> str:
    price = PRICES.get(SYSTEM_OF.get(case, ""))
    if not price or minutes <= 0:
        return ""
    return f" = ${price[0] * minutes / 60:.2f}"


def _duplicates_table(calls: dict) -> tuple[list[str], list[tuple[str, float, float]]]:
    lines = [
        "| operator | path | fault | jobs: upstream → ours | job-minutes: upstream → ours | "
        "duplicate job-minutes: upstream → ours | duplicate cost: upstream → ours |",
        "|---|---|---|---|---|---|---|",
    ]
    chart: list[tuple[str, float, float]] = []
    for (case, path, scenario, side), ours in sorted(
        calls.items(), key=lambda kv: (_sort_key(kv[0][0]), kv[0][1])
    ):
        if side != "ours" or scenario == "happy":
            continue
        up = calls.get((case, path, scenario, "upstream"))
        if up is None:
            continue
        om, oj = job_minutes(ours)
        um, uj = job_minutes(up)
        od, ud = om - JOB_MINUTES, um - JOB_MINUTES
        price = PRICES.get(SYSTEM_OF.get(case, ""))
        cost = f"${price[0] * ud / 60:.2f} → ${price[0] * od / 60:.2f}" if price else "n/a"
        lines.append(
            f"| {case} | {path} | {scenario} | {uj} → {oj} | {um:.0f} → {om:.0f} | "
            f"{ud:.0f} → {od:.0f} | {cost} |"
        )
        if scenario in ("kill-mid-wait", "kill-before-defer"):
            chart.append((f"{case} {path}", ud, od))
    return lines, chart


# --------------------------------------------------------------------------- other sections
def _slots(records: list[dict[str, Any]]) -> tuple[list[str], dict[str, dict[int, float]]]:
    data: dict[tuple[str, int, str], list[dict]] = defaultdict(list)
    for r in records:
        if r["section"] == "slots":
            data[(r["case"], r["minutes"], f"{r['side']} {r['path']}")].append(r)
    variants = ["ours deferrable", "ours sync", "upstream deferrable"]
    minutes = sorted({k[1] for k in data})
    cases = sorted({k[0] for k in data}, key=_sort_key)
    per_variant: dict[str, dict[int, list[float]]] = {v: defaultdict(list) for v in variants}
    lines = [
        "| operator | job | "
        + " | ".join(f"{v}: slot s (worker status reads)" for v in variants)
        + " | load |",
        "|---|---|" + "---|" * (len(variants) + 1),
    ]
    for case in cases:
        for m in minutes:
            cells = []
            for v in variants:
                rs = data.get((case, m, v), [])
                ok = [r for r in rs if r["state"] == "success"]
                if not ok:
                    cells.append("failed" if rs else "–")
                    continue
                # The sync worker holds its slot while the job runs; a deferred one only around the wait.
                slot = [r["worker_seconds"] + (m * 60 if r["deferrals"] == 0 else 0.0) for r in ok]
                per_variant[v][m].append(_med(slot))
                cells.append(f"{_med(slot):.1f} ({_med([r['worker_status'] for r in ok]):.0f})")
            every = [r for v in variants for r in data.get((case, m, v), [])]
            lines.append(f"| {case} | {m} min | " + " | ".join(cells) + f" | {_load(every)} |")
    summary = {v: {m: _med(xs) for m, xs in by_m.items()} for v, by_m in per_variant.items()}
    return lines, summary


def _parse(records: list[dict[str, Any]]) -> tuple[list[str], list[tuple[str, tuple[float, float, float]]]]:
    lines = [
        "| what | ours: ms, median (min–max) | upstream: ms | ours / upstream | modules: ours / upstream | "
        "load |",
        "|---|---|---|---|---|---|",
    ]
    chart = []
    for r in records:
        if r["section"] != "parse":
            continue
        o = [x["seconds"] for x in r["ours"]]
        u = [x["seconds"] for x in r["upstream"]]
        ratio = _ratio(o, u)
        label = {
            "import": f"`import {r['name']}` vs `import {r['upstream_name']}`",
            "package": f"`import {r['name']}` alone (vs `import {r['upstream_name']}`, not a ratio target)",
            "dag-cold": f"DAG file, {r['name']} vs {r['upstream_name']}, cold (imports included)",
            "dag-warm": f"DAG file, {r['name']} vs {r['upstream_name']}, modules pre-imported",
        }[r["kind"]]
        shown = _fmt_ratio(ratio) if r["kind"] != "package" else "–"
        lines.append(
            f"| {label} | {_ms(o)} | {_ms(u)} | {shown} | "
            f"{r['ours'][0]['modules']} / {r['upstream'][0]['modules']} | "
            f"{_load(r['ours'] + r['upstream'])} |"
        )
        if r["kind"] != "package":
            chart.append(
                (
                    r["name"].replace("airflow_durable.operators.", "")
                    if r["kind"] == "import"
                    else r["kind"],
                    ratio,
                )
            )
    return lines, chart


def _dagtest(records: list[dict[str, Any]]) -> tuple[list[str], list[tuple[str, tuple[float, float, float]]]]:
    data: dict[tuple[str, str], dict[str, list[float]]] = defaultdict(lambda: defaultdict(list))
    states: dict[tuple[str, str], set[str]] = defaultdict(set)
    raw: dict[tuple[str, str], list[dict[str, Any]]] = defaultdict(list)
    for r in records:
        if r["section"] == "dagtest" and not r.get("warmup"):
            data[(r["case"], r["path"])][r["side"]].append(r["seconds"])
            raw[(r["case"], r["path"])].append(r)
            states[(r["case"], r["path"])].add(r["state"])
    lines = [
        "| operator | path | ours: s, median (min–max) | upstream: s | ours / upstream (pairs) | "
        "final states | load |",
        "|---|---|---|---|---|---|---|",
    ]
    chart = []
    for (case, path), sides in sorted(data.items(), key=lambda kv: (_sort_key(kv[0][0]), kv[0][1])):
        ratio = _ratio(sides["ours"], sides["upstream"])
        chart.append((f"{case} {path}", ratio))
        lines.append(
            f"| {case} | {path} | {_s(sides['ours'])} | {_s(sides['upstream'])} | {_fmt_ratio(ratio)} | "
            f"{', '.join(sorted(states[(case, path)]))} | {_load(raw[(case, path)])} |"
        )
    return lines, chart


def _worst(parse_chart: list, dagtest_chart: list) -> tuple[str, tuple[float, float, float]] | None:
    items = [(f"DAG parse: {n}", r) for n, r in parse_chart] + [
        (f"dag.test(): {n}", r) for n, r in dagtest_chart
    ]
    items = [i for i in items if i[1][0] == i[1][0]]
    return max(items, key=lambda i: i[1][0]) if items else None


# --------------------------------------------------------------------------- the issue's targets
def _targets(
    calls: dict,
    reconnect_rows: list[dict[str, Any]],
    parse_chart: list,
    dagtest_chart: list,
    slot_summary: dict[str, dict[int, float]],
) -> list[str]:
    """Each target of the issue, checked against this run's figures."""
    lines = ["| target | this run |", "|---|---|"]
    if reconnect_rows:
        at = [r for r in reconnect_rows if r["extra"] and not any(r["extra"].values())]
        off: dict[str, list[str]] = defaultdict(list)
        for r in reconnect_rows:
            if r["extra"] and any(r["extra"].values()):
                what = ", ".join(f"+{v} {k}" for k, v in r["extra"].items() if v)
                off[what].append(f"{r['case']} {r['path']}")
        detail = "; ".join(f"{what}: {', '.join(sorted(set(who)))}" for what, who in sorted(off.items()))
        lines.append(
            f"| reconnect at {LIMIT} before waiting | {len(at)} of {len(reconnect_rows)} operator × path × "
            f"fault at the limit{'; ' + detail if detail else ''} |"
        )
        happy = [
            (r["tries"][0]["total"]["store_get"], r["tries"][0]["total"]["store_set"])
            for (_c, _p, scen, side), r in calls.items()
            if scen == "happy" and side == "ours"
        ]
        if happy:
            reads = sorted({h[0] for h in happy})
            writes = sorted({h[1] for h in happy})
            lines.append(
                "| state-store round trips per task, each with its reason | happy path: "
                f"{'/'.join(map(str, reads))} read{'' if reads == [1] else 's'} + "
                f"{'/'.join(map(str, writes))} writes per task (the contract's minimum: the decision's read "
                "and 2 writes, the intent and the id; the third write, `done`, keeps a success answerable "
                "after the system forgets the job; see *why each store operation exists*) |"
            )
    dups = [
        (case, path, scen, job_minutes(r)[0] - JOB_MINUTES)
        for (case, path, scen, side), r in calls.items()
        if side == "ours" and scen != "happy"
    ]
    if dups:
        paid = [d for d in dups if d[3] > 0]
        lines.append(
            "| no duplicate job-minutes for ours under the fault matrix | "
            + (
                f"0 duplicate job-minutes in all {len(dups)} rows"
                if not paid
                else f"{len(paid)} of {len(dups)} rows pay: "
                + ", ".join(f"{c} {p} {s} {m:.0f} min" for c, p, s, m in paid)
            )
            + " |"
        )
    deferred = slot_summary.get("ours deferrable") or {}
    if deferred:
        lines.append(
            "| ours deferred: worker-slot time near constant as the job grows | median over operators: "
            + ", ".join(f"{m} min → {v:.1f} s" for m, v in sorted(deferred.items()))
            + " |"
        )
    for name, chart in (
        ("DAG-parse cost ≤ 1.05×", parse_chart),
        ("`dag.test()` happy path ≤ 1.05×", dagtest_chart),
    ):
        if not chart:
            continue
        over = [(n, r) for n, r in chart if r[0] == r[0] and r[0] > 1.05]
        noisy = [(n, r) for n, r in over if r[1] <= 1.05]
        lines.append(
            f"| {name} | {len(chart) - len(over)} of {len(chart)} at or under 1.05× (median of pairs)"
            + (
                "; over: "
                + ", ".join(f"{n} {r[0]:.2f}× ({r[1]:.2f}–{r[2]:.2f})" for n, r in over)
                + f" — {len(noisy)} of them with pairs at or under 1.05× (noise on this machine cannot be "
                "told from cost)"
                if over
                else ""
            )
            + " |"
        )
    return lines


# --------------------------------------------------------------------------- charts
def _charts(
    directory: Path,
    parse_chart: list,
    dagtest_chart: list,
    slots: dict[str, dict[int, float]],
    dup_chart: list,
) -> dict[str, str]:
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return {}
    directory.mkdir(parents=True, exist_ok=True)
    made: dict[str, str] = {}
    plt.rcParams["svg.hashsalt"] = "airflow-durable-bench"  # stable ids: diffs show only real changes

    def ratio_bars(name: str, items: list, title: str) -> None:
        if not items:
            return
        fig, ax = plt.subplots(figsize=(8, 0.35 * len(items) + 1.2))
        labels = [i[0] for i in items]
        med = [i[1][0] for i in items]
        low = [m - i[1][1] for m, i in zip(med, items, strict=True)]
        high = [i[1][2] - m for m, i in zip(med, items, strict=True)]
        err = [low, high]
        ax.barh(labels, med, xerr=err, color="#4a7bb7", capsize=3)
        ax.axvline(1.0, color="black", lw=0.8)
        ax.axvline(1.05, color="#c0392b", lw=0.8, ls="--", label="target 1.05×")
        ax.set_xlabel("ours / upstream (median of interleaved pairs, min–max)")
        ax.set_title(title)
        ax.invert_yaxis()
        ax.legend(loc="lower right")
        fig.tight_layout()
        fig.savefig(directory / f"{name}.svg", metadata={"Date": None})
        plt.close(fig)
        made[name] = f"{name}.svg"

    ratio_bars("parse", parse_chart, "DAG-parse cost")
    ratio_bars("dagtest", dagtest_chart, "dag.test() wall time, one task")
    if slots and any(slots.values()):
        fig, ax = plt.subplots(figsize=(7, 4))
        for variant, by_m in slots.items():
            xs = sorted(by_m)
            if xs:
                ax.plot(xs, [by_m[x] for x in xs], marker="o", label=variant)
        ax.set_xscale("log")
        ax.set_yscale("log")
        ax.set_xlabel("emulated job length (minutes)")
        ax.set_ylabel("worker-slot seconds per task (median over operators)")
        ax.set_title("Worker slot held per task")
        ax.legend()
        fig.tight_layout()
        fig.savefig(directory / "slots.svg", metadata={"Date": None})
        plt.close(fig)
        made["slots"] = "slots.svg"
    if dup_chart:
        fig, ax = plt.subplots(figsize=(8, 0.35 * len(dup_chart) + 1.2))
        labels = [d[0] for d in dup_chart]
        ax.barh(labels, [d[1] for d in dup_chart], color="#c0392b", label="upstream")
        ax.barh(labels, [d[2] for d in dup_chart], color="#27ae60", label="ours")
        ax.set_xlabel("duplicate job-minutes (10-minute job, worker killed, retried)")
        ax.invert_yaxis()
        ax.legend(loc="lower right")
        fig.tight_layout()
        fig.savefig(directory / "duplicates.svg", metadata={"Date": None})
        plt.close(fig)
        made["duplicates"] = "duplicates.svg"
    return made


# --------------------------------------------------------------------------- the document
#: A 1-minute load average above this, on 2 cores, means other work shared the machine.
BUSY_LOAD = 4.0


def _timed_loads(records: list[dict[str, Any]]) -> list[float]:
    """The 1-minute load averages the timed figures (not the storm) were measured under."""
    loads = [r["load"] for r in records if r.get("section") in ("slots", "parse", "dagtest") and "load" in r]
    loads += [row["load"][0] for r in records if r.get("section") == "triggerer" for row in r.get("rows", [])]
    return [float(x) for x in loads if isinstance(x, (int, float))]


def _storm_loads(records: list[dict[str, Any]]) -> list[float]:
    return [
        float(row["load_max"])
        for r in records
        if r.get("section") == "triggerer"
        for row in r.get("storm", [])
        if isinstance(row.get("load_max"), (int, float))
    ]


def _quiet_or_not(meta: dict[str, Any], records: list[dict[str, Any]]) -> str:
    """Whether the timed figures ran on a quiet machine, from the loads recorded with them (and the load
    when the run started): never claimed without them."""
    loads = _timed_loads(records)
    before = (meta.get("load_before") or [None])[0]
    exact = "Counts (API calls, store operations, jobs) do not depend on load and are exact."
    storm = _storm_loads(records)
    storm_note = (
        f" The reconnect storm's rows are not timed figures of this kind: their *load max* "
        f"(up to {max(storm):.1f}) includes the storm's own task processes, started by the dozen at once."
        if storm
        else ""
    )
    if not loads:
        return f"    No timed figure in this run recorded its load. {exact}{storm_note}"
    span = f"{min(loads):.1f}–{max(loads):.1f}"
    if max(loads) <= BUSY_LOAD and (before is None or before <= BUSY_LOAD):
        return (
            f"    The machine was quiet: the timed figures ran under a 1-minute load average of {span} "
            f"(column *load*; the benchmark's own processes included), ours and upstream interleaved "
            f"(A B, B A, ...). {exact}{storm_note}"
        )
    return (
        f"    **The machine was not quiet**: the timed figures ran under a 1-minute load average of {span} "
        f"on {meta.get('cores', '?')} cores (column *load*), so timings are noisy. The run was niced, ours "
        f"and upstream interleaved (A B, B A, ...) so that a busy neighbour slows both alike; compare the "
        f"ratios, not the absolute times. {exact}{storm_note}"
    )


def _provenance(meta: dict[str, Any], settings: dict[str, Any]) -> str:
    """The report's first statement: the one run (or the several merged runs) it comes from."""
    commits = {c for s, c in meta.get("section_commits", {}).items() if s != "errors"}
    dirty = " (with uncommitted changes)" if meta.get("dirty") else ""
    if len(commits) > 1:
        by = "; ".join(f"{s} at `{c}`" for s, c in meta["section_commits"].items() if s != "errors")
        return (
            f"**Not one run: this page merges {len(commits)} runs on different commits** ({by}). "
            "`make bench` replaces it with one run."
        )
    minutes = meta.get("duration_s", 0) / 60
    what = "one run of `make bench`" if settings.get("full_run") else "one partial run of `python -m bench`"
    return (
        f"**Measured in {what} at commit `{meta.get('commit')}`{dirty}**, {meta.get('date')}, "
        f"{minutes:.0f} min."
    )


def write(document: dict[str, Any], md: Path, charts_dir: Path, json_name: str) -> None:
    meta, settings, records = document["meta"], document["settings"], document["records"]
    calls = _calls(records)
    happy = _happy_table(calls)
    reconnect, reconnect_rows = _reconnect_table(calls)
    succeeded = _succeeded_table(calls)
    duplicates, dup_chart = _duplicates_table(calls)
    slots, slot_summary = _slots(records)
    parse_lines, parse_chart = _parse(records)
    dagtest_lines, dagtest_chart = _dagtest(records)
    try:
        rel = charts_dir.resolve().relative_to(md.parent.resolve()).as_posix()
    except ValueError:
        rel = charts_dir.as_posix()
    made = _charts(charts_dir, parse_chart, dagtest_chart, slot_summary, dup_chart)

    v = meta["versions"]
    out: list[str] = [
        "# Benchmarks",
        "",
        "What durability costs when nothing fails, and what it saves when something does: every durable "
        "operator side by side with the provider operator it wraps, in the same run, against the offline "
        "emulators. Generated by `make bench` (`python -m bench`); do not edit by hand. Raw results: "
        f"[`{json_name}`]({json_name}).",
        "",
        _provenance(meta, settings),
        "",
        '!!! note "Machine"',
        f"    {meta['date']}, {meta['cpu']}, {meta['cores']} cores, {meta['memory_gib']} GiB, {meta['os']}, "
        f"Python {meta['python']}. Airflow {v.get('apache-airflow')} "
        f"(task SDK {v.get('apache-airflow-task-sdk')}), "
        f"providers: databricks {v.get('apache-airflow-providers-databricks')}, snowflake "
        f"{v.get('apache-airflow-providers-snowflake')}, google "
        f"{v.get('apache-airflow-providers-google')}, amazon "
        f"{v.get('apache-airflow-providers-amazon')}, dbt-cloud "
        f"{v.get('apache-airflow-providers-dbt-cloud')}; "
        f"airflow-durable {v.get('airflow-durable')} at `{meta['commit']}`"
        f"{' (uncommitted changes)' if meta['dirty'] else ''}.",
        _quiet_or_not(meta, records),
        "    Load average (1, 5, 15 min) "
        f"{meta['load_before']} before, "
        f"{meta.get('load_after')} after"
        + (
            f"; the run took {meta.get('duration_s', 0):.0f} s."
            if len(set(meta.get("section_commits", {}).values())) <= 1
            else "."
        )
        + " Timings are medians "
        "of interleaved pairs (ours, upstream, upstream, ours, ...) and their ratios; counts are exact.",
        f"    Settings: `{settings['command'].strip()}` — sections {', '.join(settings['sections'])}; "
        "operators "
        f"{settings['cases']}; {settings['samples']} timed pairs per comparison.",
        "",
    ]
    if document.get("note"):
        out += ['!!! warning "About this run"', "", f"    {document['note']}", ""]
    worst = _worst(parse_chart, dagtest_chart)
    if worst:
        out += [
            f"**Worst time ratio in this run: {worst[1][0]:.2f}× ({worst[1][1]:.2f}–{worst[1][2]:.2f}), "
            f"{worst[0]}.** Target ≤ 1.05× everywhere.",
            "",
        ]
    targets = _targets(calls, reconnect_rows, parse_chart, dagtest_chart, slot_summary)
    if targets[2:]:
        out += ["## The issue's targets against this run", "", *targets, ""]
    if document.get("failures"):
        out += ['!!! warning "Sections that could not run"', ""]
        out += [f"    * {f}" for f in document["failures"]]
        out.append("")
    errors = [r for r in records if r["section"] == "errors"]
    if errors:
        out += ['!!! warning "Scenarios that failed"', ""]
        out += [f"    * `{line}`" for r in errors for line in r["failed"]]
        out.append("")

    if calls:
        out += [
            "## API calls and state-store operations per task",
            "",
            "Counted at the boundaries, never assumed: the task's `task_state_store` `get`/`set` "
            "calls, every "
            "request that reached the emulator (status calls = the operator's status endpoints; "
            "submits = the "
            "ledger's submit operations), in-process through the conformance harness (`tests/harness.py`), "
            "with the provider's own hooks and triggers. `a → b` is upstream → ours (one number: the same).",
            "",
            "### Happy path (one try, the job succeeds)",
            "",
            *happy,
            "",
            "Each store operation is one round trip to the API server on a real deployment (`set submitting` "
            "is the intent written before the submit call, `set submitted` the job id written before "
            "waiting, "
            "`set done` the completion; the one read is the decision).",
            "",
            "Our state-store operations, per path and scenario (`get` = a read of the record, "
            "`set <state>` = "
            "a write of it):",
            "",
            *_ops_table(calls),
            "",
            "Why each of our store operations exists (the contract needs the intent and the job id written "
            "before the external call and before waiting; every other read or write must say why):",
            "",
            *_reasons_table(),
            "",
            *(
                [
                    f"### Engine change: {document['baseline']['label']} → this run",
                    "",
                    *_baseline_table(document["baseline"], records),
                    "",
                ]
                if document.get("baseline")
                else []
            ),
            "### A retry that reconnects to a running job",
            "",
            f'The physical limit is {LIMIT} before waiting. "Before waiting" ends at `TaskDeferred` '
            "(deferrable) or at the end of the `resumable_job.resume_decision` span (sync: the provider's "
            "poll loop starts next). The provider's own pre-wait reads are what the provider operator itself "
            "reads between submitting and deferring on a fresh run (upstream happy path); a reconnect that "
            "goes through the provider's deferral path pays them again.",
            "",
            *reconnect,
            "",
            "What is left above the limit, and why: `+1 writes` is the reconnecting try's claim of the job "
            "(see *why each store operation exists*); a deferrable reconnect's extra status call is the "
            "provider's own check before deferring (the column beside it), which the provider's trigger "
            "path needs; Snowflake reads each statement handle of a multi-statement job once (two handles "
            "here); `+1 other`: Batch's retry looks its job up by token, because the provider reads the "
            "job's status inside its submit, where the kill landed (the id was not stored yet); EMR steps "
            "read every step's state with one `ListSteps`, which this count files under other calls. The "
            "sync `kill-mid-wait` rows of the AWS systems vary by one status call from run to "
            "run: the kill is an exception raised inside the in-process worker, and where it lands decides "
            "whether the retry's first status read is sent once or twice.",
            "",
            "### A retry that finds the job already succeeded",
            "",
            f"Fault: {FAULTS['kill-after-success']}. Ours returns the result and XComs from the record; "
            "upstream runs the job again unless its own sync path reconnects.",
            "",
            *succeeded,
            "",
            "## Duplicate job-minutes under the fault matrix",
            "",
            f"A {JOB_MINUTES:.0f}-minute job on a virtual clock: try 1 submits at minute 0; the fault hits; "
            "the retry starts at minute 5 (Airflow's default `task_instance_heartbeat_timeout` is 300 s) or "
            "15 (after success). Jobs and cancellations come from the emulator's ledger; each job runs "
            f"{JOB_MINUTES:.0f} minutes unless cancelled (an untracked job is never cancelled). Duplicate = "
            f"all job-minutes − the {JOB_MINUTES:.0f} the task needed.",
            "",
            *[f"* `{k}`: {v}" for k, v in FAULTS.items()],
            "",
            *duplicates,
            "",
            "List prices used (USD per job-hour):",
            "",
        ]
        for system, price in PRICES.items():
            out.append(
                f"* {system}: ${price[0]:.2f}/h — {price[1]}; source: <{price[2]}>"
                if price
                else f"* {system}: {NO_PRICE[system]}"
            )
        out.append("")
        if "duplicates" in made:
            out += [f"![duplicate job-minutes]({rel}/{made['duplicates']})", ""]

    if slots[2:]:
        out += [
            "## Worker-slot seconds",
            "",
            "One successful try per job length (a status read every 30 virtual seconds): seconds the task "
            "holds a worker slot. Measured: the worker's own wall time in this process (everything except "
            "the trigger). A sync worker also holds its slot for the whole job, so the job's length is added "
            "when the try did not defer (the column's status-read count shows the worker polled it); a "
            "deferred task holds none while the triggerer waits.",
            "",
            *slots,
            "",
        ]
        if "slots" in made:
            out += [f"![worker-slot seconds]({rel}/{made['slots']})", ""]

    if parse_lines[2:]:
        out += [
            "## DAG-parse cost",
            "",
            "Fresh interpreter per sample, the time measured inside it around the import (or the DAG file's "
            "execution). The DAG files cycle through the ten operators. Target: ≤ 1.05×.",
            "",
            *parse_lines,
            "",
        ]
        if "parse" in made:
            out += [f"![DAG-parse ratios]({rel}/{made['parse']})", ""]

    if dagtest_lines[2:]:
        out += [
            "## Happy path end to end: `dag.test()`",
            "",
            "One task per DAG, against the emulator, in one process per run of the section (a warm-up run of "
            "each DAG first). Wall time of `dag.test()`. Target: ≤ 1.05×.",
            "",
            *dagtest_lines,
            "",
        ]
        if "dagtest" in made:
            out += [f"![dag.test ratios]({rel}/{made['dagtest']})", ""]

    trig = [r for r in records if r["section"] == "triggerer"]
    out += ["## Scale on one triggerer", ""]
    out += _triggerer(trig)
    md.parent.mkdir(parents=True, exist_ok=True)
    md.write_text("\n".join(out).rstrip() + "\n")


def _num(x: Any, fmt: str = ".1f") -> str:
    return "–" if x is None else format(x, fmt)


def _triggerer(records: list[dict[str, Any]]) -> list[str]:
    ran = [r for r in records if r.get("ran")]
    if not ran:
        reason = (
            records[0]["reason"] if records else "not part of this run (`make bench-quick` leaves it out)"
        )
        return [f"Not measured in this run: {reason}.", ""]
    r = ran[0]
    lines: list[str] = []
    if r.get("rows"):
        lines += [
            f"Mode: {r['mode']}. `DatabricksSubmitRunOperator` (upstream: it defers to the provider's "
            "`DatabricksExecutionTrigger`) vs `DurableDatabricksSubmitRunOperator` (ours: the same trigger "
            "inside `DurableOwnedTrigger`). Per size and operator a fresh SQLite metadata DB gets the N "
            "deferred task instances (N/10 runs of a 10-task DAG: the triggerer deserializes a task's whole "
            "DAG for every trigger it loads, so one 1,000-task DAG would measure only that) and trigger "
            "rows exactly as a worker's `defer()` and the execution API "
            "write them (the operators' own `execute()` submits each run to the emulator; "
            "`bench/triggerer_setup.py`), then one `airflow triggerer --skip-serve-logs` process runs them "
            "against the Databricks emulator (in the benchmark's process, outside the triggerer's tree). "
            "psutil samples the triggerer's process tree (the triggerer and its trigger-runner subprocess) "
            "every 0.5 s. Phases: start → every trigger has polled its run (*to running*, includes "
            f"Airflow's start-up); {r['window']:.0f} s of waiting with every run RUNNING, polled every "
            f"{r['poll']:.0f} s (*steady*); every run turns `TERMINATED:SUCCESS` → no task instance is "
            "`deferred` any more (*to fired*: each trigger fired and its event reached the task instance). "
            "Load = the 1-minute load average when the row finished.",
            "",
            "| deferred tasks | operator | trigger | CPU s: to running / steady / to fired / total | "
            "peak RSS MiB | s to running | s to fired | API calls | store rows / writes / bytes per task | "
            "trigger row bytes per task | still deferred | load |",
            "|---|---|---|---|---|---|---|---|---|---|---|---|",
        ]
        for row in r["rows"]:
            if "trigger" not in row:  # this size could not run: its error is listed below the table
                lines.append(f"| {row['tasks']} | {row['side']} | could not run | " + "– | " * 9)
                continue
            lines.append(
                f"| {row['tasks']} | {row['side']} | {row['trigger']} | "
                f"{_num(row['cpu_s_to_running'])} / {_num(row['cpu_s_window'])} / "
                f"{_num(row['cpu_s_to_fired'])} / {_num(row['cpu_s_total'])} | {row['rss_mib']:.0f} | "
                f"{_num(row['s_to_running'])} | {_num(row['s_to_fired'])} | {row['api_calls']} | "
                f"{row['store_rows_per_task']:.0f} / {row['store_writes_per_task']:.0f} / "
                f"{row['store_bytes_per_task']:.0f} | {row['trigger_row_bytes_per_task']:.0f} | "
                f"{row['still_deferred']} | {row['load'][0]:.1f} |"
            )
        errors = [row for row in r["rows"] if row.get("error")]
        lines.append("")
        for row in errors:
            lines += [f"* {row['tasks']} {row['side']}: {row['error'][:400]}", ""]
        lines += [
            "The store writes are the worker's, before it defers (the intent and the job id); the triggerer "
            "itself writes no state-store row (the wrapper reads the task's state only when the trigger is "
            "cancelled). The trigger row is what the triggerer decrypts and inflates per trigger: ours "
            "carries the provider trigger's kwargs plus the task's identity.",
            "",
        ]
    if r.get("storm"):
        real = any("api_submits" in row or "error" in row for row in r["storm"])
        lines += _storm_real(r) if real else _storm_in_process(r)
    return lines


def _storm_in_process(r: dict[str, Any]) -> list[str]:
    """The storm of the in-process harness (``--storm-mode in-process``, and every record before it)."""
    lines = [
        f"Reconnect storm ({r.get('storm_mode', 'in-process')}): N deferred tasks, every try died at once, "
        "all retried (try 2).",
        "",
        "| tasks | operator | API calls | submissions | store reads / writes per task | "
        "time until all deferred again s |",
        "|---|---|---|---|---|---|",
    ]
    for row in r["storm"]:
        lines.append(
            f"| {row['tasks']} | {row['side']} | {row['api_calls']} | {row['submissions']} | "
            f"{row['store_gets_per_task']:.1f} / {row['store_sets_per_task']:.1f} | "
            f"{row['seconds']:.2f} |"
        )
    lines += [
        "",
        "The storm's retries run one after another in this process (a real deployment runs them on "
        "parallel workers, each in its own task process), so the time is the sum of the retries' own "
        "work, not the wall time a deployment would see; the API calls and store operations are exact.",
        "",
    ]
    return lines


def _storm_real(r: dict[str, Any]) -> list[str]:
    """The storm on a real deployment per side (``--storm-mode real``, ``bench/storm.py``)."""
    lines = [
        f"Reconnect storm ({r.get('storm_mode', 'real deployment')}): one DAG of N deferrable "
        "Databricks submit-run tasks per operator, each side on its own fresh deployment (api-server, "
        "scheduler, dag-processor, triggerer, the LocalExecutor running every try in its own task process), "
        "against the Databricks emulator, which keeps every job `RUNNING`. Once all N are `deferred` "
        "(try 1), the storm starts (*t* = 0): the Databricks API fails the triggerer's status reads "
        "(HTTP 500), so every `DatabricksExecutionTrigger` fails after its hook's 3 attempts; Airflow sends "
        "each task instance to a worker only to fail that try, and `retries=1` sends it `up_for_retry`. "
        "The outage heals when no task instance is `deferred` any more (every try 1 died); the scheduler "
        "then runs every retry (try 2) on the executor. The storm ends when all N are `deferred` again in "
        "try 2. Only the triggerer's client is failed, not the workers' calls: the retries see the same "
        "healthy API whenever the outage heals, so no retry fails at random on the heal's timing.",
        "",
        "| tasks | operator | s: every try 1 died / all deferred again | s one retry ran: mean / max | "
        "deployment CPU s: try 1 / storm | "
        "API calls: submit / status "
        "(workers) / status (triggerer, failed by the outage) / other | jobs submitted | state-store rows / "
        "rows written in the storm | the retries' decisions | jobs left running that no task tracks | "
        "deferred again / failed | load max |",
        "|---|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for row in r["storm"]:
        if row.get("error") and "seconds" not in row:
            lines.append(f"| {row['tasks']} | {row['side']} | could not run | " + "– | " * 9)
            continue
        decisions = ", ".join(f"{k} {v}" for k, v in sorted(row.get("decisions_try2", {}).items())) or "–"
        side = f"{row['side']}, {row['run']}" if row.get("run") else row["side"]
        lines.append(
            f"| {row['tasks']} | {side} | {row['s_outage']:.0f} / {row['seconds']:.0f} | "
            f"{_num(row.get('s_retry_run_mean'))} / {_num(row.get('s_retry_run_max'))} | "
            f"{_num(row.get('cpu_s_try1'), '.0f')} / {_num(row.get('cpu_s'), '.0f')} | "
            f"{row['api_submits']} / {row['api_status_workers']} / {row['api_status_triggerer']} "
            f"({row['api_faulted']}) / {row['api_other']} | {row['submissions']} | "
            f"{row['store_rows']} / {row['store_rows_written_in_storm']} | {decisions} | "
            f"{row['jobs_running_untracked']} | {row['deferred_try2']} / {row['failed']} | "
            f"{_num(row.get('load_max'))} |"
        )
    lines.append("")
    for row in r["storm"]:
        if row.get("error"):
            lines += [f"* {row['tasks']} {row['side']}: {row['error'][:600]}", ""]
    done = [row for row in r["storm"] if "seconds" in row]
    if done:
        totals = " / ".join(
            f"{row['side']}{', ' + row['run'] if row.get('run') else ''} {row['s_side_total']:.0f}"
            for row in done
        )
        lines += [
            "Times are wall seconds from the outage's start, on the shared machine (the load column); "
            f"each side's whole run took {totals} s (deployment start and try 1 included). "
            "Each task instance runs two task processes in the storm (the failed try's `__fail__` run, "
            "then the retry), so much of the time is the executor starting 2N task processes on its "
            "slots, whichever the operator; what differs is what "
            "each retry does: upstream submits a new job (and leaves the old one running, tracked by no task "
            "instance), ours reads its record and reconnects to the job it already has. API calls are those "
            "the emulator received from the outage's start to the end of the storm. State-store rows are "
            "the DAG run's `task_state_store` rows; *written in the storm* counts those whose `updated_at` "
            "falls in the storm. *Decisions* are the durable engine's, read from the retries' task logs. "
            "*One retry ran*: from its task process's start (`start_date`) to its deferral (its trigger "
            "row's `created_date`): the retry's own work, the rest of the storm is waiting for a slot. "
            "*Deployment CPU s*: user + system seconds of every process of the deployment (components, task "
            "processes, PostgreSQL; not the emulator) from the DAG run's start to all N deferred (*try 1*) "
            "and over the storm. The "
            "triggerer's status reads include, besides the outage's failed ones, the polls of the retries' "
            f"triggers once they deferred again (every {done[0].get('trigger_poll_s', '?')} s).",
            "",
        ]
    return lines
