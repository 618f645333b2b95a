"""MkDocs hooks that let pages written in parallel branches merge without breaking ``--strict``.

* Optional nav entries (every page under ``systems/``, and ``demo.md``) whose file does not exist
  are dropped from the nav with an INFO log line instead of the strict-failing "not found" warning,
  so ``mkdocs.yml`` can list every planned system before its page has landed.
* A page under ``systems/`` that exists but is not listed is appended to the "Systems" section,
  so a system page merged without its nav line still shows up (and ``omitted_files`` stays strict
  for every other page).
* A link to an optional page that does not exist yet (``[Snowflake](systems/snowflake.md)``) is
  rendered as its plain text, so other pages may link to every planned page already.
* Developer pages (``dev/``) stay out of the user navigation: a nav entry under ``dev/`` is dropped
  (logged), and ``not_in_nav`` in ``mkdocs.yml`` keeps them from counting as omitted. They are still
  built, so links to them work; ``dev/index.md`` lists them.
* In ``reference/operators.md`` the line ``<!-- operator-modules -->`` becomes one
  ``::: airflow_durable.operators.<module>`` block per operator module that exists, so every
  operator's API reference is rendered from its docstrings without anyone editing the page.

Only file existence is looked at; nothing is fetched or imported.
"""

from __future__ import annotations

import logging
import posixpath
import re
from pathlib import Path
from typing import Any

log = logging.getLogger("mkdocs.hooks.airflow_durable")

OPTIONAL_PREFIXES = ("systems/",)
DEV_PREFIX = "dev/"
OPTIONAL_PAGES = frozenset({"demo.md"})
SYSTEMS_SECTION = "Systems"
OPERATOR_MARKER = "<!-- operator-modules -->"
_LINK = re.compile(r"\[(?P<text>[^\]\n]+)\]\((?P<target>[^)\s#]+\.md)(?P<anchor>#[^)\s]*)?\)")
REPO = Path(__file__).resolve().parents[2]


def _optional(path: str) -> bool:
    return path in OPTIONAL_PAGES or path.startswith(OPTIONAL_PREFIXES)


def _prune(items: list[Any], docs_dir: Path) -> list[Any]:
    kept: list[Any] = []
    for item in items:
        if isinstance(item, dict):
            ((title, value),) = item.items()
            if isinstance(value, list):
                value = _prune(value, docs_dir)
                if not value:  # a section of developer pages only: gone with them
                    log.info("nav: section %r held only developer pages, left out of the nav", title)
                    continue
                item = {title: value}
            elif isinstance(value, str) and value.startswith(DEV_PREFIX):
                log.info("nav: %r (%s) is a developer page, left out of the user nav", title, value)
                continue
            elif isinstance(value, str) and _optional(value) and not (docs_dir / value).is_file():
                log.info("nav: %r (%s) not written yet, left out of the nav", title, value)
                continue
        elif isinstance(item, str) and item.startswith(DEV_PREFIX):
            log.info("nav: %s is a developer page, left out of the user nav", item)
            continue
        elif isinstance(item, str) and _optional(item) and not (docs_dir / item).is_file():
            log.info("nav: %s not written yet, left out of the nav", item)
            continue
        kept.append(item)
    return kept


def _listed(items: list[Any]) -> set[str]:
    found: set[str] = set()
    for item in items:
        value = next(iter(item.values())) if isinstance(item, dict) else item
        if isinstance(value, list):
            found |= _listed(value)
        elif isinstance(value, str):
            found.add(value)
    return found


def _title(page: Path) -> str:
    for line in page.read_text(encoding="utf-8").splitlines():
        if line.startswith("# "):
            return line[2:].strip()
    return page.stem.replace("-", " ").title()


def on_config(config: Any) -> Any:
    nav = config.get("nav")
    if not nav:
        return config
    docs_dir = Path(config["docs_dir"])
    nav = _prune(nav, docs_dir)
    listed = _listed(nav)
    extra = [
        page for page in sorted((docs_dir / "systems").glob("*.md")) if f"systems/{page.name}" not in listed
    ]
    if extra:
        for item in nav:
            if isinstance(item, dict) and SYSTEMS_SECTION in item:
                for page in extra:
                    log.info("nav: appending unlisted systems/%s to %s", page.name, SYSTEMS_SECTION)
                    item[SYSTEMS_SECTION].append({_title(page): f"systems/{page.name}"})
                break
    config["nav"] = nav
    return config


def operator_modules() -> list[str]:
    """Every ``airflow_durable.operators`` module, by file name (no import)."""
    folder = REPO / "airflow_durable" / "operators"
    return [
        f"airflow_durable.operators.{p.stem}" for p in sorted(folder.glob("*.py")) if p.stem != "__init__"
    ]


def _unlink_missing(markdown: str, page_uri: str, docs_dir: Path) -> str:
    def replace(match: re.Match[str]) -> str:
        target = posixpath.normpath(posixpath.join(posixpath.dirname(page_uri), match["target"]))
        if _optional(target) and not (docs_dir / target).is_file():
            log.info("%s: %s not written yet, link rendered as text", page_uri, target)
            return match["text"]
        return match[0]

    return _LINK.sub(replace, markdown)


def on_page_markdown(markdown: str, page: Any, config: Any, **_: Any) -> str:
    markdown = _unlink_missing(markdown, page.file.src_uri, Path(config["docs_dir"]))
    if OPERATOR_MARKER in markdown:
        blocks = "\n\n".join(f"::: {module}" for module in operator_modules())
        markdown = markdown.replace(OPERATOR_MARKER, blocks)
    return markdown
