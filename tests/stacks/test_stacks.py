"""CDK assertions on every resource property the stacks promise, per configuration (each synthesized once)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from aws_cdk.assertions import Match
from helpers import FAKE_HASH, FAKE_WEIGHT_BYTES, HAND_MADE_CONFIG, ROOT, synthesize, write_fake_manifest

LOCAL = "config/local.yaml"
EXAMPLE = "config/examples/hf-fastload.yaml"
MINIMAL = "config/examples/minimal.yaml"


@pytest.fixture(scope="session")
def local(local_built):
    """config/local.yaml with a (fake) build (tests/conftest.py)."""
    return local_built


@pytest.fixture(scope="session")
def dev(synth):
    return synth(EXAMPLE, "dev")


@pytest.fixture(scope="session")
def prod(synth):
    return synth(EXAMPLE, "prod")


@pytest.fixture(scope="session")
def minimal(synth):
    return synth(MINIMAL)


def test_stack_names_follow_project_environment_endpoint(local, dev, minimal):
    assert set(local.templates) == {"llm-endpoints-local-artifacts", "llm-endpoints-local-tiny-gpt2"}
    assert set(dev.templates) == {"llm-endpoints-dev-artifacts", "llm-endpoints-dev-gptj-fastload"}
    assert set(minimal.templates) == {"llm-endpoints-default-artifacts", "llm-endpoints-default-gpt2-small"}


def test_artifact_bucket_is_encrypted_versioned_private_logged(dev):
    t = dev.template("llm-endpoints-dev-artifacts")
    t.has_resource(
        "AWS::S3::Bucket",
        {
            "Properties": {
                "BucketName": {
                    "Fn::Join": [
                        "",
                        ["llm-endpoints-dev-artifacts-", {"Ref": "AWS::AccountId"}, "-", {"Ref": "AWS::Region"}],
                    ]
                },
                "BucketEncryption": {
                    "ServerSideEncryptionConfiguration": [{"ServerSideEncryptionByDefault": {"SSEAlgorithm": "AES256"}}]
                },
                "VersioningConfiguration": {"Status": "Enabled"},
                "PublicAccessBlockConfiguration": {
                    "BlockPublicAcls": True,
                    "BlockPublicPolicy": True,
                    "IgnorePublicAcls": True,
                    "RestrictPublicBuckets": True,
                },
                "LoggingConfiguration": {
                    "DestinationBucketName": Match.any_value(),
                    "LogFilePrefix": "artifact-bucket/",
                },
            },
            "DeletionPolicy": "Delete",
        },
    )
    # TLS only: a Deny on aws:SecureTransport false for both buckets.
    policies = dev.resources("llm-endpoints-dev-artifacts", "AWS::S3::BucketPolicy")
    assert len(policies) == 2
    for policy in policies:
        statements = policy["Properties"]["PolicyDocument"]["Statement"]
        assert any(
            s["Effect"] == "Deny" and s["Condition"] == {"Bool": {"aws:SecureTransport": "false"}} for s in statements
        )


def test_image_repository_scans_and_is_immutable(dev, prod):
    for synthesized, stack, empty, policy in (
        (dev, "llm-endpoints-dev-artifacts", True, "Delete"),
        (prod, "llm-endpoints-prod-artifacts", False, "Retain"),
    ):
        [repo] = synthesized.resources(stack, "AWS::ECR::Repository")
        props = repo["Properties"]
        assert props["ImageScanningConfiguration"] == {"ScanOnPush": True}
        assert props["ImageTagMutability"] == "IMMUTABLE"
        assert props["RepositoryName"] == stack.removesuffix("-artifacts")
        assert props.get("EmptyOnDelete") is empty
        assert repo["DeletionPolicy"] == policy


def test_retain_flag_decides_what_destroy_keeps(dev, prod, local):
    for synthesized, stack, policy in (
        (dev, "llm-endpoints-dev-artifacts", "Delete"),
        (prod, "llm-endpoints-prod-artifacts", "Retain"),
        (local, "llm-endpoints-local-artifacts", "Delete"),
    ):
        buckets = synthesized.resources(stack, "AWS::S3::Bucket")
        assert {b["DeletionPolicy"] for b in buckets} == {policy}
    # Clean delete empties buckets with CDK's auto-delete resource, on the emulator too (it runs the Lambda); its log
    # group is the stack's, so destroy leaves none behind.
    assert dev.resources("llm-endpoints-dev-artifacts", "Custom::S3AutoDeleteObjects")
    assert not prod.resources("llm-endpoints-prod-artifacts", "Custom::S3AutoDeleteObjects")
    assert local.resources("llm-endpoints-local-artifacts", "Custom::S3AutoDeleteObjects")
    for synthesized, stack in ((dev, "llm-endpoints-dev-artifacts"), (local, "llm-endpoints-local-artifacts")):
        resources = synthesized.templates[stack]["Resources"]
        [handler] = [
            k
            for k, r in resources.items()
            if k.startswith("CustomS3AutoDeleteObjectsCustomResourceProvider") and r["Type"] == "AWS::Lambda::Function"
        ]
        [group] = [
            k
            for k, r in resources.items()
            if r["Type"] == "AWS::Logs::LogGroup"
            and r["Properties"].get("LogGroupName") == {"Fn::Join": ["", ["/aws/lambda/", {"Ref": handler}]]}
        ]
        for lid, r in resources.items():
            if r["Type"] == "Custom::S3AutoDeleteObjects":
                assert group in r["DependsOn"], lid  # the group exists before the function first writes to it


def test_model_reads_uncompressed_prefix_named_by_content_hash(local):
    [model] = local.resources("llm-endpoints-local-tiny-gpt2", "AWS::SageMaker::Model")
    container = model["Properties"]["PrimaryContainer"]
    source = container["ModelDataSource"]["S3DataSource"]
    assert source["S3DataType"] == "S3Prefix" and source["CompressionType"] == "None"
    uri = json.dumps(source["S3Uri"])
    assert f"/models/tiny-gpt2/{FAKE_HASH}/" in uri and "llm-endpoints-local-artifacts-" in uri
    assert "ModelDataUrl" not in container
    assert container["Image"] == (
        "763104351884.dkr.ecr.us-east-1.amazonaws.com/huggingface-pytorch-inference:"
        "2.6.0-transformers4.51.3-cpu-py312-ubuntu22.04"
    )
    assert container["Environment"]["SAGEMAKER_MODEL_SERVER_WORKERS"] == "1"
    assert model["Properties"]["EnableNetworkIsolation"] is True
    # CloudFormation names the model and the endpoint config, so any change replaces them cleanly.
    assert "ModelName" not in model["Properties"]
    [config] = local.resources("llm-endpoints-local-tiny-gpt2", "AWS::SageMaker::EndpointConfig")
    assert "EndpointConfigName" not in config["Properties"]


def test_gpu_instance_gets_gpu_image_in_its_region(prod):
    [model] = prod.resources("llm-endpoints-prod-gptj-fastload", "AWS::SageMaker::Model")
    assert model["Properties"]["PrimaryContainer"]["Image"] == (
        "763104351884.dkr.ecr.us-west-2.amazonaws.com/huggingface-pytorch-inference:"
        "2.6.0-transformers4.51.3-gpu-py312-cu124-ubuntu22.04"
    )


def test_region_agnostic_stack_maps_region_to_registry(minimal):
    stack = "llm-endpoints-default-gpt2-small"
    mappings = minimal.templates[stack]["Mappings"]
    [mapping] = mappings.values()
    assert mapping["us-east-1"] == {"account": "763104351884"}
    assert mapping["af-south-1"] == {"account": "626614931356"}
    [model] = minimal.resources(stack, "AWS::SageMaker::Model")
    image = json.dumps(model["Properties"]["PrimaryContainer"]["Image"])
    assert "Fn::FindInMap" in image and "huggingface-pytorch-inference:2.6.0-transformers4.51.3-gpu" in image


def test_endpoint_config_has_instance_and_timeouts(dev, prod, local, tmp_path_factory):
    for synthesized, stack, count, instance in (
        (dev, "llm-endpoints-dev-gptj-fastload", 1, "ml.g5.2xlarge"),
        (prod, "llm-endpoints-prod-gptj-fastload", 2, "ml.g5.2xlarge"),
        (local, "llm-endpoints-local-tiny-gpt2", 1, "ml.m5.xlarge"),
    ):
        [config] = synthesized.resources(stack, "AWS::SageMaker::EndpointConfig")
        [variant] = config["Properties"]["ProductionVariants"]
        assert variant["InstanceType"] == instance
        assert variant["InitialInstanceCount"] == count
        assert variant["VariantName"] == "AllTraffic"
        assert variant["ModelDataDownloadTimeoutInSeconds"] == 600
        assert variant["ContainerStartupHealthCheckTimeoutInSeconds"] == 600
        if instance.startswith("ml.g5"):  # local NVMe: SageMaker refuses VolumeSizeInGB there
            assert "VolumeSizeInGB" not in variant
        else:  # m5 (EBS only): sized from the built artifact's bytes (tests/config/test_sizing.py has the rule)
            assert variant["VolumeSizeInGB"] == _volume_of_a_fake_build(tmp_path_factory)


def test_volume_size_where_the_instance_allows_it(synth, tmp_path):
    config = tmp_path / "volume.yaml"
    config.write_text(
        "endpoints:\n  - {name: v, system: hf-fastload, model: m, instance_type: ml.p3.2xlarge, volume_size_gb: 100,"
        " model_data_download_timeout_s: 1200}\n"
    )
    s = synth(str(config))
    [config_res] = s.resources("llm-endpoints-default-v", "AWS::SageMaker::EndpointConfig")
    [variant] = config_res["Properties"]["ProductionVariants"]
    assert variant["VolumeSizeInGB"] == 100
    assert variant["ModelDataDownloadTimeoutInSeconds"] == 1200


def test_tar_gz_model_data_uses_model_data_url(synth, tmp_path):
    config = tmp_path / "targz.yaml"
    config.write_text(
        "endpoints:\n  - {name: t, system: hf-fastload, model: m, instance_type: ml.g5.xlarge, model_data: tar-gz}\n"
    )
    s = synth(str(config))
    [model] = s.resources("llm-endpoints-default-t", "AWS::SageMaker::Model")
    container = model["Properties"]["PrimaryContainer"]
    assert "ModelDataSource" not in container
    assert json.dumps(container["ModelDataUrl"]).endswith('/model.tar.gz"]]}')


def test_endpoint_is_named_and_waits_for_its_log_group(dev):
    stack = "llm-endpoints-dev-gptj-fastload"
    t = dev.templates[stack]["Resources"]
    [(endpoint_id, endpoint)] = [(k, v) for k, v in t.items() if v["Type"] == "AWS::SageMaker::Endpoint"]
    assert endpoint["Properties"]["EndpointName"] == "dev-gptj-fastload"
    [(log_id, log_group)] = [
        (k, v)
        for k, v in t.items()
        if v["Type"] == "AWS::Logs::LogGroup"
        and v["Properties"].get("LogGroupName") == "/aws/sagemaker/Endpoints/dev-gptj-fastload"
    ]
    assert log_id in endpoint["DependsOn"]
    assert log_group["Properties"]["RetentionInDays"] == 30
    assert log_group["DeletionPolicy"] == "Delete"


def test_autoscaling_tracks_high_resolution_concurrency(dev, prod):
    for synthesized, stack, low, high in (
        (dev, "llm-endpoints-dev-gptj-fastload", 1, 1),
        (prod, "llm-endpoints-prod-gptj-fastload", 2, 8),
    ):
        t = synthesized.template(stack)
        t.has_resource_properties(
            "AWS::ApplicationAutoScaling::ScalableTarget",
            {
                "ServiceNamespace": "sagemaker",
                "ScalableDimension": "sagemaker:variant:DesiredInstanceCount",
                "ResourceId": f"endpoint/{stack.removeprefix('llm-endpoints-')}/variant/AllTraffic",
                "MinCapacity": low,
                "MaxCapacity": high,
            },
        )
        t.has_resource_properties(
            "AWS::ApplicationAutoScaling::ScalingPolicy",
            {
                "PolicyType": "TargetTrackingScaling",
                "TargetTrackingScalingPolicyConfiguration": {
                    "TargetValue": 4,
                    "PredefinedMetricSpecification": {
                        "PredefinedMetricType": "SageMakerVariantConcurrentRequestsPerModelHighResolution"
                    },
                    "ScaleInCooldown": 300,
                    "ScaleOutCooldown": 60,
                },
            },
        )


def test_no_autoscaling_when_not_configured(minimal):
    assert not minimal.resources("llm-endpoints-default-gpt2-small", "AWS::ApplicationAutoScaling::ScalableTarget")


def _statements(synthesized, stack, role_fragment):
    policies = synthesized.resources(stack, "AWS::IAM::Policy")
    [policy] = [p for p in policies if role_fragment in json.dumps(p["Properties"]["Roles"])]
    return policy["Properties"]["PolicyDocument"]["Statement"]


def test_execution_role_reads_its_endpoints_artifacts_and_pulls_one_repository(local):
    stack = "llm-endpoints-local-tiny-gpt2"
    statements = _statements(local, stack, "ExecutionRole")
    by_action = {json.dumps(s["Action"]): s for s in statements}
    get = by_action['"s3:GetObject"']
    # Every artifact of this endpoint, not only the current one: during a blue/green update the old fleet still
    # reads its own prefix while the policy names the new one. Never another endpoint's.
    assert get["Resource"]["Fn::Join"][1][-1] == "/models/tiny-gpt2/*"
    listing = by_action['"s3:ListBucket"']
    assert listing["Condition"] == {"StringLike": {"s3:prefix": ["models/tiny-gpt2/*"]}}
    logs = by_action[
        json.dumps(["logs:CreateLogGroup", "logs:CreateLogStream", "logs:DescribeLogStreams", "logs:PutLogEvents"])
    ]
    group_lid, attribute = logs["Resource"]["Fn::GetAtt"]
    group = local.templates[stack]["Resources"][group_lid]["Properties"]
    assert (group["LogGroupName"], attribute) == ("/aws/sagemaker/Endpoints/local-tiny-gpt2", "Arn")
    pull = by_action[json.dumps(["ecr:BatchCheckLayerAvailability", "ecr:BatchGetImage", "ecr:GetDownloadUrlForLayer"])]
    assert pull["Resource"] == "arn:aws:ecr:us-east-1:763104351884:repository/huggingface-pytorch-inference"
    metrics = by_action['"cloudwatch:PutMetricData"']
    assert metrics["Condition"] == {"StringEquals": {"cloudwatch:namespace": "/aws/sagemaker/Endpoints"}}
    # Nothing else: no s3:* or ecr:* wildcards, no write access.
    actions = [a for s in statements for a in ([s["Action"]] if isinstance(s["Action"], str) else s["Action"])]
    assert not [a for a in actions if a.endswith("*") or a.startswith(("s3:Put", "s3:Delete", "ecr:Put"))]


def test_invoke_function_may_only_invoke_its_endpoint(local):
    stack = "llm-endpoints-local-tiny-gpt2"
    [fn] = [
        f
        for f in local.resources(stack, "AWS::Lambda::Function")
        if f["Properties"]["Handler"] == "invoke/handler.handler"
    ]
    props = fn["Properties"]
    assert props["Environment"]["Variables"] == {
        "ENDPOINT_NAME": "local-tiny-gpt2",
        "READ_TIMEOUT_S": "55",
        # the local file's chat: block on hf-fastload (our handler applies the template; chat_contract.CHAT_ENV)
        "CHAT_ROUTE": "handler",
        "CHAT_TOOL_CALLS": "true",
        "CHAT_CONSTRAINED_DECODING": "false",
        # the body hf-fastload's container takes a prompt in (ContainerBodies, endpoint_runtime/bodies.py)
        "PROMPT_BODY": "generation",
    }
    assert props["Timeout"] == 65 and props["Runtime"] == "python3.14"
    statements = _statements(local, stack, "InvokeRole")
    [invoke] = [s for s in statements if s["Action"] == "sagemaker:InvokeEndpoint"]
    assert "endpoint/local-tiny-gpt2" in json.dumps(invoke["Resource"])


def test_smoke_test_function_reads_its_stack_and_endpoint_only(local):
    stack = "llm-endpoints-local-tiny-gpt2"
    [fn] = [
        f
        for f in local.resources(stack, "AWS::Lambda::Function")
        if f["Properties"]["Handler"] == "smoke/handler.handler"
    ]
    env = fn["Properties"]["Environment"]["Variables"]
    assert env["STACK_NAME"] == {"Ref": "AWS::StackName"} and env["ENDPOINT_NAME"] == "local-tiny-gpt2"
    assert (env["PROMPT"], env["SMOKE_MAX_NEW_TOKENS"], env["LATENCY_BUDGET_MS"], env["EMULATOR"]) == (
        "The capital of France is",
        "16",
        "30000",
        "true",
    )
    assert fn["Properties"]["Timeout"] == 90
    statements = _statements(local, stack, "SmokeTestFunctionRole")
    by_action = {json.dumps(s["Action"]): s["Resource"] for s in statements}
    assert by_action['["cloudformation:DescribeStacks", "cloudformation:ListStackResources"]'] == {
        "Ref": "AWS::StackId"
    }
    assert "endpoint/local-tiny-gpt2" in by_action['["sagemaker:DescribeEndpoint", "sagemaker:InvokeEndpoint"]']


def test_outputs_name_the_endpoint(local):
    outputs = local.templates["llm-endpoints-local-tiny-gpt2"]["Outputs"]
    assert {"Value": "local-tiny-gpt2"} == {k: v for k, v in outputs["EndpointName"].items() if k == "Value"}


def test_synth_is_deterministic(synth, local, tmp_path_factory):
    build_root = tmp_path_factory.mktemp("build-again")
    write_fake_manifest(build_root, "tiny-gpt2", "hf-fastload", "fp16")
    again = synth(LOCAL, build_root=build_root, allow_unbuilt=False)
    assert again.templates == local.templates


def _volume_of_a_fake_build(tmp_path_factory) -> int:
    """The volume the plan sizes for config/local.yaml built as tests/helpers.py's fake build (FAKE_WEIGHT_BYTES)."""
    from deployment import load_config

    build_root = tmp_path_factory.mktemp("fake-build")
    write_fake_manifest(build_root, "tiny-gpt2", "hf-fastload", "fp16")
    volume = load_config(LOCAL, build_root=build_root).plan("tiny-gpt2").volume_size_gb
    assert volume is not None and volume >= FAKE_WEIGHT_BYTES / 1024**3
    return volume


def test_a_built_endpoint_does_not_depend_on_its_source_folder(synth, tmp_path):
    """A built artifact's stacks come from its manifest alone: the source model's folder may be absent (a pipeline
    that deploys a build) or be written meanwhile (the session's demos make build/tiny-models), and synth is the same.
    A model folder whose config.json sizes a far larger model proves the folder is not read for the volume."""
    import yaml

    model = tmp_path / "source-model"
    raw = yaml.safe_load(Path(ROOT / LOCAL).read_text())
    [endpoint] = raw["endpoints"]
    endpoint["model"] = str(model)
    config = tmp_path / "local.yaml"
    config.write_text(yaml.safe_dump(raw))
    build_root = tmp_path / "build"
    write_fake_manifest(build_root, endpoint["name"], "hf-fastload", "fp16")
    without_folder = synth(str(config), build_root=build_root, allow_unbuilt=False).templates
    model.mkdir()
    large = {
        **HAND_MADE_CONFIG,
        "hidden_size": 8192,
        "intermediate_size": 28672,
        "num_hidden_layers": 80,
        "layer_types": ["full_attention"] * 80,
        "vocab_size": 128256,
    }
    (model / "config.json").write_text(json.dumps(large))
    with_folder = synthesize(str(config), None, tmp_path / "cdk.out", build_root, False).templates
    assert with_folder == without_folder


def test_changed_artifact_changes_only_model_data(synth, local, tmp_path_factory):
    build_root = tmp_path_factory.mktemp("build-changed")
    write_fake_manifest(build_root, "tiny-gpt2", "hf-fastload", "fp16", content_hash="cd" * 32)
    changed = synth(LOCAL, build_root=build_root, allow_unbuilt=False)
    stack = "llm-endpoints-local-tiny-gpt2"
    before, after = local.templates[stack]["Resources"], changed.templates[stack]["Resources"]
    assert before.keys() == after.keys()  # stable logical ids
    differing = sorted(k for k in before if before[k] != after[k])
    # The execution role's policy stays: it reads every artifact of the endpoint (the old fleet keeps its access).
    # Besides the Model: the artifact check reads the new manifest (its resource, its function's description and
    # read grant), and the smoke check runs again on the new artifact (its ArtifactHash).
    assert {k: before[k]["Type"] for k in differing if not k.startswith(("ArtifactCheck", "SmokeCheck"))} == {
        k: "AWS::SageMaker::Model" for k in differing if k.startswith("LlmEndpointModel")
    }
    assert any(before[k]["Type"] == "AWS::SageMaker::Model" for k in differing)
    [smoke_check] = [k for k in differing if k.startswith("SmokeCheck")]
    assert after[smoke_check]["Properties"]["ArtifactHash"] == "cd" * 32


def test_unbuilt_artifact_warns_and_is_refused_without_the_flag(dev, synth, tmp_path):
    from endpoint_config import ConfigError

    meta = json.loads((dev.outdir / "llm-endpoints-dev-gptj-fastload.metadata.json").read_text())
    assert "no built artifact" in json.dumps(meta)
    with pytest.raises(ConfigError, match="no built artifact .* model_build build"):
        synth(EXAMPLE, "dev", build_root=tmp_path, allow_unbuilt=False)


def test_artifact_built_for_another_dtype_is_refused(synth, tmp_path):
    from endpoint_config import ConfigError

    write_fake_manifest(tmp_path, "tiny-gpt2", "hf-fastload", "fp32")
    with pytest.raises(ConfigError, match="has dtype 'fp32' but the config says 'fp16'"):
        synth(LOCAL, build_root=tmp_path, allow_unbuilt=False)


def test_adopting_kept_data_uses_them_by_name_and_restores_the_tls_policy(adopting):
    resources = adopting.templates["llm-endpoints-prod-artifacts"]["Resources"]
    # The environment's dashboard lives in this stack too (stacks/__init__.py); it holds no data; and so does the
    # weights staging job (stacks/weights_staging.py: its project, role, policy and log group), which holds none.
    staging = {k for k in resources if k.startswith(("WeightsStaging", "RecipeBuild"))}
    resources = {k: r for k, r in resources.items() if r["Type"] != "AWS::CloudWatch::Dashboard" and k not in staging}
    kinds = sorted(r["Type"] for r in resources.values())
    assert kinds == ["AWS::S3::BucketPolicy"], "no bucket or repository is created: they exist"
    [policy] = resources.values()
    statement, write_once = policy["Properties"]["PolicyDocument"]["Statement"]
    assert statement["Effect"] == "Deny" and statement["Condition"] == {"Bool": {"aws:SecureTransport": "false"}}
    assert write_once["Sid"] == "PublishedArtifactsAreWriteOnce"  # models/* stays write-once (stacks/artifact_store.py)
    assert policy["DeletionPolicy"] == "Retain"
    outputs = adopting.templates["llm-endpoints-prod-artifacts"]["Outputs"]
    assert json.dumps(outputs["ArtifactBucketName"]["Value"]).count("llm-endpoints-prod-artifacts-") == 1


def test_cdk_nag_reports_have_no_unacknowledged_findings(local, dev, prod, minimal):
    for s in (local, dev, prod, minimal):
        report = json.loads((s.outdir / "validation-report.json").read_text())
        assert report.get("pluginReports"), "cdk-nag did not run"
        violations = [
            v
            for plugin in report["pluginReports"]
            for v in plugin.get("violations", [])
            if not v["ruleName"].startswith("Annotation::llm-endpoints:")  # our own notices, tested elsewhere
        ]
        assert violations == [], violations


def test_cdk_nag_fails_synth_on_an_unacknowledged_finding(tmp_path):
    import aws_cdk as cdk
    from aws_cdk import aws_iam as iam

    from stacks.nag import add_nag_checks

    app = cdk.App(outdir=str(tmp_path))
    stack = cdk.Stack(app, "Loose")
    role = iam.Role(stack, "R", assumed_by=iam.ServicePrincipal("sagemaker.amazonaws.com"))
    role.add_to_policy(iam.PolicyStatement(actions=["s3:*"], resources=["*"]))
    add_nag_checks(app)
    with pytest.raises(Exception, match=r"(?s)ValidationFailed.*AwsSolutions-IAM5\[Action::s3:\*\]"):
        app.synth()


def test_default_timeouts_grow_with_the_model(synth, tmp_path):
    """No timeouts in the config: a 70 B-parameter fp16 model (140 GB) gets more than the 600 s floor."""
    config = tmp_path / "big.yaml"
    config.write_text(
        "endpoints:\n  - {name: big, system: hf-fastload, model: some/llama-70b, model_parameters: 70000000000,"
        " instance_type: ml.p5.48xlarge, tensor_parallel_degree: 8}\n"
        "  - {name: small, system: hf-fastload, model: gpt2, instance_type: ml.g5.xlarge}\n"
    )
    s = synth(str(config))
    timeouts = {}
    for name in ("big", "small"):
        [cfg] = s.resources(f"llm-endpoints-default-{name}", "AWS::SageMaker::EndpointConfig")
        [variant] = cfg["Properties"]["ProductionVariants"]
        timeouts[name] = (
            variant["ModelDataDownloadTimeoutInSeconds"],
            variant["ContainerStartupHealthCheckTimeoutInSeconds"],
        )
    assert timeouts["small"] == (600, 600)
    # 140 GB at 100 MB/s + 300 s; loading at 200 MB/s + 300 s.
    assert timeouts["big"] == (1700, 1000)


# ---- updates keep what autoscaling set; routing; invoke concurrency; copies; unbuilt templates refuse to deploy ----


def _endpoint(synthesized, stack):
    [endpoint] = synthesized.resources(stack, "AWS::SageMaker::Endpoint")
    return endpoint["Properties"]


def test_updates_retain_the_scaled_instance_count_and_apply_the_rest(dev, minimal):
    """UpdateEndpoint resets the fleet to InitialInstanceCount unless RetainAllVariantProperties is set: keep what
    autoscaling chose; without autoscaling the config's count is the truth, so it is excluded from retention."""
    scaled = _endpoint(dev, "llm-endpoints-dev-gptj-fastload")
    assert scaled["RetainAllVariantProperties"] is True
    assert [p["VariantPropertyType"] for p in scaled["ExcludeRetainedVariantProperties"]] == ["DesiredWeight"]
    fixed = _endpoint(minimal, "llm-endpoints-default-gpt2-small")
    assert [p["VariantPropertyType"] for p in fixed["ExcludeRetainedVariantProperties"]] == [
        "DesiredWeight",
        "DesiredInstanceCount",
    ]


def test_routing_invoke_concurrency_and_per_copy_scaling_target(synth, tmp_path):
    """least-outstanding-requests routing and reserved concurrency when asked; a DJL endpoint serving 2 copies per
    instance scales on 2 x the per-copy target (SageMaker's concurrency metric counts per instance)."""
    config = tmp_path / "routing.yaml"
    config.write_text(
        "endpoints:\n"
        "  - {name: r, system: lmi-vllm, model: EleutherAI/gpt-j-6B, instance_type: ml.g5.12xlarge,"
        " tensor_parallel_degree: 2, routing: least-outstanding-requests, invoke_function: {reserved_concurrency: 8},"
        " autoscaling: {min_capacity: 1, max_capacity: 2, target_value: 3}}\n"
    )
    s = synth(str(config))
    stack = "llm-endpoints-default-r"
    [endpoint_config] = s.resources(stack, "AWS::SageMaker::EndpointConfig")
    [variant] = endpoint_config["Properties"]["ProductionVariants"]
    assert variant["RoutingConfig"] == {"RoutingStrategy": "LEAST_OUTSTANDING_REQUESTS"}
    [policy] = s.resources(stack, "AWS::ApplicationAutoScaling::ScalingPolicy")
    assert policy["Properties"]["TargetTrackingScalingPolicyConfiguration"]["TargetValue"] == 6
    functions = s.resources(stack, "AWS::Lambda::Function")
    [invoke] = [f for f in functions if "Validates a generation request" in f["Properties"]["Description"]]
    assert invoke["Properties"]["ReservedConcurrentExecutions"] == 8
    others = [f for f in functions if f is not invoke]  # the smoke test, the smoke check and the artifact check
    assert len(others) == 3 and not [f for f in others if "ReservedConcurrentExecutions" in f["Properties"]]


def test_default_routing_is_sagemakers_random(dev):
    [endpoint_config] = dev.resources("llm-endpoints-dev-gptj-fastload", "AWS::SageMaker::EndpointConfig")
    [variant] = endpoint_config["Properties"]["ProductionVariants"]
    assert variant["RoutingConfig"] == {"RoutingStrategy": "RANDOM"}
    assert "InferenceAmiVersion" not in variant  # the HF image runs on SageMaker's default AMI


def test_unbuilt_template_carries_a_rule_that_refuses_deployment(dev, local):
    """A template synthesized with allow_unbuilt names a placeholder artifact: CloudFormation evaluates the rule
    before it creates anything, so a mistaken deploy stops with the message; a built template has no such rule."""
    template = dev.templates["llm-endpoints-dev-gptj-fastload"]
    rule = template["Rules"]["RefuseUnbuiltArtifact"]
    [assertion] = rule["Assertions"]
    assert assertion["Assert"] == {"Fn::Equals": [{"Ref": "UnbuiltArtifactAcknowledged"}, "yes"]}
    assert "allow_unbuilt" in assertion["AssertDescription"] and "model_build build" in assertion["AssertDescription"]
    parameter = template["Parameters"]["UnbuiltArtifactAcknowledged"]
    assert (parameter["Default"], parameter["AllowedValues"]) == ("no", ["no", "yes"])
    built = local.templates["llm-endpoints-local-tiny-gpt2"]
    assert "RefuseUnbuiltArtifact" not in built.get("Rules", {})
    assert "UnbuiltArtifactAcknowledged" not in built.get("Parameters", {})
