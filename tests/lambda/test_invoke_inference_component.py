"""InvokeEndpoint's InferenceComponentName from the invoke and smoke functions (hosting.mode inference-components):
named when INFERENCE_COMPONENT_NAME is set (the stacks set it: tests/stacks/test_inference_components.py), never
otherwise, and sent on the wire as botocore serializes it (the X-Amzn-SageMaker-Inference-Component header, botocore's
sagemaker-runtime model)."""

from __future__ import annotations

import io
import json

import boto3
import pytest

from endpoint_runtime import invoke as invoke_module
from endpoint_runtime import smoke

GOOD = [{"generated_text": "The capital of France is Paris."}]
COMPONENT = "prod-assist-ic-ic"
REQUEST = {"inputs": "The capital of France is", "parameters": {"max_new_tokens": 8}}


class RecordingClient:
    """The sagemaker-runtime client's invoke_endpoint: records the keyword arguments, answers GOOD."""

    def __init__(self) -> None:
        self.calls: list[dict] = []

    def invoke_endpoint(self, **kwargs):
        self.calls.append(kwargs)
        return {"Body": io.BytesIO(json.dumps(GOOD).encode()), "ContentType": "application/json"}


@pytest.fixture
def recording(monkeypatch):
    for key in ("INFERENCE_COMPONENT_NAME", "MAX_NEW_TOKENS", "MAX_BATCH_SIZE", "MAX_REQUEST_BYTES", "READ_TIMEOUT_S"):
        monkeypatch.delenv(key, raising=False)
    monkeypatch.setenv("ENDPOINT_NAME", "prod-assist-ic")
    client = RecordingClient()
    monkeypatch.setattr(invoke_module, "_client", client)
    yield client
    invoke_module.reset_client()


def test_handler_names_the_component_from_its_environment(recording, monkeypatch):
    monkeypatch.setenv("INFERENCE_COMPONENT_NAME", COMPONENT)
    answer = invoke_module.handler(dict(REQUEST), None)
    assert answer["statusCode"] == 200, answer
    [call] = recording.calls
    assert call["EndpointName"] == "prod-assist-ic" and call["InferenceComponentName"] == COMPONENT


@pytest.mark.parametrize("value", [None, "", "  "])
def test_handler_names_no_component_without_one(recording, monkeypatch, value):
    if value is not None:
        monkeypatch.setenv("INFERENCE_COMPONENT_NAME", value)
    assert invoke_module.handler(dict(REQUEST), None)["statusCode"] == 200
    [call] = recording.calls
    assert "InferenceComponentName" not in call  # a model on the variant: SageMaker would refuse a component name


def test_component_name_travels_as_botocore_serializes_it(monkeypatch):
    """The real client: InferenceComponentName becomes the X-Amzn-SageMaker-Inference-Component header (captured
    before sending; the request never leaves the process)."""
    import botocore.awsrequest

    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "testing")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "testing")
    monkeypatch.setenv("AWS_DEFAULT_REGION", "us-east-1")
    monkeypatch.setattr(boto3, "DEFAULT_SESSION", None)
    client = invoke_module.make_client()
    seen: list[dict] = []

    def answer(request, **_):
        seen.append(dict(request.headers))
        return botocore.awsrequest.AWSResponse(request.url, 200, {"Content-Type": "application/json"}, _Raw(GOOD))

    client.meta.events.register("before-send.sagemaker-runtime.InvokeEndpoint", answer)
    status, body = invoke_module.invoke("prod-assist-ic", dict(REQUEST), client, inference_component=COMPONENT)
    assert status == 200 and body["outputs"] == GOOD
    [headers] = seen
    assert headers["X-Amzn-SageMaker-Inference-Component"] in (COMPONENT, COMPONENT.encode())
    seen.clear()
    invoke_module.invoke("prod-assist-ic", dict(REQUEST), client)
    assert "X-Amzn-SageMaker-Inference-Component" not in seen[0]


class _Raw(io.BytesIO):
    """A urllib3-like body for AWSResponse (read for the streaming Body, stream for the response's content)."""

    def __init__(self, payload) -> None:
        super().__init__(json.dumps(payload).encode())

    def stream(self, *_args, **_kwargs):
        yield self.getvalue()


def test_smoke_function_names_the_component(monkeypatch):
    """The smoke Lambda (INFERENCE_COMPONENT_NAME from its environment) sends the component with its invocation;
    without the variable it names none. CloudFormation and SageMaker answer through botocore's Stubber (an
    InService endpoint running the stack's config), so every check runs."""
    from botocore.stub import Stubber
    from helpers import Session

    stack, endpoint_name, config = "llm-endpoints-prod-assist-ic", "prod-assist-ic", "prod-assist-ic-config"
    for key, value in {"STACK_NAME": stack, "ENDPOINT_NAME": endpoint_name, "AWS_DEFAULT_REGION": "us-east-1",
                       "AWS_ACCESS_KEY_ID": "testing", "AWS_SECRET_ACCESS_KEY": "testing",
                       "INFERENCE_COMPONENT_NAME": COMPONENT}.items():  # fmt: skip
        monkeypatch.setenv(key, value)
    monkeypatch.setattr(boto3, "DEFAULT_SESSION", None)
    arn = "arn:aws:sagemaker:us-east-1:111122223333:{}/{}"
    resources = [
        {"LogicalResourceId": "Endpoint", "PhysicalResourceId": arn.format("endpoint", endpoint_name),
         "ResourceType": "AWS::SageMaker::Endpoint", "LastUpdatedTimestamp": "2026-01-01T00:00:00Z",
         "ResourceStatus": "CREATE_COMPLETE"},
        {"LogicalResourceId": "EndpointConfig", "PhysicalResourceId": arn.format("endpoint-config", config),
         "ResourceType": "AWS::SageMaker::EndpointConfig", "LastUpdatedTimestamp": "2026-01-01T00:00:00Z",
         "ResourceStatus": "CREATE_COMPLETE"},
    ]  # fmt: skip
    runtime = RecordingClient()
    cfn, sm = boto3.client("cloudformation"), boto3.client("sagemaker")
    for _ in range(2):
        with Stubber(cfn) as cfn_stub, Stubber(sm) as sm_stub:
            cfn_stub.add_response("describe_stacks", {"Stacks": [{
                "StackName": stack, "StackStatus": "CREATE_COMPLETE", "CreationTime": "2026-01-01T00:00:00Z"}]})  # fmt: skip
            cfn_stub.add_response("list_stack_resources", {"StackResourceSummaries": resources})
            sm_stub.add_response("describe_endpoint", {
                "EndpointName": endpoint_name, "EndpointArn": arn.format("endpoint", endpoint_name),
                "EndpointConfigName": config, "EndpointStatus": "InService", "CreationTime": "2026-01-01T00:00:00Z",
                "LastModifiedTime": "2026-01-01T00:00:00Z"})  # fmt: skip
            result = smoke.handler({}, None, session=Session(cloudformation=cfn, sagemaker=sm), runtime_client=runtime)
        assert result["ok"], result["failures"]
        monkeypatch.delenv("INFERENCE_COMPONENT_NAME", raising=False)  # the second run: none named
    assert [c.get("InferenceComponentName") for c in runtime.calls] == [COMPONENT, None]
