"""``airflow-durable check`` (static analysis of DAG files) and ``airflow-durable migrate`` (codemod).

Public API::

    from airflow_durable.lint import check_paths, check_source, Finding, Severity, RULES
"""

from __future__ import annotations

from airflow_durable.lint.engine import Report, check_paths, check_source
from airflow_durable.lint.findings import RULES, Finding, Rule, Severity

__all__ = ["RULES", "Finding", "Report", "Rule", "Severity", "check_paths", "check_source"]
