"""Our own triggers, only where a provider trigger cannot serve as is.

* `airflow_durable.triggers.owned.DurableOwnedTrigger` wraps every provider trigger a durable
  task defers to, so that its ``on_kill()`` cancels the job only when the task stopped waiting on it.
"""
