"""A failed smoke test (or SLO gate) rolls the endpoint stack back to the template and artifact it had before the
deploy (operations review R1; workstation/deploy.py check_or_roll_back, model_build/rollback.py), on the emulator.

What the emulator can show: the snapshot before the deploy, the real smoke test failing, the rollback's UpdateStack
(body, or URL for a large template) and the check that the endpoint serves the previous artifact again. What it cannot:
moto cannot update a stack through CDK's change sets, so the new version is deployed here with UpdateStack directly;
and moto's CloudFormation replaces a resource only when its own template text changes (it does not follow a changed
GetAtt), so each resource of the stand-in templates below carries the artifact hash in a tag. How CloudFormation and
SageMaker run the rollback's blue/green update in an account is unverified here (docs/design/rollback.md)."""

from __future__ import annotations

import json
import socket
from pathlib import Path

import boto3
import pytest
import yaml
from botocore.stub import Stubber

from deployment import load_config
from endpoint_config import artifact_bucket_name
from local_emulator import moto_server
from model_build.rollback import RollbackError, take_snapshot
from workstation.deploy import DeployError, check_or_roll_back, take_snapshots

ACCOUNT, REGION = moto_server.EMULATOR_ACCOUNT, moto_server.EMULATOR_REGION
OLD, NEW = "a" * 64, "b" * 64


@pytest.fixture
def environment_plan(tmp_path: Path):
    path = tmp_path / "config.yaml"
    path.write_text(
        yaml.safe_dump(
            {
                "project": "rb",
                "environments": {"dev": {"emulator": True, "account": ACCOUNT, "region": REGION}},
                "endpoints": [
                    {"name": "chat", "system": "hf-fastload", "model": "gpt2", "instance_type": "ml.m5.xlarge"}
                ],
            }
        )
    )
    return load_config(path, "dev")


def template(environment_plan, content_hash: str, pad: int = 0) -> str:
    """The endpoint stack's SageMaker resources as the project's templates have them (a Model on the artifact's
    prefix, an EndpointConfig naming it, the Endpoint), a stand-in for the synthesized template."""
    plan = environment_plan.plan("chat")
    bucket = artifact_bucket_name("rb", "dev", ACCOUNT, REGION)
    tags = [{"Key": "artifact", "Value": content_hash}]  # see the module docstring: moto follows template text only
    body = {
        "Resources": {
            "Model": {
                "Type": "AWS::SageMaker::Model",
                "UpdateReplacePolicy": "Retain",
                "Properties": {
                    "ExecutionRoleArn": f"arn:aws:iam::{ACCOUNT}:role/x",
                    "PrimaryContainer": {
                        "Image": "i",
                        "ModelDataSource": {
                            "S3DataSource": {
                                "S3Uri": f"s3://{bucket}/models/chat/{content_hash}/",
                                "S3DataType": "S3Prefix",
                                "CompressionType": "None",
                            }
                        },
                    },
                    "Tags": tags,
                },
            },
            "Config": {
                "Type": "AWS::SageMaker::EndpointConfig",
                "UpdateReplacePolicy": "Retain",
                "Properties": {
                    "ProductionVariants": [
                        {
                            "VariantName": "AllTraffic",
                            "ModelName": {"Fn::GetAtt": ["Model", "ModelName"]},
                            "InstanceType": "ml.m5.xlarge",
                            "InitialInstanceCount": 1,
                            "InitialVariantWeight": 1,
                        }
                    ],
                    "Tags": tags,
                },
            },
            "Endpoint": {
                "Type": "AWS::SageMaker::Endpoint",
                "Properties": {
                    "EndpointName": plan.endpoint_name,
                    "EndpointConfigName": {"Fn::GetAtt": ["Config", "EndpointConfigName"]},
                    "Tags": tags,
                },
            },
        },
        **({"Metadata": {"padding": "x" * pad}} if pad else {}),
    }
    return json.dumps(body)


def serving(environment_plan) -> set[str]:
    from model_build.rollback import running_hashes

    plan = environment_plan.plan("chat")
    return running_hashes(boto3.Session(), plan.stack_name, plan.endpoint_name, "chat")


def closed_port_runtime():
    """A sagemaker-runtime client aimed at a port nothing listens on: every invocation fails, so the smoke test does."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    from botocore.config import Config

    return boto3.client(
        "sagemaker-runtime",
        endpoint_url=f"http://127.0.0.1:{port}",
        config=Config(retries={"max_attempts": 1}, connect_timeout=2, read_timeout=2),
    )


def deploy_new_version(environment_plan, tmp_path: Path, pad: int = 0):
    """Deploy OLD, snapshot it as `make deploy` does, then deploy NEW over it."""
    cfn = boto3.client("cloudformation")
    stack = environment_plan.plan("chat").stack_name
    boto3.client("s3").create_bucket(Bucket=artifact_bucket_name("rb", "dev", ACCOUNT, REGION))
    cfn.create_stack(StackName=stack, TemplateBody=template(environment_plan, OLD, pad))
    snapshots = take_snapshots(environment_plan, boto3.Session(), tmp_path / "rollback", echo=lambda _: None)
    cfn.update_stack(StackName=stack, TemplateBody=template(environment_plan, NEW))  # what `cdk deploy` does on AWS
    assert serving(environment_plan) == {NEW}
    return snapshots


def test_a_failed_smoke_test_rolls_the_endpoint_back_to_the_artifact_it_served(moto_env, environment_plan, tmp_path):
    """Before: DeployError("smoke test of chat failed ...") and the endpoint kept serving NEW."""
    snapshots = deploy_new_version(environment_plan, tmp_path)
    with pytest.raises(DeployError) as err:
        check_or_roll_back(
            environment_plan,
            snapshots,
            session=boto3.Session(),
            runtime_client=closed_port_runtime(),
            echo=lambda _: None,
        )
    message = str(err.value)
    assert message.startswith("smoke test of chat failed")
    assert f"rolled back: endpoint {environment_plan.plan('chat').endpoint_name} serves {OLD[:12]} again" in message
    assert serving(environment_plan) == {OLD}


def test_a_template_over_the_body_limit_goes_by_url(moto_env, environment_plan, tmp_path):
    """UpdateStack takes at most 51,200 bytes of TemplateBody: a larger previous template is put in the artifact
    bucket and passed by URL."""
    snapshots = deploy_new_version(environment_plan, tmp_path, pad=60_000)
    bucket = artifact_bucket_name("rb", "dev", ACCOUNT, REGION)
    with pytest.raises(DeployError, match=f"serves {OLD[:12]} again"):
        check_or_roll_back(
            environment_plan,
            snapshots,
            session=boto3.Session(),
            runtime_client=closed_port_runtime(),
            bucket=bucket,
            echo=lambda _: None,
        )
    assert serving(environment_plan) == {OLD}
    keys = [o["Key"] for o in boto3.client("s3").list_objects_v2(Bucket=bucket)["Contents"]]
    assert len(keys) == 1 and keys[0].startswith(f"rollback/{environment_plan.plan('chat').stack_name}/")


def test_a_first_deploy_has_nothing_to_roll_back_to_and_says_so(moto_env, environment_plan, tmp_path):
    snapshots = take_snapshots(environment_plan, boto3.Session(), tmp_path, echo=lambda _: None)
    assert snapshots == {}
    boto3.client("cloudformation").create_stack(
        StackName=environment_plan.plan("chat").stack_name, TemplateBody=template(environment_plan, NEW)
    )
    with pytest.raises(DeployError, match="first deployed by this deploy: there is no earlier version"):
        check_or_roll_back(
            environment_plan,
            snapshots,
            session=boto3.Session(),
            runtime_client=closed_port_runtime(),
            echo=lambda _: None,
        )
    assert serving(environment_plan) == {NEW}


def test_a_rollback_that_cannot_run_names_the_exact_command(moto_env, environment_plan, tmp_path):
    """The stack is gone before the rollback (here: deleted): the message names the AWS CLI command with the saved
    previous template, which holds what the stack had."""
    snapshots = deploy_new_version(environment_plan, tmp_path)
    stack = environment_plan.plan("chat").stack_name
    boto3.client("cloudformation").delete_stack(StackName=stack)
    with pytest.raises(DeployError) as err:
        check_or_roll_back(
            environment_plan,
            snapshots,
            session=boto3.Session(),
            runtime_client=closed_port_runtime(),
            echo=lambda _: None,
        )
    saved = tmp_path / "rollback" / f"{stack}.previous.template"
    assert "NOT rolled back" in str(err.value)
    assert f"aws cloudformation update-stack --stack-name {stack} --template-body file://{saved}" in str(err.value)
    assert json.loads(saved.read_text()) == json.loads(template(environment_plan, OLD))


@pytest.mark.parametrize("status", ["UPDATE_ROLLBACK_FAILED", "UPDATE_IN_PROGRESS"])
def test_a_stack_in_an_unsettled_status_has_no_version_to_return_to(moto_env, environment_plan, status):
    cfn = boto3.client("cloudformation")

    class Session:
        def client(self, name, **_):
            return cfn

    with Stubber(cfn) as stub:
        stub.add_response("describe_stacks", {"Stacks": [{"StackName": "s", "CreationTime": 0, "StackStatus": status}]})
        with pytest.raises(RollbackError, match=f"is {status}: .*no version to return to"):
            take_snapshot(Session(), environment_plan.plan("chat"))
