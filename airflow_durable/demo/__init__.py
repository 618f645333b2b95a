"""``airflow-durable demo``: the upstream operator and its durable drop-in, side by side, on a real
Airflow deployment against an offline emulator, with try 1 killed mid-job.

* `systems` — the registry of systems the demo can run.
* `deployment` — a real Airflow 3 deployment in a temporary ``AIRFLOW_HOME``.
* `runner` — the steps, and the measured `DemoResult`.
* `render` — progress, the table, JSON.

Importing this package imports neither Airflow nor rich.
"""

from __future__ import annotations

from airflow_durable.demo.runner import DemoResult, DemoStepError, SideResult, run_demo

__all__ = ["DemoResult", "DemoStepError", "SideResult", "run_demo"]
