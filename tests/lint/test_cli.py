"""The check command end to end: golden text/JSON/SARIF reports, exit codes, selection, config, errors.

Set AIRFLOW_DURABLE_UPDATE_GOLDEN=1 to rewrite the golden files after an intended change.
"""

from __future__ import annotations

import json
import os
import re
from pathlib import Path

import pytest
import typer
from typer.testing import CliRunner

from airflow_durable.lint import RULES
from airflow_durable.lint.cli import register
from tests.lint.conftest import GOLDEN, HERE

runner = CliRunner()


def _app() -> typer.Typer:
    app = typer.Typer()
    register(app)
    return app


def run(*args: str, cwd: Path = HERE) -> tuple[int, str, str]:
    old = os.getcwd()
    os.chdir(cwd)
    try:
        result = runner.invoke(_app(), list(args))
    finally:
        os.chdir(old)
    return result.exit_code, result.stdout, result.stderr


def _normalise_sarif(text: str) -> str:
    data = json.loads(text)
    data["runs"][0]["tool"]["driver"]["version"] = "<version>"
    return json.dumps(data, indent=2) + "\n"


@pytest.mark.parametrize(
    "fmt,name", [("text", "corpus.txt"), ("json", "corpus.json"), ("sarif", "corpus.sarif")]
)
def test_golden_reports(fmt: str, name: str) -> None:
    code, out, _ = run("check", "corpus", "--isolated", "--format", fmt)
    assert code == 1  # the corpus has warnings and errors
    if fmt == "sarif":
        out = _normalise_sarif(out)
    golden = GOLDEN / name
    if os.environ.get("AIRFLOW_DURABLE_UPDATE_GOLDEN"):
        golden.write_text(out, encoding="utf-8")
    assert out == golden.read_text(encoding="utf-8")


def test_text_lines_are_file_line_col_code_message() -> None:
    _, out, _ = run("check", "corpus/tp_adr002_watermark.py", "--isolated")
    lines = out.splitlines()
    assert re.fullmatch(
        r"corpus/tp_adr002_watermark\.py:15:9 ADR002 Variable\.set.*asset_state_store.*", lines[0]
    )
    assert "\x1b[" not in out  # no colour when not a TTY
    assert lines[-1].startswith("2 finding(s) in 1 file(s) checked")


def test_github_annotations() -> None:
    _, out, _ = run("check", "corpus/tp_adr003_xcom_job_id.py", "--isolated", "--format", "github")
    first = out.splitlines()[0]
    assert first.startswith("::warning file=corpus/tp_adr003_xcom_job_id.py,line=10,col=9,title=ADR004 ")


def test_clean_file_exits_zero() -> None:
    code, out, _ = run("check", "corpus/la_values.py", "--isolated")
    assert code == 0 and out.startswith("0 finding(s)")


@pytest.mark.parametrize("fail_on,expected", [("error", 1), ("warning", 1), ("info", 1)])
def test_fail_on_threshold(fail_on: str, expected: int) -> None:
    code, _, _ = run("check", "corpus/tp_adr008_012_mixin.py", "--isolated", "--fail-on", fail_on)
    assert code == expected


def test_info_findings_do_not_fail_by_default() -> None:
    code, out, _ = run("check", "corpus/tp_adr007_dropins.py", "--isolated")
    assert code == 0 and "ADR007" in out
    code, _, _ = run("check", "corpus/tp_adr007_dropins.py", "--isolated", "--fail-on", "info")
    assert code == 1


def test_select_and_ignore() -> None:
    _, out, _ = run(
        "check",
        "corpus/tp_adr013_015_values.py",
        "--isolated",
        "--select",
        "ADR013,ADR015",
        "--ignore",
        "ADR015",
        "--format",
        "json",
    )
    codes = {f["code"] for f in json.loads(out)["findings"]}
    assert codes == {"ADR013"}
    _, out, _ = run(
        "check", "corpus/tp_adr008_012_mixin.py", "--isolated", "--select", "ADR01", "--format", "json"
    )
    assert {f["code"] for f in json.loads(out)["findings"]} == {"ADR010", "ADR011", "ADR012"}


@pytest.mark.parametrize(
    "args",
    [
        ("check", "corpus", "--select", "ADR999"),
        ("check", "corpus", "--format", "xml"),
        ("check", "corpus", "--fail-on", "fatal"),
        ("check", "does/not/exist.py"),
        ("check",),
        ("migrate", "does/not/exist.py"),
    ],
)
def test_usage_errors_exit_two(args: tuple[str, ...]) -> None:
    code, _, _ = run(*args)
    assert code == 2


def test_pyproject_config_is_used(tmp_path: Path) -> None:
    dags = tmp_path / "dags"
    dags.mkdir()
    (dags / "dag.py").write_text((HERE / "corpus" / "tp_adr008_012_mixin.py").read_text(), encoding="utf-8")
    (tmp_path / "pyproject.toml").write_text(
        '[tool.airflow-durable]\nignore = ["ADR008", "ADR009", "ADR011"]\nfail-on = "error"\n',
        encoding="utf-8",
    )
    code, out, _ = run("check", "dags", "--format", "json", cwd=tmp_path)
    codes = {f["code"] for f in json.loads(out)["findings"]}
    assert codes == {"ADR010", "ADR012"} and code == 0  # only warnings left, fail-on error
    code, out, _ = run("check", "dags", "--format", "json", "--isolated", cwd=tmp_path)
    assert "ADR008" in {f["code"] for f in json.loads(out)["findings"]} and code == 1


def test_bad_pyproject_setting_is_a_usage_error(tmp_path: Path) -> None:
    (tmp_path / "dag.py").write_text("x = 1\n", encoding="utf-8")
    (tmp_path / "pyproject.toml").write_text('[tool.airflow-durable]\nselct = ["ADR001"]\n', encoding="utf-8")
    code, _, err = run("check", "dag.py", cwd=tmp_path)
    assert code == 2 and "selct" in err


def test_unparsable_file_is_named_and_the_rest_still_checked(tmp_path: Path) -> None:
    (tmp_path / "broken.py").write_text("def broken(:\n    pass\n", encoding="utf-8")
    (tmp_path / "good.py").write_text(
        (HERE / "corpus" / "tp_adr002_watermark.py").read_text(), encoding="utf-8"
    )
    code, out, _ = run("check", ".", "--isolated", cwd=tmp_path)
    assert code == 1
    assert "error: broken.py:" in out and "cannot parse this file" in out
    assert "good.py:15:9 ADR002" in out
    code, out, err = run("check", ".", "--isolated", "--format", "json", cwd=tmp_path)
    data = json.loads(out)
    assert [e["path"] for e in data["errors"]] == ["broken.py"] and data["files_checked"] == 1
    assert "broken.py" in err


def test_migrate_diff_then_write_then_nothing(tmp_path: Path) -> None:
    src = (HERE / "migrate_cases" / "databricks_before.py").read_text(encoding="utf-8")
    golden = (HERE / "migrate_cases" / "databricks_after.py").read_text(encoding="utf-8")
    (tmp_path / "dag.py").write_text(src, encoding="utf-8")
    (tmp_path / "broken.py").write_text("def broken(:\n", encoding="utf-8")
    code, out, err = run("migrate", ".", cwd=tmp_path)
    assert (
        out.startswith("--- a/dag.py\n+++ b/dag.py\n") and "+from airflow_durable.operators.databricks" in out
    )
    assert (tmp_path / "dag.py").read_text(encoding="utf-8") == src  # diff only: nothing written
    assert "broken.py" in err and "left untouched" in err and code == 1
    (tmp_path / "broken.py").unlink()
    code, out, err = run("migrate", ".", "--write", cwd=tmp_path)
    assert code == 0 and out == "" and (tmp_path / "dag.py").read_text(encoding="utf-8") == golden
    code, out, err = run("migrate", ".", cwd=tmp_path)
    assert code == 0 and out == "" and "0 file(s) would be rewritten" in err


def test_migrate_reports_the_split_on_stderr(tmp_path: Path) -> None:
    (tmp_path / "dag.py").write_text(
        (HERE / "migrate_cases" / "split_before.py").read_text(), encoding="utf-8"
    )
    _, _, err = run("migrate", "dag.py", cwd=tmp_path)
    assert "dag.py:9: 'submit' submits without waiting" in err and "Not rewritten; suggested:" in err


def test_every_rule_message_names_problem_reason_and_fix() -> None:
    _, out, _ = run("check", "corpus", "--isolated", "--format", "json")
    findings = json.loads(out)["findings"]
    by_code: dict[str, str] = {}
    for f in findings:
        by_code.setdefault(f["code"], f["message"])
    assert set(by_code) == set(RULES)
    for code, message in by_code.items():
        assert "Fix:" in message or "Decide" in message, code
        assert len(message) > 120, code  # problem + why, not a bare label


def test_colour_only_when_asked_for_a_terminal() -> None:
    import io

    from rich.console import Console

    from airflow_durable.lint import check_paths
    from airflow_durable.lint.config import Config
    from airflow_durable.lint.output import render_text

    report = check_paths([HERE / "corpus" / "tp_adr002_watermark.py"], Config())
    plain = render_text(report)
    assert "\x1b[" not in plain and "[yellow]" not in plain
    buffer = io.StringIO()
    Console(file=buffer, force_terminal=True, highlight=False, soft_wrap=True).print(
        render_text(report, colour=True), end=""
    )
    coloured = buffer.getvalue()
    assert "\x1b[" in coloured and "ADR002" in coloured and "[yellow]" not in coloured


def test_parse_error_names_the_line_to_fix(tmp_path: Path) -> None:
    # libcst gives up on the token after the error (line 5); the report names line 4, column 7.
    (tmp_path / "broken.py").write_text("import os\n\n\ndef f(:\n    pass\n", encoding="utf-8")
    code, out, _ = run("check", "broken.py", "--isolated", cwd=tmp_path)
    assert code == 1
    assert "error: broken.py:4:7: cannot parse this file, not checked: invalid syntax" in out


def test_help_shows_the_pyproject_table_and_format_is_a_choice() -> None:
    result = runner.invoke(_app(), ["check", "--help"], env={"COLUMNS": "200"})
    assert "[tool.airflow-durable]" in result.stdout
    assert "text" in result.stdout and "sarif" in result.stdout and "github" in result.stdout
    code, _, err = run("check", "corpus", "--format", "xml")
    assert code == 2 and "'xml' is not one of" in err


def _fenced(text: str, heading: str, language: str) -> str:
    """The first ``language`` code block after ``heading`` in a Markdown page."""
    after = text.split(heading, 1)[1]
    return after.split(f"```{language}\n", 1)[1].split("```", 1)[0]


def test_the_documented_pre_commit_hook_fails_on_adr007() -> None:
    """docs/check.md's pre-commit configuration, run as pre-commit runs it: the hook's entry from
    .pre-commit-hooks.yaml, then the configured args, then the file names."""
    import yaml

    root = HERE.parents[1]
    config = yaml.safe_load(_fenced((root / "docs" / "check.md").read_text(), "### pre-commit", "yaml"))
    (hook,) = [h for repo in config["repos"] for h in repo["hooks"] if h["id"] == "airflow-durable-check"]
    (definition,) = [
        h for h in yaml.safe_load((root / ".pre-commit-hooks.yaml").read_text()) if h["id"] == hook["id"]
    ]
    program, command = definition["entry"].split()
    assert program == "airflow-durable"
    code, out, _ = run(command, *hook.get("args", []), "--isolated", "corpus/tp_adr007_dropins.py")
    assert "ADR007" in out and code == 1, "the hook as documented lets ADR007 through"
