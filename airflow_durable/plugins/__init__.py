"""Airflow UI plugin: the "Durable jobs" page (registered by ``get_provider_info``'s ``plugins`` key).

Airflow imports this module in every component that loads plugins, so it stays light: the FastAPI app is
built from `airflow_durable.plugins.app`, which imports Airflow's API internals only per request.
"""

from __future__ import annotations

from typing import Any

from airflow.plugins_manager import AirflowPlugin

__all__ = ["DurableJobsPlugin"]

_apps: list[dict[str, Any]] = []
_views: list[dict[str, Any]] = []
try:
    from airflow_durable.plugins.app import URL_PREFIX, app
except ModuleNotFoundError as err:
    # An Airflow without FastAPI (2.x: no API server to mount the page on) still loads this entry-point
    # plugin in every component: an empty plugin there, not an import error logged by each of them.
    if err.name != "fastapi":
        raise
else:
    _apps = [{"app": app, "url_prefix": URL_PREFIX, "name": "Durable jobs"}]
    _views = [
        {
            "name": "Durable jobs",
            "href": f"{URL_PREFIX}/",
            "destination": "nav",
            "category": "browse",
            "url_route": "durable-jobs",
        }
    ]


class DurableJobsPlugin(AirflowPlugin):
    """A FastAPI app serving the page and its JSON, and a nav entry that shows it inside Airflow's UI."""

    name = "airflow_durable_jobs"
    fastapi_apps = _apps
    external_views = _views
