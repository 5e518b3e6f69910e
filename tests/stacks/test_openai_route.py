"""SageMaker's OpenAI route as a front door, on config/examples/production.yaml (prod): each configured caller, and the
role the stack creates, is granted exactly sagemaker:InvokeEndpoint on its endpoint (and component) and
sagemaker:CallWithBearerToken; the base URLs are stack outputs; the front doors and the smoke test get the endpoint's
chat settings. The IAM test evaluates each caller's synthesized statements on the calls the route makes and on calls
it must not allow."""

from __future__ import annotations

import fnmatch
from typing import Any

import pytest

CONFIG, ENV = "config/examples/production.yaml", "prod"
ACCOUNT, REGION = "111122223333", "us-east-1"
CHAT_VLLM, ASSIST_IC = "llm-endpoints-prod-chat-vllm", "llm-endpoints-prod-assist-ic"


@pytest.fixture(scope="module")
def templates(synth) -> dict[str, dict]:
    return synth(CONFIG, ENV).templates


def render(value: Any, template: dict) -> str:
    """A statement's resource as text: pseudo parameters of this environment, Fn::Join, and a Ref/GetAtt of a
    resource in the template as a name that matches nothing (it is not an endpoint ARN)."""
    if isinstance(value, str):
        return value
    if "Fn::Join" in value:
        sep, parts = value["Fn::Join"]
        return sep.join(render(p, template) for p in parts)
    if "Ref" in value:
        return {
            "AWS::Partition": "aws",
            "AWS::Region": REGION,
            "AWS::AccountId": ACCOUNT,
            "AWS::URLSuffix": "amazonaws.com",
        }.get(value["Ref"], f"<{value['Ref']}>")
    return f"<{value}>"


def statements_of(template: dict, predicate) -> list[dict]:
    return [
        s
        for r in template["Resources"].values()
        if r["Type"] == "AWS::IAM::Policy" and predicate(r)
        for s in r["Properties"]["PolicyDocument"]["Statement"]
    ]


def allowed(statements: list[dict], action: str, resource: str, template: dict) -> bool:
    """Whether the Allow statements (no Deny, no conditions here) allow `action` on `resource` (IAM's wildcards)."""
    for s in statements:
        actions = s["Action"] if isinstance(s["Action"], list) else [s["Action"]]
        resources = s["Resource"] if isinstance(s["Resource"], list) else [s["Resource"]]
        if (
            s["Effect"] == "Allow"
            and "Condition" not in s
            and any(fnmatch.fnmatchcase(action.lower(), a.lower()) for a in actions)
            and any(fnmatch.fnmatchcase(resource, render(r, template)) for r in resources)
        ):
            return True
    return False


def endpoint_arn(name: str) -> str:
    return f"arn:aws:sagemaker:{REGION}:{ACCOUNT}:endpoint/{name}"


COMPONENT_ARN = f"arn:aws:sagemaker:{REGION}:{ACCOUNT}:inference-component/prod-assist-ic-ic"


def caller_statements(template: dict) -> list[dict]:
    return statements_of(template, lambda r: r["Properties"].get("Roles") == ["chat-frontend"])


def created_role_statements(template: dict) -> list[dict]:
    return statements_of(template, lambda r: "OpenAIRoute" in str(r["Properties"].get("Roles")))


def test_each_caller_gets_exactly_the_two_actions(templates) -> None:
    for statements, resources in (
        (caller_statements(templates[CHAT_VLLM]), [endpoint_arn("prod-chat-vllm")]),
        (created_role_statements(templates[ASSIST_IC]), [endpoint_arn("prod-assist-ic"), COMPONENT_ARN]),
    ):
        granted = sorted(
            (s["Action"], tuple(s["Resource"]) if isinstance(s["Resource"], list) else (s["Resource"],))
            for s in statements
        )
        assert granted == [("sagemaker:CallWithBearerToken", ("*",)), ("sagemaker:InvokeEndpoint", tuple(resources))]


@pytest.mark.parametrize(
    ("stack", "statements_for", "action", "resource", "expected"),
    [
        (CHAT_VLLM, caller_statements, "sagemaker:InvokeEndpoint", endpoint_arn("prod-chat-vllm"), True),
        (CHAT_VLLM, caller_statements, "sagemaker:CallWithBearerToken", "*", True),
        (CHAT_VLLM, caller_statements, "sagemaker:InvokeEndpoint", endpoint_arn("prod-other"), False),
        (CHAT_VLLM, caller_statements, "sagemaker:InvokeEndpointAsync", endpoint_arn("prod-chat-vllm"), False),
        (CHAT_VLLM, caller_statements, "sagemaker:DescribeEndpoint", endpoint_arn("prod-chat-vllm"), False),
        (CHAT_VLLM, caller_statements, "sagemaker:CreateEndpoint", endpoint_arn("prod-chat-vllm"), False),
        (ASSIST_IC, created_role_statements, "sagemaker:InvokeEndpoint", COMPONENT_ARN, True),
        (
            ASSIST_IC,
            created_role_statements,
            "sagemaker:InvokeEndpoint",
            f"arn:aws:sagemaker:{REGION}:{ACCOUNT}:inference-component/prod-other-ic",
            False,
        ),
        (ASSIST_IC, created_role_statements, "sagemaker:CallWithBearerToken", "*", True),
        (ASSIST_IC, created_role_statements, "s3:GetObject", "arn:aws:s3:::any/key", False),
    ],
)
def test_the_route_calls_are_allowed_and_nothing_else(
    templates, stack, statements_for, action, resource, expected
) -> None:
    template = templates[stack]
    assert allowed(statements_for(template), action, resource, template) is expected


def test_the_created_role_is_the_accounts_to_assume_and_its_arn_an_output(templates) -> None:
    template = templates[ASSIST_IC]
    [role] = [r for lid, r in template["Resources"].items() if r["Type"] == "AWS::IAM::Role" and "OpenAIRoute" in lid]
    assert role["Properties"]["RoleName"] == "llm-endpoints-prod-assist-ic-openai"
    [statement] = role["Properties"]["AssumeRolePolicyDocument"]["Statement"]
    assert statement["Principal"] == {"AWS": f"arn:aws:iam::{ACCOUNT}:root"} and statement["Action"] == "sts:AssumeRole"
    assert "OpenAIRoleArn" in template["Outputs"] and "OpenAIRoleArn" not in templates[CHAT_VLLM]["Outputs"]


def test_the_base_urls_are_outputs(templates) -> None:
    def output(stack: str, name: str) -> str:
        return render(templates[stack]["Outputs"][name]["Value"], templates[stack])

    assert (
        output(CHAT_VLLM, "OpenAIBaseUrl")
        == "https://runtime.sagemaker.us-east-1.amazonaws.com/endpoints/prod-chat-vllm/openai/v1"
    )
    assert output(ASSIST_IC, "OpenAIComponentBaseUrl") == (
        "https://runtime.sagemaker.us-east-1.amazonaws.com/endpoints/"
        "prod-assist-ic/inference-components/prod-assist-ic-ic/openai/v1"
    )
    assert "OpenAIComponentBaseUrl" not in templates[CHAT_VLLM]["Outputs"]
    assert not any("OpenAI" in name for name in templates["llm-endpoints-prod-summarize-async"]["Outputs"])


def test_the_functions_get_the_endpoints_chat_settings(templates) -> None:
    """The invoke and stream functions know the endpoint's chat (chat_contract.CHAT_ENV); the smoke function checks
    chat through the clients' route and may make a bearer token for it."""
    template = templates[CHAT_VLLM]
    # the front doors and the smoke test (not the deploy-time custom resources: artifact check, kept copy count)
    functions = {
        lid: r["Properties"]["Environment"]["Variables"]
        for lid, r in template["Resources"].items()
        if r["Type"] == "AWS::Lambda::Function" and lid.startswith(("Invoke", "Stream", "SmokeTest"))
    }
    chat = {"CHAT_ROUTE": "native", "CHAT_TOOL_CALLS": "false", "CHAT_CONSTRAINED_DECODING": "true"}
    # and how LMI takes a prompt (systems/lmi_vllm ContainerBodies, endpoint_runtime/bodies.py; no reasoning field)
    chat.update(PROMPT_BODY="generation", REASONING_FIELD=None)
    for lid, env in functions.items():
        assert {k: env.get(k) for k in chat} == chat, lid
    [smoke] = [env for lid, env in functions.items() if lid.startswith("SmokeTest")]
    assert (smoke["SMOKE_CHAT_ROUTE"], smoke["SMOKE_CHAT_TOOLS"]) == ("openai", "false")
    assert "SMOKE_CHAT_EXTRA" not in smoke  # no thinking-off fields are known for LMI
    smoke_policy = statements_of(template, lambda r: "SmokeTest" in str(r["Properties"].get("Roles")))
    assert allowed(smoke_policy, "sagemaker:CallWithBearerToken", "*", template)
    async_functions = templates["llm-endpoints-prod-summarize-async"]["Resources"].values()
    assert not any(
        "CHAT_ROUTE" in r["Properties"].get("Environment", {}).get("Variables", {})
        for r in async_functions
        if r["Type"] == "AWS::Lambda::Function"
    )


def test_a_caller_of_another_account_is_refused_at_synth() -> None:
    """CDK would add no policy to a role of another account (and an endpoint takes no resource policy)."""
    import aws_cdk as cdk

    from stacks.openai_route import caller_principal

    stack = cdk.Stack(cdk.App(), "S", env=cdk.Environment(account=ACCOUNT, region=REGION))
    with pytest.raises(ValueError, match="is in account 444455556666, not the endpoint's 111122223333"):
        caller_principal(stack, 0, "arn:aws:iam::444455556666:role/app")
    with pytest.raises(ValueError, match="partition aws-cn"):
        caller_principal(stack, 1, f"arn:aws-cn:iam::{ACCOUNT}:role/app")
    assert caller_principal(stack, 2, f"arn:aws:iam::{ACCOUNT}:user/path/dev") is not None
