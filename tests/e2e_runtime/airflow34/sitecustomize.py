"""Test-only: give a 3.3 deployment's Airflow the feature of 3.4's clear that the shim detects.

Airflow 3.4's ``POST .../clearTaskInstances`` body has ``keep_task_state`` (and the request deletes the
cleared task instances' ``task_state_store`` rows unless it is true). 3.4 cannot be installed here, so the
runtime tier puts this directory first on every component's ``PYTHONPATH``: when Airflow imports its
clear body model, the model gains the field, so the api-server accepts it (3.3's model forbids extra
fields: an unpatched deployment answers 422) and `airflow_durable.shims.clear_discards_task_state` sees
3.4 in the workers and triggerers. The deletion itself is the tier's action (``actions.clear_task``),
in the same step as the clear, as the reference note on 3.4 describes. Nothing else changes.
"""

from __future__ import annotations

import importlib.abc
import importlib.machinery
import os
import sys

_TARGET = "airflow.api_fastapi.core_api.datamodels.task_instances"


def _patch(module: object) -> None:
    body = module.ClearTaskInstancesBody  # type: ignore[attr-defined]
    if "keep_task_state" in body.model_fields:
        return
    module.ClearTaskInstancesBody = type(  # type: ignore[attr-defined]
        "ClearTaskInstancesBody",
        (body,),
        {"__annotations__": {"keep_task_state": bool}, "keep_task_state": False, "__module__": _TARGET},
    )


class _Loader(importlib.abc.Loader):
    def __init__(self, inner: importlib.abc.Loader) -> None:
        self.inner = inner

    def create_module(self, spec: importlib.machinery.ModuleSpec) -> object:
        return self.inner.create_module(spec)

    def exec_module(self, module: object) -> None:
        self.inner.exec_module(module)  # type: ignore[arg-type]
        _patch(module)


class _Finder(importlib.abc.MetaPathFinder):
    def find_spec(self, name: str, path: object = None, target: object = None) -> object:
        if name != _TARGET:
            return None
        spec = importlib.machinery.PathFinder.find_spec(name, path)  # type: ignore[arg-type]
        if spec is not None and spec.loader is not None:
            spec.loader = _Loader(spec.loader)
        return spec


sys.meta_path.insert(0, _Finder())


def _chain() -> None:
    """Run the sitecustomize this one shadows (an emulator's routing one), if there is one."""
    import importlib.util

    here = os.path.dirname(os.path.abspath(__file__))
    rest = [p for p in sys.path if os.path.abspath(p or ".") != here]
    spec = importlib.machinery.PathFinder.find_spec("sitecustomize", rest)
    if spec is not None and spec.loader is not None:
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)


_chain()
