"""Scaling pieces the endpoint constructs share."""

from __future__ import annotations

from aws_cdk import aws_applicationautoscaling as appscaling
from constructs import Construct


def scale_from_zero_policy(
    scope: Construct, *, policy_name: str, target: appscaling.CfnScalableTarget, metric_aggregation: str, cooldown_s: int
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
