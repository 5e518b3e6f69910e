"""Two operations blocks of an endpoint: `deployment:` (guarded updates with automatic rollback) and `alarms:`
(CloudWatch alarms to an SNS topic, and the environment's dashboard). Both are on by default; `null` turns one off.

Rules inside a block are pydantic validators; those that need the fleet or the instance type are
`operations_problems`. Imports only .base and .hosting, so the schema can import it.
Sources, and the inference-component case: docs/design/metrics-and-alarms.md.
"""

from __future__ import annotations

import math
import re
from typing import TYPE_CHECKING, Literal

from pydantic import Field, model_validator

from .base import Strict
from .hosting import accelerators_per_copy, update_copy_range

if TYPE_CHECKING:
    from facts.instances import InstanceType

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
# InferenceComponentRollingUpdatePolicy.MaximumBatchSize: "The value must be between 5% to 50% of the copy count of
# the inference component" (botocore 1.44.8). The default batch on a component is one copy, where that is within
# those bounds at every copy count an update can meet (2 to 20 copies), else 5 %.
COMPONENT_DEFAULT_BATCH_COPIES = 1
COMPONENT_FALLBACK_BATCH_PERCENT = 5
# "To prevent impact to inference requests, Data Capture stops capturing requests at high levels of disk usage. It
# is recommended you keep your disk utilization below 75% in order to ensure data capture continues capturing
# requests" (SageMaker Developer Guide, "Capture data from real-time endpoint",
# https://docs.aws.amazon.com/sagemaker/latest/dg/model-monitor-data-capture-endpoint.html). With capture on, the disk
# alarm fires at 75 % at the latest; by default at 70 %, to leave time to act before capture stops.
CAPTURE_DISK_LIMIT_PERCENT = 75
CAPTURE_DISK_DEFAULT_PERCENT = 70
# An asynchronous request may run for its invocation timeout: InvokeEndpointAsync InvocationTimeoutSeconds, "The
# default is 15 minutes, or 900 seconds" (botocore 1.44.8 sagemaker-runtime). SageMaker publishes ModelLatency for
# asynchronous endpoints (https://docs.aws.amazon.com/sagemaker/latest/dg/async-inference-monitor.html, "Common Endpoint
# Metrics"), one datapoint per finished request, so the real-time default (30 s) would alarm, and roll updates back,
# on every long generation. The async default is 90 % of the timeout: p99 close to where requests are cut off.
ASYNC_DEFAULT_INVOCATION_TIMEOUT_S = 900
ASYNC_LATENCY_SHARE = 0.9
# PutMetricAlarm: Period is 10, 20, 30 or a multiple of 60; SageMaker's endpoint metrics are published each minute
# (https://docs.aws.amazon.com/sagemaker/latest/dg/monitoring-cloudwatch.html), so a shorter period sees no data.
# "For alarms with a period of less than one hour (3,600 seconds), the total evaluation period can't be longer
# than one day (86,400 seconds)"; below 3600 s is the only range offered here.
ALARM_PERIOD_BOUNDS = (60, 3540)
ALARM_WINDOW_MAX_S = 86_400
# A CloudWatch alarm name: 1-255 characters (AWS::SageMaker::Endpoint Alarm.AlarmName, pattern ^(?!\s*$).+).
ALARM_NAME_PATTERN = r"^(?!\s*$).{1,255}$"
SNS_TOPIC_ARN_PATTERN = r"^arn:aws[a-z-]*:sns:[a-z0-9-]+:[0-9]{12}:[A-Za-z0-9_-]{1,256}(?:\.fifo)?$"


# ----------------------------------------------------------------------------------------------- deployment:


class CapacitySize(Strict):
    """A step of the fleet: `instances: N`, `copies: N` (an inference component's copies) or `percent: P` (SageMaker
    CapacitySize INSTANCE_COUNT | CAPACITY_PERCENT; InferenceComponentCapacitySize COPY_COUNT | CAPACITY_PERCENT;
    Value >= 1). Exactly one."""

    instances: int | None = Field(None, ge=1, le=100)
    copies: int | None = Field(None, ge=1, le=100)
    percent: int | None = Field(None, ge=1, le=100)

    @model_validator(mode="after")
    def _one(self) -> CapacitySize:
        if [self.instances, self.copies, self.percent].count(None) != 2:
            raise ValueError(
                "give exactly one of instances (a number of instances), copies (of an inference component) or percent "
                "(of the fleet)"
            )
        return self

    @property
    def count(self) -> int | None:
        """The number of instances or copies (None for a percentage)."""
        return self.instances if self.instances is not None else self.copies

    @property
    def unit(self) -> str:
        return "instances" if self.instances is not None else "copies" if self.copies is not None else "percent"

    @property
    def api_type(self) -> str:
        """CapacitySize.Type (INSTANCE_COUNT, CAPACITY_PERCENT) or InferenceComponentCapacitySize.Type (COPY_COUNT,
        CAPACITY_PERCENT)."""
        return {"instances": "INSTANCE_COUNT", "copies": "COPY_COUNT", "percent": "CAPACITY_PERCENT"}[self.unit]

    @property
    def api_value(self) -> int:
        return self.count if self.count is not None else self.percent  # type: ignore[return-value]

    def instances_of(self, fleet: int) -> int:
        """The units (instances or copies) this step is in a fleet of `fleet` (a percentage rounded up, as a batch of
        at least one)."""
        return self.count if self.count is not None else max(1, math.ceil(self.percent * fleet / 100))  # type: ignore[operator]

    def steps(self, largest_fleet: int) -> int:
        """How many steps of this size cover the largest fleet (the most bakes an update can take)."""
        if self.percent is not None:
            return math.ceil(100 / self.percent)
        return math.ceil(largest_fleet / self.count)  # type: ignore[operator]


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
    maximum_execution_timeout_s: int | None = Field(
        None, ge=EXECUTION_TIMEOUT_BOUNDS[0], le=EXECUTION_TIMEOUT_BOUNDS[1]
    )

    @model_validator(mode="after")
    def _sizes_match_traffic(self) -> BlueGreen:
        if self.traffic == "canary" and self.canary_size is None:
            raise ValueError(
                "canary_size: required key is missing: traffic canary needs the canary's size, e.g. {percent: 25}"
            )
        if self.traffic == "linear" and self.linear_step is None:
            raise ValueError(
                "linear_step: required key is missing: traffic linear needs the step size, e.g. {percent: 25}"
            )
        if self.traffic != "canary" and self.canary_size is not None:
            raise ValueError(f"canary_size: is used by traffic canary only, not {self.traffic}; remove it")
        if self.traffic != "linear" and self.linear_step is not None:
            raise ValueError(f"linear_step: is used by traffic linear only, not {self.traffic}; remove it")
        _percent_rule(
            "canary_size", self.canary_size, 1, CANARY_MAX_PERCENT, "a canary (TrafficRoutingConfig.CanarySize)"
        )
        _percent_rule(
            "linear_step", self.linear_step, *LINEAR_PERCENT, "a linear step (TrafficRoutingConfig.LinearStepSize)"
        )
        return self

    def traffic_steps(self, largest_fleet: int) -> int:
        if self.traffic == "canary":
            return 2  # the canary, then the rest
        if self.traffic == "linear":
            assert self.linear_step is not None, "the validator requires linear_step for traffic linear"
            return self.linear_step.steps(largest_fleet)
        return 1


class Rolling(Strict):
    """Replace the fleet in batches, each baked for `wait_interval_s`: fewer extra instances than blue/green (useful
    for scarce GPU types), refused by SageMaker on multi-variant endpoints."""

    maximum_batch_size: CapacitySize  # 5-50 % of the fleet (RollingUpdatePolicy.MaximumBatchSize)
    wait_interval_s: int = Field(300, ge=WAIT_BOUNDS[0], le=WAIT_BOUNDS[1])
    # None: SageMaker brings the whole old fleet back at once on rollback (its documented default, 100 %).
    rollback_maximum_batch_size: CapacitySize | None = None
    maximum_execution_timeout_s: int | None = Field(
        None, ge=EXECUTION_TIMEOUT_BOUNDS[0], le=EXECUTION_TIMEOUT_BOUNDS[1]
    )

    @model_validator(mode="after")
    def _batch_bounds(self) -> Rolling:
        _percent_rule(
            "maximum_batch_size",
            self.maximum_batch_size,
            *ROLLING_PERCENT,
            "a rolling batch (RollingUpdatePolicy.MaximumBatchSize)",
        )
        return self

    def traffic_steps(self, largest_fleet: int) -> int:
        return self.maximum_batch_size.steps(largest_fleet)


class AutoRollback(Strict):
    """Alarms the stack creates on the NEW fleet only (metrics with the EndpointConfigName dimension of the config
    being deployed, as AWS's example "Monitor model latency on the new fleet" does:
    https://docs.aws.amazon.com/sagemaker/latest/dg/deployment-guardrails-configuration.html), so an old fleet that
    already errs cannot stop every update. Any alarm in ALARM during a bake rolls the update back.

    errors_5xx_rate: Invocation5XXErrors Average (the fraction of invocations answered 5xx: SageMaker sends 1 per
      5xx response and 0 otherwise), above which to roll back; null: no such alarm. Where SageMaker publishes
      InvocationModelErrors (real-time endpoints and inference components), the same threshold also rolls back on
      the share of requests that failed other than with a 4xx: 5xx, timeouts, socket errors, malformed responses.
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
                raise ValueError(
                    f"extra_alarm_names: value {name!r} is not a CloudWatch alarm name (1-255 characters, not blank)"
                )
        if len(set(self.extra_alarm_names)) != len(self.extra_alarm_names):
            raise ValueError("extra_alarm_names: an alarm is named twice")
        count = self.created_alarm_count + len(self.extra_alarm_names)
        if count == 0:
            raise ValueError(
                "no alarm left: errors_5xx_rate and latency_p99_ms are null and extra_alarm_names is empty; "
                "SageMaker needs at least one alarm (AutoRollbackConfig.Alarms: 1-10); set auto_rollback: null instead"
            )
        if count > MAX_ROLLBACK_ALARMS:
            raise ValueError(
                f"value {count} alarms ({self.created_alarm_count} created by the stack + {len(self.extra_alarm_names)} "
                f"in extra_alarm_names) is above SageMaker's limit of {MAX_ROLLBACK_ALARMS} (AutoRollbackConfig.Alarms)"
            )
        return self

    def alarm_keys(self) -> tuple[str, ...]:
        """The alarms the stack creates: which thresholds are set."""
        return tuple(k for k in ("errors_5xx_rate", "latency_p99_ms") if getattr(self, k) is not None)

    @property
    def created_alarm_count(self) -> int:
        """The most alarms the stack creates: one per threshold, and errors_5xx_rate's model-errors alarm beside its
        5xx alarm (counted even where SageMaker does not publish the metric: the limit holds either way)."""
        return len(self.alarm_keys()) + (1 if self.errors_5xx_rate is not None else 0)

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


class UpdatePolicySpec(Strict):
    """`deployment:` how SageMaker replaces the fleet when the endpoint config changes (a new model, instance type,
    count...): `blue_green:` (the default when neither is given) or `rolling:`, exclusive; `auto_rollback:` the
    alarms that stop and undo a bad update (null: none). `deployment: null` leaves the update to SageMaker's
    default (blue/green, all at once, no alarms)."""

    blue_green: BlueGreen | None = None
    rolling: Rolling | None = None
    auto_rollback: AutoRollback | None = AutoRollback()

    @model_validator(mode="after")
    def _exclusive(self) -> UpdatePolicySpec:
        if self.blue_green is not None and self.rolling is not None:
            raise ValueError(
                'blue_green and rolling are exclusive (DeploymentConfig: "Only one update policy should be used"); '
                "keep one of them"
            )
        return self

    @property
    def policy(self) -> BlueGreen | Rolling:
        return self.rolling if self.rolling is not None else (self.blue_green or BlueGreen())

    @property
    def policy_key(self) -> str:
        return "rolling" if self.rolling is not None else "blue_green"

    @property
    def policy_given(self) -> bool:
        """Whether the config names a policy (blue_green or rolling), not only the default."""
        return self.blue_green is not None or self.rolling is not None


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
    """The smallest and largest fleet an update can meet: on an inference-component endpoint its copies
    (hosting.update_copy_range: the stack keeps the scaled count); else instances, where autoscaling keeps its count
    across updates (the stacks retain DesiredInstanceCount when autoscaling is on), so any count in its range, or
    instance_count."""
    if ep.hosting.uses_components:
        return update_copy_range(ep.hosting)
    scaling = ep.autoscaling
    if scaling is None:
        return ep.instance_count, ep.instance_count
    return max(1, scaling.min_capacity), max(1, scaling.max_capacity)


# ----------------------------------------------------------------------------------------------- as the stacks apply them


def async_latency_default_ms(ep: EndpointSpec) -> int:
    """The latency threshold of an asynchronous endpoint when the config gives none: ASYNC_LATENCY_SHARE of its
    invocation timeout (ASYNC_DEFAULT_INVOCATION_TIMEOUT_S when unset)."""
    timeout_s = ep.invocation.invocation_timeout_s or ASYNC_DEFAULT_INVOCATION_TIMEOUT_S
    return int(timeout_s * 1000 * ASYNC_LATENCY_SHARE)


def _latency_default(block: AlarmsSpec | AutoRollback, ep: EndpointSpec) -> dict[str, int]:
    if ep.invocation.is_async and "latency_p99_ms" not in block.model_fields_set and block.latency_p99_ms is not None:
        return {"latency_p99_ms": async_latency_default_ms(ep)}
    return {}


def resolved_alarms(ep: EndpointSpec) -> AlarmsSpec | None:
    """`alarms:` as the stack creates them: an asynchronous endpoint's latency threshold from its invocation timeout,
    and with data capture the disk threshold at CAPTURE_DISK_DEFAULT_PERCENT, unless the config sets them."""
    alarms = ep.alarms
    if alarms is None:
        return None
    update: dict[str, float] = dict(_latency_default(alarms, ep))
    if ep.data_capture is not None and "disk_percent" not in alarms.model_fields_set:
        update["disk_percent"] = CAPTURE_DISK_DEFAULT_PERCENT
    return alarms.model_copy(update=update) if update else alarms


def default_component_rolling(ep: EndpointSpec) -> Rolling | None:
    """The rolling update a component gets when `deployment:` names no policy: one copy per batch where one copy is
    5-50 % of every copy count an update can meet, else 5 %; None when the component can run a single copy (no batch
    is then at most 50 % of it)."""
    low, high = fleet_range(ep)
    if low < 2:
        return None
    batch = (
        CapacitySize(copies=COMPONENT_DEFAULT_BATCH_COPIES)
        if 100 * COMPONENT_DEFAULT_BATCH_COPIES / high >= ROLLING_PERCENT[0]
        else CapacitySize(percent=COMPONENT_FALLBACK_BATCH_PERCENT)
    )
    return Rolling(maximum_batch_size=batch)


def resolved_update_policy(ep: EndpointSpec) -> UpdatePolicySpec | None:
    """`deployment:` as the stacks apply it. On an inference-component endpoint: the component's rolling update (the
    configured one, else default_component_rolling), or None when there is none to apply (SageMaker's own update of
    the component, unguarded; component_deployment_warning says so). Elsewhere the block as configured. Either way
    auto_rollback's latency threshold of an asynchronous endpoint comes from its invocation timeout unless given."""
    update_policy = ep.deployment
    if update_policy is None:
        return None
    update: dict[str, object] = {}
    if ep.hosting.uses_components and update_policy.rolling is None:
        rolling = default_component_rolling(ep)
        if rolling is None:
            return None
        update["rolling"] = rolling
    rollback = update_policy.auto_rollback
    if rollback is not None:
        latency = _latency_default(rollback, ep)
        if latency:
            update["auto_rollback"] = rollback.model_copy(update=latency)
    return update_policy.model_copy(update=update) if update else update_policy


def component_deployment_warning(ep: EndpointSpec) -> str | None:
    """Why an inference component's model updates go unguarded although `deployment:` is on (the default), or None."""
    if not ep.hosting.uses_components or ep.deployment is None or resolved_update_policy(ep) is not None:
        return None
    low, _ = fleet_range(ep)
    return (
        f"endpoint {ep.name!r}: model updates of its inference component are not guarded: a component updates only in "
        f"rolling batches of 5-50 % of its copies, and it can run {low} copy at an update (hosting.copies / "
        "copy_scaling.min_copies), so SageMaker's own update applies (all copies at once, no rollback alarms). Set "
        "deployment: null to accept that, or keep at least 2 copies and set deployment.rolling"
    )


# ----------------------------------------------------------------------------------------------- cross-field rules


def rolling_headroom_problem(ep: EndpointSpec, instance: InstanceType) -> str | None:
    """Why the component's rolling update cannot place its first batch, or None (operations review R5).

    "For each step, SageMaker AI provisions capacity on the new endpoint fleet, routes traffic to that fleet, and
    terminates capacity on the old endpoint fleet" (botocore 1.44.8 sagemaker model,
    InferenceComponentRollingUpdatePolicy.MaximumBatchSize): a batch's new copies run beside every old copy. On GPU
    instances a copy takes its accelerators whole, so the most copies an update meets plus one batch must fit on
    hosting.instance_scaling.max_instances instances. Only a rolling update is checked here: the component's update
    without one (a single copy) is SageMaker's own, whose capacity needs no source found here states."""
    if not ep.hosting.uses_components or not instance.is_gpu:
        return None
    update_policy = resolved_update_policy(ep)
    rolling = update_policy.rolling if update_policy is not None else None
    if rolling is None:
        return None
    gpus = accelerators_per_copy(ep, instance)
    if gpus < 1 or gpus > instance.gpu_count:
        return None  # hosting_problems says what is wrong there
    max_instances = ep.hosting.instance_scaling.max_instances if ep.hosting.instance_scaling is not None else 1
    per_instance = instance.gpu_count // gpus
    room = per_instance * max_instances
    _, high = update_copy_range(ep.hosting)
    size = rolling.maximum_batch_size
    batch = size.copies if size.copies is not None else max(1, math.ceil(high * (size.percent or 0) / 100))
    if high + batch <= room:
        return None
    key = "hosting.copy_scaling.max_copies" if ep.hosting.copy_scaling is not None else "hosting.copies"
    fits = room - batch
    allowed = f"at most {fits} copies" if fits >= 1 else "no copy count fits"
    return (
        f"endpoint {ep.name!r}: {key}: value {high}: a rolling update adds a batch of {batch} new cop"
        f"{'y' if batch == 1 else 'ies'} (deployment.rolling.maximum_batch_size) beside the {high} running, "
        f"{high + batch} in all, but hosting.instance_scaling.max_instances {max_instances} of "
        f"{ep.instance_type} ({instance.gpu_count} GPUs each) hold {room} copies of {gpus} GPU(s); the first batch "
        f"has nowhere to go. Allowed: {allowed} with this batch, or raise max_instances to "
        f"{math.ceil((high + batch) / per_instance)}"
    )


def operations_problems(ep: EndpointSpec, instance: InstanceType) -> list[str]:
    """The `deployment:` and `alarms:` rules that need the endpoint's fleet size, instance type, hosting and
    invocation mode. One message per problem, naming endpoint, key, value and what is allowed."""
    problems: list[str] = []
    headroom = rolling_headroom_problem(ep, instance)
    if headroom is not None:
        problems.append(headroom)
    alarms = resolved_alarms(ep)  # what the stack creates: the defaults that depend on the endpoint filled in
    if alarms is not None:
        problems += _alarm_problems(ep, alarms)
    update_policy = ep.deployment
    if update_policy is None:
        return problems
    unit_problems = _size_unit_problems(ep, update_policy)
    if unit_problems:  # the rules below assume sizes of the right unit
        return problems + unit_problems

    components = ep.hosting.uses_components
    key = update_policy.policy_key
    if instance.family == "inf1" and not components:
        # "Endpoints that use Inf1 (Inferentia-based) instances ... fall back to using a blue/green deployment with
        # all at once traffic shifting and no final baking period" (deployment guardrails, Exclusions).
        return problems + [
            _deployment_problem(
                ep,
                key,
                f"is not available on {ep.instance_type}: SageMaker's deployment guardrails exclude Inf1 instances "
                "and fall back to all-at-once without baking; set deployment: null",
            )
        ]
    return problems + _step_problems(ep, update_policy) + _timing_problems(ep, update_policy)


def _deployment_problem(ep: EndpointSpec, key: str, message: str) -> str:
    return f"endpoint {ep.name!r}: deployment.{key}: {message}"


def _size_unit_problems(ep: EndpointSpec, update_policy: UpdatePolicySpec) -> list[str]:
    """Sizes in the wrong unit for the hosting mode (instances on a component, copies on a variant), and blue/green
    on an inference component."""
    components = ep.hosting.uses_components
    problems: list[str] = []
    for size_key, size in _sizes(update_policy):
        if components and size.instances is not None:
            problems.append(
                _deployment_problem(
                    ep,
                    size_key,
                    f"value {{instances: {size.instances}}} counts instances, but on an inference-component "
                    "endpoint a model update replaces copies of the component; allowed: {copies: N} or {percent: P}",
                )
            )
        elif not components and size.copies is not None:
            problems.append(
                _deployment_problem(
                    ep,
                    size_key,
                    f"value {{copies: {size.copies}}} counts inference-component copies, and this endpoint "
                    "(hosting.mode: endpoint) has none; allowed: {instances: N} or {percent: P}",
                )
            )
    if components and update_policy.blue_green is not None:
        problems.append(
            _deployment_problem(
                ep,
                "blue_green",
                "cannot apply to an inference component: a new model updates the component "
                "(UpdateInferenceComponent), whose DeploymentConfig takes a RollingUpdatePolicy only, and blue/green "
                "acts on the endpoint config, which a model update does not change; use rolling: {maximum_batch_size: "
                "{copies: N} or {percent: P}}, or deployment: null",
            )
        )
    return problems


def _step_problems(ep: EndpointSpec, update_policy: UpdatePolicySpec) -> list[str]:
    """A stepped update (rolling batches, canary or linear traffic) against the fleet: at least 2, and each step's
    count within SageMaker's share of the fleet at both ends of its range."""
    policy, key = update_policy.policy, update_policy.policy_key
    components = ep.hosting.uses_components
    low, high = fleet_range(ep)
    unit = "copies" if components else "instances"
    one = "copy" if components else "instance"
    stepped = isinstance(policy, Rolling) or policy.traffic != "all_at_once"
    if not stepped:
        return []
    if low < 2:
        where = (
            "hosting.copies / copy_scaling.min_copies" if components else "instance_count / autoscaling.min_capacity"
        )
        what = "rolling batches" if isinstance(policy, Rolling) else f"{policy.traffic} traffic"
        return [
            _deployment_problem(
                ep,
                key,
                f"{what} need a fleet of at least 2 {unit}, and this one can be {low} ({where}): one {one} is 100 % "
                "of the fleet, above the 50 % SageMaker allows per step; "
                + (
                    "set deployment: null (SageMaker's own update of the component, unguarded) or keep at least 2 "
                    "copies"
                    if components
                    else "use blue_green with traffic all_at_once, or at least 2 instances"
                ),
            )
        ]
    # Counts against the fleet: the fraction shrinks as the fleet grows, so check both ends.
    # A missing canary_size / linear_step is the BlueGreen validator's error, not this check's.
    checks: list[tuple[str, CapacitySize | None, tuple[int, int], str]]
    if isinstance(policy, Rolling):
        checks = [("rolling.maximum_batch_size", policy.maximum_batch_size, ROLLING_PERCENT, "a rolling batch")]
    elif policy.traffic == "canary":
        checks = [("blue_green.canary_size", policy.canary_size, (0, CANARY_MAX_PERCENT), "a canary")]
    else:
        checks = [("blue_green.linear_step", policy.linear_step, LINEAR_PERCENT, "a linear step")]
    ranged = "copy_scaling" if components else "autoscaling"
    fleet = f"{low} {unit}" if low == high else f"{low}-{high} {unit} ({ranged})"
    problems: list[str] = []
    for size_key, step, (lo_pct, hi_pct), what in checks:
        if step is None or step.count is None:
            continue
        largest_share = 100 * step.count / low
        smallest_share = 100 * step.count / high
        if largest_share > hi_pct or smallest_share < lo_pct:
            allowed_low = max(1, math.ceil(lo_pct * high / 100))
            allowed_high = math.floor(hi_pct * low / 100)
            allowed = (
                f"{allowed_low}-{allowed_high} {unit}"
                if allowed_low <= allowed_high
                else f"no {one} count fits: use percent"
            )
            share = f"{largest_share:.0f} %" if low == high else f"{smallest_share:.0f}-{largest_share:.0f} %"
            limit = f"at most {hi_pct} %" if lo_pct == 0 else f"{lo_pct}-{hi_pct} %"
            problems.append(
                _deployment_problem(
                    ep,
                    size_key,
                    f"value {step.count} {one if step.count == 1 else unit} is {share} of a fleet of {fleet}; SageMaker "
                    f"allows {limit} for {what}; allowed here: {allowed}",
                )
            )
    return problems


def _timing_problems(ep: EndpointSpec, update_policy: UpdatePolicySpec) -> list[str]:
    """The update's timeout against its waits, and the rollback alarms' window against one bake."""
    policy, key = update_policy.policy, update_policy.policy_key
    unit = "copies" if ep.hosting.uses_components else "instances"
    high = fleet_range(ep)[1]
    problems: list[str] = []
    termination_wait_s = policy.termination_wait_s if isinstance(policy, BlueGreen) else 0
    waits = policy.wait_interval_s * policy.traffic_steps(high) + termination_wait_s
    timeout = policy.maximum_execution_timeout_s
    if timeout is not None and timeout <= waits:
        problems.append(
            _deployment_problem(
                ep,
                f"{key}.maximum_execution_timeout_s",
                f"value {timeout} s is not longer than the update's waits, {waits} s (wait_interval_s "
                f"{policy.wait_interval_s} x {policy.traffic_steps(high)} step(s) at a fleet of {high} {unit}"
                + (f" + termination_wait_s {termination_wait_s}" if termination_wait_s else "")
                + f"); the timeout must exceed them ({key} MaximumExecutionTimeoutInSeconds); allowed: {waits + 1}-"
                f"{EXECUTION_TIMEOUT_BOUNDS[1]}",
            )
        )
    applied = resolved_update_policy(ep)
    rollback = applied.auto_rollback if applied is not None else None
    bake = applied.policy.wait_interval_s if applied is not None else policy.wait_interval_s
    if rollback is not None and rollback.alarm_keys() and rollback.window_s > bake:
        problems.append(
            _deployment_problem(
                ep,
                "auto_rollback",
                f"period_s x evaluation_periods = {rollback.window_s} s is longer than {key}.wait_interval_s "
                f"{bake} s: a new-fleet alarm could not reach ALARM within one bake; shorten the alarm "
                f"window or raise wait_interval_s to at least {rollback.window_s}",
            )
        )
    if rollback is not None:
        problems += _latency_problems(ep, rollback, "deployment.auto_rollback")
    return problems


def _sizes(update_policy: UpdatePolicySpec) -> list[tuple[str, CapacitySize]]:
    found = []
    if update_policy.blue_green is not None:
        found += [(f"blue_green.{k}", getattr(update_policy.blue_green, k)) for k in ("canary_size", "linear_step")]
    if update_policy.rolling is not None:
        found += [
            (f"rolling.{k}", getattr(update_policy.rolling, k))
            for k in ("maximum_batch_size", "rollback_maximum_batch_size")
        ]
    return [(k, size) for k, size in found if size is not None]


def _latency_problems(ep: EndpointSpec, block: AlarmsSpec | AutoRollback, key: str) -> list[str]:
    """An asynchronous endpoint's latency threshold above its invocation timeout: no request runs longer (SageMaker
    cuts it off and counts a failure), so the alarm could never fire."""
    latency = block.latency_p99_ms
    if not ep.invocation.is_async or latency is None:
        return []
    timeout_s = ep.invocation.invocation_timeout_s or ASYNC_DEFAULT_INVOCATION_TIMEOUT_S
    if latency <= timeout_s * 1000:
        return []
    given = (
        "invocation.invocation_timeout_s"
        if ep.invocation.invocation_timeout_s
        else "SageMaker's default invocation timeout"
    )
    return [
        f"endpoint {ep.name!r}: {key}.latency_p99_ms: value {latency} ms is above the {timeout_s * 1000} ms "
        f"({given}, {timeout_s} s) after which an asynchronous request is cut off, so this alarm could never fire; "
        f"allowed: 1-{timeout_s * 1000}, or leave it out ({async_latency_default_ms(ep)} ms, "
        f"{ASYNC_LATENCY_SHARE:.0%} of the timeout)"
    ]


def _alarm_problems(ep: EndpointSpec, alarms: AlarmsSpec) -> list[str]:
    problems = []
    if alarms.no_invocations_periods is not None and ep.invocation.is_async:
        # "Any metric not listed below is not published if the endpoint is enabled for asynchronous inference. Such
        # metrics include ... Invocations" (https://docs.aws.amazon.com/sagemaker/latest/dg/async-inference-monitor.html).
        problems.append(
            f"endpoint {ep.name!r}: alarms.no_invocations_periods: value {alarms.no_invocations_periods} cannot work on an "
            "asynchronous endpoint (invocation.mode: async): SageMaker does not publish Invocations for it; remove the key"
        )
    disk = alarms.disk_percent
    if ep.data_capture is not None and disk is not None and disk > CAPTURE_DISK_LIMIT_PERCENT:
        problems.append(
            f"endpoint {ep.name!r}: alarms.disk_percent: value {disk:g} is above {CAPTURE_DISK_LIMIT_PERCENT}, where "
            "data capture (data_capture:) stops capturing requests (SageMaker keeps disk use below 75 % for it): the "
            f"alarm would fire only after capture stopped; allowed with data capture: 1-{CAPTURE_DISK_LIMIT_PERCENT} "
            f"(or leave it out: {CAPTURE_DISK_DEFAULT_PERCENT})"
        )
    problems += _latency_problems(ep, alarms, "alarms")
    return problems


__all__ = [
    "AlarmsSpec",
    "AutoRollback",
    "BlueGreen",
    "CAPTURE_DISK_DEFAULT_PERCENT",
    "CAPTURE_DISK_LIMIT_PERCENT",
    "CapacitySize",
    "UpdatePolicySpec",
    "MAX_ROLLBACK_ALARMS",
    "Rolling",
    "async_latency_default_ms",
    "component_deployment_warning",
    "default_component_rolling",
    "fleet_range",
    "operations_problems",
    "rolling_headroom_problem",
    "resolved_alarms",
    "resolved_update_policy",
]
