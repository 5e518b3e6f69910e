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


STACK, ENDPOINT_NAME, CONFIG, MODEL = (
    "llm-endpoints-prod-assist-ic",
    "prod-assist-ic",
    "prod-assist-ic-config",
    "Model-a1b2c3",
)
ARN = "arn:aws:sagemaker:us-east-1:111122223333:{}/{}"
T0 = "2026-01-01T00:00:00Z"


def _component(status: str = "InService", model: str = MODEL, **extra) -> dict:
    """A DescribeInferenceComponent answer (botocore's sagemaker model) for COMPONENT on the endpoint."""
    return {
        "InferenceComponentName": COMPONENT,
        "InferenceComponentArn": ARN.format("inference-component", COMPONENT),
        "EndpointName": ENDPOINT_NAME,
        "EndpointArn": ARN.format("endpoint", ENDPOINT_NAME),
        "Specification": {"ModelName": model},
        "RuntimeConfig": {"DesiredCopyCount": 1, "CurrentCopyCount": 1},
        "CreationTime": T0,
        "LastModifiedTime": T0,
        "InferenceComponentStatus": status,
        **extra,
    }


def _run_smoke(monkeypatch, component_answer, *, component: str | None = COMPONENT) -> tuple[dict, RecordingClient]:
    """The smoke Lambda against an InService endpoint running the stack's config; CloudFormation and SageMaker answer
    through botocore's Stubber (moto has no inference components). `component_answer`: DescribeInferenceComponent's
    answer (a dict), or a ClientError code (a str); with no component named it is not asked."""
    from botocore.stub import Stubber
    from helpers import Session

    for key, value in {
        "STACK_NAME": STACK,
        "ENDPOINT_NAME": ENDPOINT_NAME,
        "AWS_DEFAULT_REGION": "us-east-1",
        "AWS_ACCESS_KEY_ID": "testing",
        "AWS_SECRET_ACCESS_KEY": "testing",
        "PROMPT": "Hello",
        "MAX_NEW_TOKENS": "8",
        "LATENCY_BUDGET_MS": "30000",
    }.items():
        monkeypatch.setenv(key, value)
    if component:
        monkeypatch.setenv("INFERENCE_COMPONENT_NAME", component)
    else:
        monkeypatch.delenv("INFERENCE_COMPONENT_NAME", raising=False)
    monkeypatch.setattr(boto3, "DEFAULT_SESSION", None)
    resources = [
        {
            "LogicalResourceId": logical,
            "PhysicalResourceId": ARN.format(kind, name),
            "ResourceType": rtype,
            "LastUpdatedTimestamp": T0,
            "ResourceStatus": "CREATE_COMPLETE",
        }
        for logical, kind, name, rtype in [
            ("Endpoint", "endpoint", ENDPOINT_NAME, "AWS::SageMaker::Endpoint"),
            ("EndpointConfig", "endpoint-config", CONFIG, "AWS::SageMaker::EndpointConfig"),
            # The Model's physical id is its ARN (primaryIdentifier ModelArn in the resource's CloudFormation
            # registry schema), which carries the name in lower case.
            ("Model", "model", MODEL.lower(), "AWS::SageMaker::Model"),
        ]
    ]
    runtime = RecordingClient()
    cfn, sm = boto3.client("cloudformation"), boto3.client("sagemaker")
    with Stubber(cfn) as cfn_stub, Stubber(sm) as sm_stub:
        cfn_stub.add_response(
            "describe_stacks", {"Stacks": [{"StackName": STACK, "StackStatus": "CREATE_COMPLETE", "CreationTime": T0}]}
        )
        cfn_stub.add_response("list_stack_resources", {"StackResourceSummaries": resources})
        sm_stub.add_response(
            "describe_endpoint",
            {
                "EndpointName": ENDPOINT_NAME,
                "EndpointArn": ARN.format("endpoint", ENDPOINT_NAME),
                "EndpointConfigName": CONFIG,
                "EndpointStatus": "InService",
                "CreationTime": T0,
                "LastModifiedTime": T0,
            },
        )
        if component and isinstance(component_answer, dict):
            sm_stub.add_response(
                "describe_inference_component", component_answer, {"InferenceComponentName": component}
            )
        elif component:
            sm_stub.add_client_error("describe_inference_component", component_answer, "not found")
        result = smoke.handler({}, None, session=Session(cloudformation=cfn, sagemaker=sm), runtime_client=runtime)
        sm_stub.assert_no_pending_responses()
    return result, runtime


def test_smoke_function_names_the_component_and_checks_it_runs_the_stacks_model(monkeypatch):
    """The smoke Lambda (INFERENCE_COMPONENT_NAME from its environment) checks the component and sends it with its
    invocation; without the variable it does neither."""
    result, runtime = _run_smoke(monkeypatch, _component())
    assert result["ok"], result["failures"]
    [check] = [c for c in result["checks"] if c["name"] == "component"]
    assert check["message"] == f"{COMPONENT} runs {MODEL}, the model the stack deployed (1 copies now)"
    assert [c.get("InferenceComponentName") for c in runtime.calls] == [COMPONENT]
    result, runtime = _run_smoke(monkeypatch, None, component=None)
    assert result["ok"] and "component" not in [c["name"] for c in result["checks"]]
    assert [c.get("InferenceComponentName") for c in runtime.calls] == [None]


@pytest.mark.parametrize(
    "answer, fragment, invoked",
    [
        (
            _component(model="Model-old999"),
            f"runs model Model-old999, but stack {STACK} deployed {MODEL.lower()}: the update did not take effect",
            True,
        ),
        (
            _component(status="Failed", FailureReason="health check"),
            f"inference component {COMPONENT} is Failed, not "
            f"InService (health check): wait for it (Creating/Updating) or read its CloudWatch logs "
            f"(/aws/sagemaker/InferenceComponents/{COMPONENT})",
            False,
        ),
        (
            "ValidationException",
            f"cannot describe inference component {COMPONENT}: ValidationException: not found; it may "
            f"have been deleted outside CloudFormation: deploy stack {STACK} again",
            False,
        ),
    ],
)
def test_component_check_failures(monkeypatch, answer, fragment, invoked):
    """A component that runs another model than the stack deployed (a rolled-back or outside change: the endpoint
    config is unchanged, so only this check sees it), one that is not InService, one that is gone."""
    result, runtime = _run_smoke(monkeypatch, answer)
    assert not result["ok"]
    assert [f.split(":", 1)[0] for f in result["failures"]] == ["component"]
    assert fragment in result["failures"][0]
    assert bool(runtime.calls) is invoked  # a component that cannot serve is not invoked


def test_the_stacks_model_is_named_by_its_arn():
    """The `component` check takes the model's name from the stack's physical id, which is the model's ARN: the
    primaryIdentifier of AWS::SageMaker::Model in its CloudFormation registry schema (the copy cfn-lint ships)."""
    from pathlib import Path

    import cfnlint

    schemas = Path(cfnlint.__file__).parent / "data" / "schemas"
    digest = json.loads((schemas / "providers" / "us-east-1.json").read_text())["AWS::SageMaker::Model"]
    schema = json.loads((schemas / "resources" / f"{digest}.json").read_text())
    assert schema["primaryIdentifier"] == ["/properties/ModelArn"]
