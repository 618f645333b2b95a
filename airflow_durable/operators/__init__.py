"""The durable operators, one module per integration of `airflow_durable.catalogue`."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator

from airflow_durable import catalogue


@contextlib.contextmanager
def provider_required(module: str) -> Iterator[None]:
    """Around an operator module's provider imports: a missing provider names the extra to install."""
    try:
        yield
    except ImportError as err:
        system = next(s for s in catalogue.SYSTEMS if s.module == module)
        raise ImportError(
            f"{module} needs the {system.provider_package} package, which could not be imported ({err}). "
            f'Install it with: pip install "airflow-durable[{system.extra}]"'
        ) from err
