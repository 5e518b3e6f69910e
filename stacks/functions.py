"""The Lambda functions beside each endpoint: the invoke function (lambda/invoke) and the post-deploy smoke test
(lambda/smoke). Each gets its own log group and a role that may write only those logs; the endpoint grants the rest
(LlmEndpoint.grant_client, grant_smoke_test)."""

from __future__ import annotations

import json
from typing import Any

from aws_cdk import Aws, Duration
from aws_cdk import aws_iam as iam
from aws_cdk import aws_lambda as lambda_
from constructs import Construct

from .lambda_asset import LAMBDA_ROOT, function_code
from .log_groups import owned_log_group

# The smoke function's Lambda timeout: its other checks take a few seconds; a real-time invocation is bounded by the
# invoke client's 5 s connect + 55 s read timeouts, an asynchronous one by the budget it polls for. Lambda allows at
# most 900 s ("up to a maximum value of 900 seconds", https://docs.aws.amazon.com/lambda/latest/dg/configuration-timeout.html),
# which the async budget's 840 s maximum leaves room under.
SMOKE_TIMEOUT_MARGIN_S, SMOKE_REAL_TIME_TIMEOUT_S, LAMBDA_MAX_TIMEOUT_S = 60, 90, 900
# The invoke function's: above the client's 5 s connect + 55 s read timeouts, and the read timeout stays below
# SageMaker's 60 s InvokeEndpoint limit, so the function answers 504 itself instead of being killed.
INVOKE_TIMEOUT_S, INVOKE_READ_TIMEOUT_S = 65, 55


def smoke_timeout_s(budget_ms: int) -> int:
    """The smoke function's timeout for a latency budget: never below the real-time 90 s, never above 900 s."""
    return min(LAMBDA_MAX_TIMEOUT_S, max(SMOKE_REAL_TIME_TIMEOUT_S, -(-budget_ms // 1000) + SMOKE_TIMEOUT_MARGIN_S))


class PythonFunction(Construct):
    """A Python Lambda function (arm64, the newest Python runtime) with its own log group (retention, deleted with the
    stack) and a role that may write only those logs."""

    def __init__(
        self,
        scope: Construct,
        construct_id: str,
        *,
        code: lambda_.Code,
        handler: str,
        environment: dict[str, str],
        timeout: Duration,
        description: str,
        log_retention_days: int,
        reserved_concurrency: int | None = None,
    ) -> None:
        super().__init__(scope, construct_id)
        log_group = owned_log_group(self, "Logs", retention_days=log_retention_days)
        role = iam.Role(self, "Role", assumed_by=iam.ServicePrincipal("lambda.amazonaws.com"), description=description)
        role.add_to_policy(
            iam.PolicyStatement(
                actions=["logs:CreateLogStream", "logs:PutLogEvents"], resources=[log_group.log_group_arn]
            )
        )
        self.function = lambda_.Function(
            self,
            "Function",
            runtime=lambda_.Runtime.PYTHON_3_14,
            architecture=lambda_.Architecture.ARM_64,
            handler=handler,
            code=code,
            role=role,
            log_group=log_group,
            timeout=timeout,
            memory_size=256,
            reserved_concurrent_executions=reserved_concurrency,
            environment=environment,
            description=description,
        )
        self.function.node.add_dependency(role)


class InvokeFunction(PythonFunction):
    """lambda/invoke: validates a request and invokes one endpoint, named by its environment only (ENDPOINT_NAME).

    Keyword-only props: endpoint_name; asynchronous (the endpoint takes InvokeEndpointAsync only: the function
    submits and fetches instead, endpoint_runtime/async_invoke.py); environment (what the code reads beyond
    ENDPOINT_NAME and READ_TIMEOUT_S: the request limits, the inference component, the async folders);
    log_retention_days; reserved_concurrency (default None: the account's unreserved pool)."""

    def __init__(
        self,
        scope: Construct,
        construct_id: str,
        *,
        endpoint_name: str,
        environment: dict[str, str],
        log_retention_days: int,
        asynchronous: bool = False,
        reserved_concurrency: int | None = None,
    ) -> None:
        super().__init__(
            scope,
            construct_id,
            code=function_code(LAMBDA_ROOT / "invoke" / "handler.py"),
            handler="invoke/handler.async_handler" if asynchronous else "invoke/handler.handler",
            environment={"ENDPOINT_NAME": endpoint_name, "READ_TIMEOUT_S": str(INVOKE_READ_TIMEOUT_S), **environment},
            timeout=Duration.seconds(INVOKE_TIMEOUT_S),
            description=f"Validates a generation request and invokes SageMaker endpoint {endpoint_name}",
            log_retention_days=log_retention_days,
            reserved_concurrency=reserved_concurrency,
        )


def smoke_chat_environment(
    route: str | None, tools: bool, features: Any, extra: dict[str, Any] | None = None
) -> dict[str, str]:
    """The smoke function's chat settings (read back at run time by endpoint_runtime/smoke.py chat_settings_from_env);
    empty without chat. The reasoning field comes with the endpoint's client environment (endpoint_runtime/bodies.py
    REASONING_FIELD)."""
    if route is None:
        return {}
    return {
        "SMOKE_CHAT_ROUTE": route,
        "SMOKE_CHAT_TOOLS": str(tools).lower(),
        **features.environment(),
        **({"SMOKE_CHAT_EXTRA": json.dumps(extra, separators=(",", ":"))} if extra else {}),
    }


def smoke_environment(
    *,
    endpoint_name: str,
    prompt: str,
    max_new_tokens: int,
    latency_budget_ms: int,
    environment: dict[str, str],
    emulator: bool,
    wake_budget_ms: int | None = None,
) -> dict[str, str]:
    """The smoke test's settings as its functions read them (endpoint_runtime/smoke.py settings_from_env): the smoke
    function's and the stack's smoke check's (stacks/smoke_check.py)."""
    return {
        "STACK_NAME": Aws.STACK_NAME,
        "ENDPOINT_NAME": endpoint_name,
        **environment,
        "PROMPT": prompt,
        # The smoke prompt's own length, apart from MAX_NEW_TOKENS (the endpoint's request limit where `environment`
        # carries it, else the contract's default cap), which bounds the chat and tool-call checks' max_tokens.
        "SMOKE_MAX_NEW_TOKENS": str(max_new_tokens),
        "LATENCY_BUDGET_MS": str(latency_budget_ms),
        **({"WAKE_BUDGET_MS": str(wake_budget_ms)} if wake_budget_ms is not None else {}),
        "EMULATOR": "true" if emulator else "false",
    }


class SmokeTestFunction(PythonFunction):
    """lambda/smoke: after a deploy, checks the stack's endpoint serves (state, the deployed endpoint config, one
    prompt's answer and latency). The same code runs as `model_build smoke`.

    Keyword-only props: endpoint_name; prompt, max_new_tokens, latency_budget_ms (the endpoint's smoke settings; the
    budget also sets the function's timeout); wake_budget_ms (an asynchronous endpoint that scales to zero: the wait
    when it runs 0 instances, which also sets the timeout, within Lambda's 900 s: the function stops waiting before its
    end and leaves the answer unchecked); environment (the inference component, the async folders); emulator;
    log_retention_days."""

    def __init__(
        self,
        scope: Construct,
        construct_id: str,
        *,
        endpoint_name: str,
        prompt: str,
        max_new_tokens: int,
        latency_budget_ms: int,
        environment: dict[str, str],
        emulator: bool,
        log_retention_days: int,
        wake_budget_ms: int | None = None,
    ) -> None:
        super().__init__(
            scope,
            construct_id,
            code=function_code(LAMBDA_ROOT / "smoke" / "handler.py"),
            handler="smoke/handler.handler",
            environment=smoke_environment(
                endpoint_name=endpoint_name,
                prompt=prompt,
                max_new_tokens=max_new_tokens,
                latency_budget_ms=latency_budget_ms,
                environment=environment,
                emulator=emulator,
                wake_budget_ms=wake_budget_ms,
            ),
            timeout=Duration.seconds(smoke_timeout_s(max(latency_budget_ms, wake_budget_ms or 0))),
            description=f"Smoke test of SageMaker endpoint {endpoint_name} and its stack",
            log_retention_days=log_retention_days,
        )


__all__ = [
    "InvokeFunction",
    "PythonFunction",
    "SmokeTestFunction",
    "smoke_chat_environment",
    "smoke_environment",
    "smoke_timeout_s",
]
