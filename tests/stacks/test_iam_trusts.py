"""Every role's trust says who may assume it (issue 33 item 5, operations review F9): every AWS::IAM::Role of every
synthesized template (each example in each environment, the pipeline and its stages' stacks) is held to one rule.

- An AWS principal is a role of the same template (Fn::GetAtt), or an account root with a condition naming the
  principals (aws:PrincipalArn); never an account root, or another account, without one.
- A service principal carries aws:SourceAccount / aws:SourceArn wherever its service documents them for a role's
  trust policy (SERVICE_CONDITIONS, each with its source), with values of the stack's own account.
- A service whose documentation read here gives no such condition is listed in UNCONDITIONED with why; any other
  service principal fails, so a new one has to be looked up before it is trusted.
"""

from __future__ import annotations

import json
import re

import pytest
from helpers import EXAMPLE_CASES

# service principal -> the condition keys its documentation gives for a role's trust policy.
SERVICE_CONDITIONS = {
    # SageMaker Developer Guide, "Cross-service confused deputy prevention", section "SageMaker AI Inference": the
    # execution role's trust with ArnLike aws:SourceArn arn:<partition>:sagemaker:<region>:<account>:* (exactly that
    # form). The benchmark job's role follows the page's general guidance ("Limit Permissions With Global Condition
    # Keys": aws:SourceArn and aws:SourceAccount), which the benchmark role carries both of.
    "sagemaker.amazonaws.com": {"aws:SourceArn"},
    # Amazon VPC User Guide, "IAM role for publishing flow logs to CloudWatch Logs": "We recommend that you use the
    # aws:SourceAccount and aws:SourceArn condition keys", source ARN arn:aws:ec2:<region>:<account>:vpc-flow-log/<id>.
    "vpc-flow-logs.amazonaws.com": {"aws:SourceAccount", "aws:SourceArn"},
}
UNCONDITIONED = {
    # Lambda Developer Guide, "Lambda execution role": the trust policy it gives for an execution role has no
    # condition, and Lambda documents aws:SourceArn/aws:SourceAccount only for resource-based policies of a function
    # (who may invoke it), not for the execution role's trust. Covers our functions and CDK's custom-resource
    # providers (S3 auto-delete, BucketDeployment).
    "lambda.amazonaws.com": "Lambda documents no source condition for an execution role's trust",
    # CodeBuild User Guide, "Allow CodeBuild to interact with other AWS services" (setting-up-service-role): its
    # service-role trust policy has no condition; no CodeBuild page read here gives aws:SourceArn for a service role.
    # CDK Pipelines makes these roles (synth, self-mutation, assets, our build steps).
    "codebuild.amazonaws.com": "the CodeBuild service-role trust documented without a condition (not found here)",
    # CodePipeline User Guide, "Manage the CodePipeline service role" / security-iam: no source condition found for
    # the pipeline's service role; CDK Pipelines makes it.
    "codepipeline.amazonaws.com": "the CodePipeline service-role trust documented without a condition (not found here)",
}
ROOT = re.compile(r"^arn:[a-z-]+:iam::(\d{12}):root$")


def _text(value) -> str:
    """A CloudFormation value as text: Fn::Join joined, Ref as ${Name}, anything else as its JSON."""
    if isinstance(value, str):
        return value
    if isinstance(value, dict) and "Fn::Join" in value:
        sep, parts = value["Fn::Join"]
        return sep.join(_text(p) for p in parts)
    if isinstance(value, dict) and "Ref" in value:
        return "${" + value["Ref"] + "}"
    return json.dumps(value, sort_keys=True)


def _condition_keys(statement: dict) -> dict[str, list[str]]:
    """{condition key: its values as text} over every operator of the statement's Condition."""
    found: dict[str, list[str]] = {}
    for block in (statement.get("Condition") or {}).values():
        for key, value in block.items():
            values = value if isinstance(value, list) else [value]
            found.setdefault(key, []).extend(_text(v) for v in values)
    return found


def _own_account(value: str, account: str | None) -> bool:
    return "${AWS::AccountId}" in value or (account is not None and account in value)


def trust_problems(where: str, role: dict, account: str | None) -> list[str]:
    """What in one role's AssumeRolePolicyDocument breaks the rule (empty: it holds)."""
    problems = []
    for statement in role["Properties"]["AssumeRolePolicyDocument"]["Statement"]:
        if statement.get("Effect") != "Allow":
            continue
        principal = statement.get("Principal", {})
        keys = _condition_keys(statement)
        if principal == "*" or "*" in _as_list(principal.get("AWS")):
            problems.append(f"{where}: trusts any principal (*)")
            continue
        for aws in _as_list(principal.get("AWS")):
            if isinstance(aws, dict) and "Fn::GetAtt" in aws:
                continue  # one role of this template
            text = _text(aws)
            if text.endswith(":root") or ROOT.match(text) or re.fullmatch(r"\d{12}", text):
                if "aws:PrincipalArn" not in keys:
                    problems.append(f"{where}: trusts account root {text} with no aws:PrincipalArn condition")
            elif not _own_account(text, account):
                problems.append(f"{where}: trusts {text} of another account")
        for service in _as_list(principal.get("Service")):
            service = _text(service)
            if service in UNCONDITIONED:
                continue
            if service not in SERVICE_CONDITIONS:
                problems.append(
                    f"{where}: trusts service {service}, whose documented trust condition is not known here"
                )
                continue
            for key in sorted(SERVICE_CONDITIONS[service]):
                values = keys.get(key)
                if not values:
                    problems.append(f"{where}: trusts {service} without {key}")
                elif not all(_own_account(v, account) for v in values):
                    problems.append(f"{where}: {service}'s {key} {values} is not this stack's account")
            for key in ("aws:SourceAccount", "aws:SourceArn"):
                if key in keys and not all(_own_account(v, account) for v in keys[key]):
                    problems.append(f"{where}: {service}'s {key} {keys[key]} is not this stack's account")
        if principal.get("Federated"):
            problems.append(f"{where}: a federated principal {principal['Federated']} (no rule for it here)")
    return problems


def _as_list(value) -> list:
    if value is None:
        return []
    return value if isinstance(value, list) else [value]


@pytest.fixture(scope="module")
def roles(synth, pipeline_synth) -> dict[str, tuple[dict, str | None]]:
    """{where: (role resource, the stack's account)} for every role of every template the examples synthesize."""
    found = {}
    for config, env in EXAMPLE_CASES:
        synthesized = synth(config, env)
        for name, template in synthesized.templates.items():
            account = synthesized.account(name)
            for lid, resource in template.get("Resources", {}).items():
                if resource["Type"] == "AWS::IAM::Role":
                    found[f"{config} ({env}) {name}/{lid}"] = (resource, account)
    _, _, pipeline, stages = pipeline_synth
    for lid, resource in pipeline["Resources"].items():
        if resource["Type"] == "AWS::IAM::Role":
            found[f"pipeline/{lid}"] = (resource, None)
    for stage, stacks in stages.items():
        for name, (template, account, _) in stacks.items():
            for lid, resource in template.get("Resources", {}).items():
                if resource["Type"] == "AWS::IAM::Role":
                    found[f"pipeline/{stage}/{name}/{lid}"] = (resource, account if account.isdigit() else None)
    return found


def test_every_role_trust_names_who_may_assume_it(roles):
    assert len(roles) > 100, "fewer roles than the examples make: the walk missed templates"
    problems = [p for where, (role, account) in roles.items() for p in trust_problems(where, role, account)]
    assert not problems, "\n".join(problems)


def test_the_walk_saw_every_kind_of_trust_it_rules_on(roles):
    """The rule is not vacuous: the templates hold service principals of each listed kind and conditioned roots."""
    services, rooted = set(), 0
    for role, _ in roles.values():
        for statement in role["Properties"]["AssumeRolePolicyDocument"]["Statement"]:
            services.update(_text(s) for s in _as_list(statement.get("Principal", {}).get("Service")))
            rooted += any(_text(a).endswith(":root") for a in _as_list(statement.get("Principal", {}).get("AWS")))
    assert set(SERVICE_CONDITIONS) | set(UNCONDITIONED) <= services
    assert rooted >= 8


@pytest.mark.parametrize(
    "statement, problem",
    [
        ({"Effect": "Allow", "Principal": {"AWS": "arn:aws:iam::111122223333:root"}}, "no aws:PrincipalArn"),
        ({"Effect": "Allow", "Principal": {"AWS": "arn:aws:iam::999999999999:role/x"}}, "another account"),
        ({"Effect": "Allow", "Principal": {"Service": "vpc-flow-logs.amazonaws.com"}}, "without aws:SourceAccount"),
        ({"Effect": "Allow", "Principal": {"Service": "sagemaker.amazonaws.com"}}, "without aws:SourceArn"),
        ({"Effect": "Allow", "Principal": {"Service": "events.amazonaws.com"}}, "is not known here"),
        (
            {
                "Effect": "Allow",
                "Principal": {"Service": "sagemaker.amazonaws.com"},
                "Condition": {"ArnLike": {"aws:SourceArn": "arn:aws:sagemaker:us-east-1:999999999999:*"}},
            },
            "is not this stack's account",
        ),
    ],
)
def test_the_rule_refuses_each_loose_trust(statement, problem):
    role = {"Properties": {"AssumeRolePolicyDocument": {"Statement": [statement]}}}
    found = trust_problems("r", role, "111122223333")
    assert found and problem in found[0], found


def test_the_openai_route_role_trusts_exactly_the_principals_the_config_names(synth):
    """config/examples/production.yaml's assist-ic: `chat.openai_route: {create_role: true, assumed_by: [...]}`."""
    template = synth("config/examples/production.yaml", "prod").templates["llm-endpoints-prod-assist-ic"]
    [role] = [
        r
        for lid, r in template["Resources"].items()
        if r["Type"] == "AWS::IAM::Role" and lid.startswith("OpenAIRouteApplicationRole")
    ]
    [statement] = role["Properties"]["AssumeRolePolicyDocument"]["Statement"]
    assert statement["Principal"] == {"AWS": "arn:aws:iam::111122223333:root"}
    assert statement["Condition"] == {"ArnEquals": {"aws:PrincipalArn": ["arn:aws:iam::111122223333:role/assist-app"]}}


@pytest.mark.parametrize(
    "route, message",
    [
        ("{create_role: true}", "create_role: true needs assumed_by"),
        (
            "{callers: [arn:aws:iam::111122223333:role/a], assumed_by: [arn:aws:iam::111122223333:role/b]}",
            "it needs create_role: true",
        ),
        ("{create_role: true, assumed_by: [arn:aws:iam::111122223333:root]}", "is not an IAM role or user ARN"),
    ],
)
def test_a_created_route_role_must_name_who_may_assume_it(tmp_path, route, message):
    from helpers import config_refusal

    path = tmp_path / "route.yaml"
    path.write_text(
        "endpoints:\n  - {name: chat, system: lmi-vllm, model: EleutherAI/gpt-j-6B, instance_type: ml.g5.2xlarge, "
        f"chat: {{openai_route: {route}}}}}\n"
    )
    assert message in config_refusal(path)
