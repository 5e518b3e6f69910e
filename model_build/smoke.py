"""Post-deploy smoke test of one endpoint from a workstation: `python -m model_build smoke`.

The checks live in lambda/smoke/handler.py (stdlib + boto3 only, so the same code runs as a Lambda function);
this module loads that file by path and feeds it the endpoint's settings from the config: the stack name,
the SageMaker endpoint name, and `smoke_test: {prompt, max_new_tokens, latency_budget_ms}`.
"""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from types import ModuleType
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
SMOKE_HANDLER = ROOT / "lambda" / "smoke" / "handler.py"
_MODULE_NAME = "llm_smoke_handler"


def load_smoke_module() -> ModuleType:
    """lambda/smoke/handler.py as a module (the folder is named `lambda`, which cannot be imported by name)."""
    module = sys.modules.get(_MODULE_NAME)
    if module is None:
        spec = importlib.util.spec_from_file_location(_MODULE_NAME, SMOKE_HANDLER)
        module = importlib.util.module_from_spec(spec)
        sys.modules[_MODULE_NAME] = module  # dataclasses look their module up in sys.modules
        spec.loader.exec_module(module)
    return module


_smoke = load_smoke_module()
Check = _smoke.Check
SmokeResult = _smoke.SmokeResult
format_checks = _smoke.format_checks


def run_smoke(deployment: Any, endpoint_name: str, session: Any = None, runtime_client: Any = None) -> SmokeResult:
    """Smoke-test the endpoint named `endpoint_name` in the config (`endpoint_config.Deployment`).

    Raises `endpoint_config.ConfigError` for an endpoint the config does not define; every AWS-side problem
    is a failed check in the result."""
    import boto3
    from botocore.exceptions import BotoCoreError, ClientError, NoCredentialsError

    spec = deployment.endpoint(endpoint_name)
    env = deployment.environment
    stack = deployment.stack_name(spec.name)
    session = session or boto3.session.Session(region_name=env.region)
    if not (env.region or session.region_name):
        result = SmokeResult(stack=stack)
        result.add(
            "region",
            False,
            f"no AWS region: set `region:` on environment {deployment.environment_name!r} in the config, or AWS_DEFAULT_REGION",
        )
        return result
    if env.account:
        # Checked first: with the wrong account's credentials every later check says "does not exist".
        try:
            account = session.client("sts", region_name=env.region).get_caller_identity()["Account"]
        except NoCredentialsError:
            account, problem = None, "no AWS credentials: configure a profile (AWS_PROFILE) or AWS_* variables"
        except (ClientError, BotoCoreError) as err:
            account, problem = None, f"cannot resolve the AWS account (sts get-caller-identity): {err}"
        else:
            problem = (
                None
                if account == env.account
                else (
                    f"environment {deployment.environment_name!r} is account {env.account}, but the credentials are "
                    f"account {account}; use credentials of {env.account}"
                )
            )
        if problem:
            result = SmokeResult(stack=stack)
            result.add("credentials", False, problem)
            return result
    return _smoke.smoke_test(
        stack,
        expected_endpoint=deployment.endpoint_name(spec),
        prompt=spec.smoke_test.prompt,
        max_new_tokens=spec.smoke_test.max_new_tokens,
        latency_budget_ms=spec.smoke_test.latency_budget_ms,
        emulator=env.emulator,
        session=session,
        runtime_client=runtime_client,
    )
