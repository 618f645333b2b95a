"""The Airflow plugin: the "Durable jobs" page (registered by ``get_provider_info``'s ``plugins`` key) and
the listener that marks a clear of a running task whose worker is gone (`airflow_durable.plugins.listener`).

Airflow imports this module in every component that loads plugins, so it stays light: the FastAPI app is
built from `airflow_durable.plugins.app`, which imports Airflow's API internals only per request.
"""

from __future__ import annotations

from typing import Any

from airflow.configuration import conf
from airflow.plugins_manager import AirflowPlugin

from airflow_durable import shims

__all__ = ["ENABLED", "DurableJobsPlugin"]

#: ``[airflow_durable] jobs_page = False`` (``AIRFLOW__AIRFLOW_DURABLE__JOBS_PAGE=False``) leaves the plugin
#: empty: no page, no menu entry. The entry point itself cannot be switched off by Airflow's settings.
ENABLED = conf.getboolean("airflow_durable", "jobs_page", fallback=True)


def _page() -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """The page's app and its menu entry, or nothing where it is switched off or cannot be served."""
    if not ENABLED:
        return [], []
    try:
        from airflow_durable.plugins.app import URL_PREFIX, app
    except ModuleNotFoundError as err:
        # An Airflow without FastAPI (2.x: no API server to mount the page on) still loads this entry-point
        # plugin in every component: an empty plugin there, not an import error logged by each of them.
        if err.name != "fastapi":
            raise
        return [], []
    view = {
        "name": "Durable jobs",
        "href": f"{URL_PREFIX}/",
        "destination": "nav",
        "category": "browse",
        "url_route": "durable-jobs",
    }
    return [{"app": app, "url_prefix": URL_PREFIX, "name": "Durable jobs"}], [view]


_apps, _views = _page()


def _listeners() -> list[Any]:
    """The clear listener, where the engine is durable (Airflow >= 3.3); it is not tied to the page."""
    if not shims.DURABLE_RUNTIME:
        return []
    from airflow_durable.plugins import listener

    return [listener]


class DurableJobsPlugin(AirflowPlugin):
    """A FastAPI app serving the page and its JSON, a nav entry that shows it inside Airflow's UI, and the
    listener that marks a clear of a running task whose worker is gone."""

    name = "airflow_durable_jobs"
    fastapi_apps = _apps
    external_views = _views
    listeners = _listeners()
