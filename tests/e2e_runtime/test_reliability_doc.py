"""Fast checks of the reliability report (no deployment): the committed page is what the committed
results render to, the committed durable cells keep the promise, and the CI group selection covers
every system. Runs in ``make test``; the matrix itself is ``make runtime-tier`` / ``make reliability``."""

from __future__ import annotations

import json
import os
import shutil
import subprocess

import pytest

from tests.e2e_runtime import reliability_report
from tests.e2e_runtime.matrix import (
    CELERY_DEPLOYMENT,
    CI_GROUPS,
    CI_PHASE_SETS,
    LOCAL_DEPLOYMENT,
    LOCAL_PHASES,
    PHASES,
    SYSTEMS,
    UNMEASURED,
    UNMEASURED_FAULTS,
    cells,
    deployment_of,
    parse_dag_id,
    pending,
    rescheduled_jobs,
    selected_phases,
    selected_systems,
    unexplained_jobs,
)


def _committed() -> dict:
    return json.loads(reliability_report.RESULTS.read_text())


def test_reliability_page_is_not_stale() -> None:
    """docs/reliability.md must be regenerated whenever docs/reliability.json changes."""
    page = reliability_report.render(_committed())
    assert reliability_report.PAGE.read_text() == page, (
        "docs/reliability.md is stale: run `python -m tests.e2e_runtime.reliability_report` "
        "(or `make reliability`)"
    )


def test_every_cell_ran_on_postgres_and_celery() -> None:
    """Every cell of the matrix has a recorded result on PostgreSQL + CeleryExecutor, but those of the
    scheduler's own stops, which ran on PostgreSQL + LocalExecutor."""
    configurations = _committed()["configurations"]
    entry = configurations[CELERY_DEPLOYMENT]
    assert entry["environment"]["executor"] == "CeleryExecutor"
    assert entry["environment"]["database"].startswith("PostgreSQL")
    if LOCAL_DEPLOYMENT in configurations:
        local = configurations[LOCAL_DEPLOYMENT]["environment"]
        assert local["executor"] == "LocalExecutor" and local["database"].startswith("PostgreSQL")
    assert set(configurations) <= {CELERY_DEPLOYMENT, LOCAL_DEPLOYMENT}
    for key, stored in configurations.items():
        wrong = [d for d, c in stored["cells"].items() if deployment_of(c["fault"]) != key]
        assert not wrong, f"cells recorded under {key} that run on another deployment: {wrong}"
    missing = [
        c.dag_id
        for c in cells()
        if c.dag_id not in configurations.get(deployment_of(c.fault), {}).get("cells", {})
    ]
    awaited = [d for d in missing if parse_dag_id(d).fault in UNMEASURED_FAULTS]
    missing = [d for d in missing if d not in awaited]
    assert not [d for d in missing if parse_dag_id(d).system not in UNMEASURED], (
        f"cells never run on PostgreSQL + Celery: {missing}"
    )
    # A fault newly added to the matrix is awaited only until its cells are recorded.
    done = [f for f in UNMEASURED_FAULTS if not any(parse_dag_id(d).fault == f for d in awaited)]
    assert not done, f"every cell of {done} is recorded: take them out of matrix.UNMEASURED_FAULTS"
    # A system newly added to the matrix is awaited only until its cells are recorded.
    recorded = [s for s in UNMEASURED if not any(parse_dag_id(d).system == s for d in missing)]
    assert not recorded, f"every cell of {recorded} is recorded: take them out of matrix.UNMEASURED"


def test_committed_durable_cells_keep_the_promise() -> None:
    """No measured durable cell is committed broken, except under a fault still pending engine work.

    A cell the harness could not drive to its end carries an ``error`` and is reported as "not
    measured" on the page; the matrix test itself fails on those when they run."""
    cells_ = {k: c for e in _committed()["configurations"].values() for k, c in e["cells"].items()}
    broken = [
        (d, c["jobs"], c["final_state"], c["untracked"])
        for d, c in cells_.items()
        if c["side"] == "durable" and not c["error"] and not c["durable_ok"] and not pending(parse_dag_id(d))
    ]
    assert not broken, broken


def test_group_selection() -> None:
    """Every system is in exactly one CI group; ``all`` and explicit lists work; bad input is refused."""
    groups = [selected_systems(f"{i}/{CI_GROUPS}") for i in range(CI_GROUPS)]
    assert sorted(s for g in groups for s in g) == sorted(SYSTEMS)
    assert selected_systems("all") == tuple(SYSTEMS)
    assert selected_systems("databricks,batch") == ("databricks", "batch")
    assert selected_systems("", commit="0000000a") == groups[10 % CI_GROUPS]
    with pytest.raises(ValueError, match="unknown systems"):
        selected_systems("databricks,nope")
    with pytest.raises(ValueError, match="group index"):
        selected_systems(f"{CI_GROUPS}/{CI_GROUPS}")


def test_phase_selection() -> None:
    """Every phase but the Celery-worker kill is in a CI phase set; consecutive pushes with the same
    system group get the other set; ``all`` and explicit lists work; bad input is refused."""
    assert sorted(p for s in CI_PHASE_SETS for p in s) == sorted(set(PHASES) - {"celerykill"})
    assert selected_phases("all") == tuple(PHASES)
    assert selected_phases("store,user") == ("user", "store")
    picked = {selected_phases("", commit=f"{i * CI_GROUPS:08x}") for i in range(len(CI_PHASE_SETS))}
    assert picked == set(CI_PHASE_SETS)
    with pytest.raises(ValueError, match="unknown phases"):
        selected_phases("pertask,nope")


def test_local_phases_run_last_on_their_own_deployment() -> None:
    """Each phase's faults run on one deployment; the LocalExecutor's phases come after every Celery one
    (the run starts the second deployment once, after stopping the first)."""
    for phase, faults in PHASES.items():
        assert len({deployment_of(f) for f in faults}) == 1, phase
        assert (deployment_of(faults[0]) == LOCAL_DEPLOYMENT) == (phase in LOCAL_PHASES), phase
    assert list(PHASES)[-len(LOCAL_PHASES) :] == list(LOCAL_PHASES)


def _run_results(commit: str = "abc123def456", **run: object) -> dict:
    """A complete run's results as `make reliability` writes them (every cell, one commit), each under
    the deployment it ran on."""
    cell = {"jobs": 1, "untracked": 0, "final_state": "success", "error": "", "tries": [[1, "success"]]}
    environments = {
        CELERY_DEPLOYMENT: {
            "airflow": "3.3.2",
            "database": "PostgreSQL 15",
            "executor": "CeleryExecutor",
            "triggerers": 2,
            "celery_workers": 2,
        },
        LOCAL_DEPLOYMENT: {
            "airflow": "3.3.2",
            "database": "PostgreSQL 15",
            "executor": "LocalExecutor",
            "triggerers": 1,
            "celery_workers": 0,
        },
    }
    return {
        "run": {
            "commit": commit,
            "dirty": False,
            "date": "2026-12-05 04:00 UTC",
            "seconds": 2400,
            "cores": 2,
            "load_before": [1.0, 1.0, 1.0],
            "load_median": 3.1,
            "load_max": 6.0,
            **run,
        },
        "configurations": {
            key: {
                "environment": environment,
                "cells": {
                    c.dag_id: {
                        **cell,
                        "dag_id": c.dag_id,
                        "system": c.system,
                        "fault": c.fault,
                        "side": c.side,
                        "path": c.path,
                        "operator": c.operator,
                        "jobs": 2
                        if c.fault in ("clear", "clear34") or (c.fault, c.side) == ("storeid", "durable")
                        else 1,
                        # the store faults reach the durable try only (the provider's makes no store call)
                        "store_failed": 5
                        if c.side == "durable" and c.fault in ("storeread", "storeintent", "storeid")
                        else 0,
                        "durable_ok": True,
                        "commit": commit,
                    }
                    for c in cells()
                    if deployment_of(c.fault) == key
                },
            }
            for key, environment in environments.items()
        },
    }


def test_a_page_from_one_run_names_its_commit_first() -> None:
    data = _run_results()
    assert reliability_report.incomplete(data) == []
    head = "\n".join(reliability_report.render(data).splitlines()[:8])
    assert "one run of `make reliability` at commit `abc123def456`" in head
    assert "40 min on 2 cores" in head
    assert "### Measured on" not in reliability_report.render(data)


def test_results_of_several_commits_say_so_and_are_not_published() -> None:
    data = _run_results()
    cells_ = data["configurations"]["postgres+celery"]["cells"]
    next(iter(cells_.values()))["commit"] = "0ld0ld0ld0ld"
    head = "\n".join(reliability_report.render(data).splitlines()[:8])
    assert "Not one run: the results below were measured on 2 commits" in head
    assert "### Measured on" in reliability_report.render(data)
    assert any("other commits" in p for p in reliability_report.incomplete(data))


def test_an_incomplete_or_dirty_run_is_not_published() -> None:
    data = _run_results(dirty=True)
    del data["configurations"]["postgres+celery"]["cells"][cells()[0].dag_id]
    problems = reliability_report.incomplete(data)
    assert any("1 cells have no result" in p for p in problems)
    assert any("uncommitted changes" in p for p in problems)
    legacy = _run_results()
    del legacy["run"]
    assert reliability_report.incomplete(legacy) == [
        "the results name no run (they were not written by `make reliability`)"
    ]


def _dry_run(target: str) -> str:
    if shutil.which("make") is None:
        pytest.skip("make is not installed")
    env = {k: v for k, v in os.environ.items() if k not in ("MAKEFLAGS", "MFLAGS", "MAKELEVEL")}
    return subprocess.run(
        ["make", "-n", "--no-print-directory", target],
        cwd=reliability_report.ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    ).stdout


def test_only_make_reliability_writes_the_published_results() -> None:
    """`make reliability` runs into build/ and publishes through ``--publish`` (which refuses a partial
    or mixed run); `make runtime-tier` (CI) records nothing."""
    reliability = _dry_run("reliability")
    assert 'AFD_RT_RESULTS="' in reliability and "/build/reliability/results.json" in reliability
    assert "docs/reliability" not in reliability
    assert "reliability_report --publish build/reliability/results.json" in reliability
    assert "AFD_RT_RESULTS" not in _dry_run("runtime-tier")


def test_a_job_no_fault_explains_is_marked_and_not_counted_as_a_duplicate() -> None:
    """An upstream run whose store fault never reached its try (the provider's deferrable path makes no
    store call) and that still started two jobs: marked ‡ with what the run kept, not counted above."""
    data = _run_results()
    cells_ = data["configurations"]["postgres+celery"]["cells"]
    odd = cells_["rt_bigquery_storeread_upstream_deferrable"]
    odd.update(jobs=2, store_failed=0, job_starts=[3.0, 41.0], try_starts=[[1, 1.0]], evidence="build/x")
    killed = cells_["rt_bigquery_workerkill_upstream_deferrable"]
    killed.update(jobs=2)  # a duplicate the worker kill caused
    assert unexplained_jobs(odd) == 1 and unexplained_jobs(killed) == 0
    assert unexplained_jobs({**odd, "store_failed": 3}) == 0  # the fault reached it: explained
    page = reliability_report.render(data)
    assert "started **1 duplicate job** in 1 of their" in page
    assert "1 more job in 1 run that no fault explains (marked ‡) is not counted" in page
    assert "| 2 jobs, success (no store call of this try was hit) ‡ |" in page
    assert "‡ BigQuery, upstream: a second job" in page
    assert "Jobs created at +3 s, +41 s after the trigger (try 1 +1 s); logs kept in `build/x`." in page


def test_a_start_airflow_rescheduled_is_marked_and_its_extra_job_not_counted() -> None:
    """A cleared task whose start after the trigger fired was rescheduled (DAG import timed out): the
    provider operator ran execute() again (3 jobs where the clear explains 2). Marked ↻, explained once
    under the table, left out of the duplicates; the durable twin, rescheduled too, kept 2."""
    data = _run_results()
    cells_ = data["configurations"]["postgres+celery"]["cells"]
    cells_["rt_bigquery_clear_upstream_deferrable"].update(jobs=3, reschedules=1)
    cells_["rt_bigquery_clear_durable_deferrable"].update(jobs=2, reschedules=1)
    assert rescheduled_jobs(cells_["rt_bigquery_clear_upstream_deferrable"]) == 1
    assert rescheduled_jobs(cells_["rt_bigquery_clear_durable_deferrable"]) == 0
    page = reliability_report.render(data)
    assert "started **0 duplicate jobs**" in page
    assert "1 more job in 1 run where Airflow rescheduled a start (marked ↻) is not counted." in page
    assert "| 3 jobs, success ↻ | 2 jobs, success ↻ |" in page
    assert page.count(reliability_report.RESCHEDULE_NOTE) == 1


def test_the_graceful_stops_are_one_section_with_their_promise() -> None:
    """The graceful stops' tables follow one introduction (a stop is not a cancel), each under a heading
    of its own below it; the page shows the section only once the results hold such a cell."""
    data = _run_results()
    page = reliability_report.render(data)
    assert page.count("### Graceful stops") == 1
    section = page[page.index("### Graceful stops") :]
    assert "A stop is not a cancel" in section
    for fault in reliability_report.GRACEFUL_FAULTS:
        assert f"#### {reliability_report.FAULT_TITLES[fault]}" in section
    assert section.index("#### a pod stop while") < section.index("#### Celery cold shutdown")
    assert section.index("#### Celery cold shutdown") < section.index(
        "#### a scheduler restart with the Local"
    )
    # The scheduler's stops ran on the second deployment: one section still, that deployment named once.
    assert page.count("## Apache Airflow") == 1
    assert page.count("ran on a second deployment, PostgreSQL 15 with the LocalExecutor and 1 triggerer") == 1
    assert "The cells of `schedstop` and `failover` ran on a second deployment" in page
    assert "### Graceful stops" not in reliability_report.render(
        {
            **data,
            "configurations": {
                key: {
                    **entry,
                    "cells": {
                        k: c
                        for k, c in entry["cells"].items()
                        if c["fault"] not in reliability_report.GRACEFUL_FAULTS
                    },
                }
                for key, entry in data["configurations"].items()
            },
        }
    )


def test_an_added_system_is_listed_not_run_only_under_recorded_faults(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A system awaiting its first run (matrix.UNMEASURED) gets a *not run* row under each fault the
    results hold; a fault they hold no cell of (one awaited itself) gets no table, nor its section."""
    data = _committed()
    dropped = ("podstop", "podcomplete", "warmstop", "coldstop", "schedstop", "failover")
    for entry in data["configurations"].values():
        entry["cells"] = {
            k: c
            for k, c in entry["cells"].items()
            if c["system"] != "databricks" and c["fault"] not in dropped
        }
    monkeypatch.setattr(reliability_report, "UNMEASURED", ("databricks",))
    page = reliability_report.render(data)
    listed = [c for c in cells(systems=("databricks",)) if c.fault not in dropped]
    assert f"{len(listed)} more runs are *not run* yet: the cells of Databricks, added" in page
    assert "### Graceful stops" not in page
    assert f"#### {reliability_report.FAULT_TITLES['podstop']}" not in page
