"""The docs: the site builds strictly, and what the pages claim agrees with the repository.

The build tests need mkdocs and its plugins, installed in the main env only (``docs`` extra): they skip
elsewhere. The content tests read files only and run in every env.
"""

from __future__ import annotations

import ast
import html
import json
import re
import statistics
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


def _need_mkdocs() -> None:
    pytest.importorskip(
        "mkdocs", reason="mkdocs is not installed in this env (docs build only in the main env)"
    )
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
    _need_mkdocs()
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
    # Developer pages are built (links to them resolve) but are not in the user navigation.
    assert (site / "dev" / "index.html").is_file()
    assert not re.search(r'class="md-nav__link[^"]*"[^>]*href="[^"]*dev/', (site / "index.html").read_text())


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
    _need_mkdocs()
    root = _copy_site_sources(tmp_path)
    page = root / "docs" / "compatibility.md"
    page.write_text(page.read_text() + "\nSee [the missing page](no-such-page.md).\n")
    faq = root / "docs" / "faq.md"  # a dangling anchor fails too, not only a missing page
    faq.write_text(faq.read_text() + "\nSee [a section](differences.md#no-such-section).\n")
    done = build(tmp_path, root / "mkdocs.yml")
    assert done.returncode != 0
    assert "no-such-page.md" in done.stderr and "no-such-section" in done.stderr


def test_system_pages_may_land_in_any_order(tmp_path):
    """A listed system page that is missing is dropped, with links to it; an unlisted one is appended."""
    _need_mkdocs()
    root = _copy_site_sources(tmp_path)
    (root / "docs" / "systems" / "zz-new-system.md").write_text("# ZZ New System\n\nHello.\n")
    for listed in ("snowflake.md", "emr.md"):  # listed in mkdocs.yml; pretend they have not landed
        (root / "docs" / "systems" / listed).unlink(missing_ok=True)
    # A merge that lists a developer page in the nav: the hook keeps it out of the user navigation.
    config = root / "mkdocs.yml"
    config.write_text(config.read_text() + "  - Development:\n      - Environments: dev/environments.md\n")
    done = build(tmp_path, root / "mkdocs.yml")
    assert done.returncode == 0, done.stderr[-6000:]
    index = (tmp_path / "site" / "index.html").read_text()
    assert "ZZ New System" in index and "systems/zz-new-system/" in index
    assert "systems/snowflake/" not in index
    compatibility = (tmp_path / "site" / "compatibility" / "index.html").read_text()
    assert "systems/emr/" not in compatibility and "EMR" in compatibility
    assert "Development" not in index and "dev/environments/" not in index


# --------------------------------------------------------------------------- what the pages claim
def user_pages() -> list[Path]:
    """What a user reads: the README, the repository's policy files, every docs page but docs/dev/."""
    pages = [ROOT / name for name in ("README.md", "CHANGELOG.md", "SECURITY.md")]
    return pages + [
        p for p in sorted((ROOT / "docs").rglob("*.md")) if "dev" not in p.relative_to(ROOT).parts
    ]


def _rel(path: Path) -> str:
    return path.relative_to(ROOT).as_posix()


# Words that belong to the project's own process, not to a user's: issue numbers, the design document
# and its sections, the benchmark run's working paths.
INTERNAL = {
    "an issue number": re.compile(r"\bissues? #?\d+", re.I),
    "the issue's": re.compile(r"\bthe issue's\b", re.I),
    "a design-document section": re.compile(r"§\s*\d"),
    "the design document": re.compile(r"\bDESIGN(\.md)?\b"),
    "a working path": re.compile(r"/work/"),
}
# Pages other tools generate or other people are rewriting. Each entry must still match (a fixed page
# fails this test until its entry goes), so none outlives its reason.
ALLOWED_INTERNAL = {
    ("docs/benchmarks.md", "the issue's"): "generated by `make bench` (bench/report.py): its targets table",
}


def test_user_pages_speak_to_users():
    found = {
        (_rel(page), what)
        for page in user_pages()
        for what, pattern in INTERNAL.items()
        if pattern.search(page.read_text(encoding="utf-8"))
    }
    assert sorted(found - set(ALLOWED_INTERNAL)) == [], (
        "internal words in user pages (move them to docs/dev/)"
    )
    assert sorted(set(ALLOWED_INTERNAL) - found) == [], "fixed: remove these entries from ALLOWED_INTERNAL"


def test_the_internal_words_check_can_fail():
    text = "Under dag.test() every scenario of issue 2 ends with one submission (DESIGN §6)."
    assert {what for what, pattern in INTERNAL.items() if pattern.search(text)} == {
        "an issue number",
        "a design-document section",
        "the design document",
    }


def _table_names(page: Path, header: str) -> list[str]:
    """The backticked names in the first column of the table whose header row starts with ``header``."""
    lines = page.read_text(encoding="utf-8").splitlines()
    start = next(i for i, line in enumerate(lines) if line.startswith(header))
    names = []
    for line in lines[start + 2 :]:
        if not line.startswith("|"):
            break
        names += re.findall(r"`([^`]+)`", line.split("|")[1])
    return names


def test_the_example_dag_list_is_the_folder():
    page = ROOT / "docs" / "examples.md"
    listed = set(_table_names(page, "| file | operator |"))
    durable = {p.name for p in (ROOT / "example_dags").glob("durable_*.py")}
    assert listed == durable, (
        f"docs/examples.md lists {sorted(listed)}, example_dags/ holds {sorted(durable)}"
    )
    text = page.read_text(encoding="utf-8")
    named = set(re.findall(r"\b((?:durable|before|after|maintenance)_\w+\.py)\b", text))
    on_disk = {p.name for p in (ROOT / "example_dags").glob("*.py")}
    assert named <= on_disk, f"docs/examples.md names files that do not exist: {sorted(named - on_disk)}"
    assert on_disk <= named, f"example DAGs the page never mentions: {sorted(on_disk - named)}"


def test_the_fixture_list_is_the_plugin():
    plugin = ast.parse((ROOT / "airflow_durable" / "testing" / "pytest_plugin.py").read_text())
    fixtures = {
        node.name
        for node in plugin.body
        if isinstance(node, ast.FunctionDef)
        and any("fixture" in ast.unparse(d) for d in node.decorator_list)
        and not node.name.startswith("_")  # private, autouse: not for users to request
    }
    listed = set(_table_names(ROOT / "docs" / "testing.md", "| fixture |"))
    assert listed == fixtures, (
        f"docs/testing.md lists {sorted(listed)}, the plugin defines {sorted(fixtures)}"
    )


def _matrix_locks() -> dict[str, str]:
    """Matrix entry → its lock file's text, from the Makefile's MAIN and MATRIX."""
    makefile = (ROOT / "Makefile").read_text()
    names = (
        re.search(r"^MAIN := (.+)$", makefile, re.M)[1].split()
        + re.search(r"^MATRIX := (.+)$", makefile, re.M)[1].split()
    )
    return {name: (ROOT / "requirements" / f"airflow-{name}.txt").read_text() for name in names}


def _pinned(lock: str, package: str) -> str:
    return re.search(rf"^{re.escape(package)}==([\w.]+)", lock, re.M)[1]


def test_the_tested_airflow_versions_are_the_matrix():
    tested = {_pinned(lock, "apache-airflow") for lock in _matrix_locks().values()}
    text = (ROOT / "docs" / "compatibility.md").read_text(encoding="utf-8")
    table = text[text.index("| Airflow | behaviour | tested with |") :].split("\n\n", 1)[0]
    claimed = {
        v for row in table.splitlines()[2:] for v in re.findall(r"\b\d+\.\d+\.\d+\b", row.split("|")[3])
    } - {v for v in re.findall(r"task-sdk (\d+\.\d+\.\d+)", table)}
    assert claimed == tested, (
        f"compatibility.md says {sorted(claimed)} are tested; the matrix runs {sorted(tested)}"
    )


def test_no_page_claims_a_version_range_is_tested():
    """The matrix runs single releases: 3.2.2 and 2.11.2, not 3.0 or 3.1."""
    tested_minors = {
        ".".join(_pinned(lock, "apache-airflow").split(".")[:2]) for lock in _matrix_locks().values()
    }
    found = []
    for page in user_pages():
        for sentence in re.split(r"(?<=[.!?])\s|\n\n", page.read_text(encoding="utf-8")):
            if not re.search(r"\b(CI|tested|runs the same suite|test suite)\b", sentence):
                continue
            for low, high in re.findall(r"\b(\d+\.\d+)\s*(?:–|-|to)\s*(\d+\.\d+)\b", sentence):
                inside = [m for m in ("3.0", "3.1") if float(low) <= float(m) <= float(high)]
                if any(m not in tested_minors for m in inside) and "not tested" not in sentence:
                    found.append(f"{_rel(page)}: {' '.join(sentence.split())[:160]}")
    assert found == [], "pages that say an untested Airflow range is tested:\n" + "\n".join(found)


def test_databricks_7_16_is_said_to_cover_submit_run_only():
    """On Airflow 3.3, the provider's own DatabricksRunNowOperator of 7.16.1 cannot submit (see the
    conformance case's ``upstream_broken``): every page that calls 7.16.1 tested must say run-now is not."""
    old = _pinned(_matrix_locks()["3.3-databricks-7.16"], "apache-airflow-providers-databricks")
    found = []
    for page in user_pages():
        for block in re.split(r"\n\s*\n|\n(?=\|)", page.read_text(encoding="utf-8")):
            if old in block and "tested" in block and "DurableDatabricksSubmitRunOperator" not in block:
                found.append(f"{_rel(page)}: {' '.join(block.split())[:160]}")
    assert found == [], f"{old} called tested without saying it is for submit-run only:\n" + "\n".join(found)


def test_the_docs_say_what_the_shim_does_below_3_3():
    """The shim warns once per process, whether or not durable= was passed (tests/test_shims.py)."""
    from airflow_durable import shims

    stale = re.compile(r"warns once per operator class|explicit `durable=True`[^.]*warns", re.S)
    found = [_rel(p) for p in user_pages() if stale.search(p.read_text(encoding="utf-8"))]
    assert found == [], f"stale description of the warning below 3.3 in {found}"
    for name in ("compatibility.md", "differences.md", "troubleshooting.md"):
        text = " ".join((ROOT / "docs" / name).read_text(encoding="utf-8").split())
        assert shims.DURABILITY_OFF in text and "first durable operator" in text, name


def test_the_overhead_figure_is_the_benchmarks():
    """docs/differences.md quotes the dag.test() section of docs/benchmarks.json; recomputed here."""
    bench = json.loads((ROOT / "docs" / "benchmarks.json").read_text())
    runs: dict[tuple[str, str, str], list[float]] = {}
    for r in bench["records"]:
        if r.get("section") == "dagtest" and not r.get("warmup") and r.get("side") in ("ours", "upstream"):
            runs.setdefault((r["case"], r["path"], r["side"]), []).append(r["seconds"])
    pairs = {(case, path) for case, path, _ in runs}
    assert pairs, "docs/benchmarks.json has no dag.test() records: update docs/differences.md's overhead"
    extra = [
        1000 * (statistics.median(runs[(c, p, "ours")]) - statistics.median(runs[(c, p, "upstream")]))
        for c, p in pairs
    ]
    samples = {len(v) for v in runs.values()}
    commit = bench["meta"].get("section_commits", {}).get("dagtest") or bench["meta"]["commit"]
    text = " ".join((ROOT / "docs" / "differences.md").read_text(encoding="utf-8").split())
    low, mid, high = round(min(extra)), round(statistics.median(extra)), round(max(extra))
    expected = [
        f"**{low} to {high} ms more per task (median {mid} ms over the ten operators and both paths)**",
        f"median of {max(samples)} interleaved pairs",
        f"run at commit `{commit}`",
        f"{low} to {high} ms more in `dag.test()`",
    ]
    missing = [e for e in expected if e not in text]
    assert missing == [], f"docs/differences.md should say, from docs/benchmarks.json: {missing}"


def _section(text: str, heading: str) -> str:
    start = text.index(heading)
    end = text.find("\n## ", start + len(heading))
    return text[start : end if end > 0 else None]


def _bash_lines(text: str) -> list[str]:
    block = re.search(r"```bash\n(.*?)```", text, re.S)
    assert block, "no bash block"
    return [line.split("#")[0].strip() for line in block[1].splitlines() if line.split("#")[0].strip()]


def test_the_quick_start_is_make_demo_and_make_test():
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    assert _bash_lines(_section(readme, "## Try it")) == ["make demo", "make test"]
    assert _bash_lines((ROOT / "docs" / "quickstart.md").read_text(encoding="utf-8")) == [
        "make demo",
        "make test",
    ]


def test_what_the_quick_start_says_make_test_runs_is_what_it_runs():
    """`make test` deselects the reliability matrix: no page may call it every test."""
    makefile = (ROOT / "Makefile").read_text(encoding="utf-8")
    pytest_args = re.search(r"^PYTEST_ARGS \?= (.*)$", makefile, re.M)
    assert pytest_args and '-m "not reliability"' in pytest_args[1], "update this test and the pages"
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    quickstart = (ROOT / "docs" / "quickstart.md").read_text(encoding="utf-8")
    for page, text in (("README.md", _section(readme, "## Try it")), ("docs/quickstart.md", quickstart)):
        (line,) = [x for x in text.splitlines() if x.startswith("make test ")]
        assert "every test" not in line or "but the reliability matrix" in line, (page, line)
        assert "make reliability" in text, page
        assert "whole suite" not in text and "runs every test\n" not in text, page


def test_the_readme_first_screen_sells_and_orients():
    """What it is, how to install it, the one-line change and what it changes: in the first 40 lines."""
    first = (ROOT / "README.md").read_text(encoding="utf-8").splitlines()[:40]
    headings = [line for line in first if line.startswith("## ")]
    assert headings == ["## Install", "## Swap one import", "## What changes"], headings
    text = "\n".join(first)
    assert 'pip install "airflow-durable[databricks]"' in text
    assert "from airflow_durable.operators.databricks import DurableDatabricksSubmitRunOperator" in text


def _anchors(page: Path) -> set[str]:
    """The heading ids mkdocs gives a page (toc's slugify, or an explicit ``{ #id }``)."""
    ids = set()
    for line in page.read_text(encoding="utf-8").splitlines():
        match = re.match(r"#{1,6}\s+(.*?)\s*(?:\{\s*#([\w-]+)\s*\})?\s*$", line)
        if match:
            text = re.sub(r"[`*_\[\]()]", "", match[1]).strip().lower()
            ids.add(match[2] or re.sub(r"[\s]+", "-", re.sub(r"[^\w\s-]", "", text)))
    return ids


def test_links_outside_the_site_resolve():
    """mkdocs checks docs/; the README, CHANGELOG and SECURITY links are checked here, anchors included."""
    broken = []
    for name in ("README.md", "CHANGELOG.md", "SECURITY.md"):
        text = (ROOT / name).read_text(encoding="utf-8")
        text = re.sub(r"```.*?```", "", text, flags=re.S)
        for target in re.findall(r"\]\(([^)\s]+)\)", text):
            if re.match(r"[a-z]+://", target):
                continue
            path, _, anchor = target.partition("#")
            resolved = ROOT / path
            if not resolved.exists():
                broken.append(f"{name}: {target}")
            elif anchor and anchor not in _anchors(resolved):
                broken.append(f"{name}: {target} (no such section)")
    assert broken == []


# --------------------------------------------------------------------------- the tests the pages cite
def _test_functions() -> dict[str, set[str]]:
    """Every test function pytest collects under tests/ (module or class level of a ``test_*.py``), by name:
    the paths (from the repository root) of the files that define it."""
    found: dict[str, set[str]] = {}
    for path in sorted((ROOT / "tests").rglob("test_*.py")):
        tree = ast.parse(path.read_text(encoding="utf-8"))
        scopes = [tree.body] + [node.body for node in tree.body if isinstance(node, ast.ClassDef)]
        for node in (node for body in scopes for node in body):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and node.name.startswith("test"):
                found.setdefault(node.name, set()).add(_rel(path))
    return found


def _test_modules() -> set[str]:
    """The names of the test files and folders under tests/ (``test_stops`` names a file, not a test)."""
    return {path.stem for path in (ROOT / "tests").rglob("test_*") if path.suffix in ("", ".py")}


def _with_includes(text: str) -> str:
    """A page's text with what it includes (``--8<-- "path"``, pymdownx.snippets from the repository
    root) in place: an included CHANGELOG's citations are the page's, and so are an included example's
    test functions."""
    return re.sub(
        r'^[ \t]*--8<--\s+"([^"]+)"[ \t]*$',
        lambda match: (ROOT / match[1]).read_text(encoding="utf-8"),
        text,
        flags=re.M,
    )


# ``file.py::test_name`` (the file may be a path, the name may wrap to the next line after ``::``), or a
# bare ``test_name``; ``test_name.py`` alone names a file.
_CITED_TEST = re.compile(r"(?:(?P<file>[\w./-]*\w\.py)::\s*)?\b(?P<name>test_\w+)(?P<py>\.py)?")


def stale_test_citations(text: str, functions: dict[str, set[str]], modules: set[str]) -> list[str]:
    """The tests ``text`` (a page, its includes in place) cites that do not exist under tests/.

    ``file.py::test_x`` must be defined in a file whose path ends with ``file.py``. A bare ``test_x`` may
    be any test function under tests/, or a test file or folder (``test_stops``). A test function the page
    defines itself (a user's example test, in a code block or an included example) is the page's own.
    A file path (``test_x.py`` without ``::``) is a file, not a test: not checked here.
    """
    own = set(re.findall(r"\bdef (test_\w+)\s*\(", text))
    stale = []
    for match in _CITED_TEST.finditer(text):
        name, cited_in = match["name"], match["file"]
        if match["py"] and not cited_in:
            continue
        where = functions.get(name, set())
        if cited_in:
            exists = any(path == cited_in or path.endswith("/" + cited_in.lstrip("./")) for path in where)
        else:
            exists = bool(where) or name in modules or name in own
        if not exists:
            line = text.count("\n", 0, match.start()) + 1
            stale.append(f"line {line}: {match[0].replace(chr(10), ' ')}")
    return stale


def test_every_test_a_page_cites_exists():
    """A page that says which test shows a behaviour names a test that exists (a test deleted or renamed
    leaves its citations pointing at nothing)."""
    functions, modules = _test_functions(), _test_modules()
    stale = {
        _rel(page): found
        for page in sorted((ROOT / "docs").rglob("*.md"))
        if (
            found := stale_test_citations(
                _with_includes(page.read_text(encoding="utf-8")), functions, modules
            )
        )
    }
    assert stale == {}, "pages cite tests that do not exist under tests/"


def test_the_cited_tests_check_can_fail():
    functions = {
        "test_a_kept_test": {"tests/conformance/test_kept.py"},
        "test_elsewhere": {"tests/test_other.py"},
    }
    page = """\
A row (`test_kept.py::test_a_kept_test`), a bare `test_a_kept_test`, a file `test_kept` and a folder
`test_suite`; a path `tests/conformance/test_gone.py` is a file. A wrapped one: `test_kept.py::
test_a_kept_test`. Gone: `test_kept.py::test_a_deleted_test`, a bare `test_a_renamed_test`, one in the
wrong file `test_kept.py::test_elsewhere`, and a name broken over a line, `test_a_kept_
test`.

```python
def test_my_dag_submits_once(emulator):  # the user's own example test
    ...
```
`test_my_dag_submits_once` is that example.
"""
    assert stale_test_citations(page, functions, {"test_kept", "test_suite"}) == [
        "line 3: test_kept.py::test_a_deleted_test",
        "line 3: test_a_renamed_test",
        "line 4: test_kept.py::test_elsewhere",
        "line 4: test_a_kept_",
    ]
