"""Violations the model finds on today's engine, with what each corresponds to.

``make test`` records these instead of failing on them. Three tables, because they are emptied by
different work:

* `KNOWN_VIOLATIONS`: findings of issue 22 ("Deliver", item 1) whose fix has not landed on this branch; the
  lead removes an entry when its fix lands, and from then on the model fails if the violation comes back.
  The findings the model showed on the engine of ``59ecc40`` are listed in docs/dev/model.md ("What it
  found"); their scenarios in ``tests/model/scenarios.py`` are regression tests now.
* `NEXT_ISSUE`: a job whose record Airflow (or a user) deleted while nothing held it: no engine can
  reach it again from the record; it is the "Airflow forgets; the job doesn't" issue (DESIGN §8,
  "Recoverable without the record"), which builds on this one.
* `IMPOSSIBLE_ON_AIRFLOW_3_3`: situations a try cannot tell apart with what Airflow 3.3 tells it
  (docs/dev/model.md, "Indistinguishable situations"); empty since the clear listener.

Keys are ``<invariant>:<situation>`` as `tests.model.world.World.violate` builds them; a pattern ending
in ``*`` matches every key it prefixes.
"""

from __future__ import annotations

_N1 = (
    "model finding N1: a trigger cancelled by a user action while it awaits asgiref's sync_to_async (the "
    "BigQuery trigger polls through it) gets a CancelledError without the user-action message (asgiref "
    "drops it; asyncio.to_thread keeps it), so run_trigger never calls on_kill and the job of a marked task "
    "(or of a deleted run) runs on. DurableOwnedTrigger.run can keep the message by awaiting the provider "
    "trigger's next event as a task of its own. Being fixed in airflow_durable/triggers/owned.py on branch "
    "runtime: remove this entry when that lands"
)

_N3 = (
    "model finding N3 (engine, open): the record is deleted by an outside hand (retention, the Storage tab) "
    "while its job runs, and the next try, finding no record, derives the same token again: the lifetime "
    "salt (identity.TryIdentity.lifetime_salt) hashes only the run's start date and clear_number, which a "
    "record deletion does not change. The system hands the older job back (an idempotency key) or the "
    "token lookup finds it and adoption keeps the earliest (Batch, EMR on EKS: the try cancels the job it "
    "just submitted), so the new logical job waits on and returns the older one. DESIGN §8: a new "
    "lifetime's tokens must be unique to it, and a job older than the intent is refused, never adopted"
)

_N4 = (
    "model finding N4 (engine, open; the sync twin of finding 11): the user marks a running task, then "
    "clears it before the try's next heartbeat; the SIGTERM's on_kill reads the record with its superseded "
    "task-instance id (not found) and asks the task's state: a try is scheduled or running, so it leaves the "
    "job to it (it cannot tell a mark-then-clear from a zombie whose retry adopted the job). The new try "
    "does end it (the record names it, a new epoch), so the job runs until that try starts"
)
_N5 = (
    "model finding N5 (engine, open): the user clears a running task before its try submitted; the "
    "heartbeat's SIGTERM runs on_kill (nothing to cancel yet) and the try's main thread goes on (the "
    "supervisor's SIGKILL comes 5 s later): it submits, its write of the id fails (404, its id is "
    "superseded), and as a superseded try it may not cancel (the newer try might have adopted the job by its "
    "token, finding 4), but the newer try is of a new epoch and never learns the job: it runs untracked. A "
    "try whose on_kill ran could refuse to submit from then on"
)

_N6 = (
    "model finding N6 (engine, open): on a system without an idempotency key (Batch) the try submits, "
    "looks its token up to converge, and the status read that follows fails: the try fails before it writes "
    "the id it already holds, so the record keeps only the token; with no retry left the job runs on, "
    "named by nothing the orphans tool reads. Minimal path: Batch, sync, retries=0, the next status read "
    "fails; try 1 submits, ListJobs, DescribeJobs fails, the try ends failed"
)
_N7 = (
    "model finding N7 (engine, open; against issue 22's rule that no read failure may lead to a submit): a "
    "new epoch's try (here after a clear of a running task whose worker froze, marked by the listener) "
    "cannot read the old job's status (5xx), keeps it in the record's unended list without cancelling it, "
    "and submits the new job: both run. Minimal path: Batch, sync, retries=0: try 1 submits and records; its "
    "worker freezes; the next status read fails; the user clears; the heartbeat timeout; try 2 reads the "
    "record, DescribeJobs of the old job fails, it writes and submits"
)

_N8 = (
    "model finding N8 (engine, open; the flip side of finding 2's fix): the DAG file lowers retries by "
    "as many tries as were used (2 → 1 after try 1), then the user clears the task: clear_task_instances "
    "sets max_tries = try_number + retries, unchanged, and raises clear_number, which a clear of another "
    "task raises too; the engine takes the clear for a retry and reconnects to the old job. Only "
    "ti.context_carrier (renewed for the task instances a clear clears) tells them apart. Minimal path: "
    "BigQuery, deferrable, retries=2: try 1 submits and defers; DAG edit retries=1; the user clears the "
    "deferred task; try 2 defers on the old job"
)

KNOWN_VIOLATIONS: dict[str, str] = {
    "2:waits-on-older-lj-after-clear-of-deferred": _N8,
    "5:old-job-left-running-named-after-clear-of-deferred": _N8,
    "3:never-recorded-creator-ended-failed": _N6,
    "5:mark-then-clear-running-on-kill-left-job": _N4,
    "3:never-recorded-creator-sigtermed": _N5,
    "2:waits-on-older-lj-after-record-deleted-*": _N3,
    "2:result-of-older-lj-after-record-deleted-*": _N3,
    # clear_on_success deleted the record at success; the clear (reset_dag_runs=false) kept the salt.
    "2:result-of-older-lj-after-clear-of-success-no-run-reset": _N3,
    "3:never-recorded-answer-lost-*": (
        "model finding N2 (engine, open): the service took a submission but its answer was lost (a 5xx "
        "after the job was created); the try fails with only the intent (token) recorded. A retry resends "
        "the token and finds the job, but with no retry left (or a mark meanwhile) the job runs on, named by "
        "nothing the orphans tool reads. The try could resend the same token at once (idempotent), or look "
        "it up, before giving up"
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
    "3:never-recorded-creator-killed-after-on-kill-in-channel-call": (
        "the user marked the task while its try was between its submit and the write of the job's id, the "
        "SIGTERM landed inside that very channel call, and the supervisor's SIGKILL came before the call "
        "returned (it has 5 s; the write takes milliseconds): on_kill could not ask Airflow who owns the job "
        "(a second channel call would deadlock on CommsDecoder's lock), so it leaves the job to the record's "
        "token by design (engine/ownership.py, Read.SKIPPED); only a lookup of the job by that token can "
        "find it"
    ),
    "3:unnamed-by-run-deleted-holder-left-it-process-deferred": (
        "the DAG run was deleted while a try ran, and the try deferred before its next heartbeat: Airflow "
        "refuses the deferral (the task instance is gone) and the process exits; no trigger and no on_kill "
        "ever holds the job"
    ),
    "3:unnamed-by-run-deleted-holder-left-it-trigger-ended": (
        "the DAG run was deleted while a trigger held its job, and the trigger ended on its own (an error "
        "event after a failed status read) before the triggerer cancelled it: the event reaches no task "
        "instance, nothing holds the job"
    ),
    "3:unnamed-by-run-deleted-holder-left-it-cancel-failed-*": (
        "the DAG run was deleted; its job's holder tried to cancel it (on_kill) and the cancel failed: with "
        "the run and its record gone nothing can try again"
    ),
    "3:unnamed-by-run-recreated-*": (
        "the DAG run was deleted and triggered again with the same run_id while a try of the old run still "
        "held its job: the old try's on_kill finds no record (its task-instance id is gone) and a task "
        "instance of that name alive again (the new run's), so it leaves the job to 'a newer try', which "
        "belongs to another run and never sees it"
    ),
    "3:unnamed-by-clear_on_success-*": (
        "the user marked the task success while its job ran and [state_store] clear_on_success is on: the "
        "public API deletes the task's state-store rows (_clear_task_state_store_on_success) before any "
        "listener runs; when nothing ran the task (up_for_retry, queued, scheduled) or its holder ended "
        "without a kill (SIGKILLed before its heartbeat, a trigger killed with its triggerer), the job runs "
        "on, named by nothing"
    ),
    "3:unnamed-by-retention-*": (
        "the record expired (retention) while its job ran: nothing names the job any more (and a try "
        "that held it may have exited without knowing: Airflow refuses a deferral of a task marked meanwhile)"
    ),
    "3:unnamed-by-storage-tab-*": (
        "a user deleted the record in the UI's Storage tab while its job ran: nothing names the job any more"
    ),
}

#: Empty since the clear listener (airflow_durable/plugins/listener.py): a clear with reset_dag_runs=false of
#: a running task whose worker is gone left the next try exactly what a plain retry sees; the listener's
#: mark in the record now tells them apart (docs/dev/model.md, "Indistinguishable situations").
IMPOSSIBLE_ON_AIRFLOW_3_3: dict[str, str] = {}

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
