"""The system families the model explores, their emulators, and a system-independent view of their jobs.

A family is one external service (the brief's nine); its operators are the conformance suite's cases
(``tests/conformance/cases``), built by their ``make(emulator, deferrable, **overrides)``. One emulator per
family serves every example of a run, reset in between (`EmulatorHost.reset`).
"""

from __future__ import annotations

import contextlib
import importlib
import re
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

import pytest

from tests.conformance.systems import SYSTEMS, SystemCase

#: family → the conformance case ids it covers.
FAMILIES: dict[str, tuple[str, ...]] = {
    "databricks": ("databricks_submit_run", "databricks_run_now"),
    "snowflake": ("snowflake_sql_api",),
    "bigquery": ("bigquery_insert_job",),
    "redshift_data": ("redshift_data",),
    "emr_steps": ("emr_add_steps",),
    "emr_serverless": ("emr_serverless_start_job",),
    "emr_eks": ("emr_container",),
    "batch": ("batch",),
    "dbt_cloud": ("dbt_cloud_run_job",),
}

#: The pytest-plugin fixture name of each emulator → its class.
_EMULATORS = {
    "databricks_emulator": "airflow_durable.testing.databricks:DatabricksEmulator",
    "snowflake_emulator": "airflow_durable.testing.snowflake:SnowflakeEmulator",
    "bigquery_emulator": "airflow_durable.testing.bigquery:BigQueryEmulator",
    "dbt_cloud_emulator": "airflow_durable.testing.dbt_cloud:DbtCloudEmulator",
    "redshift_data_emulator": "airflow_durable.testing.redshift_data:RedshiftDataEmulator",
    "batch_emulator": "airflow_durable.testing.batch:BatchEmulator",
    "emr_emulator": "airflow_durable.testing.emr:EmrEmulator",
    "emr_serverless_emulator": "airflow_durable.testing.emr:EmrServerlessEmulator",
    "emr_containers_emulator": "airflow_durable.testing.emr:EmrContainersEmulator",
}


def cases_of(family: str) -> list[SystemCase]:
    by_id = {case.id: case for case in SYSTEMS}
    return [by_id[i] for i in FAMILIES[family] if by_id[i].upstream_broken() is None]


def _emulator_class(fixture: str) -> type:
    module, _, name = _EMULATORS[fixture].partition(":")
    return getattr(importlib.import_module(module), name)


class EmulatorHost:
    """One started emulator of a family, its connection installed, its HTTP server gated.

    ``gate`` is called in the server thread for every request before it is handled (the model parks the
    calling actor there) and returns ``None`` to let it through or a ``Response`` to refuse it; ``seen`` is
    called after each request with the request and the answer (the model learns which jobs a call named).
    """

    def __init__(self, fixture: str) -> None:
        self.fixture = fixture
        self.emulator: Any = None
        self.gate: Callable[[Any], Any] | None = None
        self.seen: Callable[[Any, Any], None] | None = None

    @contextlib.contextmanager
    def running(self) -> Iterator[EmulatorHost]:
        with pytest.MonkeyPatch.context() as patch:
            emulator = _emulator_class(self.fixture)()
            with emulator:
                emulator.install_connection(patch.setenv)
                if hasattr(emulator, "install_fast_botocore"):
                    emulator.install_fast_botocore(patch.setenv)
                self.emulator = emulator
                server = emulator.server
                original = server.dispatch

                def dispatch(request: Any) -> Any:
                    if self.gate is not None:
                        refusal = self.gate(request)
                        if refusal is not None:
                            return refusal
                    answer = original(request)
                    if self.seen is not None:
                        self.seen(request, answer)
                    return answer

                server.dispatch = dispatch  # an instance attribute: the handler calls owner.dispatch
                try:
                    yield self
                finally:
                    server.dispatch = original
                    errors = list(server.errors)
            if errors:
                raise AssertionError(f"the {self.fixture} raised while serving the model: {errors!r}")

    def reset(self) -> None:
        """Forget every job, token, fault and ledger entry of the previous example (the AWS ones also reset
        moto and create their cluster / queue / application again)."""
        emulator = self.emulator
        with emulator._lock:
            emulator.jobs.clear()
            emulator._tokens.clear()
            emulator._queued_lifecycles.clear()
            for name in ("requests",):
                if isinstance(getattr(emulator, name, None), list):
                    getattr(emulator, name).clear()
            for name in ("_by_request_id", "_parents", "_list_reads"):
                if isinstance(getattr(emulator, name, None), dict):
                    getattr(emulator, name).clear()
            emulator.list_lag_reads, emulator.list_lag_seconds = 0, 0.0  # a scenario may set a lag
        emulator.faults.clear()
        emulator.ledger.clear()
        emulator.server.log.clear()
        if getattr(emulator, "uses_moto", False):
            emulator.moto.reset()
            emulator.configure_moto()

    def describe(self, request: Any) -> str:
        """``METHOD path`` of a request before the emulator handles it; an AWS call by its logical path
        ``/<service>/<Operation>`` (as the emulator's faults and ledger name it), computed without
        touching the request."""
        emulator = self.emulator
        if hasattr(emulator, "_operation"):
            from airflow_durable.testing.aws import _CREDENTIAL_SERVICE

            match = _CREDENTIAL_SERVICE.search(request.headers.get("Authorization", ""))
            service = match.group(1) if match else ""
            operation, _ = emulator._operation(service, request)
            return f"{request.method} /{service}/{operation}"
        return f"{request.method} {request.path}"

    def refusal(self, message: str) -> Any:
        """A 403 in the service's own error shape: a call of a dead process that must not take effect. No
        client retries a 403, so the dead process's code ends quickly."""
        from airflow_durable.testing._core import Response

        return Response(403, self.emulator.server.error_body(403, message))


# ---------------------------------------------------------------------------- jobs, system-independent
def atoms(ledger_id: Any) -> tuple[str, ...]:
    """The strings that name a job: its id, or each element of a list id (Snowflake handles, EMR steps)."""
    if isinstance(ledger_id, (list, tuple)):
        return tuple(str(part) for part in ledger_id)
    return tuple(str(part) for part in str(ledger_id).split(","))


def job_state(emulator: Any, ledger_id: Any) -> tuple[str, bool]:
    """``(raw state, active)``: active while the system reports a non-terminal state."""
    job = emulator.run(ledger_id)
    state = str(job.state)
    if getattr(job, "expired", False):
        return state, False
    return state, not emulator.is_terminal(state)


def end_job(case: SystemCase, emulator: Any, ledger_id: Any, outcome: str) -> None:
    emulator.set_state(ledger_id, case.succeeded if outcome == "succeeded" else case.failed)


def deep_atoms(value: Any) -> set[str]:
    """Every scalar in a JSON-like value, as text (a record, an XCom, a return value, an event)."""
    found: set[str] = set()

    def walk(item: Any) -> None:
        if isinstance(item, dict):
            for sub in item.values():
                walk(sub)
        elif isinstance(item, (list, tuple, set)):
            for sub in item:
                walk(sub)
        elif isinstance(item, (str, int)) and not isinstance(item, bool):
            found.add(str(item))

    walk(value)
    return found


def without_history(record: Any) -> Any:
    """A stored record minus its ``history`` audit trail (what it tracks, not what it once did)."""
    if isinstance(record, dict):
        return {k: v for k, v in record.items() if k != "history"}
    return record


_WORD = re.compile(r"[A-Za-z0-9_\-]+")


def text_atoms(text: str) -> set[str]:
    """Word-like tokens of a request or answer body: a job id mentioned in it is one of them."""
    return set(_WORD.findall(text))


def request_text(request: Any, answer: Any) -> str:
    parts = [str(request.path), " ".join(f"{k}={v}" for k, v in (request.query or {}).items())]
    # The emulator's own reading of the request (AWS REST routes carry ids in the URL it rewrote).
    for named in (getattr(request, "params", None), getattr(request, "path_params", None)):
        parts.append(" ".join(f"{k}={v}" for k, v in (named or {}).items()))
    body = getattr(request, "body", b"") or b""
    parts.append(body.decode("utf-8", "replace") if isinstance(body, bytes) else str(body))
    if answer is not None:
        raw = getattr(answer, "raw", None)
        if raw:
            parts.append(raw.decode("utf-8", "replace") if isinstance(raw, bytes) else str(raw))
        else:
            parts.append(str(getattr(answer, "json", "")))
    return "\n".join(parts)


@dataclass(frozen=True)
class Family:
    name: str
    cases: tuple[SystemCase, ...]
    fixture: str
