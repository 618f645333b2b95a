"""The SARIF report is valid SARIF 2.1.0 and internally consistent (rule indexes, levels)."""

from __future__ import annotations

import json
from pathlib import Path

import jsonschema
import pytest

from airflow_durable.lint import RULES, check_paths
from airflow_durable.lint.config import Config
from airflow_durable.lint.output import sarif_log
from tests.lint.conftest import CORPUS, GOLDEN, HERE

SUBSET = json.loads((HERE / "sarif_subset_schema.json").read_text(encoding="utf-8"))


def _log(tmp_path: Path | None = None) -> dict:
    paths = [CORPUS]
    if tmp_path is not None:  # include a parse error so notifications are exercised too
        (tmp_path / "broken.py").write_text("def broken(:\n", encoding="utf-8")
        paths.append(tmp_path)
    return sarif_log(check_paths(paths, Config()))


def test_golden_sarif_validates_against_subset_schema() -> None:
    jsonschema.validate(json.loads((GOLDEN / "corpus.sarif").read_text(encoding="utf-8")), SUBSET)


def test_sarif_with_parse_error_validates(tmp_path: Path) -> None:
    log = _log(tmp_path)
    jsonschema.validate(log, SUBSET)
    invocation = log["runs"][0]["invocations"][0]
    assert invocation["executionSuccessful"] is False
    assert "broken.py" in invocation["toolExecutionNotifications"][0]["message"]["text"]


def test_subset_schema_rejects_what_sarif_rejects() -> None:
    log = _log()
    bad = json.loads(json.dumps(log))
    bad["runs"][0]["results"][0]["level"] = "fatal"
    with pytest.raises(jsonschema.ValidationError):
        jsonschema.validate(bad, SUBSET)
    bad = json.loads(json.dumps(log))
    bad["runs"][0]["results"][0]["locations"][0]["physicalLocation"]["region"]["startLine"] = 0
    with pytest.raises(jsonschema.ValidationError):
        jsonschema.validate(bad, SUBSET)


def test_rule_indexes_and_levels_are_consistent() -> None:
    run = _log()["runs"][0]
    rules = run["tool"]["driver"]["rules"]
    assert [r["id"] for r in rules] == sorted(RULES)
    levels = {"error": "error", "warning": "warning", "info": "note"}
    for result in run["results"]:
        assert rules[result["ruleIndex"]]["id"] == result["ruleId"]
        assert result["level"] == levels[str(RULES[result["ruleId"]].severity)]


def test_validates_against_model_generated_from_official_schema(tmp_path: Path) -> None:
    # pydantic-sarif is generated (datamodel-codegen) from the official sarif-schema-2.1.0.json and
    # forbids unknown members, so it catches misspelt or misplaced properties the subset might miss.
    model = pytest.importorskip("pydantic_sarif.model")
    root = model.StaticAnalysisResultsFormatSarifVersion210JsonSchema
    root.model_validate(_log(tmp_path))
    bad = _log()
    bad["runs"][0]["results"][0]["lineNumber"] = 3
    with pytest.raises(Exception, match="lineNumber"):
        root.model_validate(bad)
