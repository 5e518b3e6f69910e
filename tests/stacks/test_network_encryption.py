"""Template assertions on private networking and encryption (`network:`, `encryption:`, stacks/endpoint_network.py):
config/examples/production.yaml in prod, where chat-vllm runs in a VPC the stack creates and the environment's
artifact bucket has a created KMS key. That SageMaker and Lambda work inside that VPC (no internet route; S3 through
the gateway endpoint, the runtime through its interface endpoint) only a real account shows."""

from __future__ import annotations

import pytest
from helpers import ROOT, cdk_context

from stacks.endpoint_network import LAMBDA_VPC_ACTIONS, S3_KMS_ACTIONS, SAGEMAKER_VPC_ACTIONS

CONFIG = "config/examples/production.yaml"
STACK = "llm-endpoints-prod-chat-vllm"
ARTIFACTS = "llm-endpoints-prod-artifacts"
ACCOUNT, REGION = "111122223333", "us-east-1"
KEY = "arn:aws:kms:us-east-1:111122223333:key/1234abcd-12ab-34cd-56ef-1234567890ab"


@pytest.fixture(scope="module")
def production(synth):
    return synth(CONFIG, "prod")


@pytest.fixture(scope="module")
def resources(production):
    return production.templates[STACK]["Resources"]


def of_type(resources, type_name) -> dict[str, dict]:
    return {lid: r["Properties"] for lid, r in resources.items() if r["Type"] == type_name}


def as_list(value) -> list:
    return value if isinstance(value, list) else [value]


def role_statements(resources, role_lid: str) -> list[dict]:
    return [
        s
        for r in resources.values()
        if r["Type"] == "AWS::IAM::Policy" and {"Ref": role_lid} in r["Properties"]["Roles"]
        for s in r["Properties"]["PolicyDocument"]["Statement"]
    ]


def unconditionally_on_any_resource(statements: list[dict]) -> set[str]:
    """Actions allowed on "*" without a condition (CDK's minimizePolicies merges statements that share a resource)."""
    return {
        a
        for s in statements
        if s["Effect"] == "Allow" and s["Resource"] == "*" and "Condition" not in s
        for a in as_list(s["Action"])
    }


def test_the_vpc_has_two_private_subnets_in_two_zones_and_no_way_to_the_internet(resources):
    [vpc] = of_type(resources, "AWS::EC2::VPC").values()
    assert vpc["EnableDnsSupport"] and vpc["EnableDnsHostnames"]  # the runtime endpoint's private DNS needs both
    subnets = of_type(resources, "AWS::EC2::Subnet").values()
    assert sorted(s["AvailabilityZone"]["Fn::Select"][0] for s in subnets) == [0, 1]
    assert all(s["AvailabilityZone"]["Fn::Select"][1] == {"Fn::GetAZs": ""} for s in subnets)  # no lookup at synth
    assert not any(s["MapPublicIpOnLaunch"] for s in subnets)
    for kind in ("AWS::EC2::InternetGateway", "AWS::EC2::NatGateway", "AWS::EC2::Route", "AWS::EC2::EIP"):
        assert of_type(resources, kind) == {}, kind
    [flow_log] = of_type(resources, "AWS::EC2::FlowLog").values()
    assert (flow_log["ResourceType"], flow_log["TrafficType"]) == ("VPC", "ALL")


def test_s3_is_reached_through_the_gateway_and_the_runtime_through_its_interface_endpoint(resources):
    endpoints = {p["VpcEndpointType"]: p for p in of_type(resources, "AWS::EC2::VPCEndpoint").values()}
    assert set(endpoints) == {"Gateway", "Interface"}
    gateway, interface = endpoints["Gateway"], endpoints["Interface"]
    assert gateway["ServiceName"] == {"Fn::Join": ["", ["com.amazonaws.", {"Ref": "AWS::Region"}, ".s3"]]}
    [table] = of_type(resources, "AWS::EC2::RouteTable")
    assert gateway["RouteTableIds"] == [{"Ref": table}]
    assert interface["ServiceName"] == {
        "Fn::Join": ["", ["com.amazonaws.", {"Ref": "AWS::Region"}, ".sagemaker.runtime"]]
    }
    assert interface["PrivateDnsEnabled"] is True
    assert sorted(s["Ref"] for s in interface["SubnetIds"]) == sorted(of_type(resources, "AWS::EC2::Subnet"))


def test_security_groups_admit_nothing_from_outside(resources):
    groups = of_type(resources, "AWS::EC2::SecurityGroup")
    workload = next(lid for lid in groups if "Workload" in lid)
    assert "SecurityGroupIngress" not in groups[workload]
    assert [(e["IpProtocol"], e["FromPort"], e["ToPort"]) for e in groups[workload]["SecurityGroupEgress"]] == [
        ("tcp", 443, 443)
    ]
    endpoint_group = next(lid for lid in groups if "RuntimeEndpoint" in lid)
    [ingress] = groups[endpoint_group]["SecurityGroupIngress"]
    assert (ingress["FromPort"], ingress["ToPort"]) == (443, 443)
    assert ingress["SourceSecurityGroupId"] == {"Fn::GetAtt": [workload, "GroupId"]}
    assert "CidrIp" not in ingress


def test_the_model_and_the_invoke_function_run_in_the_created_subnets(resources):
    subnets = sorted({"Ref": lid}["Ref"] for lid in of_type(resources, "AWS::EC2::Subnet"))
    workload = next(lid for lid in of_type(resources, "AWS::EC2::SecurityGroup") if "Workload" in lid)
    [model] = of_type(resources, "AWS::SageMaker::Model").values()
    assert sorted(s["Ref"] for s in model["VpcConfig"]["Subnets"]) == subnets
    assert model["VpcConfig"]["SecurityGroupIds"] == [{"Fn::GetAtt": [workload, "GroupId"]}]
    assert model["EnableNetworkIsolation"] is True  # lmi-vllm reads its weights from /opt/ml/model
    functions = of_type(resources, "AWS::Lambda::Function")
    invoke = next(p for lid, p in functions.items() if lid.startswith("Invoke"))
    smoke = next(p for lid, p in functions.items() if lid.startswith("SmokeTest"))
    assert sorted(s["Ref"] for s in invoke["VpcConfig"]["SubnetIds"]) == subnets
    assert "VpcConfig" not in smoke  # it calls CloudFormation too, which the VPC has no endpoint for


def test_roles_get_the_network_interface_permissions_each_service_documents(resources):
    [model] = of_type(resources, "AWS::SageMaker::Model").values()
    execution = role_statements(resources, model["ExecutionRoleArn"]["Fn::GetAtt"][0])
    assert set(SAGEMAKER_VPC_ACTIONS) <= unconditionally_on_any_resource(execution)
    functions = {lid: r for lid, r in resources.items() if r["Type"] == "AWS::Lambda::Function"}
    invoke_role = next(
        r["Properties"]["Role"]["Fn::GetAtt"][0] for lid, r in functions.items() if lid.startswith("Invoke")
    )
    assert set(LAMBDA_VPC_ACTIONS) <= unconditionally_on_any_resource(role_statements(resources, invoke_role))


def test_endpoints_without_network_have_no_vpc(production):
    for stack in ("llm-endpoints-prod-summarize-async", "llm-endpoints-prod-assist-ic"):
        assert production.resources(stack, "AWS::EC2::VPC") == []
        for model in production.resources(stack, "AWS::SageMaker::Model"):
            assert "VpcConfig" not in model["Properties"]


def test_the_artifact_bucket_is_encrypted_with_a_created_rotating_key_kept_with_the_data(production):
    resources = production.templates[ARTIFACTS]["Resources"]
    [(key_lid, key)] = [(lid, r) for lid, r in resources.items() if r["Type"] == "AWS::KMS::Key"]
    assert key["Properties"]["EnableKeyRotation"] is True
    assert key["DeletionPolicy"] == "Retain"  # retain_data: true keeps the bucket, so the key that decrypts it
    [alias] = of_type(resources, "AWS::KMS::Alias").values()
    assert alias["AliasName"] == "alias/llm-endpoints-prod-artifacts"
    # The key policy only delegates to this account's IAM policies (no wildcard principal, no role named).
    principals = [s["Principal"] for s in key["Properties"]["KeyPolicy"]["Statement"]]
    assert all(set(p) == {"AWS"} and "root" in str(p["AWS"]) for p in principals)
    [rule] = resources["ArtifactBucket"]["Properties"]["BucketEncryption"]["ServerSideEncryptionConfiguration"]
    assert rule["ServerSideEncryptionByDefault"] == {
        "SSEAlgorithm": "aws:kms",
        "KMSMasterKeyID": {"Fn::GetAtt": [key_lid, "Arn"]},
    }
    assert rule["BucketKeyEnabled"] is True


def test_every_execution_role_uses_the_bucket_key_by_its_alias_through_s3_only(production):
    for stack in ("llm-endpoints-prod-chat-vllm", "llm-endpoints-prod-summarize-async", "llm-endpoints-prod-assist-ic"):
        resources = production.templates[stack]["Resources"]
        [model] = of_type(resources, "AWS::SageMaker::Model").values()
        statements = [
            s
            for s in role_statements(resources, model["ExecutionRoleArn"]["Fn::GetAtt"][0])
            if "kms:Decrypt" in as_list(s["Action"])
        ]
        assert len(statements) == 1, stack
        [statement] = statements
        assert statement["Action"] == list(S3_KMS_ACTIONS)
        assert statement["Condition"] == {
            "StringEquals": {"kms:ViaService": f"s3.{REGION}.amazonaws.com"},
            "ForAnyValue:StringEquals": {"kms:ResourceAliases": ["alias/llm-endpoints-prod-artifacts"]},
        }
        assert statement["Resource"]["Fn::Join"][1][-1] == ":key/*"  # any key of this account and region, by alias


def test_the_publisher_may_use_the_bucket_key_and_a_given_key_is_used_by_arn(tmp_path):
    """The publisher role (created for a trusted pipeline) of a key-encrypted bucket, and an environment that gives
    its key's ARN: small stacks, no app synth."""
    from aws_cdk import App
    from aws_cdk.assertions import Match, Template

    from deployment import load_config
    from stacks.artifact_store import ArtifactStoreStack
    from stacks.trusted_pipeline import TrustedPipeline

    created = load_config(ROOT / CONFIG, "prod")
    text = (ROOT / CONFIG).read_text().replace("bucket_key: create", f"bucket_key: '{KEY}'")
    (tmp_path / "given.yaml").write_text(text)
    given = load_config(tmp_path / "given.yaml", "prod")
    for environment_plan, key_resource in (
        (created, {"Fn::GetAtt": [Match.string_like_regexp("BucketKey"), "Arn"]}),
        (given, KEY),
    ):
        app = App(context=cdk_context())
        stack = ArtifactStoreStack(
            app,
            "A",
            environment_plan=environment_plan,
            trusted_pipeline=TrustedPipeline("444455556666", "build"),
            env={"account": ACCOUNT, "region": REGION},
        )
        template = Template.from_stack(stack)
        template.has_resource_properties(
            "AWS::IAM::Policy",
            {
                "PolicyDocument": {
                    "Statement": Match.array_with(
                        [
                            {
                                "Action": list(S3_KMS_ACTIONS),
                                "Effect": "Allow",
                                "Resource": key_resource,
                                "Condition": {"StringEquals": {"kms:ViaService": f"s3.{REGION}.amazonaws.com"}},
                            }
                        ]
                    )
                }
            },
        )
        if environment_plan is given:
            template.resource_count_is("AWS::KMS::Key", 0)
            template.has_resource_properties(
                "AWS::S3::Bucket",
                {
                    "BucketEncryption": {
                        "ServerSideEncryptionConfiguration": [
                            {
                                "BucketKeyEnabled": True,
                                "ServerSideEncryptionByDefault": {"SSEAlgorithm": "aws:kms", "KMSMasterKeyID": KEY},
                            }
                        ]
                    }
                },
            )


def test_given_subnets_a_volume_key_and_an_async_output_key_reach_the_template(plan_of):
    """EndpointSecurity on its own: an existing VPC by id (no VPC created, the invoke function stays outside), the
    volume key on an instance without local storage, and the async output key set on the async block's OutputConfig."""
    from aws_cdk import App, Stack
    from aws_cdk import aws_iam as iam
    from aws_cdk import aws_sagemaker as sagemaker
    from aws_cdk.assertions import Template

    from stacks.endpoint_network import BucketKeyRef, EndpointSecurity

    entry = {
        "name": "chat",
        "system": "hf-fastload",
        "model": "gpt2",
        "instance_type": "ml.m5.xlarge",
        "invocation": {"mode": "async"},
        "network": {
            "subnet_ids": ["subnet-0123456789abcdef0", "subnet-0123456789abcdef1"],
            "security_group_ids": ["sg-0123456789abcdef0"],
        },
        "encryption": {"volume_key": KEY, "async_output_key": KEY},
    }
    stack = Stack(App(), "S", env={"account": ACCOUNT, "region": REGION})
    role = iam.Role(stack, "Role", assumed_by=iam.ServicePrincipal("sagemaker.amazonaws.com"))
    model = sagemaker.CfnModel(stack, "Model", execution_role_arn=role.role_arn)
    config = sagemaker.CfnEndpointConfig(
        stack,
        "Config",
        production_variants=[],
        async_inference_config=sagemaker.CfnEndpointConfig.AsyncInferenceConfigProperty(
            output_config=sagemaker.CfnEndpointConfig.AsyncInferenceOutputConfigProperty(s3_output_path="s3://b/o")
        ),
    )
    security = EndpointSecurity.resolve(
        plan_of(entry), artifact_bucket="artifacts", bucket_key=BucketKeyRef(key_arn=KEY), network=None
    )
    security.apply(role=role, model=model, endpoint_config=config)
    resources = Template.from_stack(stack).to_json()["Resources"]
    assert resources["Model"]["Properties"]["VpcConfig"] == {
        "Subnets": ["subnet-0123456789abcdef0", "subnet-0123456789abcdef1"],
        "SecurityGroupIds": ["sg-0123456789abcdef0"],
    }
    assert resources["Config"]["Properties"]["KmsKeyId"] == KEY
    assert resources["Config"]["Properties"]["AsyncInferenceConfig"]["OutputConfig"] == {
        "S3OutputPath": "s3://b/o",
        "KmsKeyId": KEY,
    }
    assert not any(r["Type"] == "AWS::EC2::VPC" for r in resources.values())
    [policy] = [r for r in resources.values() if r["Type"] == "AWS::IAM::Policy"]
    statements = policy["Properties"]["PolicyDocument"]["Statement"]
    assert set(SAGEMAKER_VPC_ACTIONS) <= unconditionally_on_any_resource(statements)
    # A given bucket key (and the same key for async output) is named by its ARN, only through S3.
    assert all(s["Resource"] == KEY for s in statements if "kms:Decrypt" in as_list(s["Action"]))


def test_the_execution_role_allows_what_sagemaker_does_with_the_encrypted_bucket_and_the_vpc(production):
    """tests/stacks/test_iam_coverage.py's checker on chat-vllm's execution role: reading the SSE-KMS model data and
    writing captures need the bucket key through S3 (S3 User Guide, UsingKMSEncryption); a model with VpcConfig needs
    the network-interface actions (sagemaker-roles.html). The key is known to this stack only by its alias."""
    from test_iam_coverage import Need, StackContext, Where, missing, role_policy

    ctx = StackContext(production.templates[STACK], STACK, Where(ACCOUNT, REGION))
    _, model = ctx.find("AWS::SageMaker::Model")
    policy = role_policy(ctx, model["Properties"]["ExecutionRoleArn"]["Fn::GetAtt"][0])
    key = f"arn:aws:kms:{REGION}:{ACCOUNT}:key/1234abcd-12ab-34cd-56ef-1234567890ab"
    via_s3 = {
        "kms:ViaService": f"s3.{REGION}.amazonaws.com",
        "kms:ResourceAliases": "alias/llm-endpoints-prod-artifacts",
    }
    bucket = f"llm-endpoints-prod-artifacts-{ACCOUNT}-{REGION}"
    capture = f"arn:aws:s3:::{bucket}/data-capture/chat-vllm/prod-chat-vllm/AllTraffic/2026/11/23/10/x.jsonl"
    needs = [
        Need("kms:Decrypt", key, "reading the SSE-KMS model data", via_s3),
        Need("kms:GenerateDataKey", key, "writing captures into the SSE-KMS bucket", via_s3),
        Need("s3:PutObject", capture, "a captured file"),
        *(
            Need(a, f"arn:aws:ec2:{REGION}:{ACCOUNT}:network-interface/eni-0123456789abcdef0", "VpcConfig")
            for a in SAGEMAKER_VPC_ACTIONS
        ),
    ]
    assert missing(policy, needs) == []
    not_granted = [
        Need(
            "kms:Decrypt",
            key,
            "a direct Decrypt, not through S3",
            {"kms:ResourceAliases": via_s3["kms:ResourceAliases"]},
        ),
        Need("kms:Decrypt", key, "another key of the account", {**via_s3, "kms:ResourceAliases": "alias/other"}),
        Need(
            "s3:PutObject", f"arn:aws:s3:::{bucket}/models/chat-vllm/{'0' * 64}/config.json", "writing the model data"
        ),
    ]
    assert missing(policy, not_granted) == sorted(str(n) for n in not_granted)
