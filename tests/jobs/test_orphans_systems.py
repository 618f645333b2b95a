"""``orphans`` finds jobs through the systems themselves (issue 23): every family with a lookup, against its
emulator, with the real operator submitting and the real provider hooks listing, reading and cancelling.

A try submits through the real operator and dies with its job running (the worker is gone, the job is
not). Airflow's side is a loopback stub of the REST API (``airflow_stub.py``): deleting the DAG run takes
the task instance and its record with it, as Airflow does. Nothing is in the local cache in any test here.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from typing import Any

import pytest

from airflow_durable import catalogue
from airflow_durable.identity_tags import task_identity
from airflow_durable.jobs.api import AirflowApi
from airflow_durable.jobs.collect import ScanReport, cancel_orphans, find_orphans
from airflow_durable.jobs.records import parse_record
from airflow_durable.jobs.systems import Scan, parse_scan, scan_of
from tests.conformance.systems import SYSTEMS, SystemCase, job_ids, runner_for
from tests.harness import DURABLE, TaskRunner, record_state
from tests.jobs.airflow_stub import AirflowStub, serve

pytestmark = pytest.mark.skipif(not DURABLE, reason="Airflow < 3.3: no durable submit, no identity carried")

SCANNED = [c for c in SYSTEMS if catalogue.LOOKUPS[c.external_id_key].implemented]
NOT_SCANNED = [c for c in SYSTEMS if not catalogue.LOOKUPS[c.external_id_key].implemented]
#: Every task-instance state in which a try will (again) wait on or look up the task's jobs.
WAITING = ("running", "deferred", "queued", "up_for_retry", "restarting", "scheduled", None)
#: The request each system's listing makes (the list call the catalogue names).
LIST_REQUEST = re.compile(
    r"runs/list|/projects/[^/]+/jobs/?(\?|$)|/accounts/[^/]+/runs/?(\?|$)|ListStatements|ListSteps|ListJobRuns"
    r"|ListJobs|DescribeJobQueues",
    re.M,
)


def _param(case: SystemCase) -> Any:
    reason = case.upstream_broken()
    return pytest.param(case, id=case.id, marks=pytest.mark.skipif(reason is not None, reason=reason or ""))


@pytest.fixture(params=[_param(c) for c in SCANNED])
def case(request: pytest.FixtureRequest) -> SystemCase:
    return request.param


@pytest.fixture
def emulator(case: SystemCase, request: pytest.FixtureRequest) -> Any:
    return request.getfixturevalue(case.emulator_fixture)


@pytest.fixture
def airflow() -> Iterator[AirflowStub]:
    yield from serve()


@pytest.fixture(autouse=True)
def _airflow_answers_task_states() -> Iterator[None]:
    from tests.harness import answering_task_states

    with answering_task_states():
        yield


class Running:
    """A job the real operator submitted and whose try died: the job runs on (the last state is sticky)."""

    def __init__(self, case: SystemCase, emulator: Any, run_id: str | None = None) -> None:
        emulator.lifecycle = [case.initial, case.running]
        self.runner: TaskRunner = runner_for(case, emulator, False)
        if run_id is not None:  # another DAG run's task instance: another identity, another job
            _rename_run(self.runner, run_id)
        before = job_ids(case, emulator)
        self.runner.store.crash_when(record_state("submitted"), before=False)
        assert self.runner.run_try().state == "crashed"
        (self.job,) = [job for job in job_ids(case, emulator) if job not in before]
        self.case, self.emulator = case, emulator
        self.record = parse_record(case.external_id_key, self.runner.store.data[case.external_id_key])
        ti = self.runner.ti
        self.ti_key = (ti.dag_id, ti.run_id, ti.task_id, ti.map_index)
        self.identity = task_identity(*self.ti_key)
        scan = scan_of(self.record.system, self.record.locator)
        assert scan is not None, self.record.locator
        self.scan: Scan = scan

    @property
    def state(self) -> str:
        return str(self.emulator.run(self.job).state)

    @property
    def cancelled(self) -> bool:
        return self.state == self.case.cancelled

    def add_ti(self, airflow: AirflowStub, state: str | None, with_record: bool = False) -> None:
        raw = self.runner.store.data[self.case.external_id_key]
        airflow.add_ti(
            *self.ti_key[:3],
            state=state,
            map_index=self.ti_key[3],
            operator=type(self.runner.last_operator).__name__,
            record=(self.case.external_id_key, raw) if with_record else None,
        )


def _rename_run(runner: TaskRunner, run_id: str) -> None:
    from tests.harness import _TASK_INSTANCES

    ti = runner.ti
    _TASK_INSTANCES.pop((ti.dag_id, ti.run_id, ti.task_id, ti.map_index), None)
    ti.run_id = run_id
    _TASK_INSTANCES[(ti.dag_id, ti.run_id, ti.task_id, ti.map_index)] = ti


def _find(airflow: AirflowStub, **kwargs: Any) -> tuple[list[Any], ScanReport]:
    report = ScanReport()
    with AirflowApi(airflow.url) as api:
        _, orphans = find_orphans(api, report=report, **kwargs)
    return orphans, report


def _cancel(airflow: AirflowStub, orphans: list[Any]) -> list[Any]:
    with AirflowApi(airflow.url) as api:
        return cancel_orphans(api, orphans)


def _system_rows(orphans: list[Any]) -> list[Any]:
    return [o for o in orphans if o.source == "system"]


# --------------------------------------------------------------------------- found, cancelled
def test_a_deleted_runs_job_is_found_with_an_empty_cache_and_cancelled(case, emulator, airflow):
    """The DAG run was deleted before ``jobs`` ever ran: no record, no task instance, no cache. A cold start
    names the place (``--scan``); the job is found by the identity it carries, and ``--cancel`` ends it."""
    job = Running(case, emulator)
    orphans, report = _find(airflow, scans=[job.scan])
    assert report.errors == [] and report.scanned == [job.scan.where]
    (row,) = orphans
    assert row.source == "system" and row.identity == job.identity and row.found_in == job.scan.where
    assert row.external_id == job.record.external_id
    assert row.dag_id == "" and "DAG run or task instance was deleted" in (row.orphan or "")
    assert row.live is not None and row.live.active
    assert not job.cancelled
    (outcome,) = _cancel(airflow, orphans)
    assert outcome.cancelled, outcome.message
    assert job.cancelled, job.state
    assert _find(airflow, scans=[job.scan])[0] == []  # ended: no orphan any more


def test_the_places_other_records_name_are_listed_without_being_asked(case, emulator, airflow):
    """No ``--scan``: another task's record names the same connection (and cluster, queue...); that is
    enough to find the deleted run's job."""
    job = Running(case, emulator)
    other = {**job.runner.store.data[case.external_id_key], "state": "done", "external_id": case.foreign_id}
    airflow.add_ti("another_dag", "manual__1", "other", "success", record=(case.external_id_key, other))
    (row,) = _find(airflow)[0]
    assert row.source == "system" and row.external_id == job.record.external_id
    # --no-scan: the records and the cache only, as before.
    assert _find(airflow, scan_records=False)[0] == []


def test_a_job_whose_task_instance_waits_is_never_reported(case, emulator, airflow):
    """Airflow 3.4's clear discards the record; the task instance is running, deferred, queued, up for a
    retry... Its own try looks its jobs up and ends or adopts this one: ``orphans`` leaves it alone."""
    job = Running(case, emulator)
    for state in WAITING:
        airflow.tis.clear()
        job.add_ti(airflow, state)
        orphans, report = _find(airflow, scans=[job.scan])
        assert orphans == [] and report.unnamed == 1, (state, orphans)
    assert not job.cancelled


def test_an_ended_task_instances_unrecorded_job_is_cancelled_only_while_it_stays_ended(
    case, emulator, airflow
):
    """The task failed, its record is gone (or never named this job): an orphan. The task instance is read
    again right before the cancel: cleared in between, it is left to its new try."""
    job = Running(case, emulator)
    job.add_ti(airflow, "failed")
    (row,) = _find(airflow, scans=[job.scan])[0]
    assert (row.dag_id, row.run_id, row.task_id) == job.ti_key[:3]
    assert row.orphan == "task instance failed, and no record names the job"
    airflow.tis[job.ti_key]["state"] = "queued"  # a user cleared it meanwhile
    (kept,) = _cancel(airflow, [row])
    assert not kept.cancelled and "queued" in kept.message and not job.cancelled
    airflow.tis[job.ti_key]["state"] = "failed"
    (done,) = _cancel(airflow, [row])
    assert done.cancelled and job.cancelled


def test_a_job_a_record_names_is_judged_by_the_record_once(case, emulator, airflow):
    job = Running(case, emulator)
    job.add_ti(airflow, "failed", with_record=True)
    orphans, report = _find(airflow, scans=[job.scan])
    (row,) = orphans
    assert row.source == "record" and row.orphan == "task instance failed"
    assert report.listed == 1 and report.unnamed == 0


def test_an_unclaimed_job_of_another_dag_is_left_out_of_a_dag_scoped_look(case, emulator, airflow):
    """``--dag``: a job no task instance claims may be any DAG's: not reported (nor cancelled) there."""
    job = Running(case, emulator)
    assert _find(airflow, dag_id="some_dag", scans=[job.scan])[0] == []


def test_an_unclaimed_job_is_not_cancelled_once_a_task_instance_claims_it(case, emulator, airflow):
    """A task instance with its identity appeared between the look and the cancel (a run created again
    with the same run_id): its try looks the job up, ``--cancel`` leaves it."""
    job = Running(case, emulator)
    (row,) = _find(airflow, scans=[job.scan])[0]
    job.add_ti(airflow, "running")
    (kept,) = _cancel(airflow, [row])
    assert not kept.cancelled and "identity exists now" in kept.message and not job.cancelled


# --------------------------------------------------------------------------- lag, failures
def test_a_lagging_list_shows_the_job_once_its_lag_has_passed(case, emulator, airflow):
    job = Running(case, emulator)
    emulator.list_lag_seconds = 60.0
    orphans, report = _find(airflow, scans=[job.scan])
    assert orphans == [] and report.listed == 0 and report.errors == []
    emulator.backdate(job.job, 61)
    (row,) = _find(airflow, scans=[job.scan])[0]
    assert row.external_id == job.record.external_id


def test_a_failed_list_call_is_an_error_that_names_it_and_finds_nothing(case, emulator, airflow):
    job = Running(case, emulator)
    fault = emulator.faults.add(status=403, times=None, predicate=_is_list_request)
    orphans, report = _find(airflow, scans=[job.scan])
    fault.remove()
    assert orphans == []
    (message,) = report.errors
    lookup = catalogue.LOOKUPS[case.external_id_key]
    call = re.search(r"`([^`]+)`", lookup.list_call)
    assert call is not None and call.group(1) in message and job.scan.where in message, message
    assert message.startswith("could not list ")
    assert not job.cancelled and fault.hits >= 1


def _is_list_request(request: Any) -> bool:
    from airflow_durable.testing.snowflake import is_history_query

    target = f"{request.path}\n{getattr(request, 'path_params', {}).get('operation', '')}"
    # Snowflake lists by a statement (QUERY_HISTORY_BY_USER) sent to the submit call.
    return (
        request.method in ("GET", "POST") and bool(LIST_REQUEST.search(target)) or is_history_query(request)
    )


# --------------------------------------------------------------------------- systems without a lookup
@pytest.mark.parametrize("case", [_param(c) for c in NOT_SCANNED])
def test_a_system_without_a_lookup_is_reported_as_not_scannable(case: SystemCase) -> None:
    reason = catalogue.LOOKUPS[case.external_id_key].reason
    system = next(o.system for o in catalogue.OPERATORS if o.key == case.external_id_key)
    durable = next(o.durable_class for o in catalogue.OPERATORS if o.key == case.external_id_key)
    if all(not o.lookup.implemented for o in catalogue.operators_of(system)):
        with pytest.raises(ValueError, match="cannot be listed") as raised:
            parse_scan(system)
        assert reason in str(raised.value)
    from airflow_durable.jobs.collect import ScanReport as Report
    from airflow_durable.jobs.collect import _row, scans_for

    ti = {"dag_id": "d", "dag_run_id": "r", "task_id": "t", "map_index": -1, "state": "failed"}
    value = {
        "schema": "airflow-durable/2",
        "system": system,
        "generation": 1,
        "token": "afd-" + "1" * 40 + "-g1",
        "state": "submitted",
        "external_id": 1,
        "locator": {},
    }
    report = Report()
    scans_for([_row(ti, case.external_id_key, value, "http://airflow")], [], report)
    (note,) = [n for n in report.not_scannable if durable in n]
    assert reason in note


# --------------------------------------------------------------------------- --scan syntax
@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("databricks", {"databricks_conn_id": "databricks_default"}),
        ("databricks:dbx_prod", {"databricks_conn_id": "dbx_prod"}),
        ("batch:aws_eu:region_name=eu-west-1", {"aws_conn_id": "aws_eu", "region_name": "eu-west-1"}),
        (
            "batch::region_name=eu-west-1,job_queue=q1",
            {"aws_conn_id": "aws_default", "region_name": "eu-west-1", "job_queue": "q1"},
        ),
        ("emr-steps:aws_default:job_flow_id=j-1ABC", {"aws_conn_id": "aws_default", "job_flow_id": "j-1ABC"}),
        (
            "bigquery:gcp:project_id=p,location=EU",
            {"gcp_conn_id": "gcp", "project_id": "p", "location": "EU"},
        ),
    ],
)
def test_scan_syntax(text: str, expected: dict[str, str]) -> None:
    scan = parse_scan(text)
    assert scan.locator == expected
    assert parse_scan(scan.where) == scan


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("nope", "unknown system 'nope'"),
        ("emr-steps:aws_default", "needs job_flow_id"),
        ("databricks:x:region_name=eu", "takes no field 'region_name'"),
        ("batch:aws_default:region_name", "expected FIELD=VALUE"),
    ],
)
def test_scan_syntax_errors_say_what_is_wrong(text: str, message: str) -> None:
    with pytest.raises(ValueError, match=re.escape(message)):
        parse_scan(text)


# --------------------------------------------------------------------------- the command
def _cli(*args: str, env: dict[str, str]) -> Any:
    from tests.test_cli_conventions import invoke

    return invoke(*args, env=env)


@pytest.fixture
def cache_home(tmp_path: Any) -> dict[str, str]:
    return {"XDG_CACHE_HOME": str(tmp_path / "cache"), "AIRFLOW_DURABLE_API_URL": ""}


@pytest.mark.parametrize("case", [_param(c) for c in SCANNED if c.id.startswith("databricks")][:1])
def test_the_command_finds_and_cancels_a_deleted_runs_job(case, emulator, airflow, cache_home):
    job = Running(case, emulator)
    args = ("orphans", "--url", airflow.url, "--no-cache", "--scan", job.scan.where)
    found = _cli(*args, "--format", "json", "-q", env=cache_home)
    assert found.exit_code == 1, found.output
    document = json.loads(found.stdout)
    (orphan,) = document["orphans"]
    assert orphan["identity"] == job.identity and orphan["found_in"] == job.scan.where
    assert document["scans"]["scanned"] == [job.scan.where] and document["scans"]["errors"] == []
    text = _cli(*args, env={**cache_home, "COLUMNS": "250"})
    assert text.exit_code == 1 and "1 orphan job(s)" in text.stdout and job.scan.where in text.stdout
    done = _cli(*args, "--cancel", "--yes", env={**cache_home, "COLUMNS": "250"})
    assert done.exit_code == 0, done.output
    assert "cancelled databricks" in done.stdout and job.identity in done.stdout
    assert job.cancelled


@pytest.mark.parametrize("case", [_param(c) for c in SCANNED if c.id.startswith("databricks")][:1])
def test_the_command_exits_2_and_cancels_nothing_when_a_list_call_fails(case, emulator, airflow, cache_home):
    job = Running(case, emulator)
    job.add_ti(airflow, "failed", with_record=True)  # an orphan the record names, cancellable on its own
    fault = emulator.faults.add(status=403, times=None, predicate=_is_list_request)
    result = _cli("orphans", "--url", airflow.url, "--no-cache", "--cancel", "--yes", env=cache_home)
    # --system leaves the other systems' places unlisted: nothing failed there.
    other = _cli("orphans", "--url", airflow.url, "--no-cache", "--system", "bigquery", env=cache_home)
    fault.remove()
    assert other.exit_code == 0 and "could not list" not in other.stderr, other.output
    assert result.exit_code == 2, result.output
    assert (
        "could not list Databricks jobs at databricks:databricks_default (GET jobs/runs/list" in result.stderr
    )
    assert "nothing cancelled" in result.stderr
    assert not job.cancelled


# --------------------------------------------------------------------------- the page
@pytest.mark.parametrize("case", [_param(c) for c in SCANNED if c.id.startswith("databricks")][:1])
def test_the_page_shows_a_job_found_on_its_system_with_where(case, emulator, airflow):
    """The "Durable jobs" page's table (its HTML, as the app renders it): the job no task instance claims
    shows the identity it carries and where it was found; its cancel button only for a user who may edit
    every DAG's task instances; a failed listing is shown, never hidden."""
    pytest.importorskip("fastapi")
    from airflow_durable.plugins.app import _render

    job = Running(case, emulator)
    orphans, report = _find(airflow, scans=[job.scan])
    html = _render([], orphans, {"": True}, None, report)
    assert html.count("<tr class='orphan'") == 1 and job.identity in html
    assert f"found on {job.scan.where}" in html and "Cancel job</button>" in html
    assert f"Systems listed for the jobs they carry: <span class='state'>{job.scan.where}</span>" in html
    assert "Cancel job</button>" not in _render([], orphans, {"": False}, None, report)
    report.errors.append("could not list Databricks jobs at databricks:x (GET jobs/runs/list): 403")
    assert "scan-error'>could not list Databricks jobs" in _render([], [], {}, None, report)


@pytest.mark.parametrize("case", [_param(c) for c in SCANNED if c.id.startswith("databricks")][:1])
def test_the_reaper_cancels_nothing_when_a_list_call_fails(case, emulator, airflow):
    """The reaper lists the systems at the places the records name, as ``orphans`` does: one failed list
    call fails its run before any cancel, even of an orphan the record names (as ``orphans --cancel``)."""
    from airflow_durable.reaper import ReaperError, reap

    job = Running(case, emulator)
    job.add_ti(airflow, "failed", with_record=True)
    fault = emulator.faults.add(status=403, times=None, predicate=_is_list_request)
    with AirflowApi(airflow.url) as api, pytest.raises(ReaperError, match="could not list") as raised:
        reap(api)
    fault.remove()
    assert "nothing cancelled" in str(raised.value)
    assert not job.cancelled
    with AirflowApi(airflow.url) as api:
        report = reap(api)
    assert job.cancelled, report


# --------------------------------------------------------------------------- bounded listings
def _past_the_bound(case: SystemCase, emulator: Any, airflow_runs: int = 3) -> list[Running]:
    """``airflow_runs`` deleted runs' jobs at one place, each a real submit of its own task instance."""
    jobs = [Running(case, emulator, run_id=f"manual__bound_{i}") for i in range(airflow_runs)]
    assert len({job.identity for job in jobs}) == airflow_runs
    return jobs


def test_a_listing_stops_at_its_bound_and_says_so(case, emulator):
    """Each pager, driven past its bound (two jobs read, a third left): the result says how many it read
    and holds no job it did not list; under the bound the same place lists every job, untruncated."""
    from airflow_durable.jobs.systems import list_marked

    if case.id.startswith("emr_add_steps"):
        pytest.skip("ListSteps takes no page size: test_emr_steps_listing_stops_at_its_bound")
    if case.id.startswith("snowflake"):
        pytest.skip("RESULT_LIMIT cuts statements, not requests: test_snowflake_listing_stops_at_its_bound")
    jobs = _past_the_bound(case, emulator)
    bounded = list_marked(jobs[0].scan, limit=2)
    assert bounded.truncated_at is not None and bounded.truncated_at >= 2, bounded
    assert 1 <= len(bounded.jobs) <= 2
    ids = {str(job.record.external_id) for job in jobs}
    assert {str(listed.external_id) for listed in bounded.jobs} <= ids
    whole = list_marked(jobs[0].scan, limit=10)
    assert whole.truncated_at is None
    assert {str(listed.external_id) for listed in whole.jobs} == ids


@pytest.mark.parametrize("case", [_param(c) for c in SCANNED if c.id == "snowflake_sql_api"])
def test_snowflake_listing_stops_at_its_bound(case, emulator):
    """QUERY_HISTORY_BY_USER returns RESULT_LIMIT statements, running ones first: three running two-statement
    requests and a limit of 2 cut inside them, so the listing names no (partial) request and says it stopped;
    a limit that leaves room lists the three whole."""
    from airflow_durable.jobs.systems import list_marked

    jobs = _past_the_bound(case, emulator)
    bounded = list_marked(jobs[0].scan, limit=2)
    assert bounded.truncated_at == 2 and bounded.jobs == [], bounded
    whole = list_marked(jobs[0].scan, limit=20)  # 3 requests: 9 rows (statements and requests), + lookups
    assert whole.truncated_at is None
    assert sorted(str(listed.external_id) for listed in whole.jobs) == sorted(
        str(job.record.external_id) for job in jobs
    )


@pytest.mark.parametrize("case", [_param(c) for c in SCANNED if c.id == "batch"])
def test_batch_listing_stops_at_its_bound_within_one_status(case, emulator):
    """Batch lists each status by ``nextToken`` pages: three jobs in one status, a bound of two, and the
    listing stops after its first page (two jobs, a ``nextToken`` left) and says so. (The test above has
    the jobs over two statuses, as the lookups by job name leave them: the bound counts across both.)"""
    from airflow_durable.jobs.systems import list_marked

    jobs = _past_the_bound(case, emulator)
    for job in jobs:
        emulator.set_state(job.job, case.running)
    bounded = list_marked(jobs[0].scan, limit=2)
    assert bounded.truncated_at == 2 and len(bounded.jobs) == 2, bounded
    whole = list_marked(jobs[0].scan, limit=10)
    assert whole.truncated_at is None
    assert {str(listed.external_id) for listed in whole.jobs} == {str(job.record.external_id) for job in jobs}


@pytest.mark.parametrize("case", [_param(c) for c in SCANNED if c.id == "redshift_data"])
def test_redshift_listing_stops_at_its_bound_across_statuses(case, emulator):
    """Redshift Data lists one status at a time: three statements over two active statuses and a bound of
    two. The bound counts across the listings (it used to allow a page of two in each, reading all three
    without saying the listing was cut)."""
    from airflow_durable.jobs.systems import list_marked

    jobs = _past_the_bound(case, emulator)
    emulator.set_state(jobs[0].job, "PICKED")
    for job in jobs[1:]:
        emulator.set_state(job.job, "STARTED")
    bounded = list_marked(jobs[0].scan, limit=2)
    assert bounded.truncated_at == 2 and len(bounded.jobs) == 2, bounded
    whole = list_marked(jobs[0].scan, limit=10)
    assert whole.truncated_at is None and len(whole.jobs) == 3, whole


@pytest.mark.parametrize("case", [_param(c) for c in SCANNED if c.id.startswith("emr_add_steps")])
def test_emr_steps_listing_stops_at_its_bound(case, emulator):
    """ListSteps pages by the service's own size (no page-size parameter): a cluster with more active steps
    than one page, the durable job's the oldest. The listing stops after the first page and says so; the
    job on the page it did not read is not in the result (found by a later look, once fewer steps run)."""
    from airflow_durable.jobs.systems import list_marked

    job = Running(case, emulator)
    client = emulator.client("emr")
    cluster = job.scan.locator["job_flow_id"]
    step = {"Name": "someone else's", "HadoopJarStep": {"Jar": "command-runner.jar", "Args": ["true"]}}
    for _ in range(3):  # more than a page of steps, in the calls' limit of 256 steps each
        client.add_job_flow_steps(JobFlowId=cluster, Steps=[step] * 100)
    bounded = list_marked(job.scan, limit=2)
    assert bounded.truncated_at is not None and 2 <= bounded.truncated_at < 301, bounded.truncated_at
    assert bounded.jobs == []
    whole = list_marked(job.scan, limit=1000)
    assert whole.truncated_at is None
    (listed,) = whole.jobs
    assert listed.external_id == job.record.external_id


@pytest.mark.parametrize("case", [_param(c) for c in SCANNED if c.id.startswith("databricks")][:1])
def test_the_command_says_a_bounded_listing_is_incomplete_and_cancels_only_what_it_listed(
    case, emulator, airflow, cache_home
):
    """Three deleted runs' jobs, a listing bounded at two: the warning is on stderr even with ``--quiet``
    (no orphan found would not be all clear), the JSON names the place, and ``--cancel`` ends the jobs it
    listed and judged, never the one it did not read; a look with the default bound finds that one."""
    jobs = _past_the_bound(case, emulator)
    scan = jobs[0].scan.where
    args = ("orphans", "--url", airflow.url, "--no-cache", "--scan", scan)
    found = _cli(*args, "--scan-limit", "2", "--format", "json", "-q", env=cache_home)
    assert found.exit_code == 1, found.output
    document = json.loads(found.stdout)
    (truncated,) = document["scans"]["truncated"]
    assert truncated.startswith(f"{scan}: stopped after 2 listed jobs")
    assert truncated in found.stderr
    listed = {orphan["external_id"] for orphan in document["orphans"]}
    assert len(listed) == 2
    done = _cli(*args, "--scan-limit", "2", "--cancel", "--yes", "-q", env=cache_home)
    assert done.exit_code == 0, done.output
    assert "stopped after 2 listed jobs" in done.stderr
    assert {job.job for job in jobs if job.cancelled} == listed
    (unread,) = [job for job in jobs if not job.cancelled]
    rest = _cli(*args, "--format", "json", "-q", env=cache_home)
    assert rest.exit_code == 1 and json.loads(rest.stdout)["scans"]["truncated"] == []
    assert [o["external_id"] for o in json.loads(rest.stdout)["orphans"]] == [unread.job]
    assert _cli(*args, "--scan-limit", "0", env=cache_home).exit_code == 2


# --------------------------------------------------------------------------- a user who cannot read a DAG
#: The DAG the harness's task instances belong to.
DAG = "conformance"


def test_a_job_of_a_dag_the_user_cannot_read_is_unknown_and_never_cancelled(case, emulator, airflow):
    """Its task instance is deferred, waiting on the job, in a DAG the API user may not read (a 403 for it,
    left out of every listing): to that user the job looks like a deleted run's. It is reported as unknown,
    never as an orphan, and a cancel refuses it."""
    job = Running(case, emulator)
    job.add_ti(airflow, "deferred")
    airflow.forbid(DAG)
    orphans, report = _find(airflow, scans=[job.scan])
    assert orphans == [], [o.orphan for o in orphans]
    (unknown,) = report.unknown
    assert unknown.identity == job.identity and unknown.external_id == job.record.external_id
    assert unknown.unknown is not None and unknown.unknown.startswith("cannot read every DAG")
    assert unknown.orphan is None and unknown.live is not None and unknown.live.active
    (refused,) = _cancel(airflow, [unknown])
    assert not refused.cancelled and refused.message.startswith(
        "not cancelled: unknown (cannot read every DAG"
    )
    assert not job.cancelled
    # The same job, its DAG readable again and its run deleted: an orphan as before.
    airflow.forbidden.clear()
    airflow.delete_run(*job.ti_key[:2])
    (row,) = _find(airflow, scans=[job.scan])[0]
    assert row.identity == job.identity and row.unknown is None


def test_a_cached_job_of_a_dag_the_user_cannot_read_names_the_dag(case, emulator, airflow, tmp_path):
    """The cache remembers the job's task instance from a look while its DAG was readable; then the API user
    loses that DAG (403). The job is unknown, naming the DAG, and stays in the cache for a user who can read
    it."""
    from airflow_durable.jobs.collect import JobCache

    job = Running(case, emulator)
    job.add_ti(airflow, "failed", with_record=True)
    cache = JobCache(tmp_path / "jobs.json")
    report = ScanReport()
    with AirflowApi(airflow.url) as api:
        (orphan,) = find_orphans(api, cache=cache, report=report, scan_records=False)[1]
    assert orphan.orphan == "task instance failed" and report.unknown == []
    airflow.forbid(DAG)
    report = ScanReport()
    with AirflowApi(airflow.url) as api:
        assert find_orphans(api, cache=cache, report=report, scans=[job.scan])[1] == []
    (unknown,) = report.unknown
    assert unknown.unknown == f"cannot read DAG {DAG}" and unknown.dag_id == DAG
    assert len(cache.load()) == 1 and not job.cancelled


def test_the_reaper_keeps_a_job_it_cannot_judge_and_warns(case, emulator, airflow, tmp_path, caplog):
    """The reaper, like ``orphans --cancel``, never ends a job of a DAG its API user may not read: it keeps it
    and says so at WARNING, naming the DAG."""
    import logging

    from airflow_durable.jobs.collect import JobCache
    from airflow_durable.reaper import KEPT, reap

    job = Running(case, emulator)
    job.add_ti(airflow, "failed", with_record=True)
    cache = JobCache(tmp_path / "jobs.json")
    with AirflowApi(airflow.url) as api:
        find_orphans(api, cache=cache, report=ScanReport(), scan_records=False)  # the cache remembers it
    airflow.forbid(DAG)
    with AirflowApi(airflow.url) as api, caplog.at_level(logging.INFO, logger="airflow_durable.reaper"):
        report = reap(api, cache=cache)
    (kept,) = report.of(KEPT)
    assert (
        kept.reason == f"not judged: cannot read DAG {DAG}" and kept.row.external_id == job.record.external_id
    )
    assert report.to_json()["kept"][0]["reason"] == kept.reason
    assert [r.levelname for r in caplog.records if kept.describe() in r.getMessage()] == ["WARNING"]
    assert not job.cancelled


@pytest.mark.parametrize("case", [_param(c) for c in SCANNED if c.id.startswith("databricks")][:1])
def test_the_command_reports_a_job_it_cannot_judge_and_cancel_refuses_it(case, emulator, airflow, cache_home):
    job = Running(case, emulator)
    job.add_ti(airflow, "deferred")
    airflow.forbid(DAG)
    args = ("orphans", "--url", airflow.url, "--no-cache", "--scan", job.scan.where)
    found = _cli(*args, "--format", "json", "-q", env=cache_home)
    assert found.exit_code == 1, found.output
    document = json.loads(found.stdout)
    assert document["orphans"] == []
    (unknown,) = document["unknown"]
    assert unknown["identity"] == job.identity and unknown["unknown"].startswith("cannot read every DAG")
    assert f"unknown: databricks job {job.job} ({job.identity}, found at {job.scan.where})" in found.stderr
    text = _cli(*args, env={**cache_home, "COLUMNS": "250"})
    assert text.exit_code == 1 and "No orphan jobs" not in text.stdout, text.output
    assert "1 job(s) this user cannot judge" in text.stdout
    done = _cli(*args, "--cancel", "--yes", env={**cache_home, "COLUMNS": "250"})
    assert done.exit_code == 1, done.output
    assert (
        f"kept databricks {job.job}" in done.stdout and "not cancelled: unknown (cannot read" in done.stdout
    )
    assert not job.cancelled


# --------------------------------------------------------------------------- submit-only tasks (issue 30)
def _no_wait_flag(case: SystemCase) -> str | None:
    return next(o.no_wait_kwarg for o in catalogue.OPERATORS if o.key == case.external_id_key)


SUBMIT_ONLY = [c for c in SCANNED if _no_wait_flag(c) is not None]


class SubmittedOnly:
    """A submit-only task (its wait flag off) started its job and succeeded; ``[state_store]
    clear_on_success`` then deleted its record. The job runs on: a downstream task waits on it."""

    def __init__(self, case: SystemCase, emulator: Any, airflow: AirflowStub) -> None:
        emulator.lifecycle = [case.initial, case.running]
        flag = _no_wait_flag(case)
        assert flag is not None
        self.runner = runner_for(case, emulator, False, **{flag: False})
        outcome = self.runner.run_try()
        assert outcome.state == "success", outcome.error
        (self.job,) = job_ids(case, emulator)
        raw = self.runner.store.data.pop(case.external_id_key)  # clear_on_success
        assert raw["state"] == "done"
        self.case, self.emulator = case, emulator
        record = parse_record(case.external_id_key, raw)
        scan = scan_of(record.system, record.locator)
        assert scan is not None
        self.scan: Scan = scan
        ti = self.runner.ti
        airflow.add_ti(
            ti.dag_id,
            ti.run_id,
            ti.task_id,
            "success",
            map_index=ti.map_index,
            operator=type(self.runner.last_operator).__name__,
        )
        # Another task's record names the same place, so a look without --scan lists it too.
        other = {**raw, "external_id": case.foreign_id}
        airflow.add_ti("another_dag", "manual__1", "other", "success", record=(case.external_id_key, other))

    @property
    def running(self) -> bool:
        return str(self.emulator.run(self.job).state) in (str(self.case.initial), str(self.case.running))


@pytest.mark.parametrize("case", [_param(c) for c in SUBMIT_ONLY])
def test_a_submit_only_tasks_job_is_no_orphan_once_its_record_is_gone(case, emulator, airflow):
    """The job carries that its task only submitted it: ``orphans`` does not report it, with or without
    ``--scan``, and ``--cancel`` has nothing to end."""
    job = SubmittedOnly(case, emulator, airflow)
    for kwargs in ({"scans": [job.scan]}, {}):
        orphans, report = _find(airflow, **kwargs)
        assert report.errors == [] and job.scan.where in report.scanned, report
        assert orphans == [], [(o.external_id, o.orphan) for o in orphans]
    assert _cancel(airflow, _find(airflow)[0]) == []
    assert job.running


@pytest.mark.parametrize("case", [_param(c) for c in SUBMIT_ONLY])
def test_the_reaper_leaves_a_submit_only_tasks_job_running(case, emulator, airflow):
    from airflow_durable.reaper import reap

    job = SubmittedOnly(case, emulator, airflow)
    with AirflowApi(airflow.url) as api:
        report = reap(api)
    assert report.of("cancelled") == [], [o.describe() for o in report.outcomes]
    assert job.running


RUN_NOW = [c for c in NOT_SCANNED if c.id == "databricks_run_now"]


@pytest.mark.parametrize("case", [_param(c) for c in RUN_NOW])
def test_a_cached_job_of_a_task_that_may_only_submit_is_unknown_once_its_record_is_gone(
    case, emulator, airflow, tmp_path
):
    """Databricks run-now jobs carry no mark and cannot be listed. The cache saw the record while it tracked
    the job; the task then succeeded and ``clear_on_success`` deleted the record. A waiting task succeeds
    once its job has, so a job still running may be a submit-only task's: unknown, never cancelled."""
    from airflow_durable.jobs.collect import JobCache
    from airflow_durable.reaper import reap

    emulator.lifecycle = [case.initial, case.running]
    runner = runner_for(case, emulator, False, wait_for_termination=False)
    runner.store.crash_when(record_state("submitted"), before=False)
    assert runner.run_try().state == "crashed"
    ti = runner.ti
    raw = runner.store.data[case.external_id_key]
    operator = type(runner.last_operator).__name__
    key = airflow.add_ti(ti.dag_id, ti.run_id, ti.task_id, "running", operator=operator)
    airflow.records[key] = {case.external_id_key: raw}
    cache = JobCache(tmp_path / "jobs.json")
    with AirflowApi(airflow.url) as api:
        find_orphans(api, cache=cache)
    del airflow.records[key]  # clear_on_success, as the task succeeds
    airflow.tis[key]["state"] = "success"
    report = ScanReport()
    with AirflowApi(airflow.url) as api:
        _, orphans = find_orphans(api, cache=cache, report=report)
    assert orphans == [], [(o.external_id, o.orphan) for o in orphans]
    (unknown,) = report.unknown
    assert "may only submit" in (unknown.unknown or "")
    with AirflowApi(airflow.url) as api:
        reaped = reap(api, cache=cache)
    assert reaped.of("cancelled") == [], [o.describe() for o in reaped.outcomes]
    (job,) = job_ids(case, emulator)
    assert str(emulator.run(job).state) != str(case.cancelled)


# --------------------------------------------------------------------------- machine output
@pytest.mark.parametrize(
    "case", [_param(c) for c in SCANNED if c.id in ("redshift_data", "dbt_cloud_run_job")]
)
def test_json_output_is_the_document_alone_while_the_provider_hooks_log(case, emulator, airflow, tmp_path):
    """A real process, as a monitoring job runs it: the provider hooks log through Airflow's structlog, whose
    default writer is stdout, so only a separate process shows whether their lines reach the document."""
    import os
    import subprocess
    import sys

    job = Running(case, emulator)
    env = {**os.environ, "XDG_CACHE_HOME": str(tmp_path / "cache"), "AIRFLOW_DURABLE_API_URL": ""}
    args = ["orphans", "--url", airflow.url, "--no-cache", "--scan", job.scan.where, "--format", "json"]
    done = subprocess.run(
        [sys.executable, "-m", "airflow_durable.cli", *args],
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 1, done.stderr
    try:
        document = json.loads(done.stdout)  # the whole of stdout: nothing before or after the document
    except ValueError:
        pytest.fail(f"stdout is not one JSON document:\n{done.stdout[:3000]}")
    assert [o["identity"] for o in document["orphans"]] == [job.identity]
