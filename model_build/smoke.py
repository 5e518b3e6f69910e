"""Post-deploy smoke test of one endpoint from a workstation or CodeBuild: `python -m model_build smoke`. The checks
are endpoint_runtime/smoke.py's (the same code runs as the smoke Lambda); this feeds them the endpoint's plan."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from endpoint_runtime.smoke import ChatSmoke, Check, SmokeResult, format_checks, smoke_test

if TYPE_CHECKING:
    from deployment import EndpointPlan, EnvironmentPlan


def run_smoke(
    environment_plan: EnvironmentPlan, plan: EndpointPlan, session: Any = None, runtime_client: Any = None
) -> SmokeResult:
    """Smoke-test one endpoint (`deployment.EndpointPlan`) of a resolved config; an asynchronous endpoint is sent its
    prompt with InvokeEndpointAsync and its answer read from S3. Every AWS-side problem is a failed check."""
    from deployment.aws import AccountError, checked_account, session_for

    env = environment_plan.environment
    session = session or session_for(env)
    region = env.region or session.region_name
    if not region:
        result = SmokeResult(stack=plan.stack_name)
        result.add(
            "region",
            False,
            f"no AWS region: set `region:` on environment {environment_plan.environment_name!r} in the config, or AWS_DEFAULT_REGION",
        )
        return result
    # Checked first when the environment names an account: with the wrong account's credentials every later check
    # says "does not exist". An asynchronous endpoint needs the account anyway: it is in the artifact bucket's name.
    account = None
    if env.account or plan.is_async:
        try:
            account = checked_account(environment_plan, session, env.region)
        except AccountError as err:
            result = SmokeResult(stack=plan.stack_name)
            result.add("credentials", False, str(err))
            return result
    smoke = plan.smoke
    return smoke_test(
        plan.stack_name,
        expected_endpoint=plan.endpoint_name,
        prompt=smoke.prompt,
        max_new_tokens=smoke.max_new_tokens,
        latency_budget_ms=smoke.latency_budget_ms,
        wake_budget_ms=smoke.wake_budget_ms,
        async_locations=plan.async_locations(plan.artifact_bucket(account, region))
        if plan.is_async and account is not None  # an asynchronous endpoint's account was checked above
        else None,
        emulator=plan.emulator,
        inference_component=plan.component_name,
        # chat: a chat exchange (and a tool call) through the route the endpoint's clients use
        chat=ChatSmoke(
            smoke.chat_route,
            smoke.chat_tools,
            plan.chat_features,
            reasoning_field=smoke.body.reasoning_field,
            extra=smoke.chat_extra or {},
        )
        if smoke.chat_route
        else None,
        adapters={a.name: a.component_name for a in plan.adapters} or None,
        # how the container takes the prompt and answers (the system's ContainerBodies)
        body=smoke.body,
        session=session,
        runtime_client=runtime_client,
    )


__all__ = ["Check", "SmokeResult", "format_checks", "run_smoke"]
