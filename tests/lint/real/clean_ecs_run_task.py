# Licensed under the Apache License, Version 2.0 (http://www.apache.org/licenses/LICENSE-2.0).
# Reduced from apache/airflow providers/amazon/tests/system/amazon/aws/example_ecs_fargate.py: the task is
# run and awaited in one operator, the sensor checks the task state (no split on a wrapped job).
from __future__ import annotations

from datetime import datetime

from airflow.providers.amazon.aws.operators.ecs import EcsRunTaskOperator
from airflow.sdk import DAG

with DAG(dag_id="example_ecs_fargate", schedule="@once", start_date=datetime(2021, 1, 1), catchup=False) as dag:
    hello_world = EcsRunTaskOperator(
        task_id="run_fargate_task",
        cluster="cluster",
        task_definition="hello-world",
        launch_type="FARGATE",
        overrides={"containerOverrides": [{"name": "hello", "command": ["echo", "hello", "world"]}]},
        network_configuration={"awsvpcConfiguration": {"subnets": ["subnet-1"], "assignPublicIp": "ENABLED"}},
        awslogs_group="/ecs/hello-world",
        awslogs_region="us-east-1",
        awslogs_stream_prefix="ecs/hello-world-container",
    )
