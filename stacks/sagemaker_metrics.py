"""What SageMaker publishes to CloudWatch for one endpoint, by how it is hosted: the one table the alarms and the
dashboard build their metrics from (`published_metric` refuses a series that is not in it, at synth), and that
tests/stacks/test_alarms.py checks every alarm and dashboard metric of the synthesized templates against.

The short source names in the table ([METRICS], [ASYNC], [ASYNC-SCALE], [ZERO], [GUARDRAILS], [POOLS]) and the pages'
quotes:
docs/design/metrics-and-alarms.md.
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
# A variant with instance pools: the same metrics per instance type besides the variant's aggregate [POOLS].
VARIANT_INSTANCE_TYPE = frozenset({"EndpointName", "VariantName", "InstanceType"})
COMPONENT = frozenset({"InferenceComponentName"})

_HOST = ("CPUUtilization", "MemoryUtilization", "DiskUtilization", "GPUUtilization", "GPUMemoryUtilization")
_HOST_WITH_COMPONENTS = (
    "CPUUtilizationNormalized",
    "GPUUtilizationNormalized",
    "GPUMemoryUtilizationNormalized",
    "CPUReservation",
    "GPUReservation",
    "MemoryReservation",
)
_COPY = (
    "CPUUtilizationNormalized",
    "GPUMemoryUtilizationNormalized",
    "GPUUtilizationNormalized",
    "MemoryUtilizationNormalized",
)
_REAL_TIME_INVOCATIONS = (
    "Invocations",
    "Invocation4XXErrors",
    "Invocation5XXErrors",
    "InvocationModelErrors",
    "InvocationsPerInstance",
    "ModelLatency",
    "OverheadLatency",
    "ConcurrentRequestsPerModel",
)
_COMPONENT_INVOCATIONS = (
    "Invocations",
    "Invocation4XXErrors",
    "Invocation5XXErrors",
    "InvocationModelErrors",
    "InvocationsPerCopy",
    "ModelLatency",
    "OverheadLatency",
    "ConcurrentRequestsPerCopy",
)
_NEW_FLEET = ("Invocation5XXErrors", "ModelLatency", "InvocationModelErrors", "Invocation4XXErrors")
_ASYNC_COMMON = ("Invocation4XXErrors", "Invocation5XXErrors", "ModelLatency")
_ASYNC_QUEUE = (
    "ApproximateBacklogSize",
    "ApproximateBacklogSizePerInstance",
    "ApproximateAgeOfOldestRequest",
    "HasBacklogWithoutCapacity",
)
_ASYNC_VARIANT = (
    "RequestDownloadFailures",
    "ResponseUploadFailures",
    "NotificationFailures",
    "RequestDownloadLatency",
    "ResponseUploadLatency",
    "ExpiredRequests",
    "InvocationFailures",
    "InvocationsProcesssed",
    "TimeInBacklog",
    "TotalProcessingTime",
)


def _rows(namespace: str, names: tuple[str, ...], dimensions: frozenset[str]) -> set[tuple[str, str, frozenset[str]]]:
    return {(namespace, name, dimensions) for name in names}


# hosting mode -> every (namespace, metric, dimension names) SageMaker publishes for such an endpoint.
PUBLISHED: dict[str, frozenset[tuple[str, str, frozenset[str]]]] = {
    REAL_TIME: frozenset(
        _rows(INVOCATIONS, _REAL_TIME_INVOCATIONS, VARIANT)  # [METRICS]
        | _rows(INVOCATIONS, _NEW_FLEET, NEW_FLEET)  # [GUARDRAILS]
        | _rows(ENDPOINT_INSTANCES, _HOST, VARIANT)  # [METRICS]
        | _rows(INVOCATIONS, _REAL_TIME_INVOCATIONS, VARIANT_INSTANCE_TYPE)  # [POOLS]
        | _rows(ENDPOINT_INSTANCES, _HOST, VARIANT_INSTANCE_TYPE)  # [POOLS]
    ),
    ASYNC: frozenset(
        _rows(INVOCATIONS, _ASYNC_COMMON, VARIANT)  # [ASYNC]
        | _rows(INVOCATIONS, ("Invocation5XXErrors", "ModelLatency"), NEW_FLEET)  # [GUARDRAILS]
        | _rows(INVOCATIONS, _ASYNC_QUEUE, ENDPOINT)  # [ASYNC], [ASYNC-SCALE]
        | _rows(INVOCATIONS, _ASYNC_VARIANT, VARIANT)  # [ASYNC]
        | _rows(ENDPOINT_INSTANCES, _HOST, VARIANT)  # [ASYNC] "host-level metrics"
        | _rows(INVOCATIONS, _ASYNC_COMMON, VARIANT_INSTANCE_TYPE)  # [POOLS] (the async-only ones: not stated)
        | _rows(ENDPOINT_INSTANCES, _HOST, VARIANT_INSTANCE_TYPE)  # [POOLS]
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
    mode: str,
    namespace: str,
    metric_name: str,
    dimensions: dict[str, str],
    statistic: str,
    period_s: int,
    label: str | None = None,
) -> cloudwatch.Metric:
    """A CloudWatch metric SageMaker publishes for a `mode` endpoint; ValueError naming the series otherwise."""
    if not is_published(mode, namespace, metric_name, dimensions):
        raise ValueError(
            f"SageMaker publishes no {namespace} {metric_name} with dimensions {sorted(dimensions)} for an endpoint "
            f"hosted as {mode!r} (stacks/sagemaker_metrics.py PUBLISHED, from the SageMaker Developer Guide)"
        )
    return cloudwatch.Metric(
        namespace=namespace,
        metric_name=metric_name,
        dimensions_map=dimensions,
        statistic=statistic,
        period=Duration.seconds(period_s),
        label=label,
    )


def hosting_mode(*, component: bool, asynchronous: bool) -> str:
    """The table's row for an endpoint: inference components, asynchronous, or a real-time model on the variant."""
    if component and asynchronous:
        raise ValueError("an inference-component endpoint is real-time only (endpoint_config/invocation.py)")
    return COMPONENTS if component else ASYNC if asynchronous else REAL_TIME


__all__ = [
    "ASYNC",
    "COMPONENT",
    "COMPONENTS",
    "COMPONENT_COPIES",
    "ENDPOINT",
    "ENDPOINT_INSTANCES",
    "HOSTING_MODES",
    "INVOCATIONS",
    "NEW_FLEET",
    "PUBLISHED",
    "REAL_TIME",
    "VARIANT",
    "VARIANT_INSTANCE_TYPE",
    "hosting_mode",
    "is_published",
    "published_metric",
]
