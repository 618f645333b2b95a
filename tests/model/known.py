"""Violations the model finds on today's engine, with what each corresponds to.

``make test`` records these instead of failing on them. Four tables, because they are emptied by
different work:

* `KNOWN_VIOLATIONS`: engine findings whose fix has not landed (empty: every finding of issues 22 and 23
  is fixed); a violation not listed fails the model. The findings the model showed on the engine of
  ``59ecc40`` are listed in docs/dev/model.md ("What it found"); their scenarios in
  ``tests/model/scenarios.py`` are regression tests now.
* `REAPER`: an active job nothing tracks and no try will come to find (issue 23: every job carries its task
  instance's identity, and a try that finds no record while Airflow shows an earlier lifetime looks the
  task instance's jobs up; invariant 3 counts a job that try will find as tracked,
  `tests.model.world.World.coming_lookup_misses`). What is left is the task instance's end: finished,
  marked, its run deleted, or a run re-created whose first try has no evidence to look up. Emptied by
  issue 23 items 4 and 5 (``orphans`` through the systems, the opt-in reaper), built elsewhere; the model
  does not play them.
* `NO_LOOKUP`: the same on a system that offers no lookup of a task instance's jobs (the catalogue's
  ``Lookup.implemented`` is False, with its reason): nothing finds the job without its record.
* `IMPOSSIBLE_ON_AIRFLOW_3_3`: situations a try cannot tell apart with what Airflow 3.3 tells it
  (docs/dev/model.md, "Indistinguishable situations").

The ``NEXT_ISSUE`` table of issue 22 ("only a lookup can end it") is gone: the lookups fixed what a try
to come can reach, and the rest moved to `REAPER` or `NO_LOOKUP`.

Keys are ``<invariant>:<situation>`` as `tests.model.world.World.violate` builds them; a pattern is matched
with `fnmatch` (``*`` matches anything). An untracked job's situation (invariant 3) starts with why the try
to come misses it when one comes (``no-lookup-``, ``no-evidence-``, ``record-kept-``, ``missed-by-lookup-``);
without such a prefix, no try is to come that would find it.
"""

from __future__ import annotations

from fnmatch import fnmatchcase

#: Empty: every engine finding of issues 22, 23 and 30 is fixed (docs/dev/model.md, "What it found").
KNOWN_VIOLATIONS: dict[str, str] = {}

_REAPER = "ended by the opt-in reaper / orphans via the systems (issue 23 items 4, 5)"

REAPER: dict[str, str] = {
    "3:never-recorded-*creator-killed-during-on-kill*": (
        f"{_REAPER}: the user marked the task while its try was between its submit and the id write, and "
        "the supervisor's SIGKILL came before the SIGTERM's on_kill could end the job; the marked task "
        "instance runs no try again (make explore, BigQuery)"
    ),
    "5:never-recorded-old-job-survives-*-state-discarded": (
        f"{_REAPER}: invariant 5's view of 3:never-recorded-*-state-discarded*: a try told to stop by "
        "Airflow 3.4's clear while its submit was in flight (or frozen in it) submits after the new "
        "logical job's try looked up; it cannot tell the clear from a retry that carries on with its "
        "token (finding 4), so it leaves the job, and no record keeps its token (make explore, Batch, on "
        "the merged engine)"
    ),
    "3:never-recorded-*-state-discarded*": (
        f"{_REAPER}: Airflow 3.4's clear discarded the record while a try's submit was in flight; on_kill "
        "left the job to the next try (a clear that keeps the state carries on with it: the try cannot tell "
        "which clear it was), whose lookup ran before the submit landed; the old try cannot record the job "
        "(its task-instance id is superseded) and, a newer try running, does not cancel it (it may be that "
        "try's, finding 4). The job carries the identity, and no record names its token: once the task "
        "instance ends, the reaper ends it (make explore, EMR steps, on engine-ac)"
    ),
    "3:never-recorded-*-cancel-failed": (
        f"{_REAPER}: a double fault: the try could not write its job's id (its task instance superseded by "
        "a clear, or the store down) and the service refused every cancel of it (on_kill's and the main "
        "thread's), and no try follows (the task was marked, or no retry is left). Nothing can record or "
        "end the job from Airflow's side; it carries its task instance's identity (make explore, Batch: a "
        "clear while running, the cancel failing, then a mark)"
    ),
    "3:list-lags-*": (
        f"{_REAPER}: the system's list is eventually consistent (no system documents its lag: the "
        "catalogue's `consistency`), and a try's jobs were made inside the lag when it died: the lookup of "
        "the try to come may not show them yet. A later lookup, `orphans` or the reaper finds them. Only the "
        "scenarios that set a lag play it (retry_resends_into_a_lagging_list)"
    ),
    "1:list-lags-two-live-jobs-*": (
        f"{_REAPER}: invariant 1's view of 3:list-lags-*: a try died with two jobs of its token (a lost "
        "answer's resend, no idempotency key) made inside the list's lag, and the try to come, whose lookup "
        "would reach them, may not see them yet; scenario retry_resends_into_a_lagging_list shows that try "
        "ending them once the list shows them"
    ),
    "3:never-recorded-answer-lost-*": (
        f"{_REAPER}: N2 with a second fault (the service made the job, its answer was lost, and the same "
        "try's resend of the token failed too: BigQuery's 409 makes the provider read the job, and that "
        "read fails); the try ends with only the token recorded and no retry left. A retry would resend "
        "the token or find the job by it"
    ),
    "3:never-recorded-creator-killed": (
        f"{_REAPER}: the worker was killed inside the submit→persist window and no try follows (no retry "
        "left, or the task was marked or its run deleted meanwhile); the record holds only the token"
    ),
    "3:never-recorded-creator-shutdown-killed": (
        f"{_REAPER}: a worker's or scheduler's shutdown landed between the submit and the id write of a try "
        "with no retry left; on_kill leaves the job (a stop is not a cancel, DESIGN §8: the engine cannot "
        "know whether a scheduler's reset will run the task again), the grace ended before the write, and "
        "the heartbeat timeout failed the task instance. The record keeps the job's token; a reset's or a "
        "clear's try would find the job by it (not yet seen by make explore; the killed twin above is)"
    ),
    "3:never-recorded-creator-shutdown-killed-during-on-kill": (
        f"{_REAPER}: a worker's or scheduler's shutdown landed between the submit and the id write, the user "
        "marked the task during the grace, and the grace's SIGKILL came before on_kill asked Airflow (it "
        "would have seen the mark and ended the job by its token): the twin of killed-during-on-kill; the "
        "marked task instance runs no try again (make explore, EMR steps)"
    ),
    "1:two-live-jobs-after-answer-lost": (
        f"{_REAPER}: a lost answer's resend made a second job (no idempotency key) and the try was killed "
        "before its converging lookup, with no retry left; neither job was ever recorded (the key "
        "1:two-live-jobs-after-lost-answer-* names the same when one was), invariant 3 names each (make "
        "explore, dbt Cloud; it hid under 1:two-live-jobs-after-* before)"
    ),
    "3:never-recorded-creator-killed-after-on-kill-in-channel-call": (
        f"{_REAPER}: the user marked the task while its try was between its submit and the write of the "
        "job's id, the SIGTERM landed inside that very channel call, and the supervisor's SIGKILL came "
        "before the call returned: on_kill could not ask Airflow who owns the job (engine/ownership.py, "
        "Read.SKIPPED) and the marked task instance runs no try again"
    ),
    "3:never-recorded-duplicate-answer-lost-creator-ended-failed": (
        f"{_REAPER}: a lost answer's token was resent (a second job: no idempotency key) and a read between "
        "that submit and the id write failed; the try recorded the job it holds, marked the record "
        "unconverged (its token may name another job) and failed, with no retry left. A retry would look "
        "the token up and end the other job (scenario lost_answer_resent_then_a_read_fails)"
    ),
    "1:two-live-jobs-after-lost-answer-*": (
        f"{_REAPER}: the try that resent a lost answer's token (two jobs, no idempotency key) was killed or "
        "SIGTERMed before its converging lookup ended the second, and no try follows (a try that follows "
        "resends the token and keeps the earliest job: the model then counts both as reached)"
    ),
    **{
        f"1:two-live-jobs-after-{gone}*": (
            f"{_REAPER}: two jobs of one logical job (one kept in the record after its cancel failed) lost "
            "their record to an outside hand (a mark success under clear_on_success, retention, the Storage "
            "tab, a deleted run) and the task instance runs no try that would find them (a try to come that "
            "misses them prefixes the key with why); invariant 3 names each"
        )
        for gone in ("clear_on_success-", "retention-", "storage-tab-", "run-deleted")
    },
    "3:never-recorded-*-run-deleted": (
        f"{_REAPER}: the job's DAG run was deleted (and maybe triggered again) before its creator wrote its "
        "id (e.g. a try cleared while its submit was in flight, whose new epoch's try would have found the "
        "job by the old intent's token, as scenario sigtermed_try_submits shows): the record went with the "
        "run and no try of it will come"
    ),
    "3:unnamed-by-run-deleted-*": (
        f"{_REAPER}: the DAG run was deleted while its job ran (nothing held it, or its holder left it: a "
        "process killed or refused its deferral, a trigger killed or ended on its own, a cancel that "
        "failed): the record and the task instance went with the run, and no try of it will come"
    ),
    "3:unnamed-by-run-recreated-*": (
        f"{_REAPER}: the DAG run was deleted and triggered again with the same run_id; the old run's job "
        "carries the same identity, but no try of the new run that would look it up is certain to come "
        "(its first try shows no earlier lifetime, the old run's try went with its run)"
    ),
    "3:no-evidence-*": (
        f"{_REAPER}: the job's DAG run was deleted (its record with it, or already gone) and triggered again "
        "with the same run_id; the new run's next try is its first (try_number 1, clear_number 0, "
        "max_tries = retries), so it shows no earlier lifetime and makes no lookup (by design: a first "
        "try's happy path makes none). The old run's job carries the identity of the new run's task "
        "instance: `orphans` through the systems must tell it from the new run's own jobs by its token"
    ),
    "3:record-kept-*unnamed-by-run-recreated-*": (
        f"{_REAPER}: as above, after the re-created run's first try (no evidence, no lookup) wrote its own "
        "record: every later try follows that record, which names the new run's job, and never looks up "
        "the old run's (make explore, Batch: deferred, the run deleted, its triggerer killed, the run "
        "triggered again, its first try fails after its id write)"
    ),
    "3:record-kept-unnamed-by-retention-*": (
        f"{_REAPER}: the record was deleted by retention while its job ran and nothing held the job any more "
        "(its trigger's triggerer killed, its try ended); then the run was deleted and triggered again, and "
        "the re-created run's first try (no evidence, no lookup) wrote its own record, which every later try "
        "follows (make explore, EMR steps: deferred, retention, triggerer killed, run deleted and "
        "re-created, its first try fails after its id write). Without the re-created run the next try finds "
        "no record "
        "and a clear or retry as evidence, and looks the job up"
    ),
    "3:record-kept-unnamed-by-storage-tab-*": (
        f"{_REAPER}: the same with the record deleted in the UI's Storage tab"
    ),
    "3:record-kept-unnamed-by-clear-discarding-state-*": (
        f"{_REAPER}: Airflow 3.4's default clear deleted the record while its job ran and its try was "
        "killed; then the run was deleted and triggered again, and the re-created run's first try (no "
        "evidence, no lookup) wrote its own record, which every later try follows (make explore, Batch)"
    ),
    "3:unnamed-by-clear-discarding-state-*": (
        f"{_REAPER}: Airflow 3.4's default clear deleted the record while its job ran, and the task instance "
        "ended before a try looked it up (marked, its try already decided, its run deleted), or the try that "
        "found it could not write it down (the write failed twice: it is written once more, and a try that "
        "cannot prove itself current ends nothing) and no retry was left"
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
    "3:unnamed-by-clear_on_success-*": (
        f"{_REAPER}: the user marked the task success while its job ran and [state_store] clear_on_success"
        " is on: the public API deletes the record (_clear_task_state_store_on_success); the task "
        "instance is finished and no try comes"
    ),
    "3:unnamed-by-retention-*": (
        f"{_REAPER}: the record expired (retention) while its job ran and the task instance runs no try "
        "again (it finished, or its try already decided)"
    ),
    "3:unnamed-by-storage-tab-*": (
        f"{_REAPER}: a user deleted the record in the UI's Storage tab while its job ran and the task "
        "instance runs no try again (it finished, or its try already decided)"
    ),
}

NO_LOOKUP: dict[str, str] = {
    "5:*on-kill-left-job-answer-lost-no-lookup": (
        "a submission's answer was lost and the user marked the task before the try stored an id: on_kill "
        "has no id to cancel and the system cannot list the job by its token (Databricks run-now); the "
        "main thread, told to stop, sends nothing more and ends the job only if a resend already in flight "
        "hands it back before the SIGKILL"
    ),
    "3:no-lookup-*": (
        "a try comes that would look the job up (no record and evidence of an earlier lifetime, or the "
        "record keeps the job's token), but the system offers no lookup of a task instance's jobs "
        "(catalogue Lookup.implemented False: Databricks run-now takes no run name or tags and its "
        "idempotency_token is not listed; Snowflake moved to a lookup in issue 34): a job whose record "
        "went is found by nothing but `orphans`' cache. (A never-recorded job whose record keeps its token "
        "may still be reached by a try to come that resends the token through Databricks' idempotency "
        "key; the model does not credit that on these systems.) Every other cause keeps its own key"
    ),
    "5:never-recorded-old-job-survives-*-no-lookup": (
        "the same: a job no record ever named (its creator failed before writing its id) outlives a "
        "clear; the new logical job's record keeps the older intent's token, which only a lookup could "
        "resolve"
    ),
}

#: What a try cannot tell apart with what Airflow 3.3 tells it (docs/dev/model.md, "Indistinguishable
#: situations"); the clear listener and the trace-carrier clear mark emptied it of everything else.
IMPOSSIBLE_ON_AIRFLOW_3_3: dict[str, str] = {
    "4:shutdown-fails-the-try-record-deleted": (
        "an outside hand (the Storage tab, retention) deleted the record while the try ran, then its worker "
        "shut down: on_kill reads its record with its own task-instance id and finds nothing while Airflow "
        "shows the task running, exactly what a try superseded by a newer running try reads (the execution "
        "API answers 404 for a stale id and for a missing key alike, and the SDK client turns both into "
        "TASK_STORE_NOT_FOUND, airflow/sdk/api/client.py). So ownership decides, as for a superseded try, "
        "and the try fails. Nothing is lost beyond the record's deletion: the next try begins a new logical "
        "job without the record and its lookup ends the older job, as for any deleted record "
        "(docs/how-it-works.md, 'Without the record')"
    ),
    "5:mark-then-clear-running-on-kill-left-job*": (
        "N4 once the clear's new try has started: the user marks a running task, then clears it before the "
        "try's next heartbeat. The SIGTERM's on_kill cannot read its record (its task-instance id is "
        "superseded); with no state yet it cancels, but a new try's scheduled/queued/running is exactly "
        "what Airflow answers about a zombie whose retry reconnected to the job by "
        "its token (finding 4): cancelling would end that retry's job. The job stays named by the record, "
        "and the clear's new try, a new epoch, ends it as it starts (the new-epoch cells of "
        "tests/conformance/test_logical_job_edges.py). ``-answer-lost``: the job of a submission whose "
        "answer was lost, which the record names by its token only; the new epoch's try finds it by that "
        "token (scenario mark_then_clear_then_a_new_try_while_a_lost_answer_is_resent)"
    ),
    "5:mark-then-clear-deferred-trigger-left-job": (
        "the deferred twin of N4: the user marks a deferred task, then clears it, and a new try starts "
        "before the old trigger's note is written (its first channel call can take seconds), so the note "
        "survives the new try's XCom clear. On the kill, Airflow answers running and the note is the "
        "trigger's own: exactly what it answers when the trigger fired on the triggerer that took it over "
        "and its own try resumed (apache/airflow#73454), where cancelling would end the job the try waits "
        "on. The job stays named by the record and the new try, a new epoch, ends it as it starts"
    ),
    "5:clear-then-mark-then-clear-deferred-trigger-left-job": (
        "the user clears a deferred task, marks it (no state yet), and clears it again: the new try, a new "
        "epoch, runs when the old trigger's on_kill asks. Its note is gone (the new try's XCom clear) and "
        "Airflow answers running: a newer try that may still run, so the trigger leaves the job to it, which "
        "ends it as it starts (the record, kept on 3.3, names it in an older epoch; after 3.4's clear the "
        "new try's lookup finds it). Had the newer try ended (marked) when the trigger asked, the trigger "
        "cancels (engine-d; scenario clear_then_mark_before_the_new_try_decides). make explore, Databricks"
    ),
    "5:mark-then-clear-deferred-after-clear-discarding-state-trigger-left-job": (
        "the same after Airflow 3.4's clear: the user clears a deferred task (state discarded), marks it, "
        "clears it again; the new try runs when the old trigger asks, so the trigger leaves the job to it. "
        "That try finds no record, the clear is its evidence, and its lookup ends the job as it starts "
        "(make explore, Batch, 68f52b9)"
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

TABLES = {
    "known": KNOWN_VIOLATIONS,
    "reaper": REAPER,
    "no lookup": NO_LOOKUP,
    "impossible on 3.3": IMPOSSIBLE_ON_AIRFLOW_3_3,
}


def explain(key: str) -> str | None:
    """``"<table>: <why>"`` for a listed key, ``None`` for a new violation."""
    for label, table in TABLES.items():
        for pattern, why in table.items():
            if fnmatchcase(key, pattern):
                return f"{label}: {why}"
    return None


def gated(key: str) -> bool:
    return explain(key) is not None
