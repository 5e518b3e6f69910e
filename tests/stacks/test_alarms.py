"""Alarms (`alarms:`) and the environment dashboard, on config/examples/production.yaml: chat-vllm tunes the block and
sends to an existing topic (and captures data: disk at 70 %); assist-ic (an inference component) and summarize-async
(asynchronous: latency from its invocation timeout) keep the defaults (a topic of their own). The class check: every
alarm and dashboard metric in these templates is one SageMaker publishes for its endpoint's hosting mode
(stacks/sagemaker_metrics.py PUBLISHED)."""

from __future__ import annotations

import json

import pytest
from aws_cdk import App, Stack
from helpers import alarm_series

from deployment import load_config
from endpoint_config.operations import AlarmsSpec
from stacks.endpoint_alarms import EndpointAlarms
from stacks.sagemaker_metrics import COMPONENTS, PUBLISHED, REAL_TIME, hosting_mode, is_published, published_metric

PROD = ("config/examples/production.yaml", "prod")
CHAT = "llm-endpoints-prod-chat-vllm"
DEFAULTS = "llm-endpoints-prod-assist-ic"
ASYNC = "llm-endpoints-prod-summarize-async"
ARTIFACTS = "llm-endpoints-prod-artifacts"
ONCALL = "arn:aws:sns:us-east-1:111122223333:llm-oncall"


@pytest.fixture(scope="module")
def prod(synth):
    return synth(*PROD)


def health_alarms(prod, stack: str, endpoint: str) -> dict[str, dict]:
    """The `alarms:` block's alarms by name suffix (rollback alarms and other blocks' alarms left out)."""
    found = {}
    for r in prod.templates[stack]["Resources"].values():
        name = str(r["Properties"].get("AlarmName", "")) if r["Type"] == "AWS::CloudWatch::Alarm" else ""
        if name.startswith(f"{endpoint}-") and "-rollback-" not in name:
            found[name.removeprefix(f"{endpoint}-")] = r["Properties"]
    return found


def test_tuned_alarms_go_to_the_existing_topic(prod):
    alarms = health_alarms(prod, CHAT, "prod-chat-vllm")
    assert sorted(alarms) == [
        "4xx-rate",
        "5xx-rate",
        "disk",
        "gpu-memory",
        "latency-p99",
        "model-errors",
        "no-invocations",
    ]
    for props in alarms.values():
        assert props["AlarmActions"] == [ONCALL]
        for series in alarm_series(props):
            assert {"Name": "EndpointName", "Value": "prod-chat-vllm"} in series["Dimensions"]
            assert {"Name": "VariantName", "Value": "AllTraffic"} in series["Dimensions"]
    # data_capture is on: capture stops at 75 % disk, so the disk alarm defaults to 70.
    assert alarms["disk"]["Threshold"] == 70
    # Its own topic is not created when one is given (other blocks' topics may exist: none is named for alarms).
    assert not [
        r
        for r in prod.templates[CHAT]["Resources"].values()
        if r["Type"] == "AWS::SNS::Topic" and "alarms" in str(r["Properties"].get("DisplayName", ""))
    ]
    # GPUMemoryUtilization sums the GPUs: 97 % per GPU on the 4 GPUs of ml.g5.12xlarge.
    gpu = alarms["gpu-memory"]
    assert (gpu["Namespace"], gpu["MetricName"], gpu["Statistic"], gpu["Threshold"]) == (
        "/aws/sagemaker/Endpoints",
        "GPUMemoryUtilization",
        "Maximum",
        388,
    )
    latency = alarms["latency-p99"]
    assert (latency["Namespace"], latency["ExtendedStatistic"], latency["Threshold"]) == (
        "AWS/SageMaker",
        "p99",
        20_000_000,
    )
    quiet = alarms["no-invocations"]
    assert (
        quiet["MetricName"],
        quiet["ComparisonOperator"],
        quiet["TreatMissingData"],
        quiet["EvaluationPeriods"],
    ) == ("Invocations", "LessThanThreshold", "breaching", 12)


def test_defaults_create_a_tls_only_topic_cloudwatch_may_publish_to(prod):
    alarms = health_alarms(prod, DEFAULTS, "prod-assist-ic")
    assert sorted(alarms) == [
        "4xx-rate",
        "5xx-rate",
        "disk",
        "gpu-memory",
        "latency-p99",
        "model-errors",
    ]  # no-invocations: off
    thresholds = {k: p["Threshold"] for k, p in alarms.items()}
    assert thresholds == {
        "4xx-rate": 0.05,
        "5xx-rate": 0.01,
        "disk": 90,
        "gpu-memory": 95,
        "latency-p99": 30_000_000,
        "model-errors": 0.01,
    }
    assert {
        (s["Period"], p["EvaluationPeriods"], p["DatapointsToAlarm"]) for p in alarms.values() for s in alarm_series(p)
    } == {(300, 3, 2)}
    resources = prod.templates[DEFAULTS]["Resources"]
    [topic_id] = [
        k
        for k, r in resources.items()
        if r["Type"] == "AWS::SNS::Topic" and "alarms" in str(r["Properties"].get("DisplayName", ""))
    ]
    assert all(p["AlarmActions"] == [{"Ref": topic_id}] for p in alarms.values())
    [policy] = [
        r["Properties"]["PolicyDocument"]
        for r in resources.values()
        if r["Type"] == "AWS::SNS::TopicPolicy" and r["Properties"]["Topics"] == [{"Ref": topic_id}]
    ]
    by_effect = {s["Effect"]: s for s in policy["Statement"]}
    assert by_effect["Deny"]["Condition"] == {"Bool": {"aws:SecureTransport": "false"}}  # AwsSolutions-SNS3
    assert by_effect["Allow"]["Principal"] == {"Service": "cloudwatch.amazonaws.com"}
    assert by_effect["Allow"]["Condition"]["StringEquals"] == {"aws:SourceAccount": {"Ref": "AWS::AccountId"}}
    outputs = prod.templates[DEFAULTS]["Outputs"]
    assert any(o["Value"] == {"Ref": topic_id} for o in outputs.values())


def test_one_dashboard_per_environment_in_the_artifact_stack(prod):
    dashboards = [
        r["Properties"]
        for r in prod.templates[ARTIFACTS]["Resources"].values()
        if r["Type"] == "AWS::CloudWatch::Dashboard"
    ]
    [dashboard] = dashboards
    assert dashboard["DashboardName"] == {"Fn::Join": ["", ["llm-endpoints-prod-endpoints-", {"Ref": "AWS::Region"}]]}
    body_parts = dashboard["DashboardBody"]["Fn::Join"][1]
    body = json.loads("".join(p if isinstance(p, str) else "us-east-1" for p in body_parts))
    metrics = [m for w in body["widgets"] if w["type"] == "metric" for m in w["properties"]["metrics"]]
    names = {(m[0], m[1], m[3]) for m in metrics if isinstance(m[0], str)}
    for endpoint in ("prod-chat-vllm", "prod-summarize-async"):
        assert ("AWS/SageMaker", "ModelLatency", endpoint) in names
        assert ("AWS/SageMaker", "Invocation5XXErrors", endpoint) in names
        assert ("/aws/sagemaker/Endpoints", "GPUMemoryUtilization", endpoint) in names  # both on g5
    # The inference component's row: its own invocations and its copies' GPUs, the instances by their CPU samples.
    assert ("AWS/SageMaker", "ModelLatency", "prod-assist-ic-ic") in names
    assert ("AWS/SageMaker", "InvocationsPerCopy", "prod-assist-ic-ic") in names
    assert ("/aws/sagemaker/InferenceComponents", "GPUMemoryUtilizationNormalized", "prod-assist-ic-ic") in names
    assert ("/aws/sagemaker/Endpoints", "CPUUtilization", "prod-assist-ic") in names
    assert ("AWS/SageMaker", "ModelLatency", "prod-assist-ic") not in names
    # Latency percentiles, and the instance count against chat-vllm's scaling range 2-6.
    stats = {m[-1]["stat"] for m in metrics if isinstance(m[0], str) and m[1] == "ModelLatency"}
    assert {"p50", "p90", "p99"} <= stats
    [instances] = [
        w
        for w in body["widgets"]
        if w["type"] == "metric"
        and w["properties"].get("title") == "Instances (from invocations)"
        and "prod-chat-vllm" in json.dumps(w)
    ]
    annotations = {a["value"] for a in instances["properties"]["annotations"]["horizontal"]}
    assert annotations == {2, 6}
    # assist-ic: copies 0-4 (copy_scaling) on instances 0-2 (instance_scaling).
    ranges = {
        w["properties"]["title"]: {a["value"] for a in w["properties"]["annotations"]["horizontal"]}
        for w in body["widgets"]
        if w["type"] == "metric"
        and "prod-assist-ic" in json.dumps(w)
        and "annotations" in w["properties"]
        and "horizontal" in w["properties"]["annotations"]
    }
    assert ranges["Copies (from invocations)"] == {0, 4}
    assert ranges["Instances (CPU samples per minute)"] == {0, 2}
    # Asynchronous endpoints publish no Invocations: no invocation count for summarize-async.
    assert ("AWS/SageMaker", "Invocations", "prod-summarize-async") not in names


def test_endpoint_alarms_validates_its_props():
    stack = Stack(App(), "S")
    with pytest.raises(ValueError, match="no_invocations_periods on an asynchronous endpoint"):
        EndpointAlarms(
            stack,
            "A",
            endpoint_name="e",
            variant_name="AllTraffic",
            alarms=AlarmsSpec(no_invocations_periods=3),
            gpu_count=0,
            asynchronous=True,
        )
    with pytest.raises(ValueError, match="gpu_count must be 0 or more"):
        EndpointAlarms(stack, "B", endpoint_name="e", variant_name="AllTraffic", alarms=AlarmsSpec(), gpu_count=-1)
    cpu = EndpointAlarms(stack, "C", endpoint_name="e", variant_name="AllTraffic", alarms=AlarmsSpec(), gpu_count=0)
    assert len(cpu.alarms) == 5  # no GPU alarm without a GPU
    with pytest.raises(ValueError, match="an inference-component endpoint is real-time only"):
        EndpointAlarms(
            stack,
            "D",
            endpoint_name="e",
            variant_name="AllTraffic",
            alarms=AlarmsSpec(),
            gpu_count=0,
            asynchronous=True,
            component_name="e-ic",
        )


def test_an_example_without_the_block_gets_the_defaults(synth):
    """config/examples/lmi-vllm.yaml says nothing about alarms: the default alarms, a topic and the dashboard."""
    synthesized = synth("config/examples/lmi-vllm.yaml", "dev")
    alarms = health_alarms(synthesized, "llm-endpoints-dev-gptj-vllm", "dev-gptj-vllm")
    assert {k: p["Threshold"] for k, p in alarms.items()} == {
        "5xx-rate": 0.01,
        "model-errors": 0.01,
        "4xx-rate": 0.05,
        "latency-p99": 30_000_000,
        "gpu-memory": 380,
        "disk": 90,
    }
    resources = synthesized.templates["llm-endpoints-dev-gptj-vllm"]["Resources"]
    assert [r["Type"] for r in resources.values()].count("AWS::SNS::Topic") == 1
    artifacts = synthesized.templates["llm-endpoints-dev-artifacts"]["Resources"]
    assert [r["Type"] for r in artifacts.values()].count("AWS::CloudWatch::Dashboard") == 1


def test_an_async_endpoint_alarms_on_latency_near_its_invocation_timeout(prod):
    """summarize-async allows 1800 s per request (invocation_timeout_s): its p99 alarm defaults to 90 % of that,
    not the real-time 30 s; and no model-errors alarm (no InvocationModelErrors for async endpoints)."""
    alarms = health_alarms(prod, ASYNC, "prod-summarize-async")
    assert alarms["latency-p99"]["Threshold"] == 1_620_000_000  # microseconds
    assert sorted(alarms) == ["4xx-rate", "5xx-rate", "disk", "gpu-memory", "latency-p99"]


# --------------------------------------------------------------------------------- the class: what SageMaker publishes


def _mode_of(template: dict) -> str:
    resources = template["Resources"].values()
    component = any(r["Type"] == "AWS::SageMaker::InferenceComponent" for r in resources)
    asynchronous = any(
        r["Type"] == "AWS::SageMaker::EndpointConfig" and "AsyncInferenceConfig" in r["Properties"] for r in resources
    )
    return hosting_mode(component=component, asynchronous=asynchronous)


def _dimension_names(dimensions) -> set[str]:
    return {d["Name"] for d in dimensions or []}


def test_every_alarm_watches_a_series_sagemaker_publishes(prod, guarded_component):
    """Every AWS::CloudWatch::Alarm of the endpoint stacks (health, rollback, scale-from-zero: all of them) watches
    metrics that SageMaker publishes for the stack's hosting mode, in exactly that namespace with exactly those
    dimensions (stacks/sagemaker_metrics.py PUBLISHED, written from the SageMaker Developer Guide)."""
    templates = {name: t for name, t in prod.templates.items() if name != ARTIFACTS}
    templates["guarded-ic"] = guarded_component
    seen_modes = set()
    for name, template in templates.items():
        mode = _mode_of(template)
        seen_modes.add(mode)
        for lid, r in template["Resources"].items():
            # PromQL alarms read labels, not namespaces: tests/stacks/test_engine_metrics.py checks them.
            if r["Type"] == "AWS::CloudWatch::Alarm" and "EvaluationCriteria" not in r["Properties"]:
                for series in alarm_series(r["Properties"]):
                    assert is_published(
                        mode, series["Namespace"], series["MetricName"], _dimension_names(series["Dimensions"])
                    ), (name, lid, mode, series)
            if r["Type"] == "AWS::ApplicationAutoScaling::ScalingPolicy":
                custom = (
                    r["Properties"]
                    .get("TargetTrackingScalingPolicyConfiguration", {})
                    .get("CustomizedMetricSpecification")
                )
                if custom:
                    assert is_published(
                        mode, custom["Namespace"], custom["MetricName"], _dimension_names(custom["Dimensions"])
                    ), (name, lid)
    assert seen_modes == set(PUBLISHED)  # the three hosting modes were all checked


def test_every_dashboard_metric_is_one_sagemaker_publishes(prod):
    environment_plan = load_config("config/examples/production.yaml", "prod")
    mode_by_name = {}
    for plan in environment_plan.plans:
        mode = hosting_mode(component=plan.component_name is not None, asynchronous=plan.is_async)
        mode_by_name[plan.endpoint_name] = mode
        if plan.component_name:
            mode_by_name[plan.component_name] = mode
    [dashboard] = prod.resources(ARTIFACTS, "AWS::CloudWatch::Dashboard")
    body = json.loads(
        "".join(
            p if isinstance(p, str) else "us-east-1" for p in dashboard["Properties"]["DashboardBody"]["Fn::Join"][1]
        )
    )
    checked = 0
    for widget in body["widgets"]:
        for m in widget["properties"].get("metrics", []) if widget["type"] == "metric" else []:
            if not isinstance(m[0], str):
                continue  # an expression; its inputs are listed as metrics of their own
            namespace, name, *rest = [x for x in m if not isinstance(x, dict)]
            dimensions = dict(zip(rest[::2], rest[1::2], strict=True))
            [mode] = {mode_by_name[v] for v in dimensions.values() if v in mode_by_name}
            assert is_published(mode, namespace, name, set(dimensions)), (widget["properties"].get("title"), m)
            checked += 1
    assert checked > 30


def test_a_series_sagemaker_does_not_publish_is_refused_at_synth():
    for mode, namespace, name, dimensions in [
        (COMPONENTS, "AWS/SageMaker", "Invocation5XXErrors", {"EndpointName": "e", "VariantName": "AllTraffic"}),
        (COMPONENTS, "/aws/sagemaker/Endpoints", "GPUMemoryUtilization", {"InferenceComponentName": "c"}),
        ("async", "AWS/SageMaker", "InvocationModelErrors", {"EndpointName": "e", "VariantName": "AllTraffic"}),
        ("async", "AWS/SageMaker", "Invocations", {"EndpointName": "e", "VariantName": "AllTraffic"}),
        (
            REAL_TIME,
            "/aws/sagemaker/InferenceComponents",
            "GPUMemoryUtilizationNormalized",
            {"InferenceComponentName": "c"},
        ),
    ]:
        with pytest.raises(ValueError, match=f"SageMaker publishes no {namespace} {name} with dimensions"):
            published_metric(mode, namespace, name, dimensions, "Average", 60)
    with pytest.raises(ValueError, match="hosting mode 'serverless' is not one of"):
        is_published("serverless", "AWS/SageMaker", "Invocations", {"EndpointName"})
