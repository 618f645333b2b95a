"""Section "parse": import cost of each durable operator module vs the provider module it wraps, DAG-file
parse cost with 200 durable vs 200 upstream tasks, and ``import airflow_durable`` alone.

Every sample is a fresh interpreter (``python -c``); the pair of a comparison runs interleaved (A B, B A, ...)
so that a busy neighbour slows both alike. The time is measured inside the child around the import (or the
DAG file's execution), so interpreter start-up is not in it; the module count is ``len(sys.modules)``.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

#: durable module → the provider module its operators subclass.
MODULES: dict[str, str] = {
    "airflow_durable.operators.databricks": "airflow.providers.databricks.operators.databricks",
    "airflow_durable.operators.snowflake": "airflow.providers.snowflake.operators.snowflake",
    "airflow_durable.operators.bigquery": "airflow.providers.google.cloud.operators.bigquery",
    "airflow_durable.operators.redshift": "airflow.providers.amazon.aws.operators.redshift_data",
    "airflow_durable.operators.emr": "airflow.providers.amazon.aws.operators.emr",
    "airflow_durable.operators.batch": "airflow.providers.amazon.aws.operators.batch",
    "airflow_durable.operators.dbt_cloud": "airflow.providers.dbt.cloud.operators.dbt",
}

_IMPORT = """
import json, sys, time
t0 = time.perf_counter()
import {module}
t1 = time.perf_counter()
print(json.dumps({{"seconds": t1 - t0, "modules": len(sys.modules)}}))
"""

_PARSE = """
import json, runpy, sys, time
{preload}
t0 = time.perf_counter()
runpy.run_path({path!r})
t1 = time.perf_counter()
print(json.dumps({{"seconds": t1 - t0, "modules": len(sys.modules)}}))
"""

# Constructor arguments valid without any connection (the DAG file is only parsed).
_TASKS: list[tuple[str, str, str, str]] = [
    (
        "airflow.providers.databricks.operators.databricks",
        "DatabricksSubmitRunOperator",
        "airflow_durable.operators.databricks",
        "json={'new_cluster': {'spark_version': '15.4.x-scala2.12', 'num_workers': 1}, "
        "'notebook_task': {'notebook_path': '/Shared/etl'}}, deferrable=True",
    ),
    (
        "airflow.providers.databricks.operators.databricks",
        "DatabricksRunNowOperator",
        "airflow_durable.operators.databricks",
        "job_id=42, notebook_params={'date': '{{ ds }}'}, deferrable=True",
    ),
    (
        "airflow.providers.snowflake.operators.snowflake",
        "SnowflakeSqlApiOperator",
        "airflow_durable.operators.snowflake",
        "sql='select 1', statement_count=1, deferrable=True",
    ),
    (
        "airflow.providers.google.cloud.operators.bigquery",
        "BigQueryInsertJobOperator",
        "airflow_durable.operators.bigquery",
        "configuration={'query': {'query': 'SELECT 1', 'useLegacySql': False}}, deferrable=True",
    ),
    (
        "airflow.providers.amazon.aws.operators.redshift_data",
        "RedshiftDataOperator",
        "airflow_durable.operators.redshift",
        "sql='select 1', database='dev', cluster_identifier='analytics', deferrable=True",
    ),
    (
        "airflow.providers.amazon.aws.operators.batch",
        "BatchOperator",
        "airflow_durable.operators.batch",
        "job_name='etl', job_queue='q', job_definition='d', deferrable=True",
    ),
    (
        "airflow.providers.amazon.aws.operators.emr",
        "EmrAddStepsOperator",
        "airflow_durable.operators.emr",
        "job_flow_id='j-1', steps=[{'Name': 'etl', 'ActionOnFailure': 'CONTINUE', "
        "'HadoopJarStep': {'Jar': 'command-runner.jar', 'Args': ['spark-submit']}}], "
        "wait_for_completion=True, deferrable=True",
    ),
    (
        "airflow.providers.amazon.aws.operators.emr",
        "EmrServerlessStartJobOperator",
        "airflow_durable.operators.emr",
        "application_id='app', execution_role_arn='arn:aws:iam::1:role/r', "
        "job_driver={'sparkSubmit': {'entryPoint': 's3://jobs/etl.py'}}, deferrable=True",
    ),
    (
        "airflow.providers.amazon.aws.operators.emr",
        "EmrContainerOperator",
        "airflow_durable.operators.emr",
        "name='etl', virtual_cluster_id='vc', execution_role_arn='arn:aws:iam::1:role/r', "
        "release_label='emr-7.1.0-latest', job_driver={'sparkSubmitJobDriver': {'entryPoint': 's3://e.py'}}, "
        "deferrable=True",
    ),
    (
        "airflow.providers.dbt.cloud.operators.dbt",
        "DbtCloudRunJobOperator",
        "airflow_durable.operators.dbt_cloud",
        "job_id=42, deferrable=True",
    ),
]


def dag_file(durable: bool, tasks: int) -> str:
    """A DAG file with ``tasks`` tasks cycling through the ten operators (durable or upstream)."""
    lines = [
        "from datetime import datetime",
        "from airflow.sdk import DAG",
    ]
    names = []
    for provider_module, cls, durable_module, _ in _TASKS:
        name = f"Durable{cls}" if durable else cls
        lines.append(f"from {durable_module if durable else provider_module} import {name}")
        names.append(name)
    lines.append("with DAG(dag_id='parse_bench', schedule=None, start_date=datetime(2026, 1, 1)):")
    for i in range(tasks):
        _, _, _, kwargs = _TASKS[i % len(_TASKS)]
        lines.append(f"    {names[i % len(names)]}(task_id='t{i}', {kwargs})")
    return "\n".join(lines) + "\n"


def _child(code: str, env: dict[str, str]) -> dict[str, Any]:
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=300, check=False
    )
    if out.returncode != 0:
        raise RuntimeError(f"child failed ({out.returncode}): {out.stderr[-2000:]}")
    result: dict[str, Any] = json.loads(out.stdout.strip().splitlines()[-1])
    result["load"] = round(os.getloadavg()[0], 2)  # the machine is shared: the load it ran under
    return result


def _pair(code_a: str, code_b: str, samples: int, env: dict[str, str]) -> tuple[list[dict], list[dict]]:
    a: list[dict[str, Any]] = []
    b: list[dict[str, Any]] = []
    _child(code_a, env)  # warm-up: page cache, .pyc files
    _child(code_b, env)
    for i in range(samples):
        if i % 2 == 0:
            a.append(_child(code_a, env))
            b.append(_child(code_b, env))
        else:
            b.append(_child(code_b, env))
            a.append(_child(code_a, env))
    return a, b


def _compile_ours() -> list[Path]:
    """Byte-compile ``airflow_durable`` in place, as an installed wheel is; returns the ``__pycache__``
    directories this created (to remove afterwards).

    The provider modules in the venv come with ``.pyc`` files; a source checkout run with
    ``PYTHONDONTWRITEBYTECODE=1`` (as this machine's shells are) has none, so every fresh interpreter would
    compile our modules from source (``engine.py`` alone: ~45 ms) and the ratio would measure the compiler.
    """
    package = Path(__file__).resolve().parents[1] / "airflow_durable"
    before = {d for d in package.rglob("__pycache__")}
    subprocess.run(
        [sys.executable, "-m", "compileall", "-q", str(package)], capture_output=True, check=True, timeout=300
    )
    return sorted({d for d in package.rglob("__pycache__")} - before)


def run(
    samples: int,
    tasks: int,
    env: dict[str, str],
    modules: list[str] | None = None,
    cold: bool = True,
    dags: bool = True,
) -> list[dict[str, Any]]:
    created = _compile_ours()
    try:
        return _run(samples, tasks, env, modules, cold, dags)
    finally:
        for directory in created:
            shutil.rmtree(directory, ignore_errors=True)


def _run(
    samples: int, tasks: int, env: dict[str, str], modules: list[str] | None, cold: bool, dags: bool
) -> list[dict[str, Any]]:
    results: list[dict[str, Any]] = []
    for durable_module, provider_module in MODULES.items():
        if modules is not None and durable_module not in modules:
            continue
        ours, upstream = _pair(
            _IMPORT.format(module=durable_module), _IMPORT.format(module=provider_module), samples, env
        )
        results.append(
            {
                "section": "parse",
                "kind": "import",
                "name": durable_module,
                "upstream_name": provider_module,
                "ours": ours,
                "upstream": upstream,
            }
        )
    # import airflow_durable alone vs `import airflow.sdk` (what every DAG file pays anyway).
    ours, upstream = _pair(
        _IMPORT.format(module="airflow_durable"), _IMPORT.format(module="airflow.sdk"), samples, env
    )
    results.append(
        {
            "section": "parse",
            "kind": "package",
            "name": "airflow_durable",
            "upstream_name": "airflow.sdk",
            "ours": ours,
            "upstream": upstream,
        }
    )
    if not dags:
        return results
    with tempfile.TemporaryDirectory(prefix="bench-parse-") as tmp:
        paths = {}
        for durable in (True, False):
            path = Path(tmp) / f"dag_{'durable' if durable else 'upstream'}.py"
            path.write_text(dag_file(durable, tasks))
            paths[durable] = str(path)
        if cold:
            # Cold: the DAG file pays its imports (a task process parsing its DAG file).
            ours, upstream = _pair(
                _PARSE.format(preload="", path=paths[True]),
                _PARSE.format(preload="", path=paths[False]),
                samples,
                env,
            )
            results.append(
                {
                    "section": "parse",
                    "kind": "dag-cold",
                    "name": f"{tasks} durable tasks",
                    "upstream_name": f"{tasks} upstream tasks",
                    "ours": ours,
                    "upstream": upstream,
                }
            )
        # Warm: every module already imported (the dag-processor's pre-import): only building the tasks.
        preload = (
            "\n".join(sorted({f"import {m}" for m in MODULES} | {f"import {m}" for m in MODULES.values()}))
            + "\nimport airflow.sdk"
        )
        ours, upstream = _pair(
            _PARSE.format(preload=preload, path=paths[True]),
            _PARSE.format(preload=preload, path=paths[False]),
            samples,
            env,
        )
        results.append(
            {
                "section": "parse",
                "kind": "dag-warm",
                "name": f"{tasks} durable tasks",
                "upstream_name": f"{tasks} upstream tasks",
                "ours": ours,
                "upstream": upstream,
            }
        )
    return results


if __name__ == "__main__":  # pragma: no cover - manual use: python -m bench.parse
    print(json.dumps(run(3, 200, dict(os.environ)), indent=1))
