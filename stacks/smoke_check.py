"""The smoke test inside the endpoint stack: a custom resource (endpoint_runtime/smoke_check.py) that checks the
endpoint after SageMaker reports it in service, and fails the stack, so CloudFormation rolls it back, when the
endpoint does not answer as it should. Every tool that deploys the stack gets it: `cdk deploy`, `make deploy`, the
pipeline. docs/design/guards.md says why it lives here and what the emulator shows of it."""

from __future__ import annotations

import hashlib
import json

from aws_cdk import CfnCustomResource, Duration, Token
from constructs import Construct, IConstruct

from .functions import PythonFunction, smoke_timeout_s
from .lambda_asset import LAMBDA_ROOT, function_code
from .llm_endpoint import LlmEndpoint

# CloudFormation waits this much longer than the function may run for its answer (the ServiceTimeout property,
# 1-3600 s: the AWS::CloudFormation::CustomResource reference), so an answer lost never holds the stack an hour.
ANSWER_MARGIN_S = 60


def settings_hash(environment: dict[str, str]) -> str:
    """A short hash of the smoke settings (the function's environment): a changed prompt or budget re-runs it. A
    value known only at deploy time (a token: the stack's name) is left out, its placeholder differs per synth."""
    settled = {k: v for k, v in environment.items() if not Token.is_unresolved(v)}
    return hashlib.sha256(json.dumps(settled, sort_keys=True).encode()).hexdigest()[:16]


class EndpointSmokeCheck(Construct):
    """Keyword-only props: endpoint (the LlmEndpoint it checks); environment (the smoke function's: endpoint_runtime/
    smoke.py settings_from_env); budget_ms (the longest wait: the latency or wake budget, which sets the timeout);
    identities (name -> value: the artifact's and adapters' content hashes, what else re-runs the check when it
    changes); log_retention_days.

    `resource` is the custom resource; it depends on the endpoint, its component and adapter components."""

    def __init__(
        self,
        scope: Construct,
        construct_id: str,
        *,
        endpoint: LlmEndpoint,
        environment: dict[str, str],
        budget_ms: int,
        identities: dict[str, object],
        log_retention_days: int,
    ) -> None:
        super().__init__(scope, construct_id)
        timeout_s = smoke_timeout_s(budget_ms)
        self.handler = PythonFunction(
            self,
            "Function",
            code=function_code(LAMBDA_ROOT / "smoke_check" / "handler.py"),
            handler="smoke_check/handler.handler",
            environment=environment,
            timeout=Duration.seconds(timeout_s),
            description=f"Fails the deploy unless SageMaker endpoint {endpoint.endpoint_name} answers its smoke test",
            log_retention_days=log_retention_days,
        )
        function = self.handler.function
        endpoint.grant_smoke_check(function)
        models = [endpoint.model.attr_model_name, *(m.attr_model_name for m in endpoint.pool_models.values())]
        self.resource = CfnCustomResource(
            self, "Resource", service_token=function.function_arn, service_timeout=timeout_s + ANSWER_MARGIN_S
        )
        self.resource.add_property_override("EndpointName", endpoint.endpoint.attr_endpoint_name)
        self.resource.add_property_override("EndpointConfigName", endpoint.endpoint_config.attr_endpoint_config_name)
        self.resource.add_property_override("ModelNames", models)
        self.resource.add_property_override("Settings", settings_hash(environment))
        for name, value in sorted(identities.items()):
            self.resource.add_property_override(name, value)
        waits_for: list[IConstruct] = [endpoint.endpoint, function.role]  # type: ignore[list-item]
        if endpoint.component is not None:
            self.resource.add_property_override("ComponentName", endpoint.plan.component_name)
            waits_for.append(endpoint.component.component)
        if endpoint.adapters is not None:
            waits_for.extend(endpoint.adapters.components.values())
        # The answer needs the grants in place, and comes after SageMaker reports every part in service.
        for construct in waits_for:
            self.resource.node.add_dependency(construct)


__all__ = ["ANSWER_MARGIN_S", "EndpointSmokeCheck", "settings_hash"]
