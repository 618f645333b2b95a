"""Rule metadata and findings: the stable codes, their severities, and what a finding carries."""

from __future__ import annotations

import enum
from dataclasses import dataclass, field


class Severity(enum.IntEnum):
    """Ordered so that ``--fail-on`` can compare: a finding fails the run when ``>=`` the threshold."""

    INFO = 1
    WARNING = 2
    ERROR = 3

    @classmethod
    def parse(cls, text: str) -> Severity:
        try:
            return cls[text.strip().upper()]
        except KeyError:
            raise ValueError(f"unknown severity {text!r}; use one of: info, warning, error") from None

    def __str__(self) -> str:
        return self.name.lower()


@dataclass(frozen=True)
class Rule:
    code: str
    name: str
    severity: Severity
    summary: str  # one line, used in SARIF rule metadata and `--help`
    docs_anchor: str = ""

    @property
    def help_uri(self) -> str:
        return f"docs/check.md#{self.code.lower()}"


@dataclass(frozen=True, order=True)
class Finding:
    path: str
    line: int  # 1-based
    column: int  # 1-based
    code: str
    message: str = field(compare=False)
    severity: Severity = field(compare=False, default=Severity.WARNING)

    def as_dict(self) -> dict[str, object]:
        return {
            "path": self.path,
            "line": self.line,
            "column": self.column,
            "code": self.code,
            "severity": str(self.severity),
            "message": self.message,
        }


_RULES = [
    Rule(
        "ADR001",
        "variable-task-state",
        Severity.WARNING,
        "Variable used as per-run or per-task state inside a task; use task_state_store.",
    ),
    Rule(
        "ADR002",
        "variable-watermark",
        Severity.WARNING,
        "Variable used as a watermark / last-processed marker; use asset_state_store.",
    ),
    Rule(
        "ADR003",
        "xcom-external-id-for-retry",
        Severity.WARNING,
        "External job id pushed to XCom so a retry can find it; XCom is cleared for a new try.",
    ),
    Rule(
        "ADR004",
        "hand-rolled-resume",
        Severity.WARNING,
        "Hand-written 'if stored id: reconnect else: submit'; use ResumableJobMixin or a durable operator.",
    ),
    Rule(
        "ADR005",
        "submit-sensor-split",
        Severity.WARNING,
        "Submit task that does not wait, followed by a sensor on the same job.",
    ),
    Rule(
        "ADR006",
        "downstream-of-submit",
        Severity.WARNING,
        "Downstream task or alert depends on the submit task instead of the sensor.",
    ),
    Rule(
        "ADR007",
        "durable-drop-in-available",
        Severity.INFO,
        "Provider operator with a durable drop-in; `airflow-durable migrate` swaps it.",
    ),
    Rule(
        "ADR008",
        "mixin-base-order",
        Severity.ERROR,
        "BaseOperator listed before ResumableJobMixin; the operator cannot be instantiated.",
    ),
    Rule(
        "ADR009",
        "mixin-execute-bypass",
        Severity.ERROR,
        "ResumableJobMixin subclass whose execute() does not go through execute_resumable().",
    ),
    Rule(
        "ADR010",
        "mixin-default-external-id-key",
        Severity.WARNING,
        "ResumableJobMixin subclass keeps the default external_id_key 'remote_job_id'.",
    ),
    Rule(
        "ADR011",
        "mixin-abstract-methods",
        Severity.ERROR,
        "ResumableJobMixin subclass does not implement every abstract method; it cannot be instantiated.",
    ),
    Rule(
        "ADR012",
        "mixin-reconnect-result",
        Severity.WARNING,
        "get_job_result() returns a value but poll_until_complete() does not; a reconnected try returns "
        "None.",
    ),
    Rule(
        "ADR013",
        "state-value-not-json",
        Severity.ERROR,
        "Value written to a state store is None or not JSON-serializable.",
    ),
    Rule(
        "ADR014",
        "naive-utc-watermark",
        Severity.WARNING,
        "Naive datetime.utcnow()/now() stored as a watermark.",
    ),
    Rule(
        "ADR015",
        "mapped-same-asset-key",
        Severity.WARNING,
        "Mapped task instances all write the same asset_state_store key.",
    ),
]

RULES: dict[str, Rule] = {r.code: r for r in _RULES}
