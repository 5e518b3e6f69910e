"""`model_build clean` keeps an instance pool's own model (InstancePool.ModelNameOverride) while the endpoint config
naming it runs, and the artifact that model reads: the answers are botocore's Stubber's (moto's SageMaker has no
instance pools)."""

from __future__ import annotations

import boto3
from botocore.stub import Stubber
from test_clean import HASHES, _endpoint, _model

from model_build.clean import in_use


class _Session:
    def __init__(self, sagemaker) -> None:
        self._sagemaker = sagemaker

    def client(self, name: str, **_):
        assert name == "sagemaker", name
        return self._sagemaker


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
        stub.add_response("describe_endpoint", _endpoint("config"))
        stub.add_response(
            "describe_endpoint_config",
            {
                "EndpointConfigName": "config",
                "EndpointConfigArn": "arn:aws:sagemaker:us-east-1:123456789012:endpoint-config/config",
                "CreationTime": 0,
                "ProductionVariants": [variant],
            },
        )
        stub.add_response("describe_model", _model("pool-model", "b"), {"ModelName": "pool-model"})
        stub.add_response("describe_model", _model("variant-model", "a"), {"ModelName": "variant-model"})
        running = in_use(_Session(sm), "dev-chat", "chat")
        stub.assert_no_pending_responses()
    assert running.models == {"variant-model", "pool-model"}
    assert running.hashes == {HASHES["a"], HASHES["b"]}
