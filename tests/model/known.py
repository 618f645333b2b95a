"""Violations the model finds on today's engine, with what each corresponds to.

``make test`` records these instead of failing on them. Three tables, because they are emptied by
different work:

* `KNOWN_VIOLATIONS`: findings of issue 22 ("Deliver", item 1); the lead removes an entry when its fix
  lands, and from then on the model fails if the violation comes back.
* `NEXT_ISSUE`: a job whose record Airflow (or a user) deleted while nothing held it: no engine can
  reach it again from the record; it is the "Airflow forgets; the job doesn't" issue (DESIGN §8,
  "Recoverable without the record"), which builds on this one.
* `IMPOSSIBLE_ON_AIRFLOW_3_3`: two situations a try cannot tell apart with what Airflow 3.3 tells it
  (docs/dev/model.md, "Indistinguishable situations"); no fix empties them.

Keys are ``<invariant>:<situation>`` as `tests.model.world.World.violate` builds them; a pattern ending
in ``*`` matches every key it prefixes.
"""

from __future__ import annotations

_F1 = (
    "finding 1, a clear of a deferred task still fails it: the new deferral's trigger row reuses the id of "
    "the old one (SQLite), the triggerer keeps running the old trigger, and its event about the old job "
    "reaches the new try, whose execute_complete raises DurableEventError"
)
_F3 = (
    "finding 3, a clear of a running task whose worker is gone is ignored: RESTARTING, then the heartbeat "
    "timeout makes it up_for_retry with max_tries untouched, and the next try continues the old job. "
    "Fixable: clear_task_instances gives the cleared task instance a new ti.context_carrier, which a "
    "retry keeps (docs/dev/model.md, 'Indistinguishable situations')"
)
_F5 = (
    "finding 5, the owner cannot cancel inside the submit→persist window: the intent record has no id, so "
    "on_kill leaves the job it just created running; a SIGTERM inside a store call deadlocks on the "
    "supervisor channel's lock and the SIGKILL leaves the job untracked"
)

_N1 = (
    "model finding N1: a trigger cancelled by a user action while it awaits asgiref's sync_to_async (the "
    "BigQuery trigger polls through it) gets a CancelledError without the user-action message (asgiref "
    "drops it; asyncio.to_thread keeps it), so run_trigger never calls on_kill and the job of a marked task "
    "(or of a deleted run) runs on. DurableOwnedTrigger.run can keep the message by awaiting the provider "
    "trigger's next event as a task of its own"
)

_F7 = (
    "finding 7, a lost id: the new epoch's cancel of the old job fails, and the new intent overwrites the "
    "record: no record names the old job any more"
)

KNOWN_VIOLATIONS: dict[str, str] = {
    "2:foreign-event-failed-try-after-clear-of-deferred": _F1,
    "4:owner-try-decision-cancels-tracked-job": (
        "finding 2, a plain retry taken for a new epoch: after a DAG edit of retries and a clear of another "
        "task (clear_number + 1), Epoch.same_as sees a new epoch, and the retry cancels the running job of "
        "its own logical job and submits again"
    ),
    "2:result-of-older-lj-after-clear-of-running-dead-worker": _F3,
    "2:waits-on-older-lj-after-clear-of-running-dead-worker": _F3,
    "5:old-job-survives-clear-of-running-dead-worker": _F3,
    "4:non-owner-try-decision-cancels-tracked-job": (
        "finding 4, a superseded try cancels the job a newer try adopted: the zombie's store write fails "
        "(its task-instance id is superseded) and _cancel_untracked cancels the job the newer try tracks"
    ),
    "5:mark-running-on-kill-left-job": _F5,
    "3:never-recorded-creator-killed-after-on-kill-deadlock": _F5,
    "5:old-job-dropped-after-failed-cancel": _F7,
    "3:unnamed-by-overwritten-after-failed-cancel": _F7,
    # Found by the model (not in the issue's list).
    "5:mark-deferred-trigger-on-kill-never-ran": _N1,
    "3:unnamed-by-run-deleted-holder-left-it-trigger-on-kill-never-ran": _N1,
    "3:never-recorded-answer-lost-*": (
        "model finding N2: the service took a submission but its answer was lost (a 5xx after the job was "
        "created); the try fails with only the intent (token) recorded. A retry resends the token and finds "
        "the job, but with no retry left (or a mark meanwhile) the job runs on, named by nothing the "
        "orphans tool reads. The try could resend the same token at once (idempotent) before giving up"
    ),
    "5:mark-deferred-trigger-left-job": (
        "finding 11, the owned trigger decides on a slow, ambiguous answer: marked failed while deferred, "
        "the trigger's on_kill asks the task's state; a clear lands first, the answer says a try will run, "
        "and the trigger cancels nothing"
    ),
}

NEXT_ISSUE: dict[str, str] = {
    "3:unnamed-by-run-deleted-nobody-held-it": (
        "the DAG run was deleted while no process or running trigger held its job (e.g. deferred, no "
        "triggerer had picked the trigger up yet, or the worker's node was lost): the record went with the "
        "run, and only a lookup of the job by its identity in the system can find it again"
    ),
    "3:unnamed-by-run-deleted-holder-left-it-trigger-killed": (
        "the DAG run was deleted while a trigger held its job, and the triggerer died before it cancelled "
        "the trigger (on_kill never ran): nothing holds the job any more"
    ),
    "3:unnamed-by-run-deleted-holder-left-it-process-killed": (
        "the DAG run was deleted while a worker held its job, and the worker died before its next heartbeat "
        "(the SIGTERM → on_kill that would have cancelled it never came)"
    ),
    "3:never-recorded-creator-killed": (
        "the worker was killed inside the submit→persist window and no try followed to resume the token "
        "(no retry left, or the task was marked or its run deleted meanwhile): the record holds only the "
        "token, and only a lookup of the job by its identity can find it"
    ),
    "3:unnamed-by-run-recreated-*": (
        "the DAG run was deleted and triggered again with the same run_id while a try of the old run still "
        "held its job: the old try's on_kill finds no record (its task-instance id is gone) and a task "
        "instance of that name alive again (the new run's), so it leaves the job to 'a newer try', which "
        "belongs to another run and never sees it"
    ),
    "3:unnamed-by-retention-*": (
        "the record expired (retention) while its job ran: nothing names the job any more (and a try "
        "that held it may have exited without knowing: Airflow refuses a deferral of a task marked meanwhile)"
    ),
    "3:unnamed-by-storage-tab-*": (
        "a user deleted the record in the UI's Storage tab while its job ran: nothing names the job any more"
    ),
}

_NO_RESET = (
    "a clear with reset_dag_runs=false of a running task whose worker is gone: neither max_tries, nor the "
    "run's clear_number, nor ti.context_carrier changes (no OpenTelemetry SDK), so the next try sees exactly "
    "what a plain retry after the worker's death sees, and the retry must reconnect"
)

IMPOSSIBLE_ON_AIRFLOW_3_3: dict[str, str] = {
    "2:result-of-older-lj-after-clear-of-running-dead-worker-no-run-reset": _NO_RESET,
    "2:waits-on-older-lj-after-clear-of-running-dead-worker-no-run-reset": _NO_RESET,
    "5:old-job-survives-clear-of-running-dead-worker-no-run-reset": _NO_RESET,
}

TABLES = {"known": KNOWN_VIOLATIONS, "next issue": NEXT_ISSUE, "impossible on 3.3": IMPOSSIBLE_ON_AIRFLOW_3_3}


def explain(key: str) -> str | None:
    """``"<table>: <why>"`` for a listed key, ``None`` for a new violation."""
    for label, table in TABLES.items():
        for pattern, why in table.items():
            if key == pattern or (pattern.endswith("*") and key.startswith(pattern[:-1])):
                return f"{label}: {why}"
    return None


def gated(key: str) -> bool:
    return explain(key) is not None
