"""The registry of example DAGs that ``tests/examples`` runs through ``dag.test()``.

Each system registers its example DAGs in a module of its own, ``tests/examples/cases/<system>.py``,
as a list ``EXAMPLES`` of :class:`ExampleDag` (see ``cases/databricks.py``): which file, which
emulator to start for it, and what a successful run looks like. Every ``example_dags/durable_*.py``
must have an entry (a test checks), so a new operator's example cannot go untested.

``setup`` runs inside the subprocess that runs the DAG (``run_example.py``), before the DAG file is
imported: it starts the emulator(s), installs the connections the DAG uses into ``env`` (the
process environment, ``AIRFLOW_CONN_*``) and returns a handle whose ``ledger`` counts submissions
and whose ``stop()`` (if any) is called at the end.
"""

from __future__ import annotations

import importlib
import pkgutil
from collections.abc import Callable, MutableMapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]
EXAMPLE_DAGS = ROOT / "example_dags"


@dataclass(frozen=True)
class ExampleDag:
    #: File name in ``example_dags/``.
    file: str
    #: ``setup(env)`` → a started emulator handle with ``.ledger`` (and optionally ``.stop()``).
    setup: Callable[[MutableMapping[str, str]], Any]
    #: ``Ledger.submissions(system)`` filter; ``None`` counts every system's submissions.
    system: str | None = None
    #: Submissions a successful run makes (on every Airflow version: nothing fails, nothing retries).
    submissions: int = 1
    #: Timing knobs set on every task that has the attribute, so the example keeps production values
    #: (e.g. the provider's 30 s ``polling_period_seconds``) and the test still takes seconds.
    task_overrides: dict[str, Any] = field(default_factory=dict)
    #: ``{task_id: {xcom keys}}`` that must exist after the run.
    xcoms: dict[str, frozenset[str]] = field(default_factory=dict)
    #: ``{task_id: value}`` return values (the ``return_value`` XCom) to check, if any.
    returns: dict[str, Callable[[Any], bool]] = field(default_factory=dict)
    #: The DAG to run; by default the one named like the file.
    dag_id: str = ""

    def __post_init__(self) -> None:
        if not self.dag_id:
            object.__setattr__(self, "dag_id", Path(self.file).stem)

    @property
    def path(self) -> Path:
        return EXAMPLE_DAGS / self.file


def start(
    emulator: Any,
    env: MutableMapping[str, str],
    conn_id: str,
    lifecycle: list[str] | None = None,
    fast_botocore: bool = False,
) -> Any:
    """Start ``emulator`` (with ``lifecycle``: a few active status reads so the deferrable path really
    defers) and install the connection ``conn_id`` the example DAGs use into ``env``."""
    if lifecycle is not None:
        emulator.lifecycle = lifecycle
    emulator.start()
    emulator.install_connection(env.__setitem__, conn_id=conn_id)
    if fast_botocore:
        emulator.install_fast_botocore(env.__setitem__)
    return emulator


def _collect() -> list[ExampleDag]:
    from tests.examples import cases

    found: list[ExampleDag] = []
    for module in sorted(pkgutil.iter_modules(cases.__path__), key=lambda m: m.name):
        found.extend(importlib.import_module(f"{cases.__name__}.{module.name}").EXAMPLES)
    return found


EXAMPLES: list[ExampleDag] = _collect()


def by_file(file: str) -> ExampleDag:
    for example in EXAMPLES:
        if example.file == file:
            return example
    raise KeyError(f"no ExampleDag registered for {file!r} in tests/examples/cases/")
