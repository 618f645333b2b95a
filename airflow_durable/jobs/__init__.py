"""Every durable job of a deployment, and the orphans nothing waits for (``airflow-durable jobs|orphans``).

Reads Airflow only through its public REST API; reaches each job's system through the provider hook and
the connection its record names. ``records`` and ``systems`` import no CLI dependency (the UI plugin
uses them inside the api-server); ``cli`` is the Typer/rich front end.
"""
