"""Preflight reads the account's Lambda concurrency before a deploy reserves some (operations review R4): a public
stream URL (streaming.auth: none) must reserve concurrency, and Lambda refuses a reservation that leaves fewer than
100 executions unreserved (botocore's lambda model, PutFunctionConcurrency), which a new account's reduced quota
does. AWS's answers are botocore Stubber's (moto's Lambda has no account quotas)."""

from __future__ import annotations

import boto3
import pytest
import yaml
from botocore.stub import Stubber

from deployment import load_config
from model_build.preflight import lambda_concurrency_checks


@pytest.fixture
def environment_plan(tmp_path, monkeypatch):
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "testing")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "testing")
    path = tmp_path / "config.yaml"
    path.write_text(
        yaml.safe_dump(
            {
                "project": "cc",
                "environments": {"dev": {"account": "111122223333", "region": "us-east-1"}},
                "endpoints": [
                    {
                        "name": "chat",
                        "system": "lmi-vllm",
                        "model": "EleutherAI/gpt-j-6B",
                        "dtype": "fp16",
                        "instance_type": "ml.g5.2xlarge",
                        "volume_size_gb": None,
                        "invoke_function": {"reserved_concurrency": 2},
                        "streaming": {
                            "enabled": True,
                            "auth": "none",
                            "acknowledge_unauthenticated": True,
                            "reserved_concurrency": 5,
                        },
                    }
                ],
            }
        )
    )
    return load_config(path, "dev")


class Session:
    def __init__(self, **clients):
        self.clients = clients

    def client(self, name, **_):
        return self.clients[name]


def clients(total: int, unreserved: int, reserved_now: dict[str, int] | None = None):
    lam = boto3.client("lambda", region_name="us-east-1")
    cfn = boto3.client("cloudformation", region_name="us-east-1")
    lam_stub, cfn_stub = Stubber(lam), Stubber(cfn)
    lam_stub.add_response(
        "get_account_settings",
        {"AccountLimit": {"ConcurrentExecutions": total, "UnreservedConcurrentExecutions": unreserved}},
    )
    if reserved_now is None:
        cfn_stub.add_client_error("list_stack_resources", "ValidationError", "Stack with id cc-dev-chat does not exist")
    else:
        cfn_stub.add_response(
            "list_stack_resources",
            {
                "StackResourceSummaries": [
                    {
                        "LogicalResourceId": f"F{i}",
                        "PhysicalResourceId": name,
                        "ResourceType": "AWS::Lambda::Function",
                        "LastUpdatedTimestamp": 0,
                        "ResourceStatus": "CREATE_COMPLETE",
                    }
                    for i, name in enumerate(reserved_now)
                ]
            },
        )
        for name, n in reserved_now.items():
            lam_stub.add_response(
                "get_function_concurrency", {"ReservedConcurrentExecutions": n}, {"FunctionName": name}
            )
    lam_stub.activate()
    cfn_stub.activate()
    return Session(**{"lambda": lam, "cloudformation": cfn})


def test_a_new_accounts_reduced_concurrency_is_refused_before_the_deploy(environment_plan):
    [check] = lambda_concurrency_checks(environment_plan, clients(total=10, unreserved=10), "us-east-1")
    assert not check.ok
    assert "the account's Lambda concurrency in us-east-1 is 10, 10 unreserved; this deploy reserves 7" in check.message
    assert "(chat invoke_function 2, chat streaming 5), which would leave 3, below the 100" in check.message
    assert "AWS Lambda quota 'Concurrent executions'" in check.message


def test_an_account_with_room_passes_and_a_redeploy_counts_what_it_reserves_already(environment_plan):
    [check] = lambda_concurrency_checks(environment_plan, clients(total=1000, unreserved=1000), "us-east-1")
    assert check.ok
    # 107 unreserved, but the stack's own functions hold 7 of the reservation already: 107 + 7 - 7 = 107 left
    [check] = lambda_concurrency_checks(
        environment_plan, clients(total=114, unreserved=107, reserved_now={"inv": 2, "str": 5}), "us-east-1"
    )
    assert check.ok, check.message
    [check] = lambda_concurrency_checks(environment_plan, clients(total=106, unreserved=106), "us-east-1")
    assert not check.ok and "would leave 99" in check.message


def test_the_pipelines_preflight_runs_the_concurrency_check_too(moto_env, tmp_path):
    """Operations review F10: `model_build preflight --only-updates` (the pipeline's Preflight step) returned before
    the Lambda concurrency check, so only `make deploy` ran it. Against the emulator, whose Lambda has no
    GetAccountSettings, the check runs and says what it could not read."""
    from model_build.preflight import run_preflight

    path = tmp_path / "pipeline.yaml"
    path.write_text(
        yaml.safe_dump(
            {
                "project": "cc",
                "environments": {"dev": {"account": "123456789012", "region": "us-east-1"}},
                "endpoints": [
                    {
                        "name": "chat",
                        "system": "lmi-vllm",
                        "model": "EleutherAI/gpt-j-6B",
                        "dtype": "fp16",
                        "instance_type": "ml.g5.2xlarge",
                        "volume_size_gb": None,
                        "invoke_function": {"reserved_concurrency": 2},
                    }
                ],
            }
        )
    )
    checks = {c.name: c for c in run_preflight(load_config(path, "dev"), boto3.Session(), only_updates=True)}
    assert "lambda concurrency" in checks, sorted(checks)
    assert "lambda:GetAccountSettings" in checks["lambda concurrency"].message
    assert not any(name.startswith("quota") for name in checks)  # still only what the Preflight role may read


def test_the_preflight_role_may_read_what_the_concurrency_check_calls(tmp_path):
    """The artifact stack's Preflight role, for an environment that reserves concurrency: GetAccountSettings,
    ListStackResources of each endpoint stack, GetFunctionConcurrency of the account's functions in its region."""
    import json

    import aws_cdk as cdk
    from helpers import cdk_context

    from stacks.artifact_store import ArtifactStoreStack
    from stacks.trusted_pipeline import TrustedPipeline

    path = tmp_path / "c.yaml"
    path.write_text(
        yaml.safe_dump(
            {
                "project": "cc",
                "environments": {"dev": {"account": "111122223333", "region": "us-east-1"}},
                "endpoints": [
                    {
                        "name": "chat",
                        "system": "lmi-vllm",
                        "model": "EleutherAI/gpt-j-6B",
                        "dtype": "fp16",
                        "instance_type": "ml.g5.2xlarge",
                        "volume_size_gb": None,
                        "invoke_function": {"reserved_concurrency": 2},
                    }
                ],
            }
        )
    )
    app = cdk.App(context=cdk_context())
    ArtifactStoreStack(
        app,
        "A",
        environment_plan=load_config(path, "dev"),
        trusted_preflight=TrustedPipeline("111111111111", "cc-dev-preflight-cb"),
        env=cdk.Environment(account="111122223333", region="us-east-1"),
    )
    template = app.synth().get_stack_by_name("A").template
    statements = [
        s
        for r in template["Resources"].values()
        if r["Type"] == "AWS::IAM::Policy" and "Preflight" in json.dumps(r["Properties"]["Roles"])
        for s in r["Properties"]["PolicyDocument"]["Statement"]
    ]
    granted = {(a, json.dumps(s["Resource"])) for s in statements for a in _as_list(s["Action"])}
    assert ("lambda:GetAccountSettings", '"*"') in granted
    assert any(a == "cloudformation:ListStackResources" and "stack/cc-dev-chat/*" in r for a, r in granted)
    assert any(a == "lambda:GetFunctionConcurrency" and ":function:*" in r for a, r in granted)


def _as_list(value):
    return value if isinstance(value, list) else [value]
