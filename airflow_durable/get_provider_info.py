"""Provider metadata, so ``airflow providers list`` shows airflow-durable (``apache_airflow_provider``).

Generated from [the catalogue][airflow_durable.catalogue]: one integration and one operator module per
system. Airflow calls this while discovering providers in every component, so it imports nothing but
the package's own ``__init__`` and the catalogue (plain data, standard library only): no provider, no
Airflow.
"""

from __future__ import annotations

from typing import Any

from airflow_durable import __version__
from airflow_durable.catalogue import SYSTEMS, docs_url


def _integration_name(title: str) -> str:
    return f"Durable {title}"


def get_provider_info() -> dict[str, Any]:
    """The provider-info dict Airflow validates against its ``provider_info.schema.json``."""
    titles = ", ".join(s.title for s in SYSTEMS[:-1]) + f" and {SYSTEMS[-1].title}"
    return {
        "package-name": "airflow-durable",
        "name": "Durable operators",
        "description": f"Crash-safe, deferrable operators for {titles}: a retry reconnects to the "
        "running job instead of submitting a duplicate.",
        "versions": [__version__],
        "integrations": [
            {
                "integration-name": _integration_name(s.title),
                "external-doc-url": docs_url(s),
                "tags": ["service"],
            }
            for s in SYSTEMS
        ],
        # The "Durable jobs" page in Airflow's UI (a FastAPI app + an external view); see docs/jobs.md.
        "plugins": [
            {"name": "airflow_durable_jobs", "plugin-class": "airflow_durable.plugins.DurableJobsPlugin"}
        ],
        "operators": [
            {"integration-name": _integration_name(s.title), "python-modules": [s.module]} for s in SYSTEMS
        ],
    }
