"""One SageMaker endpoint for an LLM, built from its plan: log group, execution role, model, endpoint config (model on
the variant, or inference components), endpoint with guarded updates, alarms and scaling. Each piece is its own
construct (stacks/sagemaker_resources.py, async_inference.py, inference_components.py, endpoint_alarms.py,
scaling.py); this one wires them and holds the grants every caller of the endpoint gets."""

from __future__ import annotations

from aws_cdk import Annotations, Stack
from aws_cdk import aws_iam as iam
from constructs import Construct

from deployment import EndpointPlan

from .adapters import AdapterComponents
from .async_inference import AsyncInference, AsyncKeys
from .endpoint_alarms import EndpointAlarms, RollbackAlarms, deployment_config
from .endpoint_network import EndpointSecurity
from .engine_metrics import EngineSaturationAlarm, has_engine_metrics, metrics_config
from .inference_components import ComponentEndpointConfig, InferenceComponent
from .log_groups import owned_log_group
from .nag import acknowledge
from .sagemaker_resources import (
    ContainerImage,
    ExecutionRole,
    GuardedEndpoint,
    SageMakerModel,
    VariantCapacity,
    VariantEndpointConfig,
    VariantPool,
    retain_when_replaced,
)
from .scaling import VARIANT_INSTANCES, scalable_target, target_tracking

VARIANT_NAME = "AllTraffic"
BEARER_WILDCARD_REASON = (
    "sagemaker:CallWithBearerToken has no resource type (cfn-lint's Policies.json, the Service "
    "Authorization Reference's data): '*' is the only resource it takes; InvokeEndpoint stays "
    "scoped to this endpoint"
)
UNGUARDED_COMPONENT_WARNING_ID = "llm-endpoints:unguarded-component-updates"
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
        self.plan = plan
        self.endpoint_name = plan.endpoint_name
        self.model_data = plan.model_data(artifact_bucket)
        self.environment = plan.container_environment(artifact_bucket)  # the functions copy the request limits from it

        # SageMaker writes to this group itself; owning it gives it a retention and lets destroy remove it.
        # It must exist before the endpoint, or SageMaker creates it first and the stack cannot.
        self.log_group = owned_log_group(
            self, "Logs", name=f"/aws/sagemaker/Endpoints/{plan.endpoint_name}", retention_days=plan.log_retention_days
        )
        self.role = ExecutionRole(
            self,
            "ExecutionRole",
            endpoint_name=plan.endpoint_name,
            model_data=self.model_data,
            image=image,
            log_group=self.log_group,
        )
        self._add_models(image, artifact_bucket)
        self.async_inference = self._async_inference(artifact_bucket, security)
        self.endpoint_config = self._endpoint_config(security)
        # Detailed observability, stated (stacks/engine_metrics.py).
        self.endpoint_config.metrics_config = metrics_config(plan.engine_metrics)
        if security is not None:
            security.apply(role=self.role, model=self.model, endpoint_config=self.endpoint_config)
            for pool_model in self.pool_models.values():  # the pools' instances sit in the same subnets
                pool_model.vpc_config = security.vpc_config()
        # A replaced model or config may still serve after a rollback: kept, `model_build clean` removes unused ones.
        retain_when_replaced(self.model, *self.pool_models.values(), self.endpoint_config)

        self._add_guarded_endpoint()
        self._add_component()
        # adapters: each LoRA adapter an adapter inference component on that component (stacks/adapters.py).
        self.adapters = (
            AdapterComponents(
                self,
                "Adapters",
                endpoint=self.endpoint,
                base=self.component,
                adapters=plan.adapters,
                artifact_bucket=artifact_bucket,
            )
            if plan.adapters and self.component is not None
            else None
        )
        if self.rollback_alarms is not None:
            # The alarms must be in place (and the role may read them) before the update they guard: on a model on
            # the variant they name the new config, so they move to it first.
            guarded = self.component.component if self.component is not None else self.endpoint
            guarded.node.add_dependency(self.rollback_alarms, self.role)
        self._add_alarms()
        self._add_scaling()

    def _add_models(self, image: ContainerImage, artifact_bucket: str) -> None:
        """The variant's model, and a model for each pool that runs its own."""
        plan = self.plan
        self.model = SageMakerModel(
            self,
            "Model",
            role=self.role,
            image=image,
            model_data=self.model_data,
            environment=self.environment,
            network_isolation=plan.network_isolation,
        )
        # instance_pools: a pool whose engine settings differ (a tensor-parallel degree) runs its own model of the
        # same artifact and image (deployment/plan.py PoolPlan.own_model); the others run the variant's model.
        self.pool_models = {
            pool.priority: SageMakerModel(
                self,
                f"PoolModel{pool.priority}",
                role=self.role,
                image=image,
                model_data=self.model_data,
                environment=plan.container_environment(artifact_bucket, pool),
                network_isolation=plan.network_isolation,
            )
            for pool in plan.pools
            if pool.own_model
        }

    def _async_inference(self, artifact_bucket: str, security: EndpointSecurity | None) -> AsyncInference | None:
        """invocation.mode async: AsyncInferenceConfig, its S3 folders and topics, the role's grants."""
        folders = self.plan.async_folders(artifact_bucket)
        if folders is None:
            return None
        return AsyncInference(
            self,
            "AsyncInference",
            endpoint_name=self.plan.endpoint_name,
            invocation=self.plan.invocation,
            artifact_bucket=artifact_bucket,
            folders=folders,
            execution_role=self.role,
            keys=AsyncKeys(security.bucket_key, security.async_output_key) if security else AsyncKeys(),
        )

    def _endpoint_config(self, security: EndpointSecurity | None) -> ComponentEndpointConfig | VariantEndpointConfig:
        """The endpoint config: a variant without a model (inference components), or the model on the variant."""
        plan = self.plan
        if plan.component_name is not None:  # hosting.mode inference-components: a variant without a model
            min_instances, max_instances = plan.instance_range
            # The instances are placed from the endpoint config: the Model's network placement goes there too.
            return ComponentEndpointConfig(
                self,
                "EndpointConfig",
                role=self.role,
                variant_name=VARIANT_NAME,
                instance_type=plan.instance_type,
                instance_count=plan.instance_count,
                volume_size_gb=plan.volume_size_gb,
                min_instances=min_instances,
                max_instances=max_instances,
                routing=plan.routing,
                inference_ami_version=plan.inference_ami_version,
                network_isolation=plan.network_isolation,
                subnet_ids=security.subnet_ids if security is not None else (),
                security_group_ids=security.security_group_ids if security is not None else (),
            )
        return VariantEndpointConfig(
            self,
            "EndpointConfig",
            model=self.model,
            variant_name=VARIANT_NAME,
            instance_type=plan.instance_type,
            instance_count=plan.instance_count,
            volume_size_gb=plan.volume_size_gb,
            download_timeout_s=plan.download_timeout_s,
            startup_timeout_s=plan.startup_timeout_s,
            routing=plan.routing,
            inference_ami_version=plan.inference_ami_version,
            async_config=self.async_inference.config if self.async_inference else None,
            capacity=self._capacity(plan),
        )

    def _add_guarded_endpoint(self) -> None:
        """The rollback alarms (where deployment.auto_rollback asks for them) and the endpoint they guard.

        deployment: guarded updates (stacks/endpoint_alarms.py). A model on the variant: the endpoint's
        DeploymentConfig, its rollback alarms on the new fleet. An inference component: a new model updates the
        component, so the rolling update and its alarms (on the component's metrics) are the component's, and the
        endpoint keeps SageMaker's default for its own config (which preflight refuses to change in place)."""
        plan = self.plan
        update_policy = plan.update_policy
        self.rollback_alarms: RollbackAlarms | None = None
        if update_policy is not None and update_policy.auto_rollback is not None:
            self.rollback_alarms = RollbackAlarms(
                self,
                "RollbackAlarms",
                endpoint_name=plan.endpoint_name,
                rollback=update_policy.auto_rollback,
                asynchronous=plan.is_async,
                **(
                    {"component_name": plan.component_name}
                    if plan.component_name is not None
                    else {
                        "variant_name": VARIANT_NAME,
                        "endpoint_config_name": self.endpoint_config.attr_endpoint_config_name,
                    }
                ),
            )
            self.rollback_alarms.grant_describe(self.role)
        self._rollback_alarm_names = self.rollback_alarms.alarm_names if self.rollback_alarms else []
        self.endpoint = GuardedEndpoint(
            self,
            "Endpoint",
            endpoint_name=plan.endpoint_name,
            endpoint_config=self.endpoint_config,
            scaled=plan.scales_instances,
            deployment_config=deployment_config(update_policy, rollback_alarm_names=self._rollback_alarm_names)
            if update_policy is not None and plan.component_name is None
            else None,
        )
        self.endpoint.node.add_dependency(self.log_group)

    def _add_component(self) -> None:
        """hosting.mode inference-components: the model as an inference component, with its copy scaling."""
        plan = self.plan
        update_policy = plan.update_policy
        self.component: InferenceComponent | None = None
        if plan.component_name is None:
            return
        compute = plan.copy_compute
        self.component = InferenceComponent(
            self,
            "InferenceComponent",
            endpoint=self.endpoint,
            component_name=plan.component_name,
            model=self.model,
            role=self.role,
            variant_name=VARIANT_NAME,
            accelerators=plan.accelerators_per_copy,
            cpu_cores=compute.cpu_cores,
            min_memory_mb=compute.min_memory_mb,
            download_timeout_s=plan.download_timeout_s,
            startup_timeout_s=plan.startup_timeout_s,
            log_retention_days=plan.log_retention_days,
            copies=plan.component_copies,
            copy_scaling=plan.copy_scaling,
            rolling=update_policy.rolling if update_policy is not None else None,
            rollback_alarm_names=self._rollback_alarm_names,
        )
        if plan.update_policy_warning:
            Annotations.of(self).add_warning_v2(UNGUARDED_COMPONENT_WARNING_ID, plan.update_policy_warning)

    def _add_alarms(self) -> None:
        """alarms: the endpoint's health alarms and their topic (stacks/endpoint_alarms.py), and the engine's
        saturation alarm (PromQL on SageMaker's engine metrics) to that topic."""
        plan = self.plan
        self.alarms = (
            EndpointAlarms(
                self,
                "Alarms",
                endpoint_name=plan.endpoint_name,
                variant_name=VARIANT_NAME,
                alarms=plan.alarms,
                gpu_count=plan.instance.gpu_count,
                asynchronous=plan.is_async,
                component_name=plan.component_name,
                instance_types=plan.instance_types,
            )
            if plan.alarms is not None
            else None
        )
        engine_alarm = plan.engine_alarm
        self.engine_alarm = (
            EngineSaturationAlarm(
                self,
                "EngineAlarm",
                system=plan.system.name,
                endpoint_name=plan.endpoint_name,
                component_name=plan.component_name,
                engine_alarm=engine_alarm,
                topic=self.alarms.topic if self.alarms is not None else None,
            )
            if engine_alarm is not None and has_engine_metrics(plan.system.name, asynchronous=plan.is_async)
            else None
        )

    def _add_scaling(self) -> None:
        """autoscaling: the async endpoint's own scaling, or target tracking on concurrent requests per instance."""
        plan = self.plan
        autoscaling = plan.autoscaling
        if autoscaling is None:
            return
        if self.async_inference is not None:
            self.async_inference.add_scaling(autoscaling, variant_name=VARIANT_NAME, endpoint=self.endpoint)
            return
        # No RoleARN: Application Auto Scaling uses its service-linked role for SageMaker endpoints.
        target = scalable_target(
            self,
            "ScalableTarget",
            dimension=VARIANT_INSTANCES,
            resource_id=f"endpoint/{plan.endpoint_name}/variant/{VARIANT_NAME}",
            min_capacity=autoscaling.min_capacity,
            max_capacity=autoscaling.max_capacity,
            after=self.endpoint,
        )
        target_tracking(
            self,
            "ConcurrencyScaling",
            policy_name=f"{plan.endpoint_name}-concurrency",
            target=target,
            # The metric counts concurrent requests per instance; the config's target is per model copy (the
            # fewest copies any pool serves: a fleet fallen back to it must not run each copy above the target).
            target_value=autoscaling.target_value * plan.fewest_copies,
            predefined_metric=SCALING_METRIC,
            scale_in_cooldown_s=autoscaling.scale_in_cooldown_s,
            scale_out_cooldown_s=autoscaling.scale_out_cooldown_s,
        )

    def _capacity(self, plan: EndpointPlan) -> VariantCapacity:
        """instance_pools and capacity as the variant renders them: instance_type at priority 1 with the variant's
        model, then each pool with its own model where it has one."""
        capacity = plan.capacity
        pools = (
            (
                VariantPool(plan.instance_type, 1),
                *(VariantPool(p.instance_type, p.priority, self.pool_models.get(p.priority)) for p in plan.pools),
            )
            if plan.pools
            else ()
        )
        return VariantCapacity(
            pools=pools,
            provision_timeout_s=capacity.provision_timeout_s if capacity is not None else None,
            reservation_arn=capacity.reservation_arn if capacity is not None else None,
            reservation_preference=capacity.reservation_preference if capacity is not None else None,
        )

    @property
    def endpoint_arn(self) -> str:
        # SageMaker ARNs carry the endpoint name in lower case.
        return Stack.of(self).format_arn(
            service="sagemaker", resource="endpoint", resource_name=self.endpoint_name.lower()
        )

    @property
    def request_limits(self) -> dict[str, str]:
        """The request limits the container enforces (request_contract.limits()), for a front door that refuses what
        the model would: the same values, or neither sets them and both use the contract's defaults; and the
        endpoint's chat features (chat_contract.CHAT_ENV, none without a chat: block)."""
        return self.plan.front_door_environment

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

    def grant_bearer_token(self, grantee: iam.IGrantable) -> iam.Grant:
        """sagemaker:CallWithBearerToken, what SageMaker's OpenAI route needs besides InvokeEndpoint (SageMaker DG,
        "Invoke endpoints with OpenAI-compatible APIs"). The action has no resource type (cfn-lint 1.58.0
        cfnlint/data/AdditionalSpecs/Policies.json, service sagemaker: "callwithbearertoken": {}), so "*" is the only
        resource it takes; the finding it raises is acknowledged on the grantee's policy."""
        grant = iam.Grant.add_to_principal(
            grantee=grantee, actions=["sagemaker:CallWithBearerToken"], resource_arns=["*"]
        )
        acknowledge(getattr(grantee, "role", None) or grantee, "AwsSolutions-IAM5[Resource::*]", BEARER_WILDCARD_REASON)
        return grant

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
        return on_stack.combine(self.grant_smoke_check(grantee))

    def grant_smoke_check(self, grantee: iam.IGrantable) -> iam.Grant:
        """What the stack's smoke check custom resource calls (endpoint_runtime/smoke_check.py: smoke_test on the
        endpoint it names, without the stack calls): DescribeEndpoint and the client's calls (grant_client); the
        OpenAI route's bearer token when the chat check uses it; with a component, DescribeInferenceComponent."""
        invoking = self.grant_client(grantee)
        granted = self.grant_describe(grantee).combine(invoking)
        if self.plan.smoke.chat_route == "openai":  # the chat check goes through SageMaker's OpenAI route
            granted = granted.combine(self.grant_bearer_token(grantee))
        # hosting.mode inference-components: the `component` check describes the component (and each adapter's).
        if self.adapters is not None:
            granted = granted.combine(self.adapters.grant_describe(grantee))
        return granted.combine(self.component.grant_describe(grantee)) if self.component is not None else granted


__all__ = ["ContainerImage", "LlmEndpoint", "VARIANT_NAME"]
