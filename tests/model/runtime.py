"""What a model run needs around it: quiet logs (thousands of tries would print megabytes), and
hypothesis' storage in a throwaway directory (it caches constants under ./.hypothesis otherwise)."""

from __future__ import annotations

import contextlib
import logging
from collections.abc import Iterator

_NOISY = ("airflow", "airflow_durable", "botocore", "aiobotocore", "urllib3", "httpx", "google", "asyncio")


@contextlib.contextmanager
def quiet_logs(level: int = logging.CRITICAL) -> Iterator[None]:
    """Silence the operators', providers' and clients' logs for the duration (restored after)."""
    import structlog

    saved = {name: logging.getLogger(name).level for name in _NOISY}
    config = structlog.get_config()
    for name in _NOISY:
        logging.getLogger(name).setLevel(level)
    structlog.configure(wrapper_class=structlog.make_filtering_bound_logger(level))
    try:
        yield
    finally:
        for name, value in saved.items():
            logging.getLogger(name).setLevel(value)
        structlog.configure(**config)


@contextlib.contextmanager
def hypothesis_storage() -> Iterator[None]:
    """Point hypothesis' storage directory at a temporary one for the duration, then remove it."""
    import shutil
    import tempfile

    from hypothesis.configuration import set_hypothesis_home_dir

    directory = tempfile.mkdtemp(prefix="afd-model-hypothesis-")
    set_hypothesis_home_dir(directory)
    try:
        yield
    finally:
        set_hypothesis_home_dir(None)
        shutil.rmtree(directory, ignore_errors=True)
