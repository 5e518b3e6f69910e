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
    [(lid, fn)] = [
        (k, r)
        for k, r in production.templates[stack]["Resources"].items()
        if r["Type"] == "AWS::Lambda::Function" and r["Properties"].get("Handler") == "stream/run.sh"
    ]
    return lid, fn["Properties"]


def test_function_url_streams_with_iam_auth(production):
    lid, _ = _stream_function(production)
    production.template(STACK).has_resource_properties(
        "AWS::Lambda::Url",
        {
            "AuthType": "AWS_IAM",
            "InvokeMode": "RESPONSE_STREAM",
            "TargetFunctionArn": {"Fn::GetAtt": [lid, "Arn"]},
        },
    )
    outputs = production.templates[STACK]["Outputs"]
    assert any(
        o["Value"] == {"Fn::GetAtt": [k, "FunctionUrl"]}
        for o in outputs.values()
        for k, r in production.templates[STACK]["Resources"].items()
        if r["Type"] == "AWS::Lambda::Url"
    )


def test_function_runs_behind_the_web_adapter(production):
    _, props = _stream_function(production)
    assert props["Layers"] == [
        f"arn:aws:lambda:us-east-1:753240598075:layer:LambdaAdapterLayerArm64:{ADAPTER_LAYER_VERSION}"
    ]
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
    statements = [
        s
        for r in resources.values()
        if r["Type"] == "AWS::IAM::Policy" and {"Ref": role} in r["Properties"]["Roles"]
        for s in r["Properties"]["PolicyDocument"]["Statement"]
    ]
    sagemaker = [s for s in statements if any(a.startswith("sagemaker:") for a in _listed(s["Action"]))]
    assert sagemaker == [
        {
            "Action": "sagemaker:InvokeEndpoint",
            "Effect": "Allow",
            "Resource": "arn:aws:sagemaker:us-east-1:111122223333:endpoint/prod-chat-vllm",
        }
    ]
    others = {a for s in statements for a in _listed(s["Action"])} - {"sagemaker:InvokeEndpoint"}
    assert others <= {
        "logs:CreateLogStream",
        "logs:PutLogEvents",
        "ec2:AssignPrivateIpAddresses",
        "ec2:CreateNetworkInterface",
        "ec2:DeleteNetworkInterface",
        "ec2:DescribeNetworkInterfaces",
        "ec2:DescribeSubnets",
        "ec2:UnassignPrivateIpAddresses",
    }, others  # the created VPC's network interfaces


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
    statements = [
        s
        for r in resources.values()
        if r["Type"] == "AWS::IAM::Policy" and {"Ref": role} in r["Properties"]["Roles"]
        for s in r["Properties"]["PolicyDocument"]["Statement"]
    ]
    sagemaker = [s for s in statements if any(a.startswith("sagemaker:") for a in _listed(s["Action"]))]
    resources_granted = sorted(r for s in sagemaker for r in _listed(s["Resource"]))
    assert {a for s in sagemaker for a in _listed(s["Action"])} == {"sagemaker:InvokeEndpoint"}
    assert resources_granted == sorted(
        [
            "arn:aws:sagemaker:us-east-1:111122223333:endpoint/prod-assist-ic",
            f"arn:aws:sagemaker:us-east-1:111122223333:inference-component/{component['InferenceComponentName']}",
        ]
    )


def test_asset_holds_the_start_script_executable_and_only_what_the_app_imports(production):
    _, props = _stream_function(production)
    asset_dir = production.outdir / f"asset.{props['Code']['S3Key'].removesuffix('.zip')}"
    files = sorted(p.relative_to(asset_dir).as_posix() for p in asset_dir.rglob("*") if p.is_file())
    # What app.py imports, followed through the repository (stacks/lambda_asset.py), plus the start script.
    assert files == sorted([*asset_files(STREAM_CODE / "app.py"), "stream/run.sh"])
    assert {"endpoint_runtime/stream.py", "endpoint_runtime/invoke.py", "request_contract.py", "stream/app.py"} <= set(
        files
    )
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


def test_a_public_url_is_capped_and_warned_about_at_synth(tmp_path):
    """streaming.auth none (with its acknowledgement and the cap the config requires): AuthType NONE, the function's
    reserved concurrency, and a synth warning naming the endpoint and the cap. One endpoint stack, synthesized alone."""
    import aws_cdk as cdk
    import yaml
    from aws_cdk.assertions import Annotations, Match, Template
    from helpers import ROOT, cdk_context

    from deployment import load_config
    from stacks.endpoint_stack import EndpointStack
    from stacks.streaming import PUBLIC_STREAM_WARNING_ID

    raw = yaml.safe_load((ROOT / PRODUCTION).read_text())
    raw["endpoints"] = [e for e in raw["endpoints"] if e["name"] == "chat-vllm"]
    raw["endpoints"][0]["streaming"] = {
        "enabled": True,
        "auth": "none",
        "acknowledge_unauthenticated": True,
        "reserved_concurrency": 5,
    }
    config = tmp_path / "config.yaml"
    config.write_text(yaml.safe_dump(raw))
    environment_plan = load_config(config, "prod", build_root=tmp_path / "no-build")
    plan = environment_plan.plan("chat-vllm")
    stack = EndpointStack(
        cdk.App(context=cdk_context()),
        plan.stack_name,
        plan=plan,
        allow_unbuilt=True,
        image_repository=environment_plan.image_repository,
        env={"account": "111122223333", "region": "us-east-1"},
    )
    template = Template.from_stack(stack)
    template.has_resource_properties("AWS::Lambda::Url", {"AuthType": "NONE", "InvokeMode": "RESPONSE_STREAM"})
    template.has_resource_properties(
        "AWS::Lambda::Function", {"Handler": "stream/run.sh", "ReservedConcurrentExecutions": 5}
    )
    template.has_resource_properties("AWS::Lambda::Permission", {"Principal": "*", "FunctionUrlAuthType": "NONE"})
    warnings = Annotations.from_stack(stack).find_warning(
        "*", Match.string_like_regexp("auth 'none' \\(Principal \\*\\)")
    )
    [warning] = warnings
    assert PUBLIC_STREAM_WARNING_ID in str(warning.entry.data)
    assert "endpoint prod-chat-vllm" in str(warning.entry.data) and "at most 5 streams at once" in str(
        warning.entry.data
    )


def test_the_construct_refuses_a_public_url_without_a_cap():
    """The construct checks its props itself: a spec built past the config's validation is refused too."""
    from endpoint_config.streaming import StreamingSpec
    from stacks.streaming import StreamingFrontDoor

    spec = StreamingSpec.model_construct(
        enabled=True, auth="none", acknowledge_unauthenticated=True, reserved_concurrency=None, timeout_s=300
    )
    with pytest.raises(ValueError, match="streaming auth 'none' needs reserved_concurrency"):
        StreamingFrontDoor(None, "S", endpoint=None, streaming=spec, log_retention_days=7)
