"""The engine's errors; each message names the task and the job (or the task-state-store key)."""

from __future__ import annotations

from airflow.exceptions import AirflowException

__all__ = [
    "DurableError",
    "DurableEventError",
    "DurableForeignJobError",
    "DurableStateError",
    "DurableStatusError",
    "JobNotFoundError",
]


class DurableError(AirflowException):
    """Base class of the engine's errors; each message names the task and the external id."""


class DurableStateError(DurableError):
    """The task state store could not be read or written, or holds a value the engine did not write."""


class DurableStatusError(DurableError):
    """The external system reported a status the operator does not know."""


class DurableEventError(DurableError):
    """A trigger event is malformed."""


class DurableForeignJobError(DurableError):
    """A submission was answered with a job created before this task instance asked for one."""


class JobNotFoundError(Exception):
    """Raised by an adapter's ``durable_status`` when the system no longer knows the id (404, expired)."""
