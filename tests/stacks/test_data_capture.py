"""Template assertions on data capture (`data_capture:`, stacks/endpoint_network.py EndpointSecurity):
config/examples/production.yaml's chat-vllm endpoint in prod captures 10 % of requests and responses into the artifact
bucket under data-capture/chat-vllm/, and its execution role may write exactly there. That SageMaker writes the
captures (and with which principal) only a real account shows."""

from __future__ import annotations

import pytest

CONFIG = "config/examples/production.yaml"
STACK = "llm-endpoints-prod-chat-vllm"
ACCOUNT, REGION = "111122223333", "us-east-1"
BUCKET = f"llm-endpoints-prod-artifacts-{ACCOUNT}-{REGION}"


@pytest.fixture(scope="module")
def production(synth):
    return synth(CONFIG, "prod")


def flat(value) -> str:
    """A template string with the pseudo parameters resolved (Fn::Join of literals and Refs)."""
    if isinstance(value, str):
        return value
    if "Fn::Join" in value:
        sep, parts = value["Fn::Join"]
        return sep.join(flat(p) for p in parts)
    if "Ref" in value:
        return {"AWS::AccountId": ACCOUNT, "AWS::Region": REGION, "AWS::Partition": "aws"}.get(
            value["Ref"], value["Ref"]
        )
    return repr(value)


def execution_statements(production, stack: str) -> list[dict]:
    """The statements of the policy attached to the stack's SageMaker execution role."""
    resources = production.templates[stack]["Resources"]
    [model] = production.resources(stack, "AWS::SageMaker::Model")
    role = model["Properties"]["ExecutionRoleArn"]["Fn::GetAtt"][0]
    return [
        s
        for r in resources.values()
        if r["Type"] == "AWS::IAM::Policy" and {"Ref": role} in r["Properties"]["Roles"]
        for s in r["Properties"]["PolicyDocument"]["Statement"]
    ]


def as_list(value) -> list:
    return value if isinstance(value, list) else [value]


def test_the_endpoint_config_captures_ten_percent_of_input_and_output_as_json(production):
    [config] = production.resources(STACK, "AWS::SageMaker::EndpointConfig")
    capture = config["Properties"]["DataCaptureConfig"]
    assert capture["EnableCapture"] is True
    assert capture["InitialSamplingPercentage"] == 10
    assert capture["CaptureOptions"] == [{"CaptureMode": "Input"}, {"CaptureMode": "Output"}]
    assert capture["CaptureContentTypeHeader"] == {"JsonContentTypes": ["application/json"]}
    assert flat(capture["DestinationS3Uri"]) == f"s3://{BUCKET}/data-capture/chat-vllm"
    assert "KmsKeyId" not in capture  # the bucket's own key (encryption.bucket_key) encrypts the captures


def test_the_execution_role_may_write_only_the_capture_prefix(production):
    writes = [s for s in execution_statements(production, STACK) if "s3:PutObject" in as_list(s["Action"])]
    assert [[flat(r) for r in as_list(s["Resource"])] for s in writes] == [
        [f"arn:aws:s3:::{BUCKET}/data-capture/chat-vllm/*"]
    ]
    assert all(as_list(s["Action"]) == ["s3:PutObject"] for s in writes)


def test_the_capture_config_is_not_sent_as_a_variant_property(production):
    """botocore documents VariantPropertyType DataCaptureConfig as "(Not currently supported.)": the update names only
    the supported variant properties; the capture settings are the new endpoint config's
    (tests/stacks/test_service_model_values.py checks every such value)."""
    [endpoint] = production.resources(STACK, "AWS::SageMaker::Endpoint")
    excluded = [p["VariantPropertyType"] for p in endpoint["Properties"]["ExcludeRetainedVariantProperties"]]
    assert excluded == ["DesiredWeight"]


def test_endpoints_without_the_block_capture_nothing(production):
    for stack in ("llm-endpoints-prod-summarize-async", "llm-endpoints-prod-assist-ic"):
        for config in production.resources(stack, "AWS::SageMaker::EndpointConfig"):
            assert "DataCaptureConfig" not in config["Properties"]
        for statement in execution_statements(production, stack):
            assert not any("data-capture" in flat(r) for r in as_list(statement["Resource"]))


def test_a_given_destination_and_key_are_written_with_the_key_through_s3_only(plan_of):
    """EndpointSecurity on its own (no app synth): a destination in another bucket and a capture key."""
    from aws_cdk import App, Stack
    from aws_cdk import aws_iam as iam
    from aws_cdk import aws_sagemaker as sagemaker
    from aws_cdk.assertions import Match, Template

    from stacks.endpoint_network import EndpointSecurity

    key = "arn:aws:kms:us-east-1:111122223333:key/1234abcd-12ab-34cd-56ef-1234567890ab"
    entry = {
        "name": "chat",
        "system": "hf-fastload",
        "model": "gpt2",
        "instance_type": "ml.m5.xlarge",
        "data_capture": {
            "sampling_percent": 1,
            "capture": ["input"],
            "destination": "s3://my-captures/llm/chat/",
            "kms_key": key,
        },
    }
    stack = Stack(App(), "S", env={"account": ACCOUNT, "region": REGION})
    role = iam.Role(stack, "Role", assumed_by=iam.ServicePrincipal("sagemaker.amazonaws.com"))
    model = sagemaker.CfnModel(stack, "Model", execution_role_arn=role.role_arn)
    config = sagemaker.CfnEndpointConfig(stack, "Config", production_variants=[])
    security = EndpointSecurity.resolve(plan_of(entry), artifact_bucket="artifacts", bucket_key=None, network=None)
    security.apply(role=role, model=model, endpoint_config=config)
    template = Template.from_stack(stack)
    template.has_resource_properties(
        "AWS::SageMaker::EndpointConfig",
        {
            "DataCaptureConfig": {
                "DestinationS3Uri": "s3://my-captures/llm/chat",
                "KmsKeyId": key,
                "InitialSamplingPercentage": 1,
                "CaptureOptions": [{"CaptureMode": "Input"}],
            }
        },
    )
    template.has_resource_properties(
        "AWS::IAM::Policy",
        {
            "PolicyDocument": {
                "Statement": Match.array_with(
                    [
                        {
                            "Action": "s3:PutObject",
                            "Effect": "Allow",
                            "Resource": {
                                "Fn::Join": ["", ["arn:", {"Ref": "AWS::Partition"}, ":s3:::my-captures/llm/chat/*"]]
                            },
                        },
                        {
                            "Action": ["kms:Decrypt", "kms:GenerateDataKey"],
                            "Effect": "Allow",
                            "Resource": key,
                            "Condition": {"StringEquals": {"kms:ViaService": f"s3.{REGION}.amazonaws.com"}},
                        },
                    ]
                )
            }
        },
    )
    # No VPC, no volume key: nothing else is added.
    assert "VpcConfig" not in template.to_json()["Resources"]["Model"]["Properties"]
    assert "KmsKeyId" not in template.to_json()["Resources"]["Config"]["Properties"]
