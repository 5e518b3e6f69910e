"""`model_build clean` keeps an instance pool's own model (InstancePool.ModelNameOverride) while the endpoint config
naming it runs, and the artifact that model reads: the answers are botocore's Stubber's (moto's SageMaker has no
instance pools)."""

from __future__ import annotations

import boto3
from botocore.stub import Stubber

from model_build.clean import in_use

ARN = "arn:aws:sagemaker:us-east-1:123456789012:{}/{}"
HASHES = {"variant": "a" * 64, "pool": "b" * 64}


class _Session:
    def __init__(self, sagemaker) -> None:
        self._sagemaker = sagemaker

    def client(self, name: str, **_):
        assert name == "sagemaker", name
        return self._sagemaker


def _model(name: str, content_hash: str) -> dict:
    uri = f"s3://bucket/models/chat/{content_hash}/"
    return {
        "ModelName": name,
        "ModelArn": ARN.format("model", name),
        "CreationTime": 0,
        "PrimaryContainer": {
            "Image": "i",
            "ModelDataSource": {"S3DataSource": {"S3Uri": uri, "S3DataType": "S3Prefix", "CompressionType": "None"}},
        },
    }


def test_a_pools_own_model_and_its_artifact_are_in_use():
    sm = boto3.client("sagemaker", region_name="us-east-1", aws_access_key_id="x", aws_secret_access_key="x")
    variant = {
        "VariantName": "AllTraffic",
        "ModelName": "variant-model",
        "InstancePools": [
            {"InstanceType": "ml.g7e.2xlarge", "Priority": 1},
            {"InstanceType": "ml.g6e.12xlarge", "Priority": 2, "ModelNameOverride": "pool-model"},
        ],
    }
    with Stubber(sm) as stub:
        stub.add_response(
            "describe_endpoint",
            {
                "EndpointName": "dev-chat",
                "EndpointArn": ARN.format("endpoint", "dev-chat"),
                "EndpointConfigName": "config",
                "EndpointStatus": "InService",
                "CreationTime": 0,
                "LastModifiedTime": 0,
            },
        )
        stub.add_response(
            "describe_endpoint_config",
            {
                "EndpointConfigName": "config",
                "EndpointConfigArn": ARN.format("endpoint-config", "config"),
                "CreationTime": 0,
                "ProductionVariants": [variant],
            },
        )
        stub.add_response("describe_model", _model("pool-model", HASHES["pool"]), {"ModelName": "pool-model"})
        stub.add_response("describe_model", _model("variant-model", HASHES["variant"]), {"ModelName": "variant-model"})
        running = in_use(_Session(sm), "dev-chat", "chat")
        stub.assert_no_pending_responses()
    assert running.models == {"variant-model", "pool-model"}
    assert running.hashes == set(HASHES.values())
