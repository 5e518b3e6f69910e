"""Post-deploy smoke test of one endpoint from a workstation: `python -m model_build smoke`.

The checks live in endpoint_runtime/smoke.py (stdlib + boto3 only, so the same code runs as the Lambda function
in lambda/smoke); this module imports it and feeds it the endpoint's settings from the config: the stack name,
the SageMaker endpoint name, and `smoke_test: {prompt, max_new_tokens, latency_budget_ms}`.
"""

from __future__ import annotations

from pathlib import Path
from types import ModuleType
from typing import Any

import endpoint_runtime.smoke as _smoke
from endpoint_runtime.smoke import Check, SmokeResult, format_checks

SMOKE_HANDLER = Path(_smoke.__file__)  # the checks' source file (the Lambda entry point is lambda/smoke/handler.py)


def load_smoke_module() -> ModuleType:
    """endpoint_runtime.smoke, the module the smoke Lambda runs."""
    return _smoke


__all__ = ["Check", "SmokeResult", "format_checks", "load_smoke_module", "run_smoke"]


def run_smoke(deployment: Any, endpoint_name: str, session: Any = None, runtime_client: Any = None) -> SmokeResult:
    """Smoke-test the endpoint named `endpoint_name` in the config (`endpoint_config.Deployment`); an asynchronous
    endpoint (invocation.mode async) is sent its prompt with InvokeEndpointAsync and its answer read from S3.

    Raises `endpoint_config.ConfigError` for an endpoint the config does not define; every AWS-side problem
    is a failed check in the result."""
    from endpoint_config import artifact_bucket_name
    from endpoint_config.hosting import component_name
    from endpoint_config.invocation import async_location_uris
    from model_build.aws import AccountError, checked_account, session_for

    spec = deployment.endpoint(endpoint_name)
    env = deployment.environment
    stack = deployment.stack_name(spec.name)
    session = session or session_for(env)
    if not (env.region or session.region_name):
        result = SmokeResult(stack=stack)
        result.add(
            "region",
            False,
            f"no AWS region: set `region:` on environment {deployment.environment_name!r} in the config, or AWS_DEFAULT_REGION",
        )
        return result
    # Checked first when the environment names an account: with the wrong account's credentials every later check
    # says "does not exist". An asynchronous endpoint needs the account anyway: it is in the artifact bucket's name.
    account = None
    if env.account or spec.invocation.is_async:
        try:
            account = checked_account(deployment, session, env.region)
        except AccountError as err:
            result = SmokeResult(stack=stack)
            result.add("credentials", False, str(err))
            return result
    async_locations = None
    if spec.invocation.is_async:
        # The folders the stack gave the endpoint (and its smoke function): in the environment's artifact bucket
        # unless the config names its own output and failure paths.
        bucket = artifact_bucket_name(deployment.project, deployment.environment_name, account, env.region or session.region_name)
        async_locations = async_location_uris(spec.invocation, endpoint_name=deployment.endpoint_name(spec), artifact_bucket=bucket)
    return _smoke.smoke_test(
        stack,
        expected_endpoint=deployment.endpoint_name(spec),
        prompt=spec.smoke_test.prompt,
        max_new_tokens=spec.smoke_test.max_new_tokens,
        latency_budget_ms=spec.smoke_test.budget_ms(spec.invocation.mode),
        async_locations=async_locations,
        emulator=env.emulator,
        # hosting.mode inference-components: the invocation names the endpoint's component (as the Lambda's does).
        inference_component=(
            component_name(deployment.endpoint_name(spec)) if spec.hosting.uses_components else None
        ),
        session=session,
        runtime_client=runtime_client,
    )
