"""An endpoint whose model runs as a SageMaker inference component (`hosting.mode: inference-components`).

LlmEndpoint builds the role, the model, the endpoint and its log group in both modes; in this one it builds a
`ComponentEndpointConfig` and adds an `InferenceComponent` after the endpoint.
What differs from a model-on-the-variant endpoint, with the sources: docs/design/inference-components.md.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Sequence

from aws_cdk import CustomResource, Duration, Stack, Token
from aws_cdk import aws_cloudwatch as cloudwatch
from aws_cdk import aws_iam as iam
from aws_cdk import aws_sagemaker as sagemaker
from constructs import Construct

from deployment.config_blocks import CopyScaling, Rolling, Routing

from .artifact_guard import CUSTOM_RESOURCE_TIMEOUT_S
from .functions import PythonFunction
from .lambda_asset import LAMBDA_ROOT, function_code
from .log_groups import owned_log_group
from .sagemaker_resources import check_timeouts, routing_config
from .scaling import COMPONENT_COPIES, scalable_target, scale_from_zero_policy, target_tracking

COPY_SCALING_METRIC = "SageMakerInferenceComponentConcurrentRequestsPerCopyHighResolution"
NO_CAPACITY_METRIC = "NoCapacityInvocationFailures"
# The documented scale-from-zero step policy and alarm (docs/design/inference-components.md).
WAKE_COOLDOWN_S = 60
WAKE_ALARM_PERIOD_S = 60
# KeptCopyCount's function: one DescribeInferenceComponent and one PUT of the answer.
KEPT_COUNT_TIMEOUT_S = 60


class ComponentEndpointConfig(sagemaker.CfnEndpointConfig):
    """The endpoint config of an inference-component endpoint: one variant with instances but no model, managed
    instance scaling between `min_instances` and `max_instances`, the routing strategy, and what a model would carry
    on a model-on-the-variant endpoint: `role` as the ExecutionRoleArn, `network_isolation` as
    EnableNetworkIsolation and `subnet_ids` / `security_group_ids` as VpcConfig (both empty: no VPC)."""

    def __init__(
        self,
        scope: Construct,
        construct_id: str,
        *,
        role: iam.IRole,
        variant_name: str,
        instance_type: str,
        instance_count: int,
        volume_size_gb: int | None,
        min_instances: int,
        max_instances: int,
        routing: Routing,
        inference_ami_version: str | None = None,
        network_isolation: bool = False,
        subnet_ids: tuple[str, ...] = (),
        security_group_ids: tuple[str, ...] = (),
    ) -> None:
        if bool(subnet_ids) != bool(security_group_ids):
            raise ValueError(
                f"{variant_name}: a VpcConfig needs both subnet_ids and security_group_ids, got "
                f"{len(subnet_ids)} subnet(s) and {len(security_group_ids)} security group(s)"
            )
        if not max(1, min_instances) <= instance_count <= max_instances:
            raise ValueError(
                f"{variant_name}: instance_count {instance_count} is outside the managed scaling range "
                f"{max(1, min_instances)}-{max_instances}; the initial count must lie within it"
            )
        super().__init__(
            scope,
            construct_id,
            execution_role_arn=role.role_arn,
            enable_network_isolation=network_isolation,
            vpc_config=sagemaker.CfnEndpointConfig.VpcConfigProperty(
                subnets=list(subnet_ids), security_group_ids=list(security_group_ids)
            )
            if subnet_ids
            else None,
            production_variants=[
                sagemaker.CfnEndpointConfig.ProductionVariantProperty(
                    variant_name=variant_name,
                    initial_instance_count=instance_count,
                    instance_type=instance_type,
                    volume_size_in_gb=volume_size_gb,
                    managed_instance_scaling=sagemaker.CfnEndpointConfig.ManagedInstanceScalingProperty(
                        status="ENABLED", min_instance_count=min_instances, max_instance_count=max_instances
                    ),
                    routing_config=routing_config(routing),
                    inference_ami_version=inference_ami_version,
                )
            ],
        )


def component_deployment_config(
    rolling: Rolling, rollback_alarm_names: Sequence[str]
) -> sagemaker.CfnInferenceComponent.InferenceComponentDeploymentConfigProperty:
    """The component's DeploymentConfig: InferenceComponentDeploymentConfig {RollingUpdatePolicy {MaximumBatchSize,
    WaitIntervalInSeconds, MaximumExecutionTimeoutInSeconds, RollbackMaximumBatchSize}, AutoRollbackConfiguration
    {Alarms}} (botocore 1.44.8; RollingUpdatePolicy is required there, Alarms 1-10). Batches count copies or percent
    (InferenceComponentCapacitySize COPY_COUNT | CAPACITY_PERCENT), never instances."""
    sizes = [rolling.maximum_batch_size, rolling.rollback_maximum_batch_size]
    if any(size is not None and size.instances is not None for size in sizes):
        raise ValueError("an inference component's rolling batches count copies or percent, not instances")

    def capacity(size):
        if size is None:
            return None
        return sagemaker.CfnInferenceComponent.InferenceComponentCapacitySizeProperty(
            type=size.api_type, value=size.api_value
        )

    names = list(rollback_alarm_names)
    return sagemaker.CfnInferenceComponent.InferenceComponentDeploymentConfigProperty(
        rolling_update_policy=sagemaker.CfnInferenceComponent.InferenceComponentRollingUpdatePolicyProperty(
            maximum_batch_size=capacity(rolling.maximum_batch_size),
            wait_interval_in_seconds=rolling.wait_interval_s,
            maximum_execution_timeout_in_seconds=rolling.maximum_execution_timeout_s,
            rollback_maximum_batch_size=capacity(rolling.rollback_maximum_batch_size),
        ),
        auto_rollback_configuration=sagemaker.CfnInferenceComponent.AutoRollbackConfigurationProperty(
            alarms=[sagemaker.CfnInferenceComponent.AlarmProperty(alarm_name=n) for n in names]
        )
        if names
        else None,
    )


class KeptCopyCount(Construct):
    """The copy count to deploy a component with: the count its copy autoscaling set, read at deploy time by the
    custom resource Custom::KeptCopyCount (lambda/copy_count/handler.py) and kept within [floor, ceiling]; `initial`
    while the component does not exist. `copy_count` is that number (a token).

    Keyword-only props: component_name, component_arn (what the function may describe), floor / ceiling / initial
    (1 <= floor <= initial <= ceiling), revision (changes whenever anything else of the component does, so the count is
    read again before every update of it), model_name (the component's model: a new one is an update too),
    log_retention_days (the function's log group)."""

    def __init__(
        self,
        scope: Construct,
        construct_id: str,
        *,
        component_name: str,
        component_arn: str,
        floor: int,
        ceiling: int,
        initial: int,
        revision: str,
        model_name: str,
        log_retention_days: int,
    ) -> None:
        super().__init__(scope, construct_id)
        if not 1 <= floor <= initial <= ceiling:
            raise ValueError(
                f"KeptCopyCount {component_name!r}: need 1 <= floor <= initial <= ceiling, got {floor}, {initial}, {ceiling}"
            )
        self.function = PythonFunction(
            self,
            "Function",
            code=function_code(LAMBDA_ROOT / "copy_count" / "handler.py"),
            handler="copy_count/handler.handler",
            environment={},
            timeout=Duration.seconds(KEPT_COUNT_TIMEOUT_S),
            description=f"Reads the copy count of inference component {component_name} before each deploy",
            log_retention_days=log_retention_days,
        )
        iam.Grant.add_to_principal(
            grantee=self.function.function,
            actions=["sagemaker:DescribeInferenceComponent"],
            resource_arns=[component_arn],
        )
        self.resource = CustomResource(
            self,
            "Resource",
            service_token=self.function.function.function_arn,
            resource_type="Custom::KeptCopyCount",
            service_timeout=Duration.seconds(CUSTOM_RESOURCE_TIMEOUT_S),  # not the default hour (R3)
            properties={
                "ComponentName": component_name,
                "Floor": floor,
                "Ceiling": ceiling,
                "Initial": initial,
                "Revision": revision,
                "ModelName": model_name,
            },
        )
        self.resource.node.add_dependency(self.function)  # its role's policy before the first call
        self.copy_count = Token.as_number(self.resource.get_att("CopyCount"))


def _check_props(
    component_name: str,
    download_timeout_s: int,
    startup_timeout_s: int,
    copies: int,
    rolling: Rolling | None,
    rollback_alarm_names: Sequence[str],
) -> None:
    """ValueError for what SageMaker would refuse: timeouts out of range, no copy, rollback alarms without a
    rolling update."""
    check_timeouts(
        f"InferenceComponent {component_name!r}",
        download_timeout_s=download_timeout_s,
        startup_timeout_s=startup_timeout_s,
    )
    if copies < 1:
        raise ValueError(
            f"InferenceComponent {component_name!r}: copies must be 1 or more (SageMaker refuses a "
            f"component with no copy), got {copies}"
        )
    if rollback_alarm_names and rolling is None:
        raise ValueError(f"InferenceComponent {component_name!r}: rollback alarms act only with a rolling update")


def _revision(settings: dict) -> str:
    """A short hash of the component's settings besides its copy count (KeptCopyCount's revision)."""
    return hashlib.sha256(json.dumps(settings, sort_keys=True).encode()).hexdigest()[:16]


def _specification(
    model: sagemaker.CfnModel,
    *,
    accelerators: int,
    cpu_cores: float,
    min_memory_mb: int,
    download_timeout_s: int,
    startup_timeout_s: int,
) -> sagemaker.CfnInferenceComponent.InferenceComponentSpecificationProperty:
    """The component's Specification: its model, what one copy needs, its startup timeouts, and DataCacheConfig.

    EnableCaching: true, so a copy added to an instance that already runs one does not download the model and pull
    the image again ("With caching enabled, the endpoint caches this data in each instance that it provisions for the
    inference component. That way, the inference component deploys faster during the auto scaling process":
    botocore's sagemaker InferenceComponentDataCacheConfig; cfn-lint 1.58's AWS::SageMaker::InferenceComponent
    schema: Specification.DataCacheConfig {EnableCaching: boolean, required}, update "No interruption"). Every system
    that runs as a component reads its model from /opt/ml/model as SageMaker put it there, so none needs a fresh
    download per copy."""
    return sagemaker.CfnInferenceComponent.InferenceComponentSpecificationProperty(
        model_name=model.attr_model_name,
        data_cache_config=sagemaker.CfnInferenceComponent.InferenceComponentDataCacheConfigProperty(
            enable_caching=True
        ),
        compute_resource_requirements=sagemaker.CfnInferenceComponent.InferenceComponentComputeResourceRequirementsProperty(
            number_of_accelerator_devices_required=accelerators or None,
            number_of_cpu_cores_required=cpu_cores,
            min_memory_required_in_mb=min_memory_mb,
        ),
        startup_parameters=sagemaker.CfnInferenceComponent.InferenceComponentStartupParametersProperty(
            model_data_download_timeout_in_seconds=download_timeout_s,
            container_startup_health_check_timeout_in_seconds=startup_timeout_s,
        ),
    )


class InferenceComponent(Construct):
    """The endpoint's model as one inference component, its log group, its guarded updates and, with copy_scaling,
    copy autoscaling (and the wake-up from zero copies when min_copies is 0) with the count kept across deploys.

    Keyword-only props:
      endpoint: the CfnEndpoint to place the component on (its EndpointName attribute, so the component waits for it).
      component_name: the component's name (EndpointPlan.component_name).
      model: the CfnModel the component runs (Specification.ModelName).
      role: the execution role; it may write the component's log group.
      variant_name: the endpoint config's variant.
      accelerators: the GPUs one copy gets (0 on an instance without GPUs).
      cpu_cores, min_memory_mb: the rest of a copy's ComputeResourceRequirements.
      download_timeout_s / startup_timeout_s: StartupParameters (60-3600).
      log_retention_days: the component's log group retention (and KeptCopyCount's function's).
      copies: RuntimeConfig.CopyCount at the first deploy (>= 1).
      copy_scaling: copy autoscaling (None: always `copies`).
      rolling: the rolling update guarding a model update (None: SageMaker's own update, unguarded).
      rollback_alarm_names: the alarms that roll an update back (with rolling only; at most 10).
    """

    def __init__(
        self,
        scope: Construct,
        construct_id: str,
        *,
        endpoint: sagemaker.CfnEndpoint,
        component_name: str,
        model: sagemaker.CfnModel,
        role: iam.IRole,
        variant_name: str,
        accelerators: int,
        cpu_cores: float,
        min_memory_mb: int,
        download_timeout_s: int,
        startup_timeout_s: int,
        log_retention_days: int,
        copies: int,
        copy_scaling: CopyScaling | None = None,
        rolling: Rolling | None = None,
        rollback_alarm_names: Sequence[str] = (),
    ) -> None:
        super().__init__(scope, construct_id)
        _check_props(component_name, download_timeout_s, startup_timeout_s, copies, rolling, rollback_alarm_names)
        self.component_name = component_name
        stack = Stack.of(self)
        # SageMaker ARNs carry names in lower case; ours are lower case already (the config's name pattern).
        self.component_arn = stack.format_arn(
            service="sagemaker", resource="inference-component", resource_name=self.component_name.lower()
        )
        self._add_log_group(role, log_retention_days)

        environment_plan = component_deployment_config(rolling, rollback_alarm_names) if rolling is not None else None
        self.kept_copies: KeptCopyCount | None = None
        copy_count: int | float = copies
        if copy_scaling is not None:
            # Everything else of the component, so the count is read again before each of its updates.
            revision = _revision(
                {
                    "variant": variant_name,
                    "accelerators": accelerators,
                    "cpu_cores": cpu_cores,
                    "min_memory_mb": min_memory_mb,
                    "timeouts": [download_timeout_s, startup_timeout_s],
                    "rolling": rolling.model_dump() if rolling is not None else None,
                    "rollback_alarms": list(rollback_alarm_names),
                }
            )
            self.kept_copies = self._kept_copies(model, copy_scaling, copies, revision, log_retention_days)
            copy_count = self.kept_copies.copy_count
        self.component = sagemaker.CfnInferenceComponent(
            self,
            "Component",
            inference_component_name=self.component_name,
            endpoint_name=endpoint.attr_endpoint_name,
            variant_name=variant_name,
            specification=_specification(
                model,
                accelerators=accelerators,
                cpu_cores=cpu_cores,
                min_memory_mb=min_memory_mb,
                download_timeout_s=download_timeout_s,
                startup_timeout_s=startup_timeout_s,
            ),
            runtime_config=sagemaker.CfnInferenceComponent.InferenceComponentRuntimeConfigProperty(
                copy_count=copy_count
            ),
            deployment_config=environment_plan,
        )
        self.component.node.add_dependency(self.log_group)
        # The container writes its logs with the role's policy: attached before the first copy starts.
        self.component.node.add_dependency(role)

        self.scalable_target = None
        if copy_scaling is not None:
            self._add_copy_scaling(copy_scaling)

    def _kept_copies(
        self, model: sagemaker.CfnModel, scaling: CopyScaling, copies: int, revision: str, log_retention_days: int
    ) -> KeptCopyCount:
        """The copy count kept across deploys (copy_scaling), `copies` at the first."""
        return KeptCopyCount(
            self,
            "KeptCopyCount",
            component_name=self.component_name,
            component_arn=self.component_arn,
            floor=max(1, scaling.min_copies),
            ceiling=scaling.max_copies,
            initial=copies,
            revision=revision,
            model_name=model.attr_model_name,
            log_retention_days=log_retention_days,
        )

    def _add_log_group(self, role: iam.IRole, log_retention_days: int) -> None:
        """Component containers log to /aws/sagemaker/InferenceComponents/<component> (the group name public SageMaker
        code reads; no AWS page found that states it: unverified). Owned here, as the endpoint's group is, so it
        gets a retention and destroy removes it instead of leaving a group SageMaker created."""
        self.log_group = owned_log_group(
            self,
            "Logs",
            name=f"/aws/sagemaker/InferenceComponents/{self.component_name}",
            retention_days=log_retention_days,
        )
        role.add_to_principal_policy(
            iam.PolicyStatement(
                actions=["logs:CreateLogGroup", "logs:CreateLogStream", "logs:PutLogEvents", "logs:DescribeLogStreams"],
                resources=[self.log_group.log_group_arn],
            )
        )

    def _add_copy_scaling(self, scaling: CopyScaling) -> None:
        target = scalable_target(
            self,
            "CopyScalableTarget",
            dimension=COMPONENT_COPIES,
            resource_id=f"inference-component/{self.component_name}",
            min_capacity=scaling.min_copies,
            max_capacity=scaling.max_copies,
            after=self.component,
        )
        self.scalable_target = target
        target_tracking(
            self,
            "CopyConcurrencyScaling",
            policy_name=f"{self.component_name}-concurrency",
            target=target,
            target_value=scaling.target_concurrency,
            predefined_metric=COPY_SCALING_METRIC,
            scale_in_cooldown_s=scaling.scale_in_cooldown_s,
            scale_out_cooldown_s=scaling.scale_out_cooldown_s,
        )
        if scaling.min_copies > 0:
            return
        # Target tracking cannot leave zero copies (no copy, no per-copy metric): the documented wake-up adds one.
        wake = scale_from_zero_policy(
            self,
            policy_name=f"{self.component_name}-scale-from-zero",
            target=target,
            metric_aggregation="Maximum",
            cooldown_s=WAKE_COOLDOWN_S,
        )
        self.wake_alarm = cloudwatch.CfnAlarm(
            self,
            "NoCapacityAlarm",
            alarm_description=(
                f"Inference component {self.component_name} was invoked with no copy to serve it: add one "
                "(scale from zero)"
            ),
            namespace="AWS/SageMaker",
            metric_name=NO_CAPACITY_METRIC,
            dimensions=[
                cloudwatch.CfnAlarm.DimensionProperty(name="InferenceComponentName", value=self.component_name)
            ],
            statistic="Sum",
            period=WAKE_ALARM_PERIOD_S,
            evaluation_periods=1,
            datapoints_to_alarm=1,
            threshold=1,
            comparison_operator="GreaterThanOrEqualToThreshold",
            actions_enabled=True,
            alarm_actions=[wake.attr_arn],
        )

    def grant_describe(self, grantee: iam.IGrantable) -> iam.Grant:
        """sagemaker:DescribeInferenceComponent on this component (the smoke test's `component` check). AWS's own
        managed policies scope the action to inference-component ARNs (SageMaker Developer Guide, "AWS managed policies
        for Amazon SageMaker AI model customization", AmazonSageMakerModelCustomizationCoreAccess, Sid
        SageMakerInference)."""
        return iam.Grant.add_to_principal(
            grantee=grantee, actions=["sagemaker:DescribeInferenceComponent"], resource_arns=[self.component_arn]
        )

    def grant_invoke(self, grantee: iam.IGrantable) -> iam.Grant:
        """sagemaker:InvokeEndpoint on this component. The Service Authorization Reference lists inference-component
        as a resource type of InvokeEndpoint besides the required endpoint (iann0036/iam-dataset
        aws/iam_definition.json, sagemaker InvokeEndpoint: endpoint*, inference-component), so a call naming a
        component is granted on both ARNs; LlmEndpoint.grant_invoke adds the endpoint's."""
        return iam.Grant.add_to_principal(
            grantee=grantee, actions=["sagemaker:InvokeEndpoint"], resource_arns=[self.component_arn]
        )


__all__ = [
    "COPY_SCALING_METRIC",
    "ComponentEndpointConfig",
    "InferenceComponent",
    "KeptCopyCount",
    "component_deployment_config",
]
