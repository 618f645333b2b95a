"""Violations the model finds on today's engine, with what each corresponds to.

``make test`` records these instead of failing on them. Three tables, because they are emptied by
different work:

* `KNOWN_VIOLATIONS`: engine findings whose fix has not landed (empty: every finding of issue 22 is fixed,
  or listed below as a limit of Airflow 3.3 or as the next issue's); a violation not listed fails the model.
  The findings the model showed on the engine of ``59ecc40`` are listed in docs/dev/model.md ("What it
  found"); their scenarios in ``tests/model/scenarios.py`` are regression tests now.
* `NEXT_ISSUE`: a job whose record Airflow (or a user) deleted while nothing held it: no engine can
  reach it again from the record; it is the "Airflow forgets; the job doesn't" issue (DESIGN §8,
  "Recoverable without the record"), which builds on this one.
* `IMPOSSIBLE_ON_AIRFLOW_3_3`: situations a try cannot tell apart with what Airflow 3.3 tells it
  (docs/dev/model.md, "Indistinguishable situations").

Keys are ``<invariant>:<situation>`` as `tests.model.world.World.violate` builds them; a pattern ending
in ``*`` matches every key it prefixes.
"""

from __future__ import annotations

KNOWN_VIOLATIONS: dict[str, str] = {}

NEXT_ISSUE: dict[str, str] = {
    "1:two-live-jobs-after-*": (
        "a try that began before an outside hand deleted the record (retention, the Storage tab, a deleted "
        "run) finds no record and, as a new lifetime, submits anew while the older job runs on untracked; "
        "or a try whose run was deleted while it resent a lost submission to a system without idempotency "
        "(a second job) is killed before it converges; or the resend's answer is lost too, or its "
        "converge lookup fails (N2's double fault, below): only a lookup by the task instance's identity "
        "or the token ends them"
    ),
    "5:never-recorded-old-job-survives-*": (
        "a job no record ever named (its creator failed before writing its id: the lost answer with a failed "
        "resend, above, or N5 in flight whose creator's own cancel then failed) outlives a clear: the new "
        "logical job's try keeps the older intent's token in "
        "`unended`, but only a lookup by that token finds the job to end it"
    ),
    "3:never-recorded-answer-lost-*": (
        "N2 with a second fault: the service made the job but its answer was lost, and the same try's "
        "resend of the token failed too (BigQuery: the resend's 409 makes the provider read the job, and "
        "that read fails); the try ends with only the token recorded and no retry left. The single fault "
        "is fixed (the resend; test_logical_job_edges.py::test_a_submit_whose_answer_was_lost_leaves_its_"
        "job_tracked); this one needs a lookup of the job by its token"
    ),
    "3:never-recorded-creator-sigtermed": (
        "N5 in flight: the user clears a running task while its submit call is in flight; the SIGTERM's "
        "on_kill finds no id, the call returns one afterwards, the try cannot write it (its task-instance id "
        "is superseded) and may not cancel (a zombie's retry may have reconnected to that job by its token: "
        "finding 4). The new epoch's record keeps the older intent's token in `unended`; only a lookup "
        "of the job by that token finds it"
    ),
    "3:unnamed-by-run-deleted-nobody-held-it*": (
        "the DAG run was deleted while no process or running trigger held its job (e.g. deferred, no "
        "triggerer had picked the trigger up yet, or the worker's node was lost): the record went with the "
        "run, and only a lookup of the job by its identity in the system can find it again"
    ),
    "3:unnamed-by-run-deleted-holder-left-it-trigger-killed": (
        "the DAG run was deleted while a trigger held its job, and the triggerer died before it cancelled "
        "the trigger (on_kill never ran): nothing holds the job any more"
    ),
    "3:unnamed-by-run-deleted-holder-left-it-trigger-on-kill-never-ran": (
        "the DAG run was deleted while a trigger held its job; the triggerer cancelled the trigger for the "
        "user's action and died before its on_kill ran: nothing holds the job any more"
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
    "3:unnamed-by-run-deleted-never-recorded-*": (
        "a job no record ever named (its creator was killed, stopped or refused before the id write, or its "
        "answer was lost) whose DAG run was deleted since: no try of that run will ever resume its token; "
        "only a lookup of the job by its identity finds it"
    ),
    "3:unnamed-by-run-deleted-holder-left-it-process-failed": (
        "the DAG run was deleted while a try waited on its job, and the try then failed on its own (its "
        "waiter gave up) before its next heartbeat: a failed try leaves its job to the retry, which a "
        "deleted run never has; only a lookup of the job by its identity finds it"
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
    "5:mark-deferred-then-run-recreated-trigger-left-job": (
        "the user marked the deferred task, then deleted its DAG run and triggered it again with the same "
        "run_id before the trigger's on_kill asked Airflow: the answer is about the new run's task instance "
        "of the same name (running), so the trigger leaves the job to it, and the new run's first try has "
        "no evidence of an earlier lifetime to look it up; only orphans through the systems (a job of this "
        "identity that the task instance's record does not name) can end it"
    ),
    "5:mark-running-answer-lost-on-kill-left-job": (
        "N2 and a mark: the submission's answer was lost, and the mark's SIGTERM came while the try resent "
        "the token; on_kill holds no id for the job the lost answer made, and the record only its token: "
        "only a lookup by that token finds it"
    ),
    "5:clear-then-mark-deferred-trigger-left-job": (
        "the user cleared the deferred task, then marked it while the new try had not yet ended the old job "
        "(the mark kills that try first); the old trigger's on_kill cannot tell whose state Airflow answers "
        "(the new try's start took the trigger's note) and keeps the job; the record still names it and "
        "the task ended: the opt-in reaper (orphans' rules with --cancel) ends it (issue 23, item 5)"
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

#: What a try cannot tell apart with what Airflow 3.3 tells it (docs/dev/model.md, "Indistinguishable
#: situations"); the clear listener and the trace-carrier clear mark emptied it of everything else.
IMPOSSIBLE_ON_AIRFLOW_3_3: dict[str, str] = {
    "5:mark-then-clear-running-on-kill-left-job": (
        "N4 once the clear's new try has started: the user marks a running task, then clears it before the "
        "try's next heartbeat. The SIGTERM's on_kill cannot read its record (its task-instance id is "
        "superseded); with no state yet it cancels, but a new try's scheduled/queued/running is exactly "
        "what Airflow answers about a zombie whose retry reconnected to the job by "
        "its token (finding 4): cancelling would end that retry's job. The job stays named by the record, "
        "and the clear's new try, a new epoch, ends it as it starts (the new-epoch cells of "
        "tests/conformance/test_logical_job_edges.py)"
    ),
    "5:mark-then-clear-deferred-trigger-left-job": (
        "the deferred twin of N4: the user marks a deferred task, then clears it, and a new try starts "
        "before the old trigger's note is written (its first channel call can take seconds), so the note "
        "survives the new try's XCom clear. On the kill, Airflow answers running and the note is the "
        "trigger's own: exactly what it answers when the trigger fired on the triggerer that took it over "
        "and its own try resumed (apache/airflow#73454), where cancelling would end the job the try waits "
        "on. The job stays named by the record and the new try, a new epoch, ends it as it starts"
    ),
    "2:waits-on-older-lj-after-clear-of-deferred-no-run-reset": (
        "N8 with reset_dag_runs=false: DAG edit lowers retries by the tries used, then a clear that does not "
        "reset the run: max_tries, clear_number and (without OpenTelemetry, where a task instance's carrier "
        "is its run's) the trace carrier all come out unchanged: no field a try can read tells the clear"
    ),
    "5:old-job-left-running-named-after-clear-of-deferred-no-run-reset": (
        "the same clear as above: the next try reconnects to the old job, which is then not old to it"
    ),
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
