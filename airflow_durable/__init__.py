"""airflow-durable: crash-safe, deferrable Airflow operators.

Importing this package imports no provider: each operator module under
``airflow_durable.operators`` imports only its own provider.
"""

from __future__ import annotations

__version__ = "0.1.0"

__all__ = ["__version__"]
