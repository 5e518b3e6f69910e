"""An endpoint's LoRA adapters as SageMaker adapter inference components on its base inference component
(`adapters:`, endpoint_config/adapters.py; the plan's deployment/adapters.py). Each adapter DependsOn the base.

The resource's shape, the ordering, the sources and what is unverified: docs/design/inference-components.md.
"""

from __future__ import annotations

import json

from aws_cdk import CfnOutput, Stack
from aws_cdk import aws_iam as iam
from aws_cdk import aws_sagemaker as sagemaker
from constructs import Construct

from deployment.adapters import AdapterPlan

from .inference_components import InferenceComponent

# What the invoke, stream and smoke functions read: adapter name -> its inference component (endpoint_runtime).
ADAPTER_COMPONENTS_ENV = "ADAPTER_COMPONENTS"


class AdapterComponents(Construct):
    """The adapter inference components of one endpoint.

    Keyword-only props:
      endpoint: the CfnEndpoint the components are placed on (its EndpointName attribute).
      base: the endpoint's base InferenceComponent (stacks/inference_components.py).
      adapters: the endpoint's planned adapters (EndpointPlan.adapters), at least one.
      artifact_bucket: the environment's artifact bucket (a name holding CDK tokens).
    """

    def __init__(
        self,
        scope: Construct,
        construct_id: str,
        *,
        endpoint: sagemaker.CfnEndpoint,
        base: InferenceComponent,
        adapters: tuple[AdapterPlan, ...],
        artifact_bucket: str,
    ) -> None:
        super().__init__(scope, construct_id)
        if not adapters:
            raise ValueError("AdapterComponents needs at least one adapter")
        stack = Stack.of(self)
        self.adapters = adapters
        self.components: dict[str, sagemaker.CfnInferenceComponent] = {}
        for adapter in adapters:
            component = sagemaker.CfnInferenceComponent(
                self,
                adapter.name,
                inference_component_name=adapter.component_name,
                endpoint_name=endpoint.attr_endpoint_name,
                specification=sagemaker.CfnInferenceComponent.InferenceComponentSpecificationProperty(
                    base_inference_component_name=base.component_name,
                    container=sagemaker.CfnInferenceComponent.InferenceComponentContainerSpecificationProperty(
                        artifact_url=adapter.artifact_url(artifact_bucket)
                    ),
                ),
            )
            component.node.add_dependency(base.component)  # created after the base, deleted before it
            self.components[adapter.name] = component
        # SageMaker ARNs carry names in lower case; ours are lower case already (the config's name patterns).
        self.component_arns = [
            stack.format_arn(
                service="sagemaker", resource="inference-component", resource_name=a.component_name.lower()
            )
            for a in adapters
        ]
        CfnOutput(
            self,
            "ComponentNames",
            value=json.dumps(self.names, sort_keys=True),
            description="Adapter name -> its inference component (InvokeEndpoint's InferenceComponentName)",
        )

    @property
    def names(self) -> dict[str, str]:
        """Adapter name -> inference component name."""
        return {a.name: a.component_name for a in self.adapters}

    @property
    def environment(self) -> dict[str, str]:
        """What a function that lets callers pick an adapter needs (endpoint_runtime/invoke.py adapter_component)."""
        return {ADAPTER_COMPONENTS_ENV: json.dumps(self.names, sort_keys=True, separators=(",", ":"))}

    def grant_invoke(self, grantee: iam.IGrantable) -> iam.Grant:
        """sagemaker:InvokeEndpoint on every adapter component (a call naming a component is authorized on the
        endpoint and the component: InferenceComponent.grant_invoke says why; LlmEndpoint.grant_invoke adds the
        endpoint)."""
        return iam.Grant.add_to_principal(
            grantee=grantee, actions=["sagemaker:InvokeEndpoint"], resource_arns=self.component_arns
        )

    def grant_describe(self, grantee: iam.IGrantable) -> iam.Grant:
        """sagemaker:DescribeInferenceComponent on every adapter component (the smoke test's adapter checks)."""
        return iam.Grant.add_to_principal(
            grantee=grantee, actions=["sagemaker:DescribeInferenceComponent"], resource_arns=self.component_arns
        )


__all__ = ["ADAPTER_COMPONENTS_ENV", "AdapterComponents"]
