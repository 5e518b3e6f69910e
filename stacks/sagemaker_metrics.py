"""What SageMaker publishes to CloudWatch for one endpoint, by how it is hosted: the one table the alarms and the
dashboard build their metrics from (`published_metric` refuses a series that is not in it, at synth), and that
tests/stacks/test_alarms.py checks every alarm and dashboard metric of the synthesized templates against.

Sources (the pages' own tables, quoted where the table below uses them):
  [METRICS] SageMaker Developer Guide, "Amazon SageMaker AI metrics in Amazon CloudWatch"
    (https://docs.aws.amazon.com/sagemaker/latest/dg/monitoring-cloudwatch.html):
    - "SageMaker AI endpoint metrics", namespace /aws/sagemaker/Endpoints: CPUUtilization, MemoryUtilization,
      DiskUtilization, GPUUtilization and GPUMemoryUtilization ("0-100 and is multiplied by the number of GPUs"); and,
      "provided only for endpoints that host active inference components", CPUUtilizationNormalized,
      GPUUtilizationNormalized, GPUMemoryUtilizationNormalized, CPUReservation, GPUReservation, MemoryReservation.
      "Dimensions for endpoint metrics: EndpointName, VariantName".
    - "SageMaker AI endpoint invocation metrics", namespace AWS/SageMaker: ConcurrentRequestsPerCopy,
      ConcurrentRequestsPerModel, Invocation4XXErrors, Invocation5XXErrors, InvocationModelErrors ("did not result in
      2XX HTTP response. This includes 4XX/5XX status codes, low-level socket errors, malformed HTTP responses, and
      request timeouts. For each error response, 1 is sent; otherwise, 0"), Invocations, InvocationsPerCopy,
      InvocationsPerInstance, ModelLatency (microseconds; "Average, Sum, Min, Max, Sample Count, Percentiles"),
      OverheadLatency. "Dimensions for endpoint invocation metrics: EndpointName, VariantName: Filters endpoint
      invocation metrics for a ProductionVariant ... InferenceComponentName: Filters inference component invocation
      metrics". *PerCopy are the component's, *PerModel and *PerInstance the variant's.
    - "SageMaker AI inference component metrics", namespace /aws/sagemaker/InferenceComponents:
      CPUUtilizationNormalized, GPUMemoryUtilizationNormalized, GPUUtilizationNormalized, MemoryUtilizationNormalized,
      each "reported by each copy of the inference component" (0-100 %). "Dimensions for inference component metrics:
      InferenceComponentName".
  [ASYNC] "Alarms and logs for tracking metrics from asynchronous endpoints"
    (https://docs.aws.amazon.com/sagemaker/latest/dg/async-inference-monitor.html): "The metrics below are an
    exhaustive list of metrics for asynchronous endpoints ... Any metric not listed below is not published if the
    endpoint is enabled for asynchronous inference. Such metrics include (but are not limited to): OverheadLatency,
    Invocations, InvocationsPerInstance". Listed: Invocation4XXErrors, Invocation5XXErrors, ModelLatency ("the same as
    the metrics published for real-time endpoints"); with EndpointName: ApproximateBacklogSize,
    ApproximateBacklogSizePerInstance, ApproximateAgeOfOldestRequest; with EndpointName and VariantName:
    RequestDownloadFailures, ResponseUploadFailures, NotificationFailures, RequestDownloadLatency,
    ResponseUploadLatency, ExpiredRequests, InvocationFailures, InvocationsProcesssed (spelt so), TimeInBacklog,
    TotalProcessingTime; "also includes host-level metrics". InvocationModelErrors is not listed: not published.
  [ASYNC-SCALE] "Autoscale an asynchronous endpoint" (async-inference-autoscale.html): HasBacklogWithoutCapacity,
    AWS/SageMaker, dimension EndpointName (the scale-from-zero alarm).
  [ZERO] "Scale an endpoint to zero instances" (endpoint-auto-scaling-zero-instances.html):
    NoCapacityInvocationFailures, AWS/SageMaker, dimension InferenceComponentName.
  [GUARDRAILS] "Monitor model latency on the new fleet" (deployment-guardrails-configuration.html): during an update
    "CloudWatch publishes the metrics with the dimension EndpointConfigName:{New-Ep-Config}" beside EndpointName and
    VariantName; its examples alarm on ModelLatency and Invocation5XXErrors. The page lists no other metric with that
    dimension, so carrying it on InvocationModelErrors and Invocation4XXErrors is unverified (README facts table).
"""

from __future__ import annotations

from aws_cdk import Duration
from aws_cdk import aws_cloudwatch as cloudwatch

REAL_TIME, ASYNC, COMPONENTS = "real-time", "async", "inference-components"
HOSTING_MODES = (REAL_TIME, ASYNC, COMPONENTS)

INVOCATIONS = "AWS/SageMaker"
ENDPOINT_INSTANCES = "/aws/sagemaker/Endpoints"
COMPONENT_COPIES = "/aws/sagemaker/InferenceComponents"

VARIANT = frozenset({"EndpointName", "VariantName"})
NEW_FLEET = frozenset({"EndpointName", "VariantName", "EndpointConfigName"})
ENDPOINT = frozenset({"EndpointName"})
COMPONENT = frozenset({"InferenceComponentName"})

_HOST = ("CPUUtilization", "MemoryUtilization", "DiskUtilization", "GPUUtilization", "GPUMemoryUtilization")
_HOST_WITH_COMPONENTS = (
    "CPUUtilizationNormalized", "GPUUtilizationNormalized", "GPUMemoryUtilizationNormalized", "CPUReservation",
    "GPUReservation", "MemoryReservation",
)  # fmt: skip
_COPY = ("CPUUtilizationNormalized", "GPUMemoryUtilizationNormalized", "GPUUtilizationNormalized", "MemoryUtilizationNormalized")
_REAL_TIME_INVOCATIONS = (
    "Invocations", "Invocation4XXErrors", "Invocation5XXErrors", "InvocationModelErrors", "InvocationsPerInstance",
    "ModelLatency", "OverheadLatency", "ConcurrentRequestsPerModel",
)  # fmt: skip
_COMPONENT_INVOCATIONS = (
    "Invocations", "Invocation4XXErrors", "Invocation5XXErrors", "InvocationModelErrors", "InvocationsPerCopy",
    "ModelLatency", "OverheadLatency", "ConcurrentRequestsPerCopy",
)  # fmt: skip
_NEW_FLEET = ("Invocation5XXErrors", "ModelLatency", "InvocationModelErrors", "Invocation4XXErrors")
_ASYNC_COMMON = ("Invocation4XXErrors", "Invocation5XXErrors", "ModelLatency")
_ASYNC_QUEUE = ("ApproximateBacklogSize", "ApproximateBacklogSizePerInstance", "ApproximateAgeOfOldestRequest",
                "HasBacklogWithoutCapacity")
_ASYNC_VARIANT = (
    "RequestDownloadFailures", "ResponseUploadFailures", "NotificationFailures", "RequestDownloadLatency",
    "ResponseUploadLatency", "ExpiredRequests", "InvocationFailures", "InvocationsProcesssed", "TimeInBacklog",
    "TotalProcessingTime",
)  # fmt: skip


def _rows(namespace: str, names: tuple[str, ...], dimensions: frozenset[str]) -> set[tuple[str, str, frozenset[str]]]:
    return {(namespace, name, dimensions) for name in names}


# hosting mode -> every (namespace, metric, dimension names) SageMaker publishes for such an endpoint.
PUBLISHED: dict[str, frozenset[tuple[str, str, frozenset[str]]]] = {
    REAL_TIME: frozenset(
        _rows(INVOCATIONS, _REAL_TIME_INVOCATIONS, VARIANT)  # [METRICS]
        | _rows(INVOCATIONS, _NEW_FLEET, NEW_FLEET)  # [GUARDRAILS]
        | _rows(ENDPOINT_INSTANCES, _HOST, VARIANT)  # [METRICS]
    ),
    ASYNC: frozenset(
        _rows(INVOCATIONS, _ASYNC_COMMON, VARIANT)  # [ASYNC]
        | _rows(INVOCATIONS, ("Invocation5XXErrors", "ModelLatency"), NEW_FLEET)  # [GUARDRAILS]
        | _rows(INVOCATIONS, _ASYNC_QUEUE, ENDPOINT)  # [ASYNC], [ASYNC-SCALE]
        | _rows(INVOCATIONS, _ASYNC_VARIANT, VARIANT)  # [ASYNC]
        | _rows(ENDPOINT_INSTANCES, _HOST, VARIANT)  # [ASYNC] "host-level metrics"
    ),
    COMPONENTS: frozenset(
        _rows(INVOCATIONS, _COMPONENT_INVOCATIONS, COMPONENT)  # [METRICS]
        | _rows(INVOCATIONS, ("NoCapacityInvocationFailures",), COMPONENT)  # [ZERO]
        | _rows(COMPONENT_COPIES, _COPY, COMPONENT)  # [METRICS]
        | _rows(ENDPOINT_INSTANCES, _HOST + _HOST_WITH_COMPONENTS, VARIANT)  # [METRICS]
    ),
}


def is_published(mode: str, namespace: str, metric_name: str, dimension_names) -> bool:
    """Whether SageMaker publishes `metric_name` in `namespace` with exactly these dimensions for a `mode` endpoint."""
    if mode not in PUBLISHED:
        raise ValueError(f"hosting mode {mode!r} is not one of {', '.join(HOSTING_MODES)}")
    return (namespace, metric_name, frozenset(dimension_names)) in PUBLISHED[mode]


def published_metric(
    mode: str, namespace: str, metric_name: str, dimensions: dict[str, str], statistic: str, period_s: int,
    label: str | None = None,
) -> cloudwatch.Metric:
    """A CloudWatch metric SageMaker publishes for a `mode` endpoint; ValueError naming the series otherwise."""
    if not is_published(mode, namespace, metric_name, dimensions):
        raise ValueError(
            f"SageMaker publishes no {namespace} {metric_name} with dimensions {sorted(dimensions)} for an endpoint "
            f"hosted as {mode!r} (stacks/sagemaker_metrics.py PUBLISHED, from the SageMaker Developer Guide)"
        )
    return cloudwatch.Metric(
        namespace=namespace, metric_name=metric_name, dimensions_map=dimensions, statistic=statistic,
        period=Duration.seconds(period_s), label=label,
    )


def hosting_mode(*, component: bool, asynchronous: bool) -> str:
    """The table's row for an endpoint: inference components, asynchronous, or a real-time model on the variant."""
    if component and asynchronous:
        raise ValueError("an inference-component endpoint is real-time only (endpoint_config/invocation.py)")
    return COMPONENTS if component else ASYNC if asynchronous else REAL_TIME


__all__ = [
    "ASYNC", "COMPONENT", "COMPONENTS", "COMPONENT_COPIES", "ENDPOINT", "ENDPOINT_INSTANCES", "HOSTING_MODES",
    "INVOCATIONS", "NEW_FLEET", "PUBLISHED", "REAL_TIME", "VARIANT", "hosting_mode", "is_published",
    "published_metric",
]  # fmt: skip
