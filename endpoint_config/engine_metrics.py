"""The `engine_metrics:` block: SageMaker's detailed observability (the endpoint config's MetricsConfig) and what the
stacks build on the engine metrics it publishes (stacks/engine_metrics.py): the dashboard's engine panel, an alarm
on queue depth and KV-cache use, and the scaling metric.

MetricsConfig, as botocore 1.44.8's sagemaker service model (2017-07-24) and cfn-lint 1.58's schema of
AWS::SageMaker::EndpointConfig state it: EnableDetailedObservability (boolean; "The default value for new endpoint
configurations is True"), EnableEnhancedMetrics (boolean, default False), MetricPublishFrequencyInSeconds (one of
10, 30, 60, 120, 180, 240, 300; default 60). The stacks always state all three, so an endpoint config says what it
publishes instead of leaning on a service default that differs for configs made before the feature.

Why the scaling metric stays concurrency: Application Auto Scaling's target tracking reads a CloudWatch metric by
namespace, name and dimensions (botocore application-autoscaling CustomizedMetricSpecification: MetricName,
Namespace, Dimensions, Statistic, Unit, Metrics; PredefinedMetricType has no engine metric), and SageMaker publishes
the engine metrics as OpenTelemetry metrics that only PromQL reads ("Detailed observability publishes
OpenTelemetry (OTel) metrics to Amazon CloudWatch via OTLP ... queryable using PromQL syntax", SageMaker Developer
Guide, monitoring-cloudwatch-detailed-observability.html). So `scaling_metric` other than concurrency is refused
at load with that reason (docs/design/engine-metrics.md).
"""

from __future__ import annotations

from typing import Literal

from pydantic import Field, model_validator

from .base import Strict

# MetricPublishFrequencyInSeconds' valid values (botocore sagemaker MetricsConfig; cfn-lint's enum).
PUBLISH_FREQUENCIES_S = (10, 30, 60, 120, 180, 240, 300)
PublishFrequency = Literal[10, 30, 60, 120, 180, 240, 300]

# What autoscaling may track. Only concurrency is buildable (module docstring); the engine metrics are named so a
# config asking for them gets the reason, not "unknown field".
SCALING_METRICS = ("concurrency", "queue-depth", "kv-cache")
ENGINE_SCALING_REFUSAL = (
    "Application Auto Scaling target tracking reads CloudWatch metrics by namespace, name and dimensions (botocore "
    "application-autoscaling CustomizedMetricSpecification), and SageMaker publishes engine metrics as "
    "OpenTelemetry metrics read only with PromQL (SageMaker Developer Guide, detailed observability); use "
    "'concurrency' and the engine alarm (engine_metrics.alarm)"
)


class EngineAlarm(Strict):
    """The PromQL alarm on the engine's saturation: requests waiting in its queue, or its KV cache nearly full,
    on any instance (or copy) for `pending_s`. Null thresholds leave that condition out; both null: no alarm."""

    # Requests waiting in one engine's queue (vllm:num_requests_waiting, sglang:num_queue_reqs).
    queue_depth: float | None = Field(8, ge=0, le=100000)
    # KV cache in use, percent (vllm:kv_cache_usage_perc and sglang:token_usage are fractions 0-1; x100).
    kv_cache_percent: float | None = Field(95, gt=0, le=100)
    # PromQL alarm PendingPeriod / RecoveryPeriod (0-86400, botocore cloudwatch AlarmPromQLCriteria).
    pending_s: int = Field(300, ge=0, le=86400)
    recovery_s: int = Field(300, ge=0, le=86400)
    # EvaluationInterval: 10, 20, 30 or a multiple of 60, at most 3600 (botocore cloudwatch PutMetricAlarm).
    evaluation_interval_s: int = Field(60, ge=10, le=3600)

    @model_validator(mode="after")
    def _interval(self) -> EngineAlarm:
        if self.evaluation_interval_s not in (10, 20, 30) and self.evaluation_interval_s % 60:
            raise ValueError(
                f"evaluation_interval_s {self.evaluation_interval_s}: CloudWatch takes 10, 20, 30 or a multiple of 60 "
                "(PutMetricAlarm EvaluationInterval)"
            )
        return self


class EngineMetrics(Strict):
    """SageMaker detailed observability and what is built on it (module docstring)."""

    detailed_observability: bool = True
    enhanced_metrics: bool = False
    publish_frequency_s: PublishFrequency = 60
    alarm: EngineAlarm | None = EngineAlarm()
    scaling_metric: Literal["concurrency", "queue-depth", "kv-cache"] = "concurrency"

    @model_validator(mode="after")
    def _buildable(self) -> EngineMetrics:
        if self.scaling_metric != "concurrency":
            raise ValueError(f"scaling_metric {self.scaling_metric!r} cannot be built: {ENGINE_SCALING_REFUSAL}")
        if self.alarm is not None and self.alarm.queue_depth is None and self.alarm.kv_cache_percent is None:
            raise ValueError("alarm: both queue_depth and kv_cache_percent are null; set alarm: null for no alarm")
        return self

    @property
    def engine_alarm(self) -> EngineAlarm | None:
        """The alarm the stacks build: none without detailed observability (nothing to read)."""
        return self.alarm if self.detailed_observability else None


__all__ = [
    "ENGINE_SCALING_REFUSAL",
    "PUBLISH_FREQUENCIES_S",
    "SCALING_METRICS",
    "EngineAlarm",
    "EngineMetrics",
]
