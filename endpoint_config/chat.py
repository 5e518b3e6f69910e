"""The `chat:` block of an endpoint: serve OpenAI chat completions (chat_contract.py) and, optionally, let named
callers use SageMaker's own OpenAI route (https://runtime.sagemaker.<region>.amazonaws.com/endpoints/<endpoint>/
openai/v1, authenticated by a bearer token from sagemaker.core.token_generator.generate_token; SageMaker Developer
Guide, "Invoke endpoints with OpenAI-compatible APIs").

Which systems serve chat, and how, is each system's own fact (ServingSystem.chat, systems/chat.py checks it); the
engine's tool-call and reasoning parsers are engine options of the systems that have them (engine.tool_call_parser).
"""

from __future__ import annotations

from pydantic import Field, model_validator

from .base import Strict

# An IAM role or user (IAM User Guide, "IAM identifiers": arn:<partition>:iam::<account>:role/<path><name>; names and
# paths use letters, digits and +=,.@_- ; a path is / or /segments/).
CALLER_ARN = r"^arn:aws[a-z-]*:iam::[0-9]{12}:(?:role|user)/[A-Za-z0-9_+=,.@/-]{1,512}$"
# A Jinja chat template inline in the config; transformers' own templates are a few KB, the largest (tool-calling
# models) some tens of KB.
MAX_TEMPLATE_CHARS = 100_000


class OpenAIRouteSpec(Strict):
    """Who may call the endpoint through SageMaker's OpenAI route. Each gets exactly sagemaker:InvokeEndpoint on the
    endpoint (and its inference component) and sagemaker:CallWithBearerToken (stacks/openai_route.py).

    callers: IAM roles or users of the environment's account (the stack attaches a policy to each).
    create_role: the stack also creates a role for the application; its ARN is a stack output.
    assumed_by: with create_role, the IAM roles or users of the environment's account that may assume that role (its
      trust names exactly these, by aws:PrincipalArn); required with create_role, so the role never trusts the whole
      account (operations review F9)."""

    callers: list[str] = Field(default_factory=list, max_length=20)
    create_role: bool = False
    assumed_by: list[str] = Field(default_factory=list, max_length=20)

    @model_validator(mode="after")
    def _someone(self) -> OpenAIRouteSpec:
        import re

        for i, arn in enumerate(self.callers):
            if not re.match(CALLER_ARN, arn):
                raise ValueError(
                    f"callers[{i}]: value {arn!r} is not an IAM role or user ARN "
                    "(arn:aws:iam::<account>:role/<name> or arn:aws:iam::<account>:user/<name>)"
                )
        if len(set(self.callers)) != len(self.callers):
            raise ValueError(
                f"callers: {sorted(a for a in self.callers if self.callers.count(a) > 1)[0]!r} is listed twice"
            )
        for i, arn in enumerate(self.assumed_by):
            if not re.match(CALLER_ARN, arn):
                raise ValueError(
                    f"assumed_by[{i}]: value {arn!r} is not an IAM role or user ARN "
                    "(arn:aws:iam::<account>:role/<name> or arn:aws:iam::<account>:user/<name>)"
                )
        if self.create_role and not self.assumed_by:
            raise ValueError(
                "create_role: true needs assumed_by: the role or user ARNs of the account that may assume the "
                "created role (e.g. assumed_by: [arn:aws:iam::<account>:role/<your application's role>]); the "
                "role no longer trusts the whole account"
            )
        if self.assumed_by and not self.create_role:
            raise ValueError("assumed_by names who may assume the created role: it needs create_role: true")
        if not self.callers and not self.create_role:
            raise ValueError(
                "names nobody: give callers (role or user ARNs) or create_role: true, or remove openai_route"
            )
        return self


class ChatSpec(Strict):
    """Serve OpenAI chat completions on this endpoint.

    template: a Jinja chat template that replaces the model's own (or gives one to a model without): model_build
      writes it into the artifact's tokenizer_config.json and renders a sample conversation with it, so a template
      that cannot render fails the build. Without it the model's own template is used, and a model with none is
      refused (at load for a local directory, at build otherwise).
    openai_route: callers of SageMaker's OpenAI route (real-time endpoints only)."""

    template: str | None = Field(None, min_length=1, max_length=MAX_TEMPLATE_CHARS)
    openai_route: OpenAIRouteSpec | None = None


def chat_problems(ep) -> list[str]:  # ep: an EndpointSpec (schema imports this module, so no annotation)
    """The rules between `chat:` and the endpoint's other blocks, each naming the key, the value and what is allowed."""
    if not ep.chat:  # unset (on by default where it can be: deployment/plan.py chat_by_default) or false
        return []
    if ep.invocation.is_async:
        return [
            f"endpoint {ep.name!r}: chat: an asynchronous endpoint (invocation.mode async) is not served chat here: "
            "SageMaker's OpenAI route serves real-time endpoints and inference components, and the asynchronous "
            "invoke function takes generation requests only; remove chat or use invocation.mode real-time"
        ]
    return []


def region_partition(region: str) -> str:
    """The partition of a region (IAM User Guide, "IAM identifiers": aws, aws-cn, aws-us-gov)."""
    return "aws-cn" if region.startswith("cn-") else "aws-us-gov" if region.startswith("us-gov-") else "aws"


def openai_caller_problems(ep, environment: str | None, account: str | None, region: str | None) -> list[str]:
    """chat.openai_route.callers against the account and region the endpoint deploys to. The stack attaches an
    identity policy to each caller by name (iam.Role.from_role_arn), which lands in the deploying account whatever
    account the ARN names: a caller of another account would silently grant the same-named role of the deploying
    account. SageMaker offers no resource policy that admits another account's direct calls: an endpoint policy
    (PutEndpointPolicy, botocore 1.44.8 sagemaker 2017-07-24) admits other accounts "through an inference router"
    only (SageMaker Developer Guide, "Route requests to endpoints in other AWS accounts"). So a caller must be in the
    environment's account, which the environment must name for this to be checked. `environment`: its name, None for
    the implicit default environment of a file without `environments:`."""
    route = ep.chat.openai_route if ep.chat else None
    if route is None or not route.callers:
        return []
    problems = []
    for i, arn in enumerate(route.callers):
        where = f"endpoint {ep.name!r}: chat.openai_route.callers[{i}]: value {arn!r}"
        caller_account = arn.split(":")[4]
        if account is None:
            fix = (
                f"set environments.{environment}.account"
                if environment is not None
                else "add an environments: block naming the account (environments: {NAME: {account: ...}})"
            )
            problems.append(
                f"{where}: the environment names no account, so nothing checks that this role is in the account the "
                "stack deploys to, and its policy would be attached to the role of that name in whichever account "
                f"deploys; {fix} to the caller's account ({caller_account}), or use create_role: true"
            )
        elif caller_account != account:
            problems.append(
                f"{where}: is in account {caller_account}, not the endpoint's {account}: a policy can only be attached "
                "in the same account, and SageMaker admits another account's callers through an inference router "
                "only; allowed: roles and users of account " + account + ", or create_role: true"
            )
        if region is not None and arn.split(":")[1] != region_partition(region):
            problems.append(
                f"{where}: is in partition {arn.split(':')[1]}, not the endpoint's {region_partition(region)} "
                f"(region {region})"
            )
    return problems


__all__ = ["CALLER_ARN", "ChatSpec", "OpenAIRouteSpec", "chat_problems", "openai_caller_problems", "region_partition"]
