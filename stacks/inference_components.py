"""An endpoint whose model runs as a SageMaker inference component (`hosting.mode: inference-components`).

LlmEndpoint builds the role, the model, the endpoint and its log group in both modes; in this one it builds a
`ComponentEndpointConfig` and adds an `InferenceComponent` after the endpoint.

What differs from the model-on-the-variant endpoint, with the sources:
  - The endpoint config's variant names no model and carries ManagedInstanceScaling; the execution role moves to the
    endpoint config (ExecutionRoleArn). AWS::SageMaker::EndpointConfig, ProductionVariant / ManagedInstanceScaling /
    RoutingConfig (https://docs.aws.amazon.com/AWSCloudFormation/latest/TemplateReference/aws-properties-sagemaker-endpointconfig-productionvariant.html).
  - The model runs as AWS::SageMaker::InferenceComponent: Specification {ModelName, ComputeResourceRequirements
    {NumberOfAcceleratorDevicesRequired, NumberOfCpuCoresRequired, MinMemoryRequiredInMb}, StartupParameters
    {ModelDataDownloadTimeoutInSeconds, ContainerStartupHealthCheckTimeoutInSeconds}}, RuntimeConfig {CopyCount},
    EndpointName, VariantName, InferenceComponentName
    (https://docs.aws.amazon.com/AWSCloudFormation/latest/TemplateReference/aws-resource-sagemaker-inferencecomponent.html).
    The startup timeouts belong to the component, so the variant sets none.
  - Copies scale with Application Auto Scaling on the scalable dimension sagemaker:inference-component:DesiredCopyCount
    of resource inference-component/<name>, target tracking on the predefined metric
    SageMakerInferenceComponentConcurrentRequestsPerCopyHighResolution (botocore application-autoscaling MetricType and
    ScalableDimension enums). No RoleARN: Application Auto Scaling uses its service-linked role, whose managed policy
    AWSApplicationAutoscalingSageMakerEndpointPolicy allows sagemaker:DescribeInferenceComponent and
    sagemaker:UpdateInferenceComponentRuntimeConfig (AWS managed policy document, as recorded in
    iann0036/iam-dataset aws/managedpolicies/AWSApplicationAutoscalingSageMakerEndpointPolicy.json).
  - Scale from zero is "Scale an endpoint to zero instances"
    (https://docs.aws.amazon.com/sagemaker/latest/dg/endpoint-auto-scaling-zero-instances.html): a StepScaling policy
    {AdjustmentType ChangeInCapacity, MetricAggregationType Maximum, Cooldown 60, StepAdjustments
    [{MetricIntervalLowerBound 0, ScalingAdjustment 1}]} triggered by a CloudWatch alarm on AWS/SageMaker
    NoCapacityInvocationFailures {InferenceComponentName}, Sum over 60 s, 1 of 1 datapoints, threshold 1, which
    "SageMaker AI emits ... when an endpoint receives an inference request, but the endpoint has no active instances".
    One change: GreaterThanOrEqualToThreshold where the page writes GreaterThanThreshold, so one failed request in a
    minute wakes the component (the page's alarm needs two).
"""

from __future__ import annotations

from aws_cdk import Stack
from aws_cdk import aws_cloudwatch as cloudwatch
from aws_cdk import aws_iam as iam
from aws_cdk import aws_sagemaker as sagemaker
from constructs import Construct

from endpoint_config.hosting import ComputeRequirements, CopyScaling, Hosting

from .log_groups import owned_log_group
from .sagemaker_resources import ROUTING_STRATEGIES, check_timeouts
from .scaling import COMPONENT_COPIES, scalable_target, scale_from_zero_policy, target_tracking

COPY_SCALING_METRIC = "SageMakerInferenceComponentConcurrentRequestsPerCopyHighResolution"
NO_CAPACITY_METRIC = "NoCapacityInvocationFailures"
# The documented scale-from-zero step policy and alarm (module docstring).
WAKE_COOLDOWN_S = 60
WAKE_ALARM_PERIOD_S = 60


class ComponentEndpointConfig(sagemaker.CfnEndpointConfig):
    """The endpoint config of an inference-component endpoint: one variant with instances but no model, managed
    instance scaling between `min_instances` and `max_instances`, the routing strategy, and `role` as the endpoint's
    ExecutionRoleArn (no model names one)."""

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
        routing: str,
        inference_ami_version: str | None = None,
    ) -> None:
        if not max(1, min_instances) <= instance_count <= max_instances:
            raise ValueError(
                f"{variant_name}: instance_count {instance_count} is outside the managed scaling range "
                f"{max(1, min_instances)}-{max_instances}; the initial count must lie within it"
            )
        super().__init__(
            scope,
            construct_id,
            execution_role_arn=role.role_arn,
            production_variants=[
                sagemaker.CfnEndpointConfig.ProductionVariantProperty(
                    variant_name=variant_name,
                    initial_instance_count=instance_count,
                    instance_type=instance_type,
                    volume_size_in_gb=volume_size_gb,
                    managed_instance_scaling=sagemaker.CfnEndpointConfig.ManagedInstanceScalingProperty(
                        status="ENABLED", min_instance_count=min_instances, max_instance_count=max_instances
                    ),
                    routing_config=sagemaker.CfnEndpointConfig.RoutingConfigProperty(
                        routing_strategy=ROUTING_STRATEGIES[routing]
                    ),
                    inference_ami_version=inference_ami_version,
                )
            ],
        )


class InferenceComponent(Construct):
    """The endpoint's model as one inference component, its log group and, with hosting.copy_scaling, copy
    autoscaling (and the wake-up from zero copies when min_copies is 0).

    Keyword-only props:
      endpoint: the CfnEndpoint to place the component on (its EndpointName attribute, so the component waits for it).
      component_name: the component's name (EndpointPlan.component_name).
      model: the CfnModel the component runs (Specification.ModelName).
      role: the execution role; it may write the component's log group.
      hosting: the endpoint's `hosting:` block (copies, compute per copy, copy scaling).
      variant_name: the endpoint config's variant.
      accelerators: the GPUs one copy gets (0 on an instance without GPUs).
      download_timeout_s / startup_timeout_s: StartupParameters (60-3600).
      log_retention_days: the component's log group retention.
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
        hosting: Hosting,
        variant_name: str,
        accelerators: int,
        download_timeout_s: int,
        startup_timeout_s: int,
        log_retention_days: int,
    ) -> None:
        super().__init__(scope, construct_id)
        if not hosting.uses_components:
            raise ValueError(f"InferenceComponent {component_name!r}: hosting.mode is {hosting.mode!r}, not inference-components")
        check_timeouts(f"InferenceComponent {component_name!r}", download_timeout_s=download_timeout_s,
                       startup_timeout_s=startup_timeout_s)
        self.component_name = component_name
        stack = Stack.of(self)
        # SageMaker ARNs carry names in lower case; ours are lower case already (the config's name pattern).
        self.component_arn = stack.format_arn(
            service="sagemaker", resource="inference-component", resource_name=self.component_name.lower()
        )

        # Component containers log to /aws/sagemaker/InferenceComponents/<component> (the group name public SageMaker
        # code reads; no AWS page found that states it: unverified). Owned here, as the endpoint's group is, so it
        # gets a retention and destroy removes it instead of leaving a group SageMaker created.
        self.log_group = owned_log_group(
            self, "Logs", name=f"/aws/sagemaker/InferenceComponents/{self.component_name}", retention_days=log_retention_days
        )
        role.add_to_principal_policy(
            iam.PolicyStatement(
                actions=["logs:CreateLogGroup", "logs:CreateLogStream", "logs:PutLogEvents", "logs:DescribeLogStreams"],
                resources=[self.log_group.log_group_arn],
            )
        )

        compute = hosting.compute or ComputeRequirements()
        self.component = sagemaker.CfnInferenceComponent(
            self,
            "Component",
            inference_component_name=self.component_name,
            endpoint_name=endpoint.attr_endpoint_name,
            variant_name=variant_name,
            specification=sagemaker.CfnInferenceComponent.InferenceComponentSpecificationProperty(
                model_name=model.attr_model_name,
                compute_resource_requirements=sagemaker.CfnInferenceComponent.InferenceComponentComputeResourceRequirementsProperty(
                    number_of_accelerator_devices_required=accelerators or None,
                    number_of_cpu_cores_required=compute.cpu_cores,
                    min_memory_required_in_mb=compute.min_memory_mb,
                ),
                startup_parameters=sagemaker.CfnInferenceComponent.InferenceComponentStartupParametersProperty(
                    model_data_download_timeout_in_seconds=download_timeout_s,
                    container_startup_health_check_timeout_in_seconds=startup_timeout_s,
                ),
            ),
            runtime_config=sagemaker.CfnInferenceComponent.InferenceComponentRuntimeConfigProperty(
                copy_count=hosting.copies
            ),
        )
        self.component.node.add_dependency(self.log_group)
        # The container writes its logs with the role's policy: attached before the first copy starts.
        self.component.node.add_dependency(role)

        self.scalable_target = None
        if hosting.copy_scaling is not None:
            self._add_copy_scaling(hosting.copy_scaling)

    def _add_copy_scaling(self, scaling: CopyScaling) -> None:
        target = scalable_target(
            self, "CopyScalableTarget", dimension=COMPONENT_COPIES, resource_id=f"inference-component/{self.component_name}",
            min_capacity=scaling.min_copies, max_capacity=scaling.max_copies, after=self.component,
        )
        self.scalable_target = target
        target_tracking(
            self, "CopyConcurrencyScaling", policy_name=f"{self.component_name}-concurrency", target=target,
            target_value=scaling.target_concurrency, predefined_metric=COPY_SCALING_METRIC,
            scale_in_cooldown_s=scaling.scale_in_cooldown_s, scale_out_cooldown_s=scaling.scale_out_cooldown_s,
        )
        if scaling.min_copies > 0:
            return
        # Target tracking cannot leave zero copies (no copy, no per-copy metric): the documented wake-up adds one.
        wake = scale_from_zero_policy(
            self, policy_name=f"{self.component_name}-scale-from-zero", target=target, metric_aggregation="Maximum", cooldown_s=WAKE_COOLDOWN_S
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
            dimensions=[cloudwatch.CfnAlarm.DimensionProperty(name="InferenceComponentName", value=self.component_name)],
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
        return iam.Grant.add_to_principal(grantee=grantee, actions=["sagemaker:InvokeEndpoint"], resource_arns=[self.component_arn])


__all__ = ["COPY_SCALING_METRIC", "ComponentEndpointConfig", "InferenceComponent"]
