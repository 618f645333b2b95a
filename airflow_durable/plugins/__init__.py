"""Airflow UI plugin: the "Durable jobs" page (registered by ``get_provider_info``'s ``plugins`` key).

Airflow imports this module in every component that loads plugins, so it stays light: the FastAPI app is
built from `airflow_durable.plugins.app`, which imports Airflow's API internals only per request.
"""

from __future__ import annotations

from airflow.plugins_manager import AirflowPlugin

from airflow_durable.plugins.app import URL_PREFIX, app

__all__ = ["DurableJobsPlugin"]


class DurableJobsPlugin(AirflowPlugin):
    """A FastAPI app serving the page and its JSON, and a nav entry that shows it inside Airflow's UI."""

    name = "airflow_durable_jobs"
    fastapi_apps = [{"app": app, "url_prefix": URL_PREFIX, "name": "Durable jobs"}]
    external_views = [
        {
            "name": "Durable jobs",
            "href": f"{URL_PREFIX}/",
            "destination": "nav",
            "category": "browse",
            "url_route": "durable-jobs",
        }
    ]
