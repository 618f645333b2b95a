"""The ``airflow-durable`` command line: ``demo``, ``check``, ``migrate``, ``jobs`` and ``orphans``."""

from __future__ import annotations

import typer

app = typer.Typer(
    name="airflow-durable",
    help="Crash-safe Airflow operators: run the demo, check DAGs for retry anti-patterns, migrate imports.",
    no_args_is_help=True,
    add_completion=False,
)


def _register_subcommands() -> None:
    # Each feature module owns its commands; importing them lazily keeps `--help` fast.
    from airflow_durable.demo.cli import register as register_demo
    from airflow_durable.jobs.cli import register as register_jobs
    from airflow_durable.lint.cli import register as register_lint

    register_demo(app)
    register_lint(app)
    register_jobs(app)


def main() -> None:
    _register_subcommands()
    app()


if __name__ == "__main__":
    main()
