"""Operations review F8: `model_build clean --delete` kept only pinned, built and deployed hashes, so after an update
(or a failed rollback) it deleted the artifact of the stack's previous version, which a rollback (CloudFormation's,
the pipeline's, or the workstation's printed update-stack command) deploys again. Now it also keeps the artifact of
the newest Model the stack retained when an update replaced it, and any artifact the workstation's saved rollback
template names; older ones still go. Against the emulator's S3 and SageMaker."""

from __future__ import annotations

import time

import boto3
from test_preflight import ACCOUNT, build, write_config

from deployment import load_config
from endpoint_config import artifact_bucket_name
from model_build.clean import delete, plan

HASH_NEXT, HASH_NOW, HASH_PREV, HASH_OLD, HASH_SNAP = ("b" * 64, "c" * 64, "d" * 64, "e" * 64, "f" * 64)


def _model(sm, name: str, bucket: str, content_hash: str, tags: list[dict]) -> None:
    sm.create_model(
        ModelName=name,
        ExecutionRoleArn=f"arn:aws:iam::{ACCOUNT}:role/x",
        PrimaryContainer={
            "Image": "i",
            "ModelDataSource": {
                "S3DataSource": {
                    "S3Uri": f"s3://{bucket}/models/chat/{content_hash}/",
                    "S3DataType": "S3Prefix",
                    "CompressionType": "None",
                }
            },
        },
        Tags=tags,
    )
    time.sleep(0.01)  # distinct creation times: the newest retained one is the previous version


def test_clean_keeps_the_previous_versions_artifact_and_the_rollback_snapshots(moto_env, tmp_path):
    config = write_config(tmp_path, emulator=True, endpoints=[{"name": "chat"}])
    environment_plan = load_config(config, "dev")
    bucket = artifact_bucket_name("pf", "dev", ACCOUNT, "us-east-1")
    s3 = boto3.client("s3")
    s3.create_bucket(Bucket=bucket)
    for h in (HASH_NEXT, HASH_NOW, HASH_PREV, HASH_OLD, HASH_SNAP):
        s3.put_object(Bucket=bucket, Key=f"models/chat/{h}/manifest.json", Body=b"x")
    build(tmp_path / "build", "chat", HASH_NEXT)
    tags = [
        {"Key": "llm-endpoints:project", "Value": "pf"},
        {"Key": "llm-endpoints:environment", "Value": "dev"},
        {"Key": "llm-endpoints:endpoint", "Value": "chat"},
    ]
    sm = boto3.client("sagemaker")
    _model(sm, "m-old", bucket, HASH_OLD, tags)  # retained by an update two versions ago
    _model(sm, "m-prev", bucket, HASH_PREV, tags)  # retained by the last update: the previous version
    _model(sm, "m-now", bucket, HASH_NOW, tags)
    sm.create_endpoint_config(
        EndpointConfigName="c",
        ProductionVariants=[
            {
                "VariantName": "AllTraffic",
                "ModelName": "m-now",
                "InstanceType": "ml.m5.xlarge",
                "InitialInstanceCount": 1,
            }
        ],
    )
    sm.create_endpoint(
        EndpointName=environment_plan.endpoint_name(environment_plan.endpoint("chat")), EndpointConfigName="c"
    )
    snapshots = tmp_path / "rollback"
    snapshots.mkdir()
    (snapshots / f"{environment_plan.plans[0].stack_name}.previous.template").write_text(
        '{"Resources": {"M": {"Properties": {"ModelDataUrl": "s3://b/models/chat/' + HASH_SNAP + '/"}}}}'
    )

    [cleanup] = plan(
        load_config(config, "dev", build_root=tmp_path / "build"), boto3.Session(), bucket, snapshot_dir=snapshots
    )
    assert cleanup.keep == {
        HASH_NEXT: ["built"],
        HASH_NOW: ["deployed"],
        HASH_PREV: ["previous version"],
        HASH_SNAP: ["rollback snapshot"],
    }
    assert list(cleanup.remove) == [HASH_OLD]
    delete(boto3.Session(), bucket, [cleanup])
    left = {o["Key"].split("/")[2] for o in s3.list_objects_v2(Bucket=bucket)["Contents"]}
    assert left == {HASH_NEXT, HASH_NOW, HASH_PREV, HASH_SNAP}
