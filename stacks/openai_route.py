"""SageMaker's OpenAI route as a front door of one endpoint: the callers the config names (chat.openai_route) get
sagemaker:InvokeEndpoint on the endpoint (and its component) plus sagemaker:CallWithBearerToken on "*" (the action
has no resource type), and the stack outputs the base URL clients give the OpenAI SDK.
The route's URLs and the source of each grant: docs/design/front-doors.md.
"""

from __future__ import annotations

import re

from aws_cdk import Aws, CfnOutput, Stack, Token
from aws_cdk import aws_iam as iam
from constructs import Construct

from deployment.config_blocks import OpenAIRouteSpec

from .llm_endpoint import LlmEndpoint

BEARER_ACTION = "sagemaker:CallWithBearerToken"
_ARN = re.compile(r"^arn:(?P<partition>aws[a-z-]*):iam::(?P<account>[0-9]{12}):(?P<kind>role|user)/(?P<path>.+)$")


def base_url(endpoint_name: str, component_name: str | None = None) -> str:
    """The OpenAI SDK's base_url for the endpoint (or its component) in the stack's region, as a CloudFormation
    value (Aws.REGION and Aws.URL_SUFFIX resolve at deploy time)."""
    middle = f"/inference-components/{component_name}" if component_name else ""
    return f"https://runtime.sagemaker.{Aws.REGION}.{Aws.URL_SUFFIX}/endpoints/{endpoint_name}{middle}/openai/v1"


class OpenAIRouteAccess(Construct):
    """Grants for SageMaker's OpenAI route and its base URLs as stack outputs.

    Keyword-only props:
      endpoint: the endpoint whose route the callers use.
      route: the endpoint's chat.openai_route block (callers: role or user ARNs in the stack's account; create_role);
        None: the base URLs only (an endpoint that serves chat to callers granted elsewhere).
      role_name: the name of the role created with create_role (a fixed name, so applications can be told it).
    """

    def __init__(
        self,
        scope: Construct,
        construct_id: str,
        *,
        endpoint: LlmEndpoint,
        route: OpenAIRouteSpec | None,
        role_name: str,
    ) -> None:
        super().__init__(scope, construct_id)
        self.endpoint = endpoint
        self.grantees: list[iam.IGrantable] = []
        for i, arn in enumerate(route.callers if route else ()):
            self.grantees.append(caller_principal(self, i, arn))
        self.role: iam.Role | None = None
        if route is not None and route.create_role:
            self.role = iam.Role(
                self,
                "ApplicationRole",
                role_name=role_name,
                assumed_by=assumers_principal(self, route.assumed_by),
                description=f"Calls SageMaker endpoint {endpoint.endpoint_name} through its OpenAI route",
            )
            self.grantees.append(self.role)
            CfnOutput(
                self,
                "RoleArn",
                value=self.role.role_arn,
                description="Assume this role to call the endpoint's OpenAI route",
            ).override_logical_id("OpenAIRoleArn")
        for grantee in self.grantees:
            self.grant_route(grantee)
        # Outputs under fixed logical ids (OpenAIBaseUrl, OpenAIComponentBaseUrl, OpenAIRoleArn): what clients read.
        CfnOutput(
            self,
            "BaseUrl",
            value=base_url(endpoint.endpoint_name),
            description="OpenAI SDK base_url (api_key: a token from sagemaker.core.token_generator.generate_token)",
        ).override_logical_id("OpenAIBaseUrl")
        if endpoint.component is not None:
            CfnOutput(
                self,
                "ComponentBaseUrl",
                value=base_url(endpoint.endpoint_name, endpoint.component.component_name),
                description="OpenAI SDK base_url of the endpoint's inference component",
            ).override_logical_id("OpenAIComponentBaseUrl")

    def grant_route(self, grantee: iam.IGrantable) -> iam.Grant:
        """sagemaker:InvokeEndpoint on the endpoint (and component) and sagemaker:CallWithBearerToken."""
        return self.endpoint.grant_invoke(grantee).combine(self.endpoint.grant_bearer_token(grantee))


def _partition(stack: Stack) -> str | None:
    """The stack's partition when its region is known (CDK leaves Aws.PARTITION a token even then)."""
    if not Token.is_unresolved(stack.partition):
        return stack.partition
    if Token.is_unresolved(stack.region):
        return None
    return "aws-cn" if stack.region.startswith("cn-") else "aws-us-gov" if stack.region.startswith("us-gov-") else "aws"


def assumers_principal(scope: Construct, arns: list[str]) -> iam.IPrincipal:
    """The created role's trust: the account, only for the principals chat.openai_route.assumed_by names (by
    aws:PrincipalArn, which survives a role's re-creation, like stacks/trusted_pipeline.py), never the whole account
    (operations review F9). Each must be of the stack's account: a trust of another account's principal is refused."""
    stack = Stack.of(scope)
    for i, arn in enumerate(arns):
        match = _ARN.match(arn)
        if match is None:
            raise ValueError(f"chat.openai_route.assumed_by[{i}]: value {arn!r} is not an IAM role or user ARN")
        if not Token.is_unresolved(stack.account) and match["account"] != stack.account:
            raise ValueError(
                f"chat.openai_route.assumed_by[{i}]: value {arn!r} is in account {match['account']}, not the "
                f"endpoint's {stack.account}; allowed: roles and users of the endpoint's account"
            )
    return iam.AccountPrincipal(stack.account).with_conditions({"ArnEquals": {"aws:PrincipalArn": list(arns)}})


def caller_principal(scope: Construct, index: int, arn: str) -> iam.IGrantable:
    """An existing role or user of the scope's account (chat.openai_route.callers[index]) to attach a policy to. CDK
    silently adds no policy for a principal of another account (it cannot attach one there, and SageMaker endpoints
    take no resource policy), so such an ARN is refused, as is one in another partition."""
    stack = Stack.of(scope)
    match = _ARN.match(arn)
    if match is None:
        raise ValueError(f"chat.openai_route.callers[{index}]: value {arn!r} is not an IAM role or user ARN")
    if not Token.is_unresolved(stack.account) and match["account"] != stack.account:
        raise ValueError(
            f"chat.openai_route.callers[{index}]: value {arn!r} is in account {match['account']}, not "
            f"the endpoint's {stack.account}: a policy can only be attached in the same account; "
            "allowed: roles and users of the endpoint's account, or create_role: true"
        )
    partition = _partition(stack)
    if partition is not None and match["partition"] != partition:
        raise ValueError(
            f"chat.openai_route.callers[{index}]: value {arn!r} is in partition {match['partition']}, "
            f"not the endpoint's {partition}"
        )
    if match["kind"] == "role":
        return iam.Role.from_role_arn(scope, f"Caller{index}", arn, mutable=True)
    return iam.User.from_user_arn(scope, f"Caller{index}", arn)


__all__ = ["BEARER_ACTION", "OpenAIRouteAccess", "assumers_principal", "base_url", "caller_principal"]
