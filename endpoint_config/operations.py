"""Two operations blocks of an endpoint: `deployment:` (guarded updates with automatic rollback) and `alarms:`
(CloudWatch alarms to an SNS topic, and the environment's dashboard). Both are on by default; `null` turns one off.

The bounds are SageMaker's and CloudWatch's, each named where it is checked:
  DeploymentConfig      https://docs.aws.amazon.com/sagemaker/latest/APIReference/API_DeploymentConfig.html
  BlueGreenUpdatePolicy https://docs.aws.amazon.com/sagemaker/latest/APIReference/API_BlueGreenUpdatePolicy.html
  TrafficRoutingConfig  https://docs.aws.amazon.com/sagemaker/latest/APIReference/API_TrafficRoutingConfig.html
  CapacitySize          https://docs.aws.amazon.com/sagemaker/latest/APIReference/API_CapacitySize.html
  RollingUpdatePolicy   https://docs.aws.amazon.com/sagemaker/latest/APIReference/API_RollingUpdatePolicy.html
  AutoRollbackConfig    https://docs.aws.amazon.com/sagemaker/latest/APIReference/API_AutoRollbackConfig.html
  Exclusions            https://docs.aws.amazon.com/sagemaker/latest/dg/deployment-guardrails-exclusions.html
  PutMetricAlarm        https://docs.aws.amazon.com/AmazonCloudWatch/latest/APIReference/API_PutMetricAlarm.html

The rules inside one block are pydantic validators; the rules that need the endpoint's fleet size (instance_count,
autoscaling) or instance type are `operations_problems`, which endpoint_config.schema.endpoint_problems runs.
This module imports nothing of ours, so the schema can import it.
"""

from __future__ import annotations

import math
import re
from typing import TYPE_CHECKING, Literal

from pydantic import Field, model_validator

from .base import Strict

if TYPE_CHECKING:
    from .instances import InstanceType
    from .schema import EndpointSpec

# AutoRollbackConfig.Alarms: "Minimum number of 1 item. Maximum number of 10 items."
MAX_ROLLBACK_ALARMS = 10
# WaitIntervalInSeconds (TrafficRoutingConfig, RollingUpdatePolicy) and TerminationWaitInSeconds: 0-3600.
WAIT_BOUNDS = (0, 3600)
# MaximumExecutionTimeoutInSeconds (BlueGreenUpdatePolicy, RollingUpdatePolicy): 600-28800.
EXECUTION_TIMEOUT_BOUNDS = (600, 28800)
# TrafficRoutingConfig.CanarySize: "less than or equal to 50% of the variant's total instance count";
# LinearStepSize: "10-50%"; RollingUpdatePolicy.MaximumBatchSize: "between 5% to 50%".
CANARY_MAX_PERCENT = 50
LINEAR_PERCENT = (10, 50)
ROLLING_PERCENT = (5, 50)
# PutMetricAlarm: Period is 10, 20, 30 or a multiple of 60; SageMaker's endpoint metrics are published each minute
# (https://docs.aws.amazon.com/sagemaker/latest/dg/monitoring-cloudwatch.html), so a shorter period sees no data.
# "For alarms with a period of less than one hour (3,600 seconds), the total evaluation period can't be longer
# than one day (86,400 seconds)"; below 3600 s is the only range offered here.
ALARM_PERIOD_BOUNDS = (60, 3540)
ALARM_WINDOW_MAX_S = 86_400
# A CloudWatch alarm name: 1-255 characters (AWS::SageMaker::Endpoint Alarm.AlarmName, pattern ^(?!\s*$).+).
ALARM_NAME_PATTERN = r"^(?!\s*$).{1,255}$"
SNS_TOPIC_ARN_PATTERN = r"^arn:aws[a-z-]*:sns:[a-z0-9-]+:\d{12}:[A-Za-z0-9_-]{1,256}(?:\.fifo)?$"


# ----------------------------------------------------------------------------------------------- deployment:


class CapacitySize(Strict):
    """A step of the fleet: `instances: N` or `percent: P` (SageMaker CapacitySize INSTANCE_COUNT | CAPACITY_PERCENT,
    Value >= 1). Exactly one."""

    instances: int | None = Field(None, ge=1, le=100)
    percent: int | None = Field(None, ge=1, le=100)

    @model_validator(mode="after")
    def _one(self) -> CapacitySize:
        if (self.instances is None) == (self.percent is None):
            raise ValueError("give exactly one of instances (a number of instances) or percent (of the fleet)")
        return self

    @property
    def api_type(self) -> str:
        """CapacitySize.Type: INSTANCE_COUNT or CAPACITY_PERCENT."""
        return "INSTANCE_COUNT" if self.instances is not None else "CAPACITY_PERCENT"

    @property
    def api_value(self) -> int:
        return self.instances if self.instances is not None else self.percent  # type: ignore[return-value]

    def instances_of(self, fleet: int) -> int:
        """The instances this step is in a fleet of `fleet` (a percentage rounded up, as a batch of at least one)."""
        return self.instances if self.instances is not None else max(1, math.ceil(self.percent * fleet / 100))  # type: ignore[operator]

    def steps(self, largest_fleet: int) -> int:
        """How many steps of this size cover the largest fleet (the most bakes an update can take)."""
        if self.percent is not None:
            return math.ceil(100 / self.percent)
        return math.ceil(largest_fleet / self.instances)


def _percent_rule(key: str, size: CapacitySize | None, low: int, high: int, what: str) -> None:
    if size is not None and size.percent is not None and not low <= size.percent <= high:
        raise ValueError(
            f"{key}: value {size.percent} % is outside the {low}-{high} % of the fleet SageMaker allows for {what}"
        )


class BlueGreen(Strict):
    """A new (green) fleet next to the old (blue) one; traffic moves all at once, as a canary then the rest, or in
    linear steps, each step followed by a bake of `wait_interval_s` during which the rollback alarms are watched.

    SageMaker requires WaitIntervalInSeconds (TrafficRoutingConfig: "Required: Yes", 0-3600), so it always has a
    value here."""

    traffic: Literal["all_at_once", "canary", "linear"] = "all_at_once"
    canary_size: CapacitySize | None = None  # traffic: canary only; at most 50 % of the fleet
    linear_step: CapacitySize | None = None  # traffic: linear only; 10-50 % of the fleet
    wait_interval_s: int = Field(300, ge=WAIT_BOUNDS[0], le=WAIT_BOUNDS[1])
    termination_wait_s: int = Field(0, ge=WAIT_BOUNDS[0], le=WAIT_BOUNDS[1])
    maximum_execution_timeout_s: int | None = Field(None, ge=EXECUTION_TIMEOUT_BOUNDS[0], le=EXECUTION_TIMEOUT_BOUNDS[1])

    @model_validator(mode="after")
    def _sizes_match_traffic(self) -> BlueGreen:
        if self.traffic == "canary" and self.canary_size is None:
            raise ValueError("canary_size: required key is missing: traffic canary needs the canary's size, e.g. {percent: 25}")
        if self.traffic == "linear" and self.linear_step is None:
            raise ValueError("linear_step: required key is missing: traffic linear needs the step size, e.g. {percent: 25}")
        if self.traffic != "canary" and self.canary_size is not None:
            raise ValueError(f"canary_size: is used by traffic canary only, not {self.traffic}; remove it")
        if self.traffic != "linear" and self.linear_step is not None:
            raise ValueError(f"linear_step: is used by traffic linear only, not {self.traffic}; remove it")
        _percent_rule("canary_size", self.canary_size, 1, CANARY_MAX_PERCENT, "a canary (TrafficRoutingConfig.CanarySize)")
        _percent_rule("linear_step", self.linear_step, *LINEAR_PERCENT, "a linear step (TrafficRoutingConfig.LinearStepSize)")
        return self

    def traffic_steps(self, largest_fleet: int) -> int:
        if self.traffic == "canary":
            return 2  # the canary, then the rest
        if self.traffic == "linear":
            return self.linear_step.steps(largest_fleet)
        return 1


class Rolling(Strict):
    """Replace the fleet in batches, each baked for `wait_interval_s`: fewer extra instances than blue/green (useful
    for scarce GPU types), refused by SageMaker on multi-variant endpoints."""

    maximum_batch_size: CapacitySize  # 5-50 % of the fleet (RollingUpdatePolicy.MaximumBatchSize)
    wait_interval_s: int = Field(300, ge=WAIT_BOUNDS[0], le=WAIT_BOUNDS[1])
    # None: SageMaker brings the whole old fleet back at once on rollback (its documented default, 100 %).
    rollback_maximum_batch_size: CapacitySize | None = None
    maximum_execution_timeout_s: int | None = Field(None, ge=EXECUTION_TIMEOUT_BOUNDS[0], le=EXECUTION_TIMEOUT_BOUNDS[1])

    @model_validator(mode="after")
    def _batch_bounds(self) -> Rolling:
        _percent_rule("maximum_batch_size", self.maximum_batch_size, *ROLLING_PERCENT, "a rolling batch (RollingUpdatePolicy.MaximumBatchSize)")
        return self

    def traffic_steps(self, largest_fleet: int) -> int:
        return self.maximum_batch_size.steps(largest_fleet)


class AutoRollback(Strict):
    """Alarms the stack creates on the NEW fleet only (metrics with the EndpointConfigName dimension of the config
    being deployed, as AWS's example "Monitor model latency on the new fleet" does:
    https://docs.aws.amazon.com/sagemaker/latest/dg/deployment-guardrails-configuration.html), so an old fleet that
    already errs cannot stop every update. Any alarm in ALARM during a bake rolls the update back.

    errors_5xx_rate: Invocation5XXErrors Average (the fraction of invocations answered 5xx: SageMaker sends 1 per
      5xx response and 0 otherwise), above which to roll back; null: no such alarm.
    latency_p99_ms: p99 ModelLatency in milliseconds above which to roll back; null: no such alarm.
    period_s x evaluation_periods: how long a breach must last; it must fit in one bake (wait_interval_s).
    extra_alarm_names: alarms that already exist in the account, watched as well (at most 10 in all)."""

    errors_5xx_rate: float | None = Field(0.01, gt=0, le=1)
    latency_p99_ms: int | None = Field(30_000, ge=1, le=3_600_000)
    period_s: int = Field(60, ge=ALARM_PERIOD_BOUNDS[0], le=ALARM_PERIOD_BOUNDS[1])
    evaluation_periods: int = Field(3, ge=1, le=1440)
    extra_alarm_names: tuple[str, ...] = ()

    @model_validator(mode="after")
    def _alarms(self) -> AutoRollback:
        _period_rule(self.period_s, self.evaluation_periods)
        for name in self.extra_alarm_names:
            if not re.match(ALARM_NAME_PATTERN, name, re.DOTALL):
                raise ValueError(f"extra_alarm_names: value {name!r} is not a CloudWatch alarm name (1-255 characters, not blank)")
        if len(set(self.extra_alarm_names)) != len(self.extra_alarm_names):
            raise ValueError("extra_alarm_names: an alarm is named twice")
        count = len(self.alarm_keys()) + len(self.extra_alarm_names)
        if count == 0:
            raise ValueError(
                "no alarm left: errors_5xx_rate and latency_p99_ms are null and extra_alarm_names is empty; "
                "SageMaker needs at least one alarm (AutoRollbackConfig.Alarms: 1-10); set auto_rollback: null instead"
            )
        if count > MAX_ROLLBACK_ALARMS:
            raise ValueError(
                f"value {count} alarms ({len(self.alarm_keys())} created by the stack + {len(self.extra_alarm_names)} in "
                f"extra_alarm_names) is above SageMaker's limit of {MAX_ROLLBACK_ALARMS} (AutoRollbackConfig.Alarms)"
            )
        return self

    def alarm_keys(self) -> tuple[str, ...]:
        """The alarms the stack creates: which thresholds are set."""
        return tuple(k for k in ("errors_5xx_rate", "latency_p99_ms") if getattr(self, k) is not None)

    @property
    def window_s(self) -> int:
        return self.period_s * self.evaluation_periods


def _period_rule(period_s: int, evaluation_periods: int) -> None:
    if period_s % 60:
        raise ValueError(
            f"period_s: value {period_s} is not a multiple of 60; SageMaker publishes endpoint metrics each minute, "
            "so CloudWatch alarms on them need a period of 60, 120, 180, ... seconds"
        )
    if period_s * evaluation_periods > ALARM_WINDOW_MAX_S:
        raise ValueError(
            f"period_s x evaluation_periods: value {period_s} x {evaluation_periods} = {period_s * evaluation_periods} s "
            f"is above the {ALARM_WINDOW_MAX_S} s CloudWatch allows for alarms with a period under an hour (PutMetricAlarm)"
        )


class DeploymentSpec(Strict):
    """`deployment:` how SageMaker replaces the fleet when the endpoint config changes (a new model, instance type,
    count...): `blue_green:` (the default when neither is given) or `rolling:`, exclusive; `auto_rollback:` the
    alarms that stop and undo a bad update (null: none). `deployment: null` leaves the update to SageMaker's
    default (blue/green, all at once, no alarms)."""

    blue_green: BlueGreen | None = None
    rolling: Rolling | None = None
    auto_rollback: AutoRollback | None = AutoRollback()

    @model_validator(mode="after")
    def _exclusive(self) -> DeploymentSpec:
        if self.blue_green is not None and self.rolling is not None:
            raise ValueError(
                "blue_green and rolling are exclusive (DeploymentConfig: \"Only one update policy should be used\"); "
                "keep one of them"
            )
        return self

    @property
    def policy(self) -> BlueGreen | Rolling:
        return self.rolling if self.rolling is not None else (self.blue_green or BlueGreen())

    @property
    def policy_key(self) -> str:
        return "rolling" if self.rolling is not None else "blue_green"


# ----------------------------------------------------------------------------------------------- alarms:


class AlarmsSpec(Strict):
    """`alarms:` CloudWatch alarms on the endpoint's metrics, notifying an SNS topic (the stack's own, or `topic_arn`).
    Each threshold may be null to leave that alarm out. Metrics and dimensions as SageMaker publishes them
    (https://docs.aws.amazon.com/sagemaker/latest/dg/monitoring-cloudwatch.html): AWS/SageMaker with EndpointName and
    VariantName for invocations; /aws/sagemaker/Endpoints with the same dimensions for instance utilization.

    errors_5xx_rate / errors_4xx_rate: Invocation5XXErrors / Invocation4XXErrors Average (fraction of invocations).
    latency_p99_ms: p99 ModelLatency (published in microseconds; the stack converts).
    gpu_memory_percent: GPUMemoryUtilization per GPU (the metric is the sum over GPUs, 0-100 x GPUs: the stack
      multiplies by the instance's GPU count); GPU instances only. Engines that preallocate the KV cache hold most
      GPU memory by design (vLLM --gpu-memory-utilization, default 0.9: https://docs.vllm.ai/en/latest/models/engine_args.html;
      TensorRT-LLM free_gpu_memory_fraction, default 0.9: https://nvidia.github.io/TensorRT-LLM/examples/kvcacheconfig.html),
      so the default alarms only near full.
    disk_percent: DiskUtilization.
    no_invocations_periods: alarm when no invocation arrives for this many periods (off by default: a quiet endpoint
      is normal for many uses).
    period_s x evaluation_periods, datapoints_to_alarm: how long a breach must last (M of N)."""

    topic_arn: str | None = Field(None, pattern=SNS_TOPIC_ARN_PATTERN)
    errors_5xx_rate: float | None = Field(0.01, gt=0, le=1)
    errors_4xx_rate: float | None = Field(0.05, gt=0, le=1)
    latency_p99_ms: int | None = Field(30_000, ge=1, le=3_600_000)
    gpu_memory_percent: float | None = Field(95, gt=0, le=100)
    disk_percent: float | None = Field(90, gt=0, le=100)
    no_invocations_periods: int | None = Field(None, ge=1, le=1440)
    period_s: int = Field(300, ge=ALARM_PERIOD_BOUNDS[0], le=ALARM_PERIOD_BOUNDS[1])
    evaluation_periods: int = Field(3, ge=1, le=1440)
    datapoints_to_alarm: int = Field(2, ge=1, le=1440)

    @model_validator(mode="after")
    def _window(self) -> AlarmsSpec:
        _period_rule(self.period_s, max(self.evaluation_periods, self.no_invocations_periods or 0))
        if self.datapoints_to_alarm > self.evaluation_periods:
            raise ValueError(
                f"datapoints_to_alarm: value {self.datapoints_to_alarm} is above evaluation_periods "
                f"{self.evaluation_periods}; CloudWatch alarms on M of N datapoints with M <= N"
            )
        return self


# ----------------------------------------------------------------------------------------------- cross-field rules


def fleet_range(ep: EndpointSpec) -> tuple[int, int]:
    """The smallest and largest instance count an update can meet: autoscaling keeps its count across updates
    (the stacks retain DesiredInstanceCount when autoscaling is on), so any count in its range; else instance_count."""
    scaling = ep.autoscaling
    if scaling is None:
        return ep.instance_count, ep.instance_count
    return max(1, scaling.min_capacity), max(1, scaling.max_capacity)


def operations_problems(ep: EndpointSpec, instance: InstanceType) -> list[str]:
    """The `deployment:` and `alarms:` rules that need the endpoint's fleet size and instance type. One message per
    problem, naming endpoint, key, value and what is allowed."""
    problems: list[str] = []
    alarms = ep.alarms
    if alarms is not None and alarms.no_invocations_periods is not None and ep.invocation.is_async:
        # "Any metric not listed below is not published if the endpoint is enabled for asynchronous inference. Such
        # metrics include ... Invocations" (https://docs.aws.amazon.com/sagemaker/latest/dg/async-inference-monitor.html).
        problems.append(
            f"endpoint {ep.name!r}: alarms.no_invocations_periods: value {alarms.no_invocations_periods} cannot work on an "
            "asynchronous endpoint (invocation.mode: async): SageMaker does not publish Invocations for it; remove the key"
        )
    deployment = ep.deployment
    if deployment is None:
        return problems

    def bad(key: str, message: str) -> None:
        problems.append(f"endpoint {ep.name!r}: deployment.{key}: {message}")

    policy, key = deployment.policy, deployment.policy_key
    low, high = fleet_range(ep)
    fleet = f"{low}" if low == high else f"{low}-{high} (autoscaling)"
    if instance.family == "inf1":
        # "Endpoints that use Inf1 (Inferentia-based) instances ... fall back to using a blue/green deployment with
        # all at once traffic shifting and no final baking period" (deployment guardrails, Exclusions).
        bad(
            key,
            f"is not available on {ep.instance_type}: SageMaker's deployment guardrails exclude Inf1 instances and "
            "fall back to all-at-once without baking; set deployment: null",
        )
        return problems

    stepped = isinstance(policy, Rolling) or policy.traffic != "all_at_once"
    if stepped and low < 2:
        what = "rolling batches" if isinstance(policy, Rolling) else f"{policy.traffic} traffic"
        bad(
            key,
            f"{what} need a fleet of at least 2 instances, and this one can be {low} (instance_count / "
            "autoscaling.min_capacity): one instance is 100 % of the fleet, above the 50 % SageMaker allows per "
            "step; use blue_green with traffic all_at_once, or at least 2 instances",
        )
    elif stepped:
        # Instance counts against the fleet: the fraction shrinks as the fleet grows, so check both ends.
        if isinstance(policy, Rolling):
            checks = [("rolling.maximum_batch_size", policy.maximum_batch_size, ROLLING_PERCENT, "a rolling batch")]
        elif policy.traffic == "canary":
            checks = [("blue_green.canary_size", policy.canary_size, (0, CANARY_MAX_PERCENT), "a canary")]
        else:
            checks = [("blue_green.linear_step", policy.linear_step, LINEAR_PERCENT, "a linear step")]
        for size_key, size, (lo_pct, hi_pct), what in checks:
            if size.instances is None:
                continue
            largest_share = 100 * size.instances / low
            smallest_share = 100 * size.instances / high
            if largest_share > hi_pct or smallest_share < lo_pct:
                allowed_low = max(1, math.ceil(lo_pct * high / 100))
                allowed_high = math.floor(hi_pct * low / 100)
                allowed = (
                    f"{allowed_low}-{allowed_high} instances" if allowed_low <= allowed_high else "no instance count fits: use percent"
                )
                share = f"{largest_share:.0f} %" if low == high else f"{smallest_share:.0f}-{largest_share:.0f} %"
                limit = f"at most {hi_pct} %" if lo_pct == 0 else f"{lo_pct}-{hi_pct} %"
                bad(
                    size_key,
                    f"value {size.instances} instance(s) is {share} of a fleet of {fleet}; SageMaker allows {limit} "
                    f"for {what}; allowed here: {allowed}",
                )

    waits = policy.wait_interval_s * policy.traffic_steps(high) + getattr(policy, "termination_wait_s", 0)
    timeout = policy.maximum_execution_timeout_s
    if timeout is not None and timeout <= waits:
        bad(
            f"{key}.maximum_execution_timeout_s",
            f"value {timeout} s is not longer than the update's waits, {waits} s (wait_interval_s "
            f"{policy.wait_interval_s} x {policy.traffic_steps(high)} step(s) at a fleet of {high}"
            + (f" + termination_wait_s {policy.termination_wait_s}" if getattr(policy, "termination_wait_s", 0) else "")
            + f"); the timeout must exceed them ({key} MaximumExecutionTimeoutInSeconds); allowed: {waits + 1}-"
            f"{EXECUTION_TIMEOUT_BOUNDS[1]}",
        )
    rollback = deployment.auto_rollback
    if rollback is not None and rollback.alarm_keys() and rollback.window_s > policy.wait_interval_s:
        bad(
            "auto_rollback",
            f"period_s x evaluation_periods = {rollback.window_s} s is longer than {key}.wait_interval_s "
            f"{policy.wait_interval_s} s: a new-fleet alarm could not reach ALARM within one bake; shorten the alarm "
            f"window or raise wait_interval_s to at least {rollback.window_s}",
        )
    return problems


__all__ = [
    "AlarmsSpec", "AutoRollback", "BlueGreen", "CapacitySize", "DeploymentSpec", "MAX_ROLLBACK_ALARMS", "Rolling",
    "fleet_range", "operations_problems",
]
