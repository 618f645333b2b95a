"""The owned trigger's kill policy (`may_cancel_on_kill`, beside `may_cancel` in the ownership module),
one case per answer Airflow can give.

Pure: what the trigger knows (the try that deferred, ``cancel_on_kill``) and what Airflow answered (the
task instance's state now, the try that state is about, or no such task instance). The I/O around it is
exercised per system in ``tests/conformance/test_logical_job.py`` and on a real triggerer in
``tests/e2e_runtime/test_logical_job.py``.
"""

from __future__ import annotations

import pytest

from airflow_durable.engine.ownership import TryAnswer, may_cancel_on_kill

CANCEL, KEEP = True, False


@pytest.mark.parametrize(
    ("my_try", "answer", "expected", "why"),
    [
        # -- the answer is about this trigger's own try
        (1, TryAnswer("success", 1), CANCEL, "a user ended it"),
        (1, TryAnswer("failed", 1), CANCEL, "a user ended it"),
        (1, TryAnswer("skipped", 1), CANCEL, "a user ended it"),
        (1, TryAnswer("upstream_failed", 1), CANCEL, "a user ended it"),
        (1, TryAnswer("removed", 1), CANCEL, "a user ended it"),
        (1, TryAnswer("deferred", 1), KEEP, "handed to another triggerer"),
        (1, TryAnswer("scheduled", 1), KEEP, "resumed"),
        (1, TryAnswer("queued", 1), KEEP, "resumed"),
        (1, TryAnswer("running", 1), KEEP, "resumed"),
        (1, TryAnswer(None, 1), CANCEL, "cleared"),
        (1, TryAnswer("restarting", 1), KEEP, "while a try of it ran"),
        (1, TryAnswer("up_for_retry", 1), KEEP, "reconnects"),
        (1, TryAnswer("up_for_reschedule", 1), KEEP, "reconnects"),
        # -- about a newer try that may still run: it owns the job (issue 22: the late "deferred")
        (1, TryAnswer("deferred", 2), KEEP, "superseded"),
        (1, TryAnswer("running", 2), KEEP, "superseded"),
        (1, TryAnswer("queued", 2), KEEP, "superseded"),
        (1, TryAnswer("scheduled", 2), KEEP, "superseded"),
        (1, TryAnswer("up_for_retry", 2), KEEP, "superseded"),
        (1, TryAnswer("restarting", 2), KEEP, "superseded"),
        (1, TryAnswer(None, 2), KEEP, "superseded"),
        # -- about a newer try that ended: nothing waits on the job, and that try may have been marked
        #    before it reached it (model: 5:mark-deferred-after-clear-discarding-state-trigger-left-job)
        (1, TryAnswer("failed", 2), CANCEL, "newer try 2 ended"),
        (1, TryAnswer("success", 3), CANCEL, "newer try 3 ended"),
        (1, TryAnswer("skipped", 2), CANCEL, "newer try 2 ended"),
        # -- about an older try number: the DAG run was deleted and run again
        (2, TryAnswer("deferred", 1), CANCEL, "re-created"),
        # -- Airflow knows no such task instance
        (1, TryAnswer(exists=False), CANCEL, "gone"),
        (None, TryAnswer(exists=False), CANCEL, "gone"),
        # -- no answer at all: the record keeps tracking the job
        (1, TryAnswer(error="TimeoutError: "), KEEP, "no answer"),
        # -- Airflow did not say which try (or the trigger does not know its own): the state alone,
        #    cancelling only where no try of any number waits on a job
        (1, TryAnswer("failed", None), CANCEL, "which try is not known"),
        (None, TryAnswer("success", 4), CANCEL, "which try is not known"),
        (1, TryAnswer("deferred", None), KEEP, "a try waits on a job"),
        (None, TryAnswer("deferred", 2), KEEP, "a try waits on a job"),
        (1, TryAnswer("queued", None), KEEP, "decides itself"),
        # A clear ended the logical job the trigger waits on: its job ends at once (finding 11).
        (1, TryAnswer(None, None), CANCEL, "cleared"),
        (None, TryAnswer(None, None), CANCEL, "cleared"),
        (1, TryAnswer("up_for_retry", None), KEEP, "reconnects"),
    ],
)
def test_may_cancel_on_kill(my_try: int | None, answer: TryAnswer, expected: bool, why: str) -> None:
    decision = may_cancel_on_kill(my_try, answer)
    assert decision.allowed is expected, decision
    assert why in decision.reason, decision


MINE, OTHER = "01a2-mine", "01a2-other"


@pytest.mark.parametrize(
    ("answer", "expected", "why"),
    [
        # the note names this very task instance: the state is about this try
        (TryAnswer("failed", 1, ti_id=MINE), CANCEL, "try 1 is failed"),
        (TryAnswer("deferred", 1, ti_id=MINE), KEEP, "handed to another triggerer"),
        # another task instance with a newer try: superseded while it may run, ended once it ended
        (TryAnswer("deferred", 2, ti_id=OTHER), KEEP, "superseded"),
        (TryAnswer("success", 2, ti_id=OTHER), CANCEL, "newer try 2 ended"),
        # another task instance with the same (or an older) try number: the DAG run was re-created
        (TryAnswer("deferred", 1, ti_id=OTHER), CANCEL, "re-created"),
        (TryAnswer("running", 1, ti_id=OTHER), CANCEL, "re-created"),
    ],
)
def test_may_cancel_on_kill_by_task_instance_id(answer: TryAnswer, expected: bool, why: str) -> None:
    decision = may_cancel_on_kill(1, answer, my_ti_id=MINE)
    assert decision.allowed is expected, decision
    assert why in decision.reason, decision


@pytest.mark.parametrize(
    "answer",
    [
        TryAnswer("failed", 1),
        TryAnswer("success", None),
        TryAnswer("success", 2),
        TryAnswer(exists=False),
        TryAnswer("deferred", 0),
        TryAnswer("running", 2),
    ],
    ids=["marked", "marked-unknown-try", "newer-try-marked", "gone", "re-created", "cleared-not-findable"],
)
def test_cancel_on_kill_false_never_cancels_and_says_so(answer: TryAnswer) -> None:
    decision = may_cancel_on_kill(1, answer, cancel_on_kill=False, clear_keeps=True, findable=False)
    assert decision.allowed is False
    assert "cancel_on_kill=False" in decision.reason


def test_a_decision_that_keeps_the_job_never_mentions_cancel_on_kill() -> None:
    # cancel_on_kill only matters where the policy would cancel.
    decision = may_cancel_on_kill(1, TryAnswer("deferred", 1), cancel_on_kill=False)
    assert decision.allowed is False and "cancel_on_kill" not in decision.reason


@pytest.mark.parametrize(
    ("answer", "findable", "expected", "why"),
    [
        # Airflow 3.4 discards a task's state on a clear unless the user keeps it: a clear no longer says
        # what becomes of the job. A system whose jobs a try finds without a record leaves it to the next
        # try (it reconnects to a kept record's job, or looks the job up and ends it) ...
        (TryAnswer(None, 1), True, KEEP, "the next try decides"),
        (TryAnswer("running", 2), True, KEEP, "superseded"),
        (TryAnswer("restarting", 1), True, KEEP, "while a try of it ran"),
        # ... one whose jobs nothing finds without the record ends it here, in every state a clear leaves
        (TryAnswer(None, 1), False, CANCEL, "cannot find"),
        (TryAnswer("scheduled", 2), False, CANCEL, "cannot find"),
        (TryAnswer("queued", 2), False, CANCEL, "cannot find"),
        (TryAnswer("running", 2), False, CANCEL, "cannot find"),
        (TryAnswer("restarting", 1), False, CANCEL, "cannot find"),
        # states no clear leaves on a kill keep their rules
        (TryAnswer("deferred", 1), False, KEEP, "handed to another triggerer"),
        (TryAnswer("up_for_retry", 1), False, KEEP, "reconnects"),
        # the model's finding: cleared with the state discarded, the new try started (its XCom clear took
        # the trigger's note) and was marked before its lookup: nothing else will ever end the job
        (TryAnswer("success", 2), True, CANCEL, "newer try 2 ended"),
        (TryAnswer("failed", 2), False, CANCEL, "newer try 2 ended"),
        (TryAnswer("success", 1), True, CANCEL, "a user ended it"),
    ],
)
def test_may_cancel_on_kill_where_a_clear_discards_task_state(
    answer: TryAnswer, findable: bool, expected: bool, why: str
) -> None:
    decision = may_cancel_on_kill(1, answer, clear_keeps=True, findable=findable)
    assert decision.allowed is expected, decision
    assert why in decision.reason, decision
