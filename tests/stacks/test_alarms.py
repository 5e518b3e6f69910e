"""Alarms (`alarms:`) and the environment dashboard, on config/examples/production.yaml: chat-vllm tunes the block and
sends to an existing topic; assist-ic and summarize-async keep the defaults (a topic of their own)."""

from __future__ import annotations

import json

import pytest
from aws_cdk import App, Stack

from endpoint_config.operations import AlarmsSpec
from stacks.endpoint_alarms import EndpointAlarms

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
    assert sorted(alarms) == ["4xx-rate", "5xx-rate", "disk", "gpu-memory", "latency-p99", "no-invocations"]
    for props in alarms.values():
        assert props["AlarmActions"] == [ONCALL]
        assert {"Name": "EndpointName", "Value": "prod-chat-vllm"} in props["Dimensions"]
        assert {"Name": "VariantName", "Value": "AllTraffic"} in props["Dimensions"]
    # Its own topic is not created when one is given (other blocks' topics may exist: none is named for alarms).
    assert not [r for r in prod.templates[CHAT]["Resources"].values()
                if r["Type"] == "AWS::SNS::Topic" and "alarms" in str(r["Properties"].get("DisplayName", ""))]
    # GPUMemoryUtilization sums the GPUs: 97 % per GPU on the 4 GPUs of ml.g5.12xlarge.
    gpu = alarms["gpu-memory"]
    assert (gpu["Namespace"], gpu["MetricName"], gpu["Statistic"], gpu["Threshold"]) == (
        "/aws/sagemaker/Endpoints", "GPUMemoryUtilization", "Maximum", 388)
    latency = alarms["latency-p99"]
    assert (latency["Namespace"], latency["ExtendedStatistic"], latency["Threshold"]) == ("AWS/SageMaker", "p99", 20_000_000)
    quiet = alarms["no-invocations"]
    assert (quiet["MetricName"], quiet["ComparisonOperator"], quiet["TreatMissingData"], quiet["EvaluationPeriods"]) == (
        "Invocations", "LessThanThreshold", "breaching", 12)


def test_defaults_create_a_tls_only_topic_cloudwatch_may_publish_to(prod):
    alarms = health_alarms(prod, DEFAULTS, "prod-assist-ic")
    assert sorted(alarms) == ["4xx-rate", "5xx-rate", "disk", "gpu-memory", "latency-p99"]  # no-invocations: off
    thresholds = {k: p["Threshold"] for k, p in alarms.items()}
    assert thresholds == {"4xx-rate": 0.05, "5xx-rate": 0.01, "disk": 90, "gpu-memory": 380, "latency-p99": 30_000_000}
    assert {(p["Period"], p["EvaluationPeriods"], p["DatapointsToAlarm"]) for p in alarms.values()} == {(300, 3, 2)}
    resources = prod.templates[DEFAULTS]["Resources"]
    [topic_id] = [k for k, r in resources.items()
                  if r["Type"] == "AWS::SNS::Topic" and "alarms" in str(r["Properties"].get("DisplayName", ""))]
    assert all(p["AlarmActions"] == [{"Ref": topic_id}] for p in alarms.values())
    [policy] = [r["Properties"]["PolicyDocument"] for r in resources.values()
                if r["Type"] == "AWS::SNS::TopicPolicy" and r["Properties"]["Topics"] == [{"Ref": topic_id}]]
    by_effect = {s["Effect"]: s for s in policy["Statement"]}
    assert by_effect["Deny"]["Condition"] == {"Bool": {"aws:SecureTransport": "false"}}  # AwsSolutions-SNS3
    assert by_effect["Allow"]["Principal"] == {"Service": "cloudwatch.amazonaws.com"}
    assert by_effect["Allow"]["Condition"]["StringEquals"] == {"aws:SourceAccount": {"Ref": "AWS::AccountId"}}
    outputs = prod.templates[DEFAULTS]["Outputs"]
    assert any(o["Value"] == {"Ref": topic_id} for o in outputs.values())


def test_one_dashboard_per_environment_in_the_artifact_stack(prod):
    dashboards = [r["Properties"] for r in prod.templates[ARTIFACTS]["Resources"].values()
                  if r["Type"] == "AWS::CloudWatch::Dashboard"]
    [dashboard] = dashboards
    assert dashboard["DashboardName"] == {"Fn::Join": ["", ["llm-endpoints-prod-endpoints-", {"Ref": "AWS::Region"}]]}
    body_parts = dashboard["DashboardBody"]["Fn::Join"][1]
    body = json.loads("".join(p if isinstance(p, str) else "us-east-1" for p in body_parts))
    metrics = [m for w in body["widgets"] if w["type"] == "metric" for m in w["properties"]["metrics"]]
    names = {(m[0], m[1], m[3]) for m in metrics if isinstance(m[0], str)}
    for endpoint in ("prod-chat-vllm", "prod-summarize-async", "prod-assist-ic"):
        assert ("AWS/SageMaker", "ModelLatency", endpoint) in names
        assert ("AWS/SageMaker", "Invocation5XXErrors", endpoint) in names
        assert ("/aws/sagemaker/Endpoints", "GPUMemoryUtilization", endpoint) in names  # all three are on g5
    # Latency percentiles, and the instance count against chat-vllm's scaling range 2-6.
    stats = {m[-1]["stat"] for m in metrics if isinstance(m[0], str) and m[1] == "ModelLatency"}
    assert {"p50", "p90", "p99"} <= stats
    [instances] = [w for w in body["widgets"] if w["type"] == "metric" and w["properties"].get("title") ==
                   "Instances (from invocations)" and "prod-chat-vllm" in json.dumps(w)]
    annotations = {a["value"] for a in instances["properties"]["annotations"]["horizontal"]}
    assert annotations == {2, 6}
    # Asynchronous endpoints publish no Invocations: no invocation count for summarize-async.
    assert ("AWS/SageMaker", "Invocations", "prod-summarize-async") not in names


def test_endpoint_alarms_validates_its_props():
    stack = Stack(App(), "S")
    with pytest.raises(ValueError, match="no_invocations_periods on an asynchronous endpoint"):
        EndpointAlarms(stack, "A", endpoint_name="e", variant_name="AllTraffic",
                       spec=AlarmsSpec(no_invocations_periods=3), gpu_count=0, asynchronous=True)
    with pytest.raises(ValueError, match="gpu_count must be 0 or more"):
        EndpointAlarms(stack, "B", endpoint_name="e", variant_name="AllTraffic", spec=AlarmsSpec(), gpu_count=-1)
    cpu = EndpointAlarms(stack, "C", endpoint_name="e", variant_name="AllTraffic", spec=AlarmsSpec(), gpu_count=0)
    assert len(cpu.alarms) == 4  # no GPU alarm without a GPU


def test_an_example_without_the_block_gets_the_defaults(synth):
    """config/examples/lmi-vllm.yaml says nothing about alarms: the default alarms, a topic and the dashboard."""
    synthesized = synth("config/examples/lmi-vllm.yaml", "dev")
    alarms = health_alarms(synthesized, "llm-endpoints-dev-gptj-vllm", "dev-gptj-vllm")
    assert {k: p["Threshold"] for k, p in alarms.items()} == {
        "5xx-rate": 0.01, "4xx-rate": 0.05, "latency-p99": 30_000_000, "gpu-memory": 380, "disk": 90}
    resources = synthesized.templates["llm-endpoints-dev-gptj-vllm"]["Resources"]
    assert [r["Type"] for r in resources.values()].count("AWS::SNS::Topic") == 1
    artifacts = synthesized.templates["llm-endpoints-dev-artifacts"]["Resources"]
    assert [r["Type"] for r in artifacts.values()].count("AWS::CloudWatch::Dashboard") == 1
