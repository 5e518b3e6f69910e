"""The streaming front door in the synthesized templates (config/examples/production.yaml, prod: chat-vllm has
`streaming: {enabled: true}`, and assist-ic, streaming from its inference component): a function URL in RESPONSE_STREAM mode with IAM auth, the Web Adapter layer and its
settings, a role that may invoke only its endpoint, and an asset that holds the start script executable."""

from __future__ import annotations

import stat

import pytest

from stacks.lambda_asset import asset_files
from stacks.streaming import ADAPTER_LAYER_VERSION, LAYER_REGIONS, STREAM_CODE

PRODUCTION = "config/examples/production.yaml"
STACK = "llm-endpoints-prod-chat-vllm"
IC_STACK = "llm-endpoints-prod-assist-ic"  # streaming from an inference component


@pytest.fixture(scope="module")
def production(synth):
    return synth(PRODUCTION, "prod")


def _stream_function(production, stack: str = STACK):
    [(lid, fn)] = [(k, r) for k, r in production.templates[stack]["Resources"].items()
                   if r["Type"] == "AWS::Lambda::Function" and r["Properties"].get("Handler") == "stream/run.sh"]  # fmt: skip
    return lid, fn["Properties"]


def test_function_url_streams_with_iam_auth(production):
    lid, _ = _stream_function(production)
    production.template(STACK).has_resource_properties("AWS::Lambda::Url", {
        "AuthType": "AWS_IAM", "InvokeMode": "RESPONSE_STREAM", "TargetFunctionArn": {"Fn::GetAtt": [lid, "Arn"]},
    })  # fmt: skip
    outputs = production.templates[STACK]["Outputs"]
    assert any(o["Value"] == {"Fn::GetAtt": [k, "FunctionUrl"]} for o in outputs.values()
               for k, r in production.templates[STACK]["Resources"].items() if r["Type"] == "AWS::Lambda::Url")  # fmt: skip


def test_function_runs_behind_the_web_adapter(production):
    _, props = _stream_function(production)
    assert props["Layers"] == [f"arn:aws:lambda:us-east-1:753240598075:layer:LambdaAdapterLayerArm64:{ADAPTER_LAYER_VERSION}"]
    assert props["Architectures"] == ["arm64"] and props["Runtime"].startswith("python3")
    env = props["Environment"]["Variables"]
    assert env["AWS_LAMBDA_EXEC_WRAPPER"] == "/opt/bootstrap" and env["AWS_LWA_INVOKE_MODE"] == "response_stream"
    assert env["ENDPOINT_NAME"] == "prod-chat-vllm" and env["AWS_LWA_READINESS_CHECK_PATH"] == "/_ready"
    assert props["Timeout"] == 300  # streaming.timeout_s default
    # The stream ends with an error line before Lambda's timeout would cut it off.
    assert env["READ_TIMEOUT_S"] == "60" and env["STREAM_DEADLINE_S"] == "295"


def test_role_may_invoke_only_its_endpoint_and_write_its_logs(production):
    _, props = _stream_function(production)
    role = props["Role"]["Fn::GetAtt"][0]
    resources = production.templates[STACK]["Resources"]
    statements = [s for r in resources.values() if r["Type"] == "AWS::IAM::Policy" and {"Ref": role} in r["Properties"]["Roles"]
                  for s in r["Properties"]["PolicyDocument"]["Statement"]]  # fmt: skip
    sagemaker = [s for s in statements if any(a.startswith("sagemaker:") for a in _listed(s["Action"]))]
    assert sagemaker == [{"Action": "sagemaker:InvokeEndpoint", "Effect": "Allow",
                          "Resource": "arn:aws:sagemaker:us-east-1:111122223333:endpoint/prod-chat-vllm"}]  # fmt: skip
    others = {a for s in statements for a in _listed(s["Action"])} - {"sagemaker:InvokeEndpoint"}
    assert others <= {"logs:CreateLogStream", "logs:PutLogEvents", "ec2:AssignPrivateIpAddresses", "ec2:CreateNetworkInterface",
                      "ec2:DeleteNetworkInterface", "ec2:DescribeNetworkInterfaces", "ec2:DescribeSubnets",
                      "ec2:UnassignPrivateIpAddresses"}, others  # fmt: skip  (the created VPC's network interfaces)


def test_only_the_streaming_endpoints_get_a_function_url(production):
    for name, template in production.templates.items():
        urls = [r for r in template["Resources"].values() if r["Type"] == "AWS::Lambda::Url"]
        assert len(urls) == (1 if name in (STACK, IC_STACK) else 0), name


def test_a_component_endpoint_streams_from_its_component(production):
    """assist-ic hosts an inference component: the stream function names it (INFERENCE_COMPONENT_NAME, sent as
    InferenceComponentName) and its role may invoke that endpoint and that component, nothing else."""
    _, props = _stream_function(production, IC_STACK)
    resources = production.templates[IC_STACK]["Resources"]
    [component] = [r["Properties"] for r in resources.values() if r["Type"] == "AWS::SageMaker::InferenceComponent"]
    assert props["Environment"]["Variables"]["INFERENCE_COMPONENT_NAME"] == component["InferenceComponentName"]
    role = props["Role"]["Fn::GetAtt"][0]
    statements = [s for r in resources.values() if r["Type"] == "AWS::IAM::Policy" and {"Ref": role} in r["Properties"]["Roles"]
                  for s in r["Properties"]["PolicyDocument"]["Statement"]]  # fmt: skip
    sagemaker = [s for s in statements if any(a.startswith("sagemaker:") for a in _listed(s["Action"]))]
    resources_granted = sorted(r for s in sagemaker for r in _listed(s["Resource"]))
    assert {a for s in sagemaker for a in _listed(s["Action"])} == {"sagemaker:InvokeEndpoint"}
    assert resources_granted == sorted([
        "arn:aws:sagemaker:us-east-1:111122223333:endpoint/prod-assist-ic",
        f"arn:aws:sagemaker:us-east-1:111122223333:inference-component/{component['InferenceComponentName']}",
    ])  # fmt: skip


def test_asset_holds_the_start_script_executable_and_only_what_the_app_imports(production):
    _, props = _stream_function(production)
    asset_dir = production.outdir / f"asset.{props['Code']['S3Key'].removesuffix('.zip')}"
    files = sorted(p.relative_to(asset_dir).as_posix() for p in asset_dir.rglob("*") if p.is_file())
    # What app.py imports, followed through the repository (stacks/lambda_asset.py), plus the start script.
    assert files == sorted([*asset_files(STREAM_CODE / "app.py"), "stream/run.sh"])
    assert {"endpoint_runtime/stream.py", "endpoint_runtime/invoke.py", "request_contract.py", "stream/app.py"} <= set(files)
    # CDK's zip keeps each file's mode (aws-cdk writeZipFile: `mode: stat.mode`): the adapter must exec run.sh.
    assert (asset_dir / "stream" / "run.sh").stat().st_mode & stat.S_IXUSR
    assert not (asset_dir / "stream" / "app.py").stat().st_mode & stat.S_IXUSR


def test_a_region_without_the_adapter_layer_is_refused():
    import aws_cdk as cdk

    from stacks.streaming import adapter_layer_arn

    assert "us-east-1" in LAYER_REGIONS
    with pytest.raises(ValueError, match="not published in region eu-central-2"):
        adapter_layer_arn(cdk.Stack(cdk.App(), "S", env=cdk.Environment(account="111122223333", region="eu-central-2")))
    unresolved = adapter_layer_arn(cdk.Stack(cdk.App(), "T"))  # region known only at deploy time: a token
    assert "LambdaAdapterLayerArm64:25" in unresolved


def _listed(value):
    return value if isinstance(value, list) else [value]

