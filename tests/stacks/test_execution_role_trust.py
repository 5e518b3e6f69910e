"""Section 4 of the 2026-11-27 reliability probe (L11 of 2026-11-25): the endpoints' execution roles trusted
sagemaker.amazonaws.com with no condition. Every role an endpoint's model runs with now trusts SageMaker only on
behalf of the stack's own account and region, in the form the SageMaker Developer Guide gives for inference
("Cross-service confused deputy prevention", SageMaker AI Inference: ArnLike aws:SourceArn
arn:<partition>:sagemaker:<region>:<account>:*). The benchmark role is a job's, not an endpoint's, and is left as
it is."""

from __future__ import annotations

import pytest

CASES = [("config/examples/production.yaml", "prod"), ("config/examples/vllm-llama-3.1-8b-tools.yaml", "dev")]
CONDITION = {
    "ArnLike": {
        "aws:SourceArn": {
            "Fn::Join": [
                "",
                [
                    "arn:",
                    {"Ref": "AWS::Partition"},
                    ":sagemaker:",
                    {"Ref": "AWS::Region"},
                    ":",
                    {"Ref": "AWS::AccountId"},
                    ":*",
                ],
            ]
        }
    }
}


@pytest.mark.parametrize("config, env", CASES)
def test_every_execution_role_trusts_sagemaker_for_this_account_and_region_only(synth, config: str, env: str) -> None:
    roles = [
        (stack, name, statement)
        for stack, template in synth(config, env).templates.items()
        for name, resource in template.get("Resources", {}).items()
        if resource["Type"] == "AWS::IAM::Role"
        and not resource["Properties"].get("RoleName", "").endswith("-benchmark")
        for statement in resource["Properties"]["AssumeRolePolicyDocument"]["Statement"]
        if statement.get("Principal", {}).get("Service") == "sagemaker.amazonaws.com"
    ]
    assert roles, "no execution role found"
    for stack, name, statement in roles:
        assert statement.get("Condition") == CONDITION, (stack, name, statement)
