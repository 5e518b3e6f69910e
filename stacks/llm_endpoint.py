"""One SageMaker endpoint for an LLM, built from its plan: log group, execution role, model, endpoint config (model on
the variant, or inference components), endpoint with guarded updates, alarms and scaling. Each piece is its own
construct (stacks/sagemaker_resources.py, async_inference.py, inference_components.py, endpoint_alarms.py,
scaling.py); this one wires them and holds the grants every caller of the endpoint gets."""

from __future__ import annotations

from aws_cdk import Stack
from aws_cdk import aws_iam as iam
from constructs import Construct

import request_contract
from deployment import EndpointPlan
from endpoint_config.hosting import accelerators_per_copy

from .adapters import AdapterComponents
from .async_inference import AsyncInference
from .endpoint_alarms import EndpointAlarms, RollbackAlarms, deployment_config
from .endpoint_network import EndpointSecurity
from .inference_components import ComponentEndpointConfig, InferenceComponent
from .log_groups import owned_log_group
from .sagemaker_resources import ContainerImage, ExecutionRole, GuardedEndpoint, SageMakerModel, VariantEndpointConfig
from .scaling import VARIANT_INSTANCES, scalable_target, target_tracking

VARIANT_NAME = "AllTraffic"
# Concurrency, not invocations, tracks LLM load: one request holds a model copy for seconds.
SCALING_METRIC = "SageMakerVariantConcurrentRequestsPerModelHighResolution"


class LlmEndpoint(Construct):
    """A SageMaker endpoint serving one model, with everything it needs and nothing more.

    Keyword-only props:
      plan: the endpoint's plan (name, instance, timeouts, copies, component, the config blocks it renders).
      image: the container image and the repository the execution role may pull from.
      artifact_bucket: the environment's artifact bucket (a name holding CDK tokens); the model data, the container
        environment and the async folders are the plan's, in this bucket.
      security: the endpoint's data capture, VPC placement and KMS keys (stacks/endpoint_network.py; None: none).
    """

    def __init__(
        self,
        scope: Construct,
        construct_id: str,
        *,
        plan: EndpointPlan,
        image: ContainerImage,
        artifact_bucket: str,
        security: EndpointSecurity | None = None,
    ) -> None:
        super().__init__(scope, construct_id)
        spec = plan.spec
        self.plan = plan
        self.endpoint_name = plan.endpoint_name
        self.model_data = plan.model_data(artifact_bucket)
        self.environment = plan.container_environment(artifact_bucket)  # the functions copy the request limits from it

        # SageMaker writes to this group itself; owning it gives it a retention and lets destroy remove it.
        # It must exist before the endpoint, or SageMaker creates it first and the stack cannot.
        self.log_group = owned_log_group(
            self, "Logs", name=f"/aws/sagemaker/Endpoints/{plan.endpoint_name}", retention_days=spec.log_retention_days
        )
        self.role = ExecutionRole(
            self, "ExecutionRole", endpoint_name=plan.endpoint_name, model_data=self.model_data, image=image,
            log_group=self.log_group,
        )
        self.model = SageMakerModel(
            self, "Model", role=self.role, image=image, model_data=self.model_data, environment=self.environment,
            network_isolation=plan.network_isolation,
        )
        # invocation.mode async: AsyncInferenceConfig, its S3 folders and topics, the role's grants.
        self.async_inference = (
            AsyncInference(self, "AsyncInference", endpoint_name=plan.endpoint_name, invocation=spec.invocation,
                           artifact_bucket=artifact_bucket, execution_role=self.role)
            if plan.is_async else None
        )
        if plan.component_name is not None:  # hosting.mode inference-components: a variant without a model
            scaling = spec.hosting.instance_scaling
            self.endpoint_config = ComponentEndpointConfig(
                self, "EndpointConfig", role=self.role, variant_name=VARIANT_NAME, instance_type=spec.instance_type,
                instance_count=spec.instance_count, volume_size_gb=spec.volume_size_gb,
                min_instances=scaling.min_instances if scaling else 1, max_instances=scaling.max_instances if scaling else 1,
                routing=spec.routing, inference_ami_version=plan.inference_ami_version,
            )
        else:
            self.endpoint_config = VariantEndpointConfig(
                self, "EndpointConfig", model=self.model, variant_name=VARIANT_NAME, instance_type=spec.instance_type,
                instance_count=spec.instance_count, volume_size_gb=spec.volume_size_gb,
                download_timeout_s=plan.download_timeout_s, startup_timeout_s=plan.startup_timeout_s,
                routing=spec.routing, inference_ami_version=plan.inference_ami_version,
                async_config=self.async_inference.config if self.async_inference else None,
            )
        if security is not None:
            security.apply(role=self.role, model=self.model, endpoint_config=self.endpoint_config)

        # deployment: guarded updates; the rollback alarms watch the new fleet (stacks/endpoint_alarms.py).
        self.rollback_alarms = None
        if spec.deployment is not None and spec.deployment.auto_rollback is not None:
            self.rollback_alarms = RollbackAlarms(
                self, "RollbackAlarms", endpoint_name=plan.endpoint_name, variant_name=VARIANT_NAME,
                endpoint_config_name=self.endpoint_config.attr_endpoint_config_name, spec=spec.deployment.auto_rollback,
            )
            self.rollback_alarms.grant_describe(self.role)
        self.endpoint = GuardedEndpoint(
            self, "Endpoint", endpoint_name=plan.endpoint_name, endpoint_config=self.endpoint_config,
            scaled=spec.autoscaling is not None or plan.component_name is not None,
            deployment_config=deployment_config(
                spec.deployment, rollback_alarm_names=self.rollback_alarms.alarm_names if self.rollback_alarms else [],
            ) if spec.deployment is not None else None,
        )
        self.endpoint.node.add_dependency(self.log_group)
        # hosting.mode inference-components: the model as an inference component, with its copy scaling.
        self.component = InferenceComponent(
            self, "InferenceComponent", endpoint=self.endpoint, component_name=plan.component_name, model=self.model,
            role=self.role, hosting=spec.hosting, variant_name=VARIANT_NAME,
            accelerators=accelerators_per_copy(spec, plan.instance), download_timeout_s=plan.download_timeout_s,
            startup_timeout_s=plan.startup_timeout_s, log_retention_days=spec.log_retention_days,
        ) if plan.component_name is not None else None
        # adapters: each LoRA adapter an adapter inference component on that component (stacks/adapters.py).
        self.adapters = AdapterComponents(
            self, "Adapters", endpoint=self.endpoint, base=self.component, adapters=plan.adapters,
            artifact_bucket=artifact_bucket,
        ) if plan.adapters and self.component is not None else None
        if self.rollback_alarms is not None:
            # The alarms name the new config: they must move to it (and the role may read them) before the update.
            self.endpoint.node.add_dependency(self.rollback_alarms, self.role)
        # alarms: the endpoint's health alarms and their topic (stacks/endpoint_alarms.py).
        self.alarms = (
            EndpointAlarms(
                self, "Alarms", endpoint_name=plan.endpoint_name, variant_name=VARIANT_NAME, spec=spec.alarms,
                gpu_count=plan.instance.gpu_count, asynchronous=plan.is_async,
            )
            if spec.alarms is not None else None
        )

        if spec.autoscaling is not None and self.async_inference is not None:
            self.async_inference.add_scaling(spec.autoscaling, variant_name=VARIANT_NAME, endpoint=self.endpoint)
        elif spec.autoscaling is not None:
            scaling = spec.autoscaling
            # No RoleARN: Application Auto Scaling uses its service-linked role for SageMaker endpoints.
            target = scalable_target(
                self, "ScalableTarget", dimension=VARIANT_INSTANCES,
                resource_id=f"endpoint/{plan.endpoint_name}/variant/{VARIANT_NAME}",
                min_capacity=scaling.min_capacity, max_capacity=scaling.max_capacity, after=self.endpoint,
            )
            target_tracking(
                self, "ConcurrencyScaling", policy_name=f"{plan.endpoint_name}-concurrency", target=target,
                # The metric counts concurrent requests per instance; the config's target is per model copy.
                target_value=scaling.target_value * plan.model_copies, predefined_metric=SCALING_METRIC,
                scale_in_cooldown_s=scaling.scale_in_cooldown_s, scale_out_cooldown_s=scaling.scale_out_cooldown_s,
            )

    @property
    def endpoint_arn(self) -> str:
        # SageMaker ARNs carry the endpoint name in lower case.
        return Stack.of(self).format_arn(service="sagemaker", resource="endpoint", resource_name=self.endpoint_name.lower())

    @property
    def request_limits(self) -> dict[str, str]:
        """The request limits the container enforces (request_contract.limits()), for a front door that refuses what
        the model would: the same values, or neither sets them and both use the contract's defaults."""
        return {k: v for k, v in self.environment.items() if k in request_contract.LIMIT_ENV}

    @property
    def target_environment(self) -> dict[str, str]:
        """What a function that calls this endpoint needs beyond its name: the component to name (InvokeEndpoint's
        InferenceComponentName), the adapters' components, and an asynchronous endpoint's mode and S3 folders."""
        return {
            **({"INFERENCE_COMPONENT_NAME": self.component.component_name} if self.component is not None else {}),
            **(self.async_inference.environment if self.async_inference is not None else {}),
            **(self.adapters.environment if self.adapters is not None else {}),
        }

    # Grants, as aws-cdk's aws-sagemaker-alpha `Endpoint.grantInvoke` does (packages/@aws-cdk/aws-sagemaker-alpha/
    # lib/endpoint.ts: iam.Grant.addToPrincipal, sagemaker:InvokeEndpoint on the endpoint ARN). Every principal that
    # calls this endpoint gets its permissions here, so no two hand-written action lists can drift apart.

    def grant_invoke(self, grantee: iam.IGrantable) -> iam.Grant:
        """InvokeEndpoint. It also authorizes InvokeEndpointWithResponseStream, which has no IAM action of its own
        ("your IAM permissions must allow the sagemaker:InvokeEndpoint action",
        https://docs.aws.amazon.com/sagemaker/latest/APIReference/API_runtime_InvokeEndpointWithResponseStream.html)."""
        grant = iam.Grant.add_to_principal(
            grantee=grantee, actions=["sagemaker:InvokeEndpoint"], resource_arns=[self.endpoint_arn]
        )
        # A call naming an inference component is authorized on the component too (InferenceComponent.grant_invoke).
        if self.component is not None:
            grant = grant.combine(self.component.grant_invoke(grantee))
        return grant.combine(self.adapters.grant_invoke(grantee)) if self.adapters is not None else grant

    def grant_client(self, grantee: iam.IGrantable) -> iam.Grant:
        """What a client calls: InvokeEndpoint, or for an asynchronous endpoint (which takes InvokeEndpointAsync only)
        the submit and fetch of AsyncInference.grant_client."""
        if self.async_inference is not None:
            return self.async_inference.grant_client(grantee, self.endpoint_arn)
        return self.grant_invoke(grantee)

    def grant_describe(self, grantee: iam.IGrantable) -> iam.Grant:
        """DescribeEndpoint: status, failure reason and the endpoint config it runs."""
        return iam.Grant.add_to_principal(
            grantee=grantee, actions=["sagemaker:DescribeEndpoint"], resource_arns=[self.endpoint_arn]
        )

    def grant_smoke_test(self, grantee: iam.IGrantable) -> iam.Grant:
        """What lambda/smoke/handler.py `smoke_test` calls (also run by `python -m model_build smoke`):
        cloudformation DescribeStacks + ListStackResources on this endpoint's stack, then DescribeEndpoint and the
        client's calls (grant_client); with a component, DescribeInferenceComponent. tests/stacks/test_iam_coverage.py
        runs that code and checks this grant covers it."""
        stack = Stack.of(self)
        # stack_id, not Aws.STACK_ID: a scoped token, so a grantee in another stack gets this stack's id
        # (exported), never its own.
        on_stack = iam.Grant.add_to_principal(
            grantee=grantee,
            actions=["cloudformation:DescribeStacks", "cloudformation:ListStackResources"],
            resource_arns=[stack.stack_id],
        )
        invoking = self.grant_client(grantee)
        granted = on_stack.combine(self.grant_describe(grantee)).combine(invoking)
        # hosting.mode inference-components: the `component` check describes the component (and each adapter's).
        if self.adapters is not None:
            granted = granted.combine(self.adapters.grant_describe(grantee))
        return granted.combine(self.component.grant_describe(grantee)) if self.component is not None else granted


__all__ = ["ContainerImage", "LlmEndpoint", "VARIANT_NAME"]
