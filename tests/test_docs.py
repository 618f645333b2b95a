"""The docs site builds with ``mkdocs build --strict``: no broken link, nav entry or docstring warning.

mkdocs and its plugins are installed in the main env only (``docs`` extra); the matrix envs skip.
"""

from __future__ import annotations

import html
import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]

pytest.importorskip("mkdocs", reason="mkdocs is not installed in this env (docs build only in the main env)")
pytest.importorskip("material", reason="mkdocs-material is not installed in this env")
pytest.importorskip("mkdocstrings", reason="mkdocstrings is not installed in this env")


def build(tmp_path: Path, config: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [
            sys.executable,
            "-m",
            "mkdocs",
            "build",
            "--strict",
            "-f",
            str(config),
            "-d",
            str(tmp_path / "site"),
        ],
        capture_output=True,
        text=True,
        timeout=300,
        cwd=ROOT,
        env={"NO_MKDOCS_2_WARNING": "1", "PATH": "/usr/bin:/bin", "HOME": str(tmp_path)},
    )


def test_docs_build_strict(tmp_path):
    done = build(tmp_path, ROOT / "mkdocs.yml")
    assert done.returncode == 0, done.stderr[-6000:]
    site = tmp_path / "site"
    # The API reference is rendered from the docstrings, not written twice.
    assert "DurableJobEngine" in (site / "reference" / "engine" / "index.html").read_text()
    operators = (site / "reference" / "operators" / "index.html").read_text()
    for module in sorted((ROOT / "airflow_durable" / "operators").glob("*.py")):
        if module.stem != "__init__":
            assert f"airflow_durable.operators.{module.stem}" in operators, module.name
    # Offline: no web-font fetch.
    assert "fonts.googleapis.com" not in (site / "index.html").read_text()
    # Docstrings render as Markdown: a Sphinx role or a cross-reference that did not resolve shows up
    # as literal text in the page.
    found = raw_markup(site)
    assert found == [], f"{len(found)} raw Sphinx role(s) / unresolved autoref(s):\n" + "\n".join(found)


# A Sphinx role as mkdocstrings renders it: the role's name as text, right before (or around) the
# backticked target, e.g. ``:class:<code>DurableJobEngine</code>`` or ``:meth:`run```.
_SPHINX_ROLE = re.compile(r":(?:py:)?(class|meth|mod|func|attr|obj|exc|data|const):(?:<code>|`)")
# An autoref mkdocs-autorefs left unresolved: the Markdown reference syntax, or its placeholder element.
_UNRESOLVED_AUTOREF = re.compile(r"\]\[[A-Za-z_][\w.]*\]|<autoref\b")


def raw_markup(site: Path) -> list[str]:
    """``page: snippet`` for every raw Sphinx role or unresolved autoref in the built HTML."""
    found = []
    for page in sorted(site.rglob("*.html")):
        # Code blocks quote source files as they are (a docstring with a role in an example is fine),
        # and inline code may hold ``x[a][b]``: neither is rendered prose.
        text = re.sub(r"<pre\b.*?</pre>", "", page.read_text(encoding="utf-8"), flags=re.S)
        prose = re.sub(r"(<code\b[^>]*>).*?</code>", r"\1</code>", text, flags=re.S)
        for pattern, where in ((_SPHINX_ROLE, text), (_UNRESOLVED_AUTOREF, prose)):
            for match in pattern.finditer(where):
                snippet = html.unescape(re.sub(r"<[^>]+>", "", where[match.start() : match.end() + 60]))
                found.append(f"{page.relative_to(site)}: {snippet.splitlines()[0] if snippet else ''}")
    return found


def test_raw_markup_check_finds_a_sphinx_role_and_an_unresolved_autoref(tmp_path):
    """The check above can fail: the two shapes, as mkdocs renders them, are reported."""
    site = tmp_path / "site"
    (site / "reference").mkdir(parents=True)
    (site / "reference" / "index.html").write_text(
        "<p>Returns a :class:<code>DurableJobEngine</code>.</p>"
        "<p>See [<code>engine</code>][airflow_durable.engine.DurableJobEngine].</p>"
        "<p>Plain <code>code</code> and [a link](x) are fine; so is <code>state[key][ASSET]</code>.</p>"
        '<pre><code>"""Uses :class:`~airflow_durable.testing.DatabricksEmulator`."""</code></pre>'
    )
    found = raw_markup(site)
    assert len(found) == 2, found
    assert found[0].startswith("reference/index.html: :class:DurableJobEngine")
    assert "[airflow_durable.engine.DurableJobEngine]" in found[1]


def _copy_site_sources(tmp_path: Path) -> Path:
    import shutil

    root = tmp_path / "repo"
    root.mkdir()
    shutil.copy(ROOT / "mkdocs.yml", root / "mkdocs.yml")
    shutil.copytree(ROOT / "docs", root / "docs")
    for name in ("airflow_durable", "example_dags", "tests"):  # read by mkdocstrings and snippets
        (root / name).symlink_to(ROOT / name)
    return root


def test_strict_build_fails_on_a_broken_link(tmp_path):
    root = _copy_site_sources(tmp_path)
    page = root / "docs" / "compatibility.md"
    page.write_text(page.read_text() + "\nSee [the missing page](no-such-page.md).\n")
    done = build(tmp_path, root / "mkdocs.yml")
    assert done.returncode != 0
    assert "no-such-page.md" in done.stderr


def test_system_pages_may_land_in_any_order(tmp_path):
    """A listed system page that is missing is dropped, with links to it; an unlisted one is appended."""
    root = _copy_site_sources(tmp_path)
    (root / "docs" / "systems" / "zz-new-system.md").write_text("# ZZ New System\n\nHello.\n")
    for listed in ("snowflake.md", "emr.md"):  # listed in mkdocs.yml; pretend they have not landed
        (root / "docs" / "systems" / listed).unlink(missing_ok=True)
    done = build(tmp_path, root / "mkdocs.yml")
    assert done.returncode == 0, done.stderr[-6000:]
    index = (tmp_path / "site" / "index.html").read_text()
    assert "ZZ New System" in index and "systems/zz-new-system/" in index
    assert "systems/snowflake/" not in index
    compatibility = (tmp_path / "site" / "compatibility" / "index.html").read_text()
    assert "systems/emr/" not in compatibility and "EMR" in compatibility
