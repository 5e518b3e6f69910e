"""Guarded updates (`deployment:`): the endpoint's DeploymentConfig, its rollback alarms on the new fleet and the
execution role's right to read them, on config/examples/production.yaml (chat-vllm: canary with auto-rollback;
summarize-async: the defaults, latency from its invocation timeout; assist-ic: an inference component, whose updates
tests/stacks/test_inference_components.py covers) and config/examples/lmi-vllm.yaml (the defaults)."""

from __future__ import annotations

import pytest
from aws_cdk import App, Stack
from helpers import alarm_series

from endpoint_config.operations import UpdatePolicySpec
from model_build.clean import TAG_ENDPOINT, TAG_ENVIRONMENT, TAG_PROJECT
from stacks.endpoint_alarms import deployment_config

PROD = ("config/examples/production.yaml", "prod")
CHAT = "llm-endpoints-prod-chat-vllm"
COMPONENT = "llm-endpoints-prod-assist-ic"
ASYNC = "llm-endpoints-prod-summarize-async"
CHAT_ALARMS = [
    "prod-chat-vllm-rollback-5xx-rate",
    "prod-chat-vllm-rollback-model-errors",
    "prod-chat-vllm-rollback-latency-p99",
]


@pytest.fixture(scope="module")
def prod(synth):
    return synth(*PROD)


def _one(prod, stack: str, type_name: str) -> tuple[str, dict]:
    [(logical_id, resource)] = [(k, r) for k, r in prod.templates[stack]["Resources"].items() if r["Type"] == type_name]
    return logical_id, resource


def _rollback_alarms(prod, stack: str) -> dict[str, dict]:
    return {
        k: r
        for k, r in prod.templates[stack]["Resources"].items()
        if r["Type"] == "AWS::CloudWatch::Alarm" and "-rollback-" in str(r["Properties"].get("AlarmName", ""))
    }


def test_canary_blue_green_with_auto_rollback(prod):
    _, endpoint = _one(prod, CHAT, "AWS::SageMaker::Endpoint")
    props = endpoint["Properties"]
    assert props["DeploymentConfig"] == {
        "BlueGreenUpdatePolicy": {
            "TrafficRoutingConfiguration": {
                "Type": "CANARY",
                "CanarySize": {"Type": "INSTANCE_COUNT", "Value": 1},
                "WaitIntervalInSeconds": 600,
            },
            "TerminationWaitInSeconds": 300,
            "MaximumExecutionTimeoutInSeconds": 3600,
        },
        "AutoRollbackConfiguration": {"Alarms": [{"AlarmName": n} for n in CHAT_ALARMS]},
    }
    assert props["RetainAllVariantProperties"] is True  # kept: autoscaling's count survives the update


def test_rollback_alarms_watch_the_new_fleet_and_come_first(prod):
    config_id, _ = _one(prod, CHAT, "AWS::SageMaker::EndpointConfig")
    _, endpoint = _one(prod, CHAT, "AWS::SageMaker::Endpoint")
    alarms = _rollback_alarms(prod, CHAT)
    assert sorted(a["Properties"]["AlarmName"] for a in alarms.values()) == sorted(CHAT_ALARMS)
    for logical_id, alarm in alarms.items():
        p = alarm["Properties"]
        for series in alarm_series(p):
            assert {"Name": "EndpointConfigName", "Value": {"Fn::GetAtt": [config_id, "EndpointConfigName"]}} in series[
                "Dimensions"
            ]
            assert {"Name": "EndpointName", "Value": "prod-chat-vllm"} in series["Dimensions"]
            assert series["Period"] == 60
        assert (p["EvaluationPeriods"], p["TreatMissingData"]) == (5, "notBreaching")
        assert "AlarmActions" not in p  # SageMaker reads their state; nobody is paged by a rollback alarm
        assert logical_id in endpoint["DependsOn"]
    by_name = {a["Properties"]["AlarmName"]: a["Properties"] for a in alarms.values()}
    latency = by_name["prod-chat-vllm-rollback-latency-p99"]
    assert (latency["MetricName"], latency["ExtendedStatistic"], latency["Threshold"]) == (
        "ModelLatency",
        "p99",
        20_000_000,
    )
    errors = by_name["prod-chat-vllm-rollback-5xx-rate"]
    assert (errors["MetricName"], errors["Statistic"], errors["Threshold"]) == ("Invocation5XXErrors", "Average", 0.01)
    # Timeouts, socket errors and malformed answers roll back too: InvocationModelErrors less the client's 4xx.
    model_errors = by_name["prod-chat-vllm-rollback-model-errors"]
    [expression] = [q for q in model_errors["Metrics"] if "Expression" in q]
    assert (expression["Expression"], model_errors["Threshold"]) == ("model_errors - errors_4xx", 0.01)
    assert sorted(
        (q["Id"], q["MetricStat"]["Metric"]["MetricName"], q["MetricStat"]["Stat"])
        for q in model_errors["Metrics"]
        if "MetricStat" in q
    ) == [("errors_4xx", "Invocation4XXErrors", "Average"), ("model_errors", "InvocationModelErrors", "Average")]


def test_execution_role_may_describe_exactly_its_rollback_alarms(prod):
    statements = [
        s
        for r in prod.templates[CHAT]["Resources"].values()
        if r["Type"] == "AWS::IAM::Policy"
        for s in r["Properties"]["PolicyDocument"]["Statement"]
        if s["Action"] == "cloudwatch:DescribeAlarms"
    ]
    [statement] = statements
    names = sorted(str(arn).rsplit(":", 1)[-1] for arn in statement["Resource"])
    assert names == sorted(CHAT_ALARMS)
    assert all(":cloudwatch:us-east-1:111122223333:alarm:" in str(arn) for arn in statement["Resource"])


def test_an_async_endpoint_rolls_back_on_latency_near_its_invocation_timeout(prod):
    """summarize-async allows 1800 s per request: the rollback alarm's default is 90 % of that, not the real-time
    30 s; SageMaker publishes no InvocationModelErrors for async endpoints, so there is no model-errors alarm."""
    _, endpoint = _one(prod, ASYNC, "AWS::SageMaker::Endpoint")
    config = endpoint["Properties"]["DeploymentConfig"]
    assert config["BlueGreenUpdatePolicy"]["TrafficRoutingConfiguration"] == {
        "Type": "ALL_AT_ONCE",
        "WaitIntervalInSeconds": 300,
    }
    by_name = {a["Properties"]["AlarmName"]: a["Properties"] for a in _rollback_alarms(prod, ASYNC).values()}
    assert sorted(by_name) == ["prod-summarize-async-rollback-5xx-rate", "prod-summarize-async-rollback-latency-p99"]
    assert by_name["prod-summarize-async-rollback-latency-p99"]["Threshold"] == 1_620_000_000  # microseconds


def test_a_component_endpoint_has_no_endpoint_level_guard(prod):
    """Blue/green on the endpoint acts only when the endpoint config changes, which a model update of a component
    does not (and which preflight refuses): the endpoint of assist-ic carries no DeploymentConfig."""
    _, endpoint = _one(prod, COMPONENT, "AWS::SageMaker::Endpoint")
    assert "DeploymentConfig" not in endpoint["Properties"]
    assert not _rollback_alarms(prod, COMPONENT)


def test_rolling_policy():
    spec = UpdatePolicySpec.model_validate(
        {
            "rolling": {
                "maximum_batch_size": {"percent": 25},
                "rollback_maximum_batch_size": {"instances": 2},
                "wait_interval_s": 120,
                "maximum_execution_timeout_s": 3600,
            },
            "auto_rollback": {"extra_alarm_names": ["team-slo"]},
        }
    )
    config = deployment_config(spec, rollback_alarm_names=["a", "team-slo"])
    rolling = config.rolling_update_policy
    assert config.blue_green_update_policy is None
    assert (rolling.maximum_batch_size.type, rolling.maximum_batch_size.value) == ("CAPACITY_PERCENT", 25)
    assert (rolling.rollback_maximum_batch_size.type, rolling.rollback_maximum_batch_size.value) == (
        "INSTANCE_COUNT",
        2,
    )
    assert (rolling.wait_interval_in_seconds, rolling.maximum_execution_timeout_in_seconds) == (120, 3600)
    assert [a.alarm_name for a in config.auto_rollback_configuration.alarms] == ["a", "team-slo"]
    blue_green = UpdatePolicySpec.model_validate({"auto_rollback": None})
    assert deployment_config(blue_green, rollback_alarm_names=[]).auto_rollback_configuration is None


def test_rollback_alarms_construct_validates_its_props():
    from endpoint_config.operations import AutoRollback
    from stacks.endpoint_alarms import RollbackAlarms

    stack = Stack(App(), "S")
    names = [f"x{i}" for i in range(9)]
    rollback = AutoRollback.model_construct(
        errors_5xx_rate=0.01, latency_p99_ms=1000, period_s=60, evaluation_periods=1, extra_alarm_names=tuple(names)
    )  # 12: past the model's own check
    with pytest.raises(ValueError, match="12 alarms; SageMaker watches at most 10"):
        RollbackAlarms(
            stack, "R", endpoint_name="e", variant_name="AllTraffic", endpoint_config_name="c", rollback=rollback
        )
    fine = AutoRollback()
    with pytest.raises(ValueError, match="give either component_name or variant_name and endpoint_config_name"):
        RollbackAlarms(stack, "B", endpoint_name="e", rollback=fine, variant_name="AllTraffic")
    with pytest.raises(ValueError, match="give either component_name or variant_name and endpoint_config_name"):
        RollbackAlarms(
            stack,
            "C",
            endpoint_name="e",
            rollback=fine,
            component_name="e-ic",
            variant_name="AllTraffic",
            endpoint_config_name="c",
        )
    with pytest.raises(ValueError, match="an inference-component endpoint is real-time only"):
        RollbackAlarms(stack, "D", endpoint_name="e", rollback=fine, component_name="e-ic", asynchronous=True)


def test_an_example_without_the_block_gets_the_defaults(synth):
    """config/examples/lmi-vllm.yaml says nothing about deployment: the safe defaults are in its template."""
    resources = synth("config/examples/lmi-vllm.yaml", "dev").templates["llm-endpoints-dev-gptj-vllm"]["Resources"]
    [endpoint] = [r for r in resources.values() if r["Type"] == "AWS::SageMaker::Endpoint"]
    assert endpoint["Properties"]["DeploymentConfig"] == {
        "BlueGreenUpdatePolicy": {
            "TrafficRoutingConfiguration": {"Type": "ALL_AT_ONCE", "WaitIntervalInSeconds": 300},
            "TerminationWaitInSeconds": 0,
        },
        "AutoRollbackConfiguration": {
            "Alarms": [
                {"AlarmName": "dev-gptj-vllm-rollback-5xx-rate"},
                {"AlarmName": "dev-gptj-vllm-rollback-model-errors"},
                {"AlarmName": "dev-gptj-vllm-rollback-latency-p99"},
            ]
        },
    }
    rollback = [
        r["Properties"]
        for r in resources.values()
        if r["Type"] == "AWS::CloudWatch::Alarm" and "-rollback-" in str(r["Properties"].get("AlarmName", ""))
    ]
    assert len(rollback) == 3 and {p["EvaluationPeriods"] for p in rollback} == {3}
    assert {s["Period"] for p in rollback for s in alarm_series(p)} == {60}


@pytest.mark.parametrize("stack", [CHAT, COMPONENT, ASYNC])
def test_a_replaced_model_or_config_is_kept_for_the_rollback_that_may_still_run_it(prod, stack):
    """A new artifact or instance type replaces the Model and the EndpointConfig; after a rolled-back guarded update
    the endpoint may run the old ones while CloudFormation counts the update done, so the replaced ones are kept
    (UpdateReplacePolicy Retain) and `model_build clean` deletes the ones nothing uses; a destroy deletes the current
    ones (DeletionPolicy Delete). Variant endpoints, async and inference-component endpoints alike."""
    for type_name in ("AWS::SageMaker::Model", "AWS::SageMaker::EndpointConfig"):
        _, resource = _one(prod, stack, type_name)
        assert resource.get("UpdateReplacePolicy") == "Retain", (stack, type_name)
        assert resource.get("DeletionPolicy", "Delete") == "Delete", (stack, type_name)
        tags = {t["Key"]: t["Value"] for t in resource["Properties"]["Tags"]}
        # what `model_build clean` finds them by: CloudFormation puts no stack tags on an EndpointConfig
        # (cfn-lint's AWS::SageMaker::EndpointConfig schema: tagging.cloudFormationSystemTags false)
        assert tags == {
            TAG_PROJECT: "llm-endpoints",
            TAG_ENVIRONMENT: "prod",
            TAG_ENDPOINT: stack.removeprefix("llm-endpoints-prod-"),
        }
    _, endpoint = _one(prod, stack, "AWS::SageMaker::Endpoint")
    assert "UpdateReplacePolicy" not in endpoint  # the endpoint itself is updated in place, never replaced
