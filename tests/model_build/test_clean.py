"""`model_build clean` (model_build/clean.py) against the moto server: it keeps everything an endpoint can run (the
running config's models, the pending config's during an update, the inference components' models), and anything it
cannot read stops it with nothing deleted (a call the credentials may not make, here refused by moto's own IAM)."""

from __future__ import annotations

import json
from pathlib import Path

import boto3
import httpx
import pytest
import yaml
from botocore.stub import Stubber

from endpoint_config import artifact_bucket_name
from local_emulator import moto_server
from model_build.clean import CleanError, deployed_hashes
from model_build.cli import main

ACCOUNT, REGION = moto_server.EMULATOR_ACCOUNT, moto_server.EMULATOR_REGION
HASHES = {key: key * 64 for key in "abcd"}


def write_config(tmp_path: Path) -> Path:
    raw = {
        "project": "pf",
        "environments": {"dev": {"emulator": True, "account": ACCOUNT, "region": REGION}},
        "endpoints": [{"name": "chat", "system": "hf-fastload", "model": "gpt2", "instance_type": "ml.m5.xlarge"}],
    }
    path = tmp_path / "config.yaml"
    path.write_text(yaml.safe_dump(raw))
    return path


def published(*keys: str) -> tuple[str, object]:
    """Two objects under each artifact prefix of endpoint `chat`, in the environment's bucket."""
    bucket = artifact_bucket_name("pf", "dev", ACCOUNT, REGION)
    s3 = boto3.client("s3")
    s3.create_bucket(Bucket=bucket)
    for key in keys:
        for name in ("manifest.json", "model.safetensors"):
            s3.put_object(Bucket=bucket, Key=f"models/chat/{HASHES[key]}/{name}", Body=b"x")
    return bucket, s3


def model_on(bucket: str, name: str, key: str) -> str:
    boto3.client("sagemaker").create_model(
        ModelName=name,
        ExecutionRoleArn=f"arn:aws:iam::{ACCOUNT}:role/x",
        PrimaryContainer={
            "Image": "i",
            "ModelDataSource": {
                "S3DataSource": {
                    "S3Uri": f"s3://{bucket}/models/chat/{HASHES[key]}/",
                    "S3DataType": "S3Prefix",
                    "CompressionType": "None",
                }
            },
        },
    )
    return name


def hashes_left(s3, bucket: str) -> set[str]:
    return {o["Key"].split("/")[2] for o in s3.list_objects_v2(Bucket=bucket).get("Contents", [])}


def test_a_call_the_credentials_may_not_make_stops_the_clean_with_nothing_deleted(
    moto_env, tmp_path, monkeypatch, capsys
):
    """The review's data loss: any DescribeEndpoint error counted as "not deployed", and the running artifact went.
    Here moto's IAM refuses sagemaker:DescribeEndpoint to the operator's credentials."""
    bucket, s3 = published("a", "b")
    sm = boto3.client("sagemaker")
    sm.create_endpoint_config(
        EndpointConfigName="c",
        ProductionVariants=[
            {
                "VariantName": "AllTraffic",
                "ModelName": model_on(bucket, "m", "a"),
                "InstanceType": "ml.m5.xlarge",
                "InitialInstanceCount": 1,
            }
        ],
    )
    sm.create_endpoint(EndpointName="dev-chat", EndpointConfigName="c")
    iam = boto3.client("iam")
    iam.create_user(UserName="operator")
    iam.put_user_policy(
        UserName="operator",
        PolicyName="no-sagemaker",
        PolicyDocument=json.dumps(
            {
                "Version": "2012-10-17",
                "Statement": [{"Effect": "Allow", "Action": ["s3:*", "sts:GetCallerIdentity"], "Resource": "*"}],
            }
        ),
    )
    key = iam.create_access_key(UserName="operator")["AccessKey"]
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", key["AccessKeyId"])
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", key["SecretAccessKey"])
    monkeypatch.delenv("AWS_SESSION_TOKEN", raising=False)  # a user's keys, not a role's
    httpx.post(f"{moto_env.url}/moto-api/reset-auth", content=b"0").raise_for_status()  # from now on, IAM decides
    try:
        assert main(["clean", "--config", str(write_config(tmp_path)), "--env", "dev", "--delete"]) == 2
    finally:
        httpx.post(f"{moto_env.url}/moto-api/reset-auth", content=b"inf").raise_for_status()
    err = capsys.readouterr().err
    assert "cannot tell what endpoint dev-chat runs" in err and "AccessDenied" in err and "nothing was deleted" in err
    assert hashes_left(s3, bucket) == {HASHES["a"], HASHES["b"]}


ARN = "arn:aws:sagemaker:us-east-1:123456789012:{}/{}"


def _config(name: str, model: str | None) -> dict:
    variant = {"VariantName": "AllTraffic", "InstanceType": "ml.g5.12xlarge", **({"ModelName": model} if model else {})}
    return {
        "EndpointConfigName": name,
        "EndpointConfigArn": ARN.format("endpoint-config", name),
        "CreationTime": 0,
        "ProductionVariants": [variant],
    }


def _model(name: str, key: str) -> dict:
    uri = f"s3://{artifact_bucket_name('pf', 'dev', ACCOUNT, REGION)}/models/chat/{HASHES[key]}/"
    return {
        "ModelName": name,
        "ModelArn": ARN.format("model", name),
        "CreationTime": 0,
        "PrimaryContainer": {
            "Image": "i",
            "ModelDataSource": {"S3DataSource": {"S3Uri": uri, "S3DataType": "S3Prefix", "CompressionType": "None"}},
        },
    }


def _endpoint(config: str, **extra) -> dict:
    return {
        "EndpointName": "dev-chat",
        "EndpointArn": ARN.format("endpoint", "dev-chat"),
        "EndpointConfigName": config,
        "EndpointStatus": "InService",
        "CreationTime": 0,
        "LastModifiedTime": 0,
        **extra,
    }


def test_an_update_in_progress_keeps_both_fleets_and_a_missing_endpoint_keeps_nothing(moto_env):
    """DescribeEndpoint's PendingDeploymentSummary names the config being deployed: its models stay too (the answers
    are botocore's Stubber's: moto keeps no pending deployment). A missing endpoint ("Could not find endpoint", moto's
    own answer) keeps nothing."""
    sm = boto3.client("sagemaker")
    with Stubber(sm) as stub:
        stub.add_response(
            "describe_endpoint",
            _endpoint("c-old", EndpointStatus="Updating", PendingDeploymentSummary={"EndpointConfigName": "c-new"}),
        )
        for config, model in sorted([("c-old", "old"), ("c-new", "new")]):
            stub.add_response("describe_endpoint_config", _config(config, model), {"EndpointConfigName": config})
        for model, key in (("new", "b"), ("old", "a")):
            stub.add_response("describe_model", _model(model, key), {"ModelName": model})
        assert deployed_hashes(_Session(sagemaker=sm), "dev-chat", "chat") == {HASHES["a"], HASHES["b"]}
    assert deployed_hashes(_Session(), "dev-nothing", "chat") == set()


def test_an_inference_component_endpoint_keeps_its_components_models(moto_env):
    """A component endpoint's variant names no model: each component's model is kept (moto has no inference
    components: the answers are the Stubber's). A component whose model was deleted still runs it, and its artifact
    cannot be told: the clean stops (probes F6), as it does for a variant's deleted model."""
    sm = boto3.client("sagemaker")
    with Stubber(sm) as stub:
        stub.add_response("describe_endpoint", _endpoint("c-ic"))
        stub.add_response("describe_endpoint_config", _config("c-ic", None))
        stub.add_response(
            "list_inference_components",
            {
                "InferenceComponents": [
                    {
                        "InferenceComponentName": name,
                        "InferenceComponentArn": ARN.format("inference-component", name),
                        "EndpointName": "dev-chat",
                        "EndpointArn": ARN.format("endpoint", "dev-chat"),
                        "VariantName": "AllTraffic",
                        "CreationTime": 0,
                        "LastModifiedTime": 0,
                    }
                    for name in ("ic-a", "ic-b")
                ]
            },
            {"EndpointNameEquals": "dev-chat"},
        )
        for name, model in (("ic-a", "ic-model"), ("ic-b", "deleted-model")):
            stub.add_response(
                "describe_inference_component",
                {
                    "InferenceComponentName": name,
                    "InferenceComponentArn": ARN.format("inference-component", name),
                    "EndpointName": "dev-chat",
                    "EndpointArn": ARN.format("endpoint", "dev-chat"),
                    "Specification": {"ModelName": model},
                    "CreationTime": 0,
                    "LastModifiedTime": 0,
                    "InferenceComponentStatus": "InService",
                },
                {"InferenceComponentName": name},
            )
        stub.add_client_error(
            "describe_model",
            "ValidationException",
            "Could not find model deleted-model.",
            expected_params={"ModelName": "deleted-model"},
        )
        with pytest.raises(CleanError, match="endpoint dev-chat runs model deleted-model, which no longer exists"):
            deployed_hashes(_Session(sagemaker=sm), "dev-chat", "chat")


def test_objects_s3_refuses_to_delete_are_counted_and_fail_the_command(moto_env, tmp_path, capsys, monkeypatch):
    """DeleteObjects answers 200 with per-key Errors: each is reported and the command exits 2."""
    import model_build.clean as clean

    bucket, s3 = published("a", "d")
    build = tmp_path / "build" / "chat"
    build.mkdir(parents=True)
    (build / "manifest.json").write_text(
        json.dumps({"system": "hf-fastload", "dtype": "fp16", "content_hash": HASHES["d"]})
    )
    real_delete = clean.delete

    def refusing(session, bucket_name, cleanups):
        client = session.client("s3")
        original = client.delete_objects

        def delete_objects(**kwargs):
            answer = original(**kwargs)
            return {
                **answer,
                "Errors": [
                    {"Key": kwargs["Delete"]["Objects"][0]["Key"], "Code": "AccessDenied", "Message": "Access Denied"}
                ],
            }

        client.delete_objects = delete_objects
        session.client = lambda name, **kw: client if name == "s3" else boto3.client(name, **kw)
        return real_delete(session, bucket_name, cleanups)

    monkeypatch.setattr("model_build.cli.delete", refusing, raising=False)
    monkeypatch.setattr(clean, "delete", refusing)
    argv = [
        "clean",
        "--config",
        str(write_config(tmp_path)),
        "--env",
        "dev",
        "--build-root",
        str(tmp_path / "build"),
        "--delete",
    ]
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert "S3 refused to delete 1 object(s)" in err and f"models/chat/{HASHES['a']}/" in err and "AccessDenied" in err


class _Session:
    """A boto3 session whose clients are moto's except the ones given (Stubber-wrapped)."""

    def __init__(self, **clients) -> None:
        self._clients = clients

    def client(self, name: str, **kwargs):
        return self._clients.get(name) or boto3.client(name, **kwargs)


def test_clean_error_names_the_resource(moto_env):
    from botocore.exceptions import ClientError

    real = boto3.client("sagemaker")
    with Stubber(real) as stub:
        stub.add_client_error("describe_endpoint", "ThrottlingException", "Rate exceeded")
        with pytest.raises(CleanError, match=r"cannot tell what endpoint dev-chat runs .*ThrottlingException"):
            deployed_hashes(_Session(sagemaker=real), "dev-chat", "chat")
    assert issubclass(CleanError, Exception) and not issubclass(CleanError, ClientError)


# ------------------------------------------------------------------------- kept Models and EndpointConfigs
# The endpoint stacks keep a replaced Model and EndpointConfig (UpdateReplacePolicy Retain): after a rolled-back
# update the endpoint may still run them. `clean` finds them by the stacks' tags and removes those no endpoint and no
# stack uses.

TAGS = {"llm-endpoints:project": "pf", "llm-endpoints:environment": "dev", "llm-endpoints:endpoint": "chat"}


def _tagged(**overrides) -> list[dict]:
    return [{"Key": k, "Value": v} for k, v in {**TAGS, **overrides}.items()]


def _model_and_config(sm, bucket: str, name: str, key: str, tags: list[dict] | None) -> None:
    model_on(bucket, f"m-{name}", key)
    sm.create_endpoint_config(
        EndpointConfigName=f"c-{name}",
        ProductionVariants=[
            {
                "VariantName": "AllTraffic",
                "ModelName": f"m-{name}",
                "InstanceType": "ml.m5.xlarge",
                "InitialInstanceCount": 1,
            }
        ],
    )
    for kind in ("model", "endpoint-config"):
        prefix = "m" if kind == "model" else "c"
        if tags:
            sm.add_tags(ResourceArn=f"arn:aws:sagemaker:{REGION}:{ACCOUNT}:{kind}/{prefix}-{name}", Tags=tags)


def _the_stack(sm, bucket: str, runs: int) -> tuple[str, str, object]:
    """The endpoint's stack as CloudFormation has it after the rolled-back update: its current Model and
    EndpointConfig (the new ones, m-new and c-new, named by their ARNs as CloudFormation's physical ids are), answered
    by botocore's Stubber `runs` times (the clean is run that often; moto's CloudFormation is not needed for two
    reads)."""
    _model_and_config(sm, bucket, "new", "c", _tagged())
    cfn = boto3.client("cloudformation")
    stub = Stubber(cfn)
    for _ in range(runs):
        stub.add_response(
            "describe_stacks",
            {"Stacks": [{"StackName": "pf-dev-chat", "CreationTime": 0, "StackStatus": "UPDATE_COMPLETE"}]},
            {"StackName": "pf-dev-chat"},
        )
        stub.add_response(
            "list_stack_resources",
            {
                "StackResourceSummaries": [
                    {
                        "LogicalResourceId": lid,
                        "ResourceType": kind,
                        "LastUpdatedTimestamp": 0,
                        "ResourceStatus": "UPDATE_COMPLETE",
                        "PhysicalResourceId": f"arn:aws:sagemaker:{REGION}:{ACCOUNT}:{arn_kind}/{name}",
                    }
                    for lid, kind, arn_kind, name in (
                        ("Model", "AWS::SageMaker::Model", "model", "m-new"),
                        ("Config", "AWS::SageMaker::EndpointConfig", "endpoint-config", "c-new"),
                    )
                ]
            },
            {"StackName": "pf-dev-chat"},
        )
    stub.activate()
    return "m-new", "c-new", cfn


def test_clean_removes_kept_models_and_configs_nothing_uses_and_keeps_what_runs(
    moto_env, tmp_path, capsys, monkeypatch
):
    """A rolled-back update: the endpoint runs c-old (m-old) while the stack names c-new (m-new). Those four stay; the
    older pair goes, with its artifact; another endpoint's, another project's and untagged ones are never touched."""
    bucket, s3 = published("a", "b", "c")
    sm = boto3.client("sagemaker")
    _model_and_config(sm, bucket, "older", "a", _tagged())
    _model_and_config(sm, bucket, "old", "b", _tagged())
    _model_and_config(sm, bucket, "sibling", "a", _tagged(**{"llm-endpoints:endpoint": "other"}))
    _model_and_config(sm, bucket, "foreign", "a", _tagged(**{"llm-endpoints:project": "someone-else"}))
    _model_and_config(sm, bucket, "untagged", "a", None)
    sm.create_endpoint(EndpointName="dev-chat", EndpointConfigName="c-old")
    stack_model, stack_config, cfn = _the_stack(sm, bucket, runs=2)
    monkeypatch.setattr("deployment.aws.session_for", lambda env: _Session(cloudformation=cfn))
    config = str(write_config(tmp_path))
    # The build the rolled-back deploy published (hash c): kept as built.
    (tmp_path / "build" / "chat").mkdir(parents=True)
    (tmp_path / "build" / "chat" / "manifest.json").write_text(
        json.dumps({"system": "hf-fastload", "dtype": "fp16", "content_hash": HASHES["c"]})
    )
    build = ["--build-root", str(tmp_path / "build")]

    assert main(["clean", "--config", config, "--env", "dev", *build]) == 0
    out = capsys.readouterr().out
    assert "  remove  model m-older  (no endpoint or stack uses it)" in out
    assert "  remove  endpoint-config c-older  (no endpoint or stack uses it)" in out
    assert "  keep    model m-old  (runs now)" in out and "  keep    endpoint-config c-old  (runs now)" in out
    assert "  keep    model m-new  (the stack's current one)" in out
    assert "2 SageMaker model(s) and endpoint config(s) would be removed" in out
    assert {m["ModelName"] for m in sm.list_models()["Models"]} >= {"m-older", "m-old"}  # a dry run deletes nothing

    assert main(["clean", "--config", config, "--env", "dev", *build, "--delete"]) == 0
    assert "deleted 2 of 2 SageMaker model(s) and endpoint config(s)" in capsys.readouterr().out
    assert {m["ModelName"] for m in sm.list_models()["Models"]} == {
        "m-old",
        stack_model,
        "m-sibling",
        "m-foreign",
        "m-untagged",
    }
    assert {c["EndpointConfigName"] for c in sm.list_endpoint_configs()["EndpointConfigs"]} == {
        "c-old",
        stack_config,
        "c-sibling",
        "c-foreign",
        "c-untagged",
    }
    assert hashes_left(s3, bucket) == {HASHES["b"], HASHES["c"]}  # m-older's artifact went with it (c: built)


def test_a_deploy_in_progress_or_an_unreadable_listing_stops_the_clean(moto_env):
    """What a stack names changes while it deploys, so a stack in progress stops the clean; so does a listing of the
    tagged resources SageMaker refuses (both before anything is deleted)."""
    from model_build.clean import stack_resources, tagged_resources

    cfn = boto3.client("cloudformation")
    with Stubber(cfn) as stub:
        stub.add_response(
            "describe_stacks",
            {"Stacks": [{"StackName": "pf-dev-chat", "CreationTime": 0, "StackStatus": "UPDATE_IN_PROGRESS"}]},
        )
        with pytest.raises(CleanError, match="stack pf-dev-chat is UPDATE_IN_PROGRESS: a deploy is running"):
            stack_resources(_Session(cloudformation=cfn), "pf-dev-chat")
    with Stubber(cfn) as stub:  # CloudFormation's answer for a stack that does not exist
        stub.add_client_error("describe_stacks", "ValidationError", "Stack with id pf-dev-nothing does not exist")
        assert stack_resources(_Session(cloudformation=cfn), "pf-dev-nothing") == set()
    sm = boto3.client("sagemaker")
    with Stubber(sm) as stub:
        stub.add_client_error("list_models", "AccessDeniedException", "not authorized to perform sagemaker:ListModels")
        with pytest.raises(CleanError, match="cannot list this project's SageMaker models.*AccessDeniedException"):
            tagged_resources(_Session(sagemaker=sm), "pf")


def test_a_resource_sagemaker_refuses_to_delete_is_reported(moto_env):
    from model_build.clean import EndpointCleanup, delete_resources

    sm = boto3.client("sagemaker")
    with Stubber(sm) as stub:
        stub.add_client_error(
            "delete_endpoint_config", "ValidationException", "Could not find endpoint configuration c-gone."
        )
        stub.add_client_error(
            "delete_model", "AccessDeniedException", "not authorized to perform sagemaker:DeleteModel"
        )
        cleanup = EndpointCleanup("chat", remove_resources=[("endpoint-config", "c-gone"), ("model", "m-kept")])
        deleted, failed = delete_resources(_Session(sagemaker=sm), [cleanup])
    assert deleted == 1  # already gone counts as deleted
    assert len(failed) == 1 and failed[0].startswith("model m-kept: ") and "AccessDeniedException" in failed[0]
