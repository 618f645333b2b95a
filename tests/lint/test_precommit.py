"""The pre-commit hook, run by pre-commit itself (offline: `language: system` via a local repo config),
and the hook definition we publish."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tests.lint.conftest import CORPUS

ROOT = Path(__file__).resolve().parents[2]


def _hooks() -> list[dict]:
    yaml = pytest.importorskip("yaml")
    return yaml.safe_load((ROOT / ".pre-commit-hooks.yaml").read_text(encoding="utf-8"))


def test_published_hook_definition() -> None:
    hooks = {h["id"]: h for h in _hooks()}
    check = hooks["airflow-durable-check"]
    assert check["entry"] == "airflow-durable check" and check["language"] == "python"
    assert check["types"] == ["python"]
    assert hooks["airflow-durable-migrate"]["stages"] == ["manual"]  # it edits files: opt-in only
    # The hook's environment is the package without an extra, which pulls no Airflow
    # (make release-check, tests/release_check.py, installs the wheel that way and runs check).
    assert not any(h.get("additional_dependencies") for h in hooks.values())


def _precommit() -> list[str]:
    exe = Path(sys.executable).with_name("pre-commit")
    if exe.exists():
        return [str(exe)]
    found = shutil.which("pre-commit")
    if found is None:
        pytest.skip("pre-commit is not installed")
    return [found]


def test_hook_runs_on_the_corpus(tmp_path: Path) -> None:
    # A scratch git repo holding the corpus, with the published hook's entry wired as a local hook.
    # `language: python` would make pre-commit build a virtualenv from the network; `system` with the
    # same entry, resolved to this interpreter, runs the very command users get.
    repo = tmp_path / "repo"
    shutil.copytree(CORPUS, repo / "dags")
    hook = next(h for h in _hooks() if h["id"] == "airflow-durable-check")
    entry = hook["entry"].replace("airflow-durable", f"{sys.executable} -m airflow_durable.cli", 1)
    (repo / ".pre-commit-config.yaml").write_text(
        "repos:\n- repo: local\n  hooks:\n"
        f"  - id: {hook['id']}\n    name: {hook['name']}\n    entry: {entry}\n"
        "    language: system\n    types: [python]\n",
        encoding="utf-8",
    )
    # isolate from the project's own pyproject (none in the scratch repo), so the defaults apply
    env = {
        "PATH": str(Path(sys.executable).parent) + ":/usr/bin:/bin",
        "HOME": str(tmp_path),
        "PRE_COMMIT_HOME": str(tmp_path / "cache"),
        "PYTHONPATH": str(ROOT),
    }
    for cmd in (["git", "init", "-q"], ["git", "add", "-A"]):
        subprocess.run(cmd, cwd=repo, check=True, env=env)
    result = subprocess.run(
        [*_precommit(), "run", "--all-files"], cwd=repo, env=env, capture_output=True, text=True, timeout=300
    )
    output = result.stdout + result.stderr
    assert result.returncode == 1, output
    assert "airflow-durable check" in output and "Failed" in output
    assert "dags/tp_adr002_watermark.py:15:9 ADR002" in output
    assert "dags/la_values.py" not in output  # the clean look-alike produced nothing


def test_hook_passes_on_clean_files(tmp_path: Path) -> None:
    clean = tmp_path / "dag.py"
    clean.write_text((CORPUS / "la_values.py").read_text(encoding="utf-8"), encoding="utf-8")
    result = subprocess.run(
        [sys.executable, "-m", "airflow_durable.cli", "check", str(clean), "--isolated"],
        capture_output=True,
        text=True,
        cwd=ROOT,
    )
    assert result.returncode == 0, result.stdout + result.stderr


def _documented_revs() -> list[str]:
    """Every ``rev:`` the docs and the hook file's usage comment tell users to write."""
    import re

    pages = [ROOT / ".pre-commit-hooks.yaml", ROOT / "README.md", *sorted((ROOT / "docs").rglob("*.md"))]
    return [m[1] for page in pages for m in re.finditer(r"^[\s#]*rev:\s*(\S+)", page.read_text(), re.M)]


def test_the_documented_rev_is_a_tag_that_exists_or_autoupdate_pins_a_commit(tmp_path: Path) -> None:
    """A ``rev:`` naming a release must be a tag of this repository; otherwise the docs say to run
    ``pre-commit autoupdate``, which must then pin a commit's full hash."""
    import re

    revs = _documented_revs()
    assert revs, "no rev: in .pre-commit-hooks.yaml or the docs (the pattern no longer matches?)"
    listed = subprocess.run(["git", "tag", "-l"], cwd=ROOT, capture_output=True, text=True)
    if listed.returncode != 0:
        pytest.skip("not a git checkout: its tags are unknown")
    tags = set(listed.stdout.split())
    untagged = [r for r in revs if r not in tags]
    assert not [r for r in untagged if re.fullmatch(r"v?\d+(\.\d+)*", r)], (untagged, sorted(tags))
    if not untagged:
        return
    # The documented configuration against a local repository holding the hook file (no tag): what
    # `pre-commit autoupdate` writes there is what users get.
    yaml = pytest.importorskip("yaml")
    upstream = tmp_path / "upstream"
    upstream.mkdir()
    shutil.copy(ROOT / ".pre-commit-hooks.yaml", upstream)
    env = {
        "PATH": str(Path(sys.executable).parent) + ":/usr/bin:/bin",
        "HOME": str(tmp_path),
        "PRE_COMMIT_HOME": str(tmp_path / "cache"),
        "GIT_AUTHOR_NAME": "t",
        "GIT_AUTHOR_EMAIL": "t@example.invalid",
        "GIT_COMMITTER_NAME": "t",
        "GIT_COMMITTER_EMAIL": "t@example.invalid",
    }
    for cmd in (["git", "init", "-q"], ["git", "add", "-A"], ["git", "commit", "-qm", "hooks"]):
        subprocess.run(cmd, cwd=upstream, check=True, env=env)
    head = subprocess.run(
        ["git", "rev-parse", "HEAD"], cwd=upstream, check=True, env=env, capture_output=True
    )
    text = (ROOT / "docs" / "check.md").read_text(encoding="utf-8")
    config = yaml.safe_load(text.split("### pre-commit", 1)[1].split("```yaml\n", 1)[1].split("```", 1)[0])
    (entry,) = config["repos"]
    assert entry["rev"] in untagged
    entry["repo"] = str(upstream)
    user = tmp_path / "user"
    user.mkdir()
    (user / ".pre-commit-config.yaml").write_text(yaml.safe_dump(config), encoding="utf-8")
    subprocess.run(["git", "init", "-q"], cwd=user, check=True, env=env)
    done = subprocess.run(
        [*_precommit(), "autoupdate"], cwd=user, env=env, capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 0, done.stdout + done.stderr
    pinned = yaml.safe_load((user / ".pre-commit-config.yaml").read_text())["repos"][0]["rev"]
    assert pinned == head.stdout.decode().strip(), done.stdout + done.stderr
