# Licensed under the Apache License, Version 2.0 (http://www.apache.org/licenses/LICENSE-2.0).
# Reduced from apache/airflow providers/amazon/tests/system/amazon/aws/example_s3.py: an object is written
# and a key sensor waits for it. Not a job. No finding.
from __future__ import annotations

from datetime import datetime

from airflow.providers.amazon.aws.operators.s3 import S3CreateBucketOperator, S3CreateObjectOperator
from airflow.providers.amazon.aws.sensors.s3 import S3KeySensor
from airflow.sdk import DAG, chain

BUCKET = "bucket"
KEY = "key"

with DAG(dag_id="example_s3", schedule="@once", start_date=datetime(2021, 1, 1), catchup=False) as dag:
    create_bucket = S3CreateBucketOperator(task_id="create_bucket", bucket_name=BUCKET)
    create_object = S3CreateObjectOperator(
        task_id="create_object", s3_bucket=BUCKET, s3_key=KEY, data="input", replace=True
    )
    sensor_one_key = S3KeySensor(task_id="sensor_one_key", bucket_name=BUCKET, bucket_key=KEY)
    sensor_key_with_function = S3KeySensor(
        task_id="sensor_key_with_function",
        bucket_name=BUCKET,
        bucket_key=KEY,
        check_fn=lambda files: all(f.get("Size", 0) > 0 for f in files),
        deferrable=True,
    )
    chain(create_bucket, create_object, [sensor_one_key, sensor_key_with_function])
