"""Engine metrics of the vllm and sglang systems (token throughput, time to first token, KV-cache use, queue depth):
the endpoint config's MetricsConfig, the PromQL alarm on engine saturation and the dashboard's engine panel. Config:
endpoint_config/engine_metrics.py; design, cost and what is unverified: docs/design/engine-metrics.md.

Where the metrics are and how they are named, by source:
  [DO]   SageMaker Developer Guide, "Amazon SageMaker AI detailed observability for inference endpoints"
         (monitoring-cloudwatch-detailed-observability.html): an OTel collector scrapes "inference framework
         containers (vLLM, SGLang)"; "Detailed observability publishes OpenTelemetry (OTel) metrics to Amazon
         CloudWatch via OTLP. These are not Prometheus metrics ... queryable using PromQL syntax". So they have no
         CloudWatch namespace or dimensions: they are read with PromQL, by labels.
  [REF]  Same guide, "OpenTelemetry metrics reference" (inference-monitoring.html): labels
         aws.sagemaker.endpoint.name, aws.sagemaker.variant.name, aws.sagemaker.inference_component.name,
         @resource.host.id, @resource.host.type; inference framework metrics with their source metrics
         vllm:prompt_tokens_total, vllm:generation_tokens_total, vllm:time_to_first_token_seconds,
         vllm:gpu_cache_usage_perc, vllm:num_requests_waiting; "Metrics prefixed with vllm: have equivalent sglang:
         counterparts".
  [PQL]  Same guide, "Connect to your observability tool": "In PromQL, labels with dots must be enclosed in single
         quotes"; its example queries spell the names with '_' (vllm_kv_cache_usage_perc, vllm_num_requests_waiting,
         vllm_time_to_first_token_seconds_bucket, vllm_prompt_tokens_total).
  [VLLM] vLLM 0.30.0's own names (vllm/v1/metrics/loggers.py, PrometheusStatLogger): vllm:num_requests_waiting,
         vllm:kv_cache_usage_perc ("1 means 100 percent usage"; vllm:gpu_cache_usage_perc is gone in 0.30.0, so
         [REF]'s KV-cache source name would read nothing), counters vllm:prompt_tokens / vllm:generation_tokens
         (exposed with prometheus_client's _total suffix), histogram vllm:time_to_first_token_seconds.
  [SGL]  SGLang's own names (sgl-project/sglang python/sglang/srt/metrics/collector.py, and its "Production Metrics"
         page): sglang:num_queue_reqs ("The number of requests in the waiting queue"), sglang:token_usage (KV pool
         use, 0-1), sglang:prompt_tokens_total, sglang:generation_tokens_total, sglang:time_to_first_token_seconds.
         The SGLang server exports them only when started with --enable-metrics (CloudWatch User Guide,
         "Collecting SGLang metrics with OTel Container Insights": "Without this flag ... the scrape fails").
  [ALARM] CloudWatch PromQL alarms (botocore cloudwatch 2010-08-01 AlarmPromQLCriteria: Query, PendingPeriod,
         RecoveryPeriod; PutMetricAlarm EvaluationInterval "10, 20, 30, and any multiple of 60"; TreatMissingData
         "is not applicable to PromQL alarms"; CloudWatch User Guide alarm-promql.html: "all matching time series
         returned by the query are considered to be breaching ... tracked as a contributor").

Unverified (only an account shows them): whether CloudWatch keeps the ':' of the engines' names ([REF], [SGL]) or
writes '_' ([PQL]) -- every query here selects both spellings with `or`; whether SageMaker's SGLang container
starts SGLang with --enable-metrics; how a histogram arrives (classic _bucket series or an OTel histogram) -- the
TTFT query asks for _bucket as [PQL] does. Safe meanwhile: a PromQL alarm whose query matches nothing has no
contributor, so it stays OK (a wrong name cannot page, and cannot warn either: docs/design/engine-metrics.md).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from aws_cdk import Duration
from aws_cdk import aws_cloudwatch as cloudwatch
from aws_cdk import aws_cloudwatch_actions as cw_actions
from aws_cdk import aws_sagemaker as sagemaker
from aws_cdk import aws_sns as sns
from constructs import Construct

from deployment.config_blocks import EngineAlarm, EngineMetrics
from systems import all_systems
from systems.base import EngineSeries

# OTel labels [REF]; quoted because of the dots [PQL].
ENDPOINT_LABEL = "'aws.sagemaker.endpoint.name'"
COMPONENT_LABEL = "'aws.sagemaker.inference_component.name'"
HOST_LABEL = "'@resource.host.id'"
INSTANCE_TYPE_LABEL = "'@resource.host.type'"  # [REF] "Instance type": splits a variant's instance pools


def engine_series() -> dict[str, EngineSeries]:
    """System name -> its engine's series (ServingSystem.metrics). Only the systems whose container runs the engine's
    own OpenAI server with its /metrics state them: SageMaker collects "vLLM and SGLang" [DO]; LMI (DJL Serving
    around vLLM) exports DJL's metrics, so lmi-vllm states none (unverified that SageMaker scrapes vLLM's inside it)."""
    return {name: system.metrics for name, system in all_systems().items() if system.metrics is not None}


def spellings(name: str) -> tuple[str, str]:
    """The engine's name and the '_' form [PQL] shows; which one CloudWatch keeps is unverified (module docstring)."""
    return name, name.replace(":", "_")


def selector(endpoint_name: str, component_name: str | None) -> str:
    """The label matchers of one endpoint (and its inference component) [REF], [PQL]."""
    matchers = [f'{ENDPOINT_LABEL}="{endpoint_name}"']
    if component_name is not None:
        matchers.append(f'{COMPONENT_LABEL}="{component_name}"')
    return "{" + ",".join(matchers) + "}"


def either(expression: Callable[[str], str], name: str) -> str:
    """`expression` of each spelling of `name`, joined with PromQL's `or`."""
    return " or ".join(expression(spelt) for spelt in spellings(name))


@dataclass(frozen=True)
class EngineQueries:
    """The PromQL queries of one endpoint's engine panel and alarm."""

    token_throughput: str
    ttft_p90: str
    kv_cache_percent: str
    queue_depth: str
    ttft_p90_by_instance_type: str  # with instance pools: each type's engines apart

    def alarm(self, engine_alarm: EngineAlarm) -> str:
        """Instances (hosts) whose engine queue or KV cache is past its threshold: each is a contributor [ALARM]."""
        parts = []
        if engine_alarm.queue_depth is not None:
            parts.append(f"({self.queue_depth}) > {engine_alarm.queue_depth:g}")
        if engine_alarm.kv_cache_percent is not None:
            parts.append(f"({self.kv_cache_percent}) > {engine_alarm.kv_cache_percent:g}")
        return " or ".join(parts)


def engine_queries(system: str, endpoint_name: str, component_name: str | None, window: str = "5m") -> EngineQueries:
    """The queries for `system`'s engine on one endpoint; KeyError-free: ValueError for a system without them."""
    known = engine_series()
    if system not in known:
        raise ValueError(f"system {system!r} has no engine metrics here; systems with them: {', '.join(known)}")
    series = known[system]
    sel = selector(endpoint_name, component_name)
    per_host = f"max by ({HOST_LABEL})"

    def rate(name: str) -> str:
        return "sum(" + either(lambda n: f"rate({n}{sel}[{window}])", name) + ")"

    def ttft_p90(by: str) -> str:
        return (
            f"histogram_quantile(0.9, sum by ({by}) ("
            + either(lambda n: f"rate({n}_bucket{sel}[{window}])", series.ttft_histogram)
            + "))"
        )

    return EngineQueries(
        token_throughput=f"{rate(series.prompt_tokens)} + {rate(series.generation_tokens)}",
        ttft_p90=ttft_p90("le"),
        ttft_p90_by_instance_type=ttft_p90(f"le, {INSTANCE_TYPE_LABEL}"),
        kv_cache_percent=f"100 * {per_host} (" + either(lambda n: n + sel, series.kv_cache) + ")",
        queue_depth=f"{per_host} (" + either(lambda n: n + sel, series.queue) + ")",
    )


def has_engine_metrics(system: str, *, asynchronous: bool) -> bool:
    """Whether the stacks build the engine panel and alarm: a vllm or sglang endpoint taking real-time requests
    (detailed observability is "for Amazon SageMaker AI real-time inference endpoints" [DO])."""
    return system in engine_series() and not asynchronous


def metrics_config(metrics: EngineMetrics) -> sagemaker.CfnEndpointConfig.MetricsConfigProperty:
    """The endpoint config's MetricsConfig, every field stated (endpoint_config/engine_metrics.py says why)."""
    return sagemaker.CfnEndpointConfig.MetricsConfigProperty(
        enable_detailed_observability=metrics.detailed_observability,
        enable_enhanced_metrics=metrics.enhanced_metrics,
        metric_publish_frequency_in_seconds=metrics.publish_frequency_s,
    )


def engine_alarm_name(endpoint_name: str) -> str:
    return f"{endpoint_name}-engine-saturation"


class EngineSaturationAlarm(Construct):
    """The PromQL alarm on one endpoint's engine saturation, notifying `topic` (the endpoint's alarm topic)."""

    def __init__(
        self,
        scope: Construct,
        construct_id: str,
        *,
        system: str,
        endpoint_name: str,
        component_name: str | None,
        engine_alarm: EngineAlarm,
        topic: sns.ITopic | None,
    ) -> None:
        super().__init__(scope, construct_id)
        queries = engine_queries(system, endpoint_name, component_name)
        conditions = []
        if engine_alarm.queue_depth is not None:
            conditions.append(f"more than {engine_alarm.queue_depth:g} requests waiting")
        if engine_alarm.kv_cache_percent is not None:
            conditions.append(f"KV cache above {engine_alarm.kv_cache_percent:g} %")
        self.query = queries.alarm(engine_alarm)
        self.alarm = cloudwatch.PromQLAlarm(
            self,
            "Alarm",
            alarm_name=engine_alarm_name(endpoint_name),
            alarm_description=f"{endpoint_name}: an instance's {system} engine has "
            + " or ".join(conditions)
            + f" for {engine_alarm.pending_s} s (engine metrics from SageMaker detailed observability; names unverified, "
            "docs/design/engine-metrics.md)",
            query=self.query,
            evaluation_interval=Duration.seconds(engine_alarm.evaluation_interval_s),
            pending_period=Duration.seconds(engine_alarm.pending_s),
            recovery_period=Duration.seconds(engine_alarm.recovery_s),
        )
        if topic is not None:
            self.alarm.add_alarm_action(cw_actions.SnsAction(topic))


def engine_panel(
    scope: Construct,
    *,
    system: str,
    endpoint_name: str,
    component_name: str | None,
    alarmed: bool,
    pooled: bool = False,
) -> list[cloudwatch.IWidget]:
    """The dashboard's engine row for one endpoint: the four PromQL queries as text (to run in CloudWatch Query
    Studio; `pooled`, instance pools: time to first token per instance type too) and, when the alarm exists, its
    state. Not charts: the dashboard body's PromQL chart widget is not in a source checked here, and a body
    CloudWatch rejects would fail the whole stack (docs/design/engine-metrics.md)."""
    queries = engine_queries(system, endpoint_name, component_name)
    text = "\n".join(
        [
            f"**Engine ({system}) metrics** -- PromQL, run in CloudWatch Query Studio (SageMaker detailed observability; "
            "metric spellings unverified):",
            "",
            f"* Token throughput (tokens/s): `{queries.token_throughput}`",
            f"* Time to first token p90 (s): `{queries.ttft_p90}`",
            f"* KV-cache use (%, per instance): `{queries.kv_cache_percent}`",
            f"* Queue depth (requests waiting, per instance): `{queries.queue_depth}`",
        ]
        + ([f"* Time to first token p90 by instance type (s): `{queries.ttft_p90_by_instance_type}`"] if pooled else [])
    )
    widgets: list[cloudwatch.IWidget] = [cloudwatch.TextWidget(markdown=text, width=18 if alarmed else 24, height=6)]
    if alarmed:
        alarm = cloudwatch.Alarm.from_alarm_name(
            scope, f"EngineAlarm-{endpoint_name}", engine_alarm_name(endpoint_name)
        )
        widgets.append(cloudwatch.AlarmStatusWidget(alarms=[alarm], title="Engine saturation", width=6, height=6))
    return widgets


__all__ = [
    "EngineSaturationAlarm",
    "EngineQueries",
    "EngineSeries",
    "engine_series",
    "engine_alarm_name",
    "engine_panel",
    "engine_queries",
    "has_engine_metrics",
    "metrics_config",
    "selector",
    "spellings",
]
