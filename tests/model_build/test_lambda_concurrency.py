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
