"""The FastAPI app behind the "Durable jobs" page, mounted by the api-server at `URL_PREFIX`.

Every request is authenticated as Airflow's own API is (``get_user``: bearer header or the UI's ``_token``
cookie) and authorized with the auth manager: no DAG readable → 403 and no page; rows only for DAGs the
user may read (the data comes from the public REST API called *as that user*); the cancel button only
where the user may edit the DAG's task instances, and the server checks that again on cancel.
"""

from __future__ import annotations

import html
import json
import os
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any
from urllib.parse import urlparse

from fastapi import FastAPI, HTTPException, Request
from fastapi.responses import HTMLResponse, JSONResponse

if TYPE_CHECKING:
    from airflow_durable.jobs.api import AirflowApi
    from airflow_durable.jobs.collect import JobRow, ScanReport

__all__ = ["URL_PREFIX", "app"]

URL_PREFIX = "/durable-jobs"
#: A header a cross-site form cannot send: a cancel must come from this page's script.
CANCEL_HEADER = "X-Airflow-Durable"

app = FastAPI(title="airflow-durable: durable jobs", docs_url=None, redoc_url=None, openapi_url=None)


# --------------------------------------------------------------------------- auth and data
async def _user(request: Request) -> Any:
    from airflow.api_fastapi.core_api.security import get_user

    header = request.headers.get("authorization", "")
    bearer = None
    if header.lower().startswith("bearer "):
        from fastapi.security import HTTPAuthorizationCredentials

        bearer = HTTPAuthorizationCredentials(scheme="Bearer", credentials=header[7:])
    return await get_user(request, None, bearer)


def _token(request: Request) -> str | None:
    from airflow.api_fastapi.auth.managers.base_auth_manager import COOKIE_NAME_JWT_TOKEN

    header = request.headers.get("authorization", "")
    if header.lower().startswith("bearer "):
        return header[7:]
    return request.cookies.get(COOKIE_NAME_JWT_TOKEN)


def _readable_dags(user: Any) -> set[str]:
    from airflow.api_fastapi.app import get_auth_manager

    return set(get_auth_manager().get_authorized_dag_ids(user=user, method="GET"))


def _every_dag() -> set[str]:
    """Every DAG id of the deployment (the api-server's database): does a user read them all?"""
    from airflow.models.dag import DagModel
    from airflow.utils.session import create_session
    from sqlalchemy import select

    with create_session() as session:
        return set(session.scalars(select(DagModel.dag_id)))


def _editable(user: Any, dag_id: str) -> bool:
    from airflow.api_fastapi.app import get_auth_manager
    from airflow.api_fastapi.auth.managers.models.resource_details import DagAccessEntity, DagDetails

    return bool(
        get_auth_manager().is_authorized_dag(
            method="PUT",
            access_entity=DagAccessEntity.TASK_INSTANCE,
            details=DagDetails(id=dag_id),
            user=user,
        )
    )


def _api(request: Request) -> AirflowApi:
    """The public REST API of this same server, called with the user's own credentials."""
    from airflow.configuration import conf

    from airflow_durable.jobs.api import AirflowApi

    prefix = urlparse(conf.get("api", "base_url", fallback="") or "").path.rstrip("/")
    return AirflowApi(f"{request.url.scheme}://{request.url.netloc}{prefix}", token=_token(request))


def _cache() -> Any:
    from airflow.configuration import AIRFLOW_HOME

    from airflow_durable.jobs.collect import JobCache

    return JobCache(Path(os.environ.get("AIRFLOW_HOME") or AIRFLOW_HOME) / "airflow-durable" / "ui-jobs.json")


def _collect(
    request: Request, readable: set[str], dag_id: str | None
) -> tuple[list[JobRow], list[JobRow], ScanReport]:
    from airflow_durable.jobs.collect import ScanReport, find_orphans, probe

    report = ScanReport()
    # A job no task instance claims may belong to any DAG: shown only to a user who reads every one.
    unclaimed = dag_id is None and _every_dag() <= readable
    with _api(request) as api:
        rows, orphans = find_orphans(
            api,
            dag_id,
            cache=_cache(),
            ui_url="",
            in_scope=lambda d: d in readable and d == (dag_id or d),
            unattributed_in_scope=unclaimed,
            report=report,
        )
    # The page shows every tracked job's status, not just the candidates' that find_orphans probed.
    probe([r for r in rows if r.record_state == "submitted" and r.live is None])
    return rows, orphans, report


async def _access(request: Request) -> tuple[Any, set[str]]:
    user = await _user(request)
    readable = _readable_dags(user)
    if not readable:
        raise HTTPException(status_code=403, detail="You may not read any DAG, so there are no jobs to show.")
    return user, readable


# --------------------------------------------------------------------------- routes
@app.get("/", response_class=HTMLResponse)
async def page(request: Request, dag_id: str | None = None) -> HTMLResponse:
    from starlette.concurrency import run_in_threadpool

    try:
        user, readable = await _access(request)
    except HTTPException as err:
        return HTMLResponse(
            _document("Durable jobs", f'<p class="denied">{html.escape(err.detail)}</p>'), err.status_code
        )
    rows, orphans, report = await run_in_threadpool(_collect, request, readable, dag_id)
    editable = {d: _editable(user, d) for d in {r.dag_id for r in [*rows, *orphans] if r.dag_id}}
    if any(not o.dag_id for o in orphans):
        editable[""] = all(_editable(user, d) for d in readable)
    return HTMLResponse(_render(rows, orphans, editable, dag_id, report))


@app.get("/api/jobs")
async def jobs_json(request: Request, dag_id: str | None = None) -> JSONResponse:
    from starlette.concurrency import run_in_threadpool

    _, readable = await _access(request)
    rows, orphans, report = await run_in_threadpool(_collect, request, readable, dag_id)
    return JSONResponse(
        json.loads(
            json.dumps(
                {
                    "jobs": [r.to_json() for r in rows],
                    "orphans": [r.to_json() for r in orphans],
                    "scans": report.to_json(),
                },
                default=str,
            )
        )
    )


@app.post("/api/cancel")
async def cancel(request: Request) -> JSONResponse:
    from starlette.concurrency import run_in_threadpool

    if request.headers.get(CANCEL_HEADER) != "cancel":
        raise HTTPException(status_code=400, detail=f"missing {CANCEL_HEADER} header")
    user, readable = await _access(request)
    body = await request.json()
    dag_id = str(body.get("dag_id", ""))
    if dag_id == "":
        # A job no task instance claims (its run deleted) may be any DAG's: every DAG's editor only.
        if not (_every_dag() <= readable and all(_editable(user, d) for d in readable)):
            raise HTTPException(
                status_code=403, detail="only a user who may edit every DAG's task instances may cancel it"
            )
    elif dag_id not in readable or not _editable(user, dag_id):
        raise HTTPException(status_code=403, detail=f"you may not edit task instances of DAG {dag_id!r}")

    def run() -> dict[str, Any]:
        from airflow_durable.jobs.collect import cancel_orphans

        _, orphans, report = _collect(request, readable, dag_id or None)
        if report.errors:
            return {"cancelled": False, "message": "a system's job list failed: nothing cancelled"}
        wanted = [
            o
            for o in orphans
            if o.ident == body.get("ident") and str(o.external_id) == str(body.get("external_id"))
        ]
        if not wanted:
            return {"cancelled": False, "message": "not an orphan (any more): nothing cancelled"}
        with _api(request) as api:
            (outcome,) = cancel_orphans(api, wanted)
        return {"cancelled": outcome.cancelled, "message": outcome.message}

    return JSONResponse(await run_in_threadpool(run))


# --------------------------------------------------------------------------- HTML
_STYLE = """
body{font-family:system-ui,-apple-system,Segoe UI,Roboto,sans-serif;margin:16px;color:#1a202c;font-size:14px}
h1{font-size:20px;margin:0 0 4px} .sub{color:#4a5568;margin:0 0 12px}
table{border-collapse:collapse;width:100%}
th,td{border-bottom:1px solid #e2e8f0;padding:6px 8px;text-align:left;vertical-align:top}
th{background:#f7fafc;font-weight:600;position:sticky;top:0}
tr.orphan td{background:#fff5f5} .badge{display:inline-block;border-radius:9px;padding:1px 8px;font-size:12px}
.b-orphan{background:#e53e3e;color:#fff} .b-ok{background:#c6f6d5;color:#22543d} .b-gone{background:#feebc8}
.state{font-family:ui-monospace,monospace;font-size:12px} a{color:#2b6cb0}
details summary{cursor:pointer;color:#2b6cb0} .hist{margin:4px 0 0;padding-left:16px;font-size:12px}
button{background:#e53e3e;color:#fff;border:0;border-radius:4px;padding:3px 10px;cursor:pointer}
.denied{padding:24px;background:#fffaf0;border:1px solid #fbd38d} .muted{color:#718096}
"""

_SCRIPT = """
async function afdCancel(btn){
  if(!confirm('Cancel job '+btn.dataset.ext+' on '+btn.dataset.system+'?'))return;
  btn.disabled=true;
  const r=await fetch('api/cancel',{method:'POST',credentials:'same-origin',
    headers:{'Content-Type':'application/json','X-Airflow-Durable':'cancel'},
    body:JSON.stringify({dag_id:btn.dataset.dag,ident:btn.dataset.ident,external_id:btn.dataset.ext})});
  const j=await r.json(); btn.replaceWith(document.createTextNode(j.message||j.detail||r.status));
}
"""


def _document(title: str, body: str) -> str:
    return (
        f"<!doctype html><html><head><meta charset='utf-8'><title>{html.escape(title)}</title>"
        f"<style>{_STYLE}</style><script>{_SCRIPT}</script></head><body>{body}</body></html>"
    )


def _e(value: Any) -> str:
    return html.escape("-" if value is None else str(value))


def _ext(value: Any) -> str:
    return ",".join(map(str, value)) if isinstance(value, list) else ("-" if value is None else str(value))


def _age(seconds: float | None) -> str:
    if seconds is None:
        return "-"
    s = int(seconds)
    return f"{s}s" if s < 120 else f"{s // 60}m" if s < 7200 else f"{s // 3600}h{s % 3600 // 60:02d}m"


def _history(row: JobRow) -> str:
    if not row.history:
        return '<span class="muted">-</span>'
    items = "".join(
        f"<li>try {_e(h.get('try'))}: <b>{_e(h.get('decision'))}</b> gen {_e(h.get('generation'))} "
        f"job {_e(_ext(h.get('external_id')))} <span class='muted'>{_e(h.get('at'))}</span></li>"
        for h in row.history
    )
    return (
        f"<details><summary>{len(row.history)} decision(s)</summary><ol class='hist'>{items}</ol></details>"
    )


def _row_html(row: JobRow, orphan: JobRow | None, editable: bool) -> str:
    from airflow_durable.jobs.collect import PROTECTED_STATES

    job = row.job_url
    ext = _e(_ext(row.external_id))
    ext_cell = (
        f"<a class='job-link' href='{_e(job)}' target='_blank' rel='noopener'>{ext}</a>" if job else ext
    )
    if orphan is not None:
        badge = f"<span class='badge b-orphan'>orphan: {_e(orphan.orphan)}</span>"
        if orphan.found_in:
            badge += f"<div class='muted found'>found on {_e(orphan.found_in)}</div>"
    elif row.source == "cache":
        badge = f"<span class='badge b-gone'>{_e(row.note)}</span>"
    else:
        badge = ""
    action = ""
    if orphan is not None and editable and (row.ti_state not in PROTECTED_STATES):
        action = (
            f"<button data-dag='{_e(row.dag_id)}' data-ident='{_e(row.ident)}' data-ext='{ext}' "
            f"data-system='{_e(row.system)}' onclick='afdCancel(this)'>Cancel job</button>"
        )
    live = row.live.status if row.live is not None else None
    ti_link = f"<a class='ti-link' href='{_e(row.ti_url)}' target='_top'>{_e(row.task_id)}</a>"
    dag, run = _e(row.dag_id), _e(row.run_id)
    if not row.dag_id:  # found on its system, no task instance claims it: show the identity it carries
        dag, run, ti_link = "?", f"<span class='state'>{_e(row.identity)}</span>", "?"
    return (
        f"<tr class='{'orphan' if orphan is not None else 'job'}' data-ident='{_e(row.ident)}'>"
        f"<td>{dag}</td><td>{run}</td><td>{ti_link}</td><td>{_e(row.map_index)}</td>"
        f"<td>{_e(row.try_number)}</td><td>{_e(row.system)}</td><td>{ext_cell}</td><td>{_e(row.generation)}</td>"
        f"<td class='state'>{_e(row.record_state)}</td><td class='state'>{_e(row.ti_state)}</td>"
        f"<td class='state'>{_e(live)}</td><td>{_age(row.age_seconds()) if live else '-'}</td>"
        f"<td>{badge}</td><td>{_history(row)}</td><td>{action}</td></tr>"
    )


def _render(
    rows: Sequence[JobRow],
    orphans: Sequence[JobRow],
    editable: dict[str, bool],
    dag_id: str | None,
    report: ScanReport | None = None,
) -> str:
    by_ident = {(o.ident, str(o.external_id)): o for o in orphans}
    listed = {(r.ident, str(r.external_id)) for r in rows}
    body_rows = [
        _row_html(r, by_ident.get((r.ident, str(r.external_id))), editable.get(r.dag_id, False)) for r in rows
    ]
    # Orphans that are not the current record's job: earlier generations, and jobs whose record is gone.
    body_rows += [
        _row_html(o, o, editable.get(o.dag_id, False))
        for o in orphans
        if (o.ident, str(o.external_id)) not in listed
    ]
    head = "".join(
        f"<th>{h}</th>"
        for h in (
            "DAG",
            "run",
            "task",
            "map",
            "try",
            "system",
            "external id",
            "gen",
            "record",
            "task state",
            "job status",
            "running",
            "",
            "decisions",
            "",
        )
    )
    scope = f" of DAG <b>{_e(dag_id)}</b>" if dag_id else ""
    summary = (
        f"<p class='sub'>{len(rows)} durable job record(s){scope}; "
        f"<span class='badge {'b-orphan' if orphans else 'b-ok'}' id='orphan-count'>"
        f"{len(orphans)} orphan(s)</span>"
        " — jobs still running that no task instance waits for.</p>"
    )
    table = f"<table id='jobs'><thead><tr>{head}</tr></thead><tbody>{''.join(body_rows)}</tbody></table>"
    if not body_rows:
        table = "<p class='muted'>No durable jobs in the DAGs you may read.</p>"
    return _document("Durable jobs", f"<h1>Durable jobs</h1>{summary}{_scans_html(report)}{table}")


def _scans_html(report: ScanReport | None) -> str:
    """Where the systems were listed, and what could not be: a failed list is shown, never hidden."""
    if report is None:
        return ""
    parts = []
    if report.scanned:
        places = ", ".join(f"<span class='state'>{_e(w)}</span>" for w in report.scanned)
        parts.append(f"<p class='sub' id='scanned'>Systems listed for the jobs they carry: {places}.</p>")
    parts += [f"<p class='denied scan-error'>{_e(m)}</p>" for m in report.errors]
    parts += [f"<p class='muted scan-note'>{_e(m)}</p>" for m in [*report.truncated, *report.not_scannable]]
    return "".join(parts)
