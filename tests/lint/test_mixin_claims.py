"""The mixin rules' claims, measured against the installed Airflow (3.3.x) rather than taken on trust.

The corpus module is executed here *by the test* to prove what the rule messages say; the check
command itself never imports or runs user files.
"""

from __future__ import annotations

import runpy

import pytest

from airflow_durable.lint import check_source
from tests.lint.conftest import CORPUS

pytest.importorskip("airflow.sdk.bases.resumablejobmixin", reason="ResumableJobMixin exists from Airflow 3.3")
from airflow.sdk import ResumableJobMixin  # noqa: E402


@pytest.fixture(scope="module")
def corpus_classes() -> dict:
    return runpy.run_path(str(CORPUS / "tp_adr008_012_mixin.py"))


@pytest.fixture(scope="module")
def good_classes() -> dict:
    return runpy.run_path(str(CORPUS / "la_mixin_correct.py"))


class _Store(dict):
    def get(self, key, default=None):  # the task_state_store API
        return dict.get(self, key, default)

    def set(self, key, value, **_):
        self[key] = value


def test_adr008_baseoperator_first_cannot_be_instantiated(corpus_classes, good_classes) -> None:
    with pytest.raises(TypeError, match="object.__init__"):
        corpus_classes["WrongOrder"](task_id="wrong_order")
    good_classes["GoodOperator"](task_id="good")  # same methods, mixin first: fine


def test_adr011_missing_abstract_methods_cannot_be_instantiated(corpus_classes) -> None:
    with pytest.raises(TypeError, match="abstract"):
        corpus_classes["Bypass"](task_id="bypass")


def test_adr010_default_key_is_remote_job_id() -> None:
    assert ResumableJobMixin.external_id_key == "remote_job_id"


def test_adr012_reconnect_returns_poll_value_not_result(corpus_classes, good_classes) -> None:
    op = corpus_classes["NoExecute"](task_id="no_execute")
    store = _Store()
    fresh = op.execute_resumable({"task_state_store": store})
    reconnected = op.execute_resumable({"task_state_store": store})  # stored id, job "RUNNING"
    assert fresh == {"rows": 3} and reconnected is None
    good = good_classes["GoodOperator"](task_id="good2")
    store = _Store()
    assert good.execute_resumable({"task_state_store": store}) == good.execute_resumable(
        {"task_state_store": store}
    )


def test_corpus_reports_the_measured_classes() -> None:
    source = (CORPUS / "tp_adr008_012_mixin.py").read_text(encoding="utf-8")
    codes = {f.code for f in check_source("m.py", source)}
    assert {"ADR008", "ADR009", "ADR010", "ADR011", "ADR012"} <= codes
