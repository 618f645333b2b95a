"""Provider metadata, so ``airflow providers list`` shows airflow-durable (entry point ``apache_airflow_provider``)."""

from __future__ import annotations

from typing import Any


def get_provider_info() -> dict[str, Any]:
    # Plain data, no imports: Airflow calls this while discovering providers in every component.
    return {
        "package-name": "airflow-durable",
        "name": "Durable operators",
        "description": "Crash-safe, deferrable operators for Databricks, Snowflake, BigQuery, Redshift, "
        "EMR, AWS Batch and dbt Cloud: a retry reconnects to the running job instead of submitting a duplicate.",
        "integrations": [
            {
                "integration-name": "Durable Databricks",
                "external-doc-url": "https://airflow-durable.readthedocs.io/en/latest/systems/databricks/",
                "tags": ["service"],
            }
        ],
        # The "Durable jobs" page in Airflow's UI (a FastAPI app + an external view); see docs/jobs.md.
        "plugins": [
            {"name": "airflow_durable_jobs", "plugin-class": "airflow_durable.plugins.DurableJobsPlugin"}
        ],
        "operators": [
            {
                "integration-name": "Durable Databricks",
                "python-modules": ["airflow_durable.operators.databricks"],
            }
        ],
    }
