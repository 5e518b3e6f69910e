"""Application Auto Scaling of SageMaker capacity (a variant's instances, a component's copies): one scalable target,
its target-tracking policy and the step policy that leaves zero. No RoleARN anywhere: Application Auto Scaling uses its
service-linked role for SageMaker (AWSApplicationAutoscalingSageMakerEndpointPolicy)."""

from __future__ import annotations

from aws_cdk import aws_applicationautoscaling as appscaling
from constructs import Construct, IConstruct

VARIANT_INSTANCES = "sagemaker:variant:DesiredInstanceCount"
COMPONENT_COPIES = "sagemaker:inference-component:DesiredCopyCount"


def scalable_target(
    scope: Construct,
    construct_id: str,
    *,
    dimension: str,
    resource_id: str,
    min_capacity: int,
    max_capacity: int,
    after: IConstruct,
) -> appscaling.CfnScalableTarget:
    """Register `resource_id` (endpoint/<name>/variant/<variant> or inference-component/<name>) for scaling along
    `dimension`, once `after` (the endpoint or the component) exists."""
    target = appscaling.CfnScalableTarget(
        scope,
        construct_id,
        service_namespace="sagemaker",
        scalable_dimension=dimension,
        resource_id=resource_id,
        min_capacity=min_capacity,
        max_capacity=max_capacity,
    )
    target.node.add_dependency(after)
    return target


def target_tracking(
    scope: Construct,
    construct_id: str,
    *,
    policy_name: str,
    target: appscaling.CfnScalableTarget,
    target_value: float,
    scale_in_cooldown_s: int,
    scale_out_cooldown_s: int,
    predefined_metric: str | None = None,
    customized_metric: appscaling.CfnScalingPolicy.CustomizedMetricSpecificationProperty | None = None,
) -> appscaling.CfnScalingPolicy:
    """A target-tracking policy on `target`: one of a predefined metric (botocore application-autoscaling MetricType)
    or a customized one."""
    if (predefined_metric is None) == (customized_metric is None):
        raise ValueError(f"{policy_name}: give exactly one of predefined_metric and customized_metric")
    return appscaling.CfnScalingPolicy(
        scope,
        construct_id,
        policy_name=policy_name,
        policy_type="TargetTrackingScaling",
        scaling_target_id=target.ref,
        target_tracking_scaling_policy_configuration=appscaling.CfnScalingPolicy.TargetTrackingScalingPolicyConfigurationProperty(
            target_value=target_value,
            predefined_metric_specification=(
                appscaling.CfnScalingPolicy.PredefinedMetricSpecificationProperty(
                    predefined_metric_type=predefined_metric
                )
                if predefined_metric is not None
                else None
            ),
            customized_metric_specification=customized_metric,
            scale_in_cooldown=scale_in_cooldown_s,
            scale_out_cooldown=scale_out_cooldown_s,
        ),
    )


def scale_from_zero_policy(
    scope: Construct,
    *,
    policy_name: str,
    target: appscaling.CfnScalableTarget,
    metric_aggregation: str,
    cooldown_s: int,
) -> appscaling.CfnScalingPolicy:
    """The step policy that adds one unit (an instance, a copy) when its alarm fires: target tracking cannot leave
    zero, since at zero there is no per-unit metric to track (SageMaker's "Scale an endpoint to zero instances" and
    asynchronous-inference autoscaling pages show this policy with an alarm on NoCapacityInvocationFailures or
    HasBacklogWithoutCapacity). Construct id "ScaleFromZero" in `scope`."""
    return appscaling.CfnScalingPolicy(
        scope,
        "ScaleFromZero",
        policy_name=policy_name,
        policy_type="StepScaling",
        scaling_target_id=target.ref,
        step_scaling_policy_configuration=appscaling.CfnScalingPolicy.StepScalingPolicyConfigurationProperty(
            adjustment_type="ChangeInCapacity",
            metric_aggregation_type=metric_aggregation,
            cooldown=cooldown_s,
            step_adjustments=[
                appscaling.CfnScalingPolicy.StepAdjustmentProperty(metric_interval_lower_bound=0, scaling_adjustment=1)
            ],
        ),
    )


__all__ = ["COMPONENT_COPIES", "VARIANT_INSTANCES", "scalable_target", "scale_from_zero_policy", "target_tracking"]
