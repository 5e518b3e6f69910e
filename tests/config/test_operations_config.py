"""`deployment:` and `alarms:` (endpoint_config/operations.py): defaults, and every rule with its message. Model-level
checks (fast); one file through load_config shows the message as users see it."""

from __future__ import annotations

import textwrap

import pytest
from pydantic import ValidationError

from deployment import load_config
from endpoint_config import ConfigError
from endpoint_config.operations import AlarmsSpec, AutoRollback, CapacitySize, UpdatePolicySpec
from endpoint_config.operations import operations_problems as _operations_problems
from endpoint_config.schema import EndpointSpec

BASE = dict(
    name="chat",
    system="lmi-vllm",
    model="EleutherAI/gpt-j-6B",
    instance_type="ml.g5.12xlarge",
    tensor_parallel_degree=2,
)


def spec(**changes) -> EndpointSpec:
    return EndpointSpec.model_validate({**BASE, **changes})


def operations_problems(ep: EndpointSpec) -> list[str]:
    return _operations_problems(ep, ep.instance)


def refused(model, data: dict, *fragments: str) -> None:
    with pytest.raises(ValidationError) as err:
        model.model_validate(data)
    text = str(err.value)
    for fragment in fragments:
        assert fragment in text, text


def test_defaults_are_on_and_safe():
    ep = spec()
    assert ep.deployment.policy_key == "blue_green"
    assert ep.deployment.policy.traffic == "all_at_once" and ep.deployment.policy.wait_interval_s == 300
    assert ep.deployment.auto_rollback.alarm_keys() == ("errors_5xx_rate", "latency_p99_ms")
    assert ep.alarms.topic_arn is None and ep.alarms.no_invocations_periods is None  # created topic; quiet is fine
    assert operations_problems(ep) == []
    assert spec(deployment=None, alarms=None).deployment is None


def test_blue_green_and_rolling_are_exclusive():
    refused(
        UpdatePolicySpec,
        {"blue_green": {}, "rolling": {"maximum_batch_size": {"percent": 25}}},
        "blue_green and rolling are exclusive",
    )


@pytest.mark.parametrize(
    ("block", "fragment"),
    [
        ({"traffic": "canary", "canary_size": {"percent": 60}}, "canary_size: value 60 % is outside the 1-50 %"),
        ({"traffic": "linear", "linear_step": {"percent": 5}}, "linear_step: value 5 % is outside the 10-50 %"),
        ({"traffic": "linear", "linear_step": {"percent": 60}}, "linear_step: value 60 % is outside the 10-50 %"),
        ({"traffic": "canary"}, "canary_size: required key is missing"),
        ({"traffic": "linear"}, "linear_step: required key is missing"),
        ({"canary_size": {"percent": 10}}, "canary_size: is used by traffic canary only, not all_at_once"),
        ({"wait_interval_s": 3601}, "less than or equal to 3600"),
        ({"termination_wait_s": -1}, "greater than or equal to 0"),
        ({"maximum_execution_timeout_s": 599}, "greater than or equal to 600"),
        ({"maximum_execution_timeout_s": 28801}, "less than or equal to 28800"),
        ({"traffic": "canary", "canary_size": {"percent": 10, "instances": 1}}, "give exactly one of instances"),
    ],
)
def test_blue_green_bounds(block, fragment):
    refused(UpdatePolicySpec, {"blue_green": block}, fragment)


@pytest.mark.parametrize(("percent", "ok"), [(4, False), (5, True), (50, True), (51, False)])
def test_rolling_batch_is_5_to_50_percent(percent, ok):
    data = {"rolling": {"maximum_batch_size": {"percent": percent}}}
    if ok:
        assert UpdatePolicySpec.model_validate(data).policy_key == "rolling"
    else:
        refused(UpdatePolicySpec, data, f"maximum_batch_size: value {percent} % is outside the 5-50 %")


def test_auto_rollback_alarm_count_and_names():
    # The stack creates three (5xx rate, the model-errors rate beside it, p99 latency): seven more may be watched.
    names = [f"team-alarm-{i}" for i in range(8)]
    refused(AutoRollback, {"extra_alarm_names": names}, "value 11 alarms (3 created by the stack + 8", "limit of 10")
    assert len(AutoRollback.model_validate({"extra_alarm_names": names[:7]}).extra_alarm_names) == 7
    assert (
        AutoRollback.model_validate({"errors_5xx_rate": None, "extra_alarm_names": names[:9]}).created_alarm_count == 1
    )
    refused(AutoRollback, {"errors_5xx_rate": None, "latency_p99_ms": None}, "no alarm left", "auto_rollback: null")
    refused(AutoRollback, {"extra_alarm_names": ["a", "a"]}, "named twice")
    refused(AutoRollback, {"extra_alarm_names": ["   "]}, "is not a CloudWatch alarm name")


def test_alarm_periods_follow_cloudwatch():
    refused(AutoRollback, {"period_s": 90}, "period_s: value 90 is not a multiple of 60")
    refused(AlarmsSpec, {"period_s": 3000, "evaluation_periods": 30}, "is above the 86400 s")
    refused(AlarmsSpec, {"datapoints_to_alarm": 4, "evaluation_periods": 3}, "datapoints_to_alarm: value 4 is above")
    refused(AlarmsSpec, {"topic_arn": "arn:aws:sqs:us-east-1:111122223333:q"}, "topic_arn")
    refused(AlarmsSpec, {"errors_5xx_rate": 5}, "less than or equal to 1")
    refused(AlarmsSpec, {"gpu_memory_pct": 90}, "gpu_memory_pct")  # unknown keys are errors


# --------------------------------------------------------------------------------- rules on the fleet


def test_stepped_updates_need_two_instances():
    [problem] = operations_problems(
        spec(deployment={"blue_green": {"traffic": "canary", "canary_size": {"percent": 50}}})
    )
    assert problem.startswith("endpoint 'chat': deployment.blue_green: canary traffic need a fleet of at least 2")
    [problem] = operations_problems(spec(deployment={"rolling": {"maximum_batch_size": {"percent": 50}}}))
    assert "rolling batches need a fleet of at least 2" in problem


def test_instance_sized_steps_against_the_autoscaling_range():
    scaling = {"min_capacity": 2, "max_capacity": 20, "target_value": 4}
    ok = spec(
        instance_count=2,
        autoscaling=scaling,
        deployment={"blue_green": {"traffic": "canary", "canary_size": {"instances": 1}}},
    )
    assert operations_problems(ok) == []
    [problem] = operations_problems(
        spec(
            instance_count=2,
            autoscaling=scaling,
            deployment={"blue_green": {"traffic": "canary", "canary_size": {"instances": 2}}},
        )
    )
    assert (
        "deployment.blue_green.canary_size: value 2 instances is 10-100 % of a fleet of 2-20 instances (autoscaling)"
        in problem
    )
    # 1 of 20 instances is 5 %: below the 10 % a linear step needs; no count fits both ends of 2-20.
    [problem] = operations_problems(
        spec(
            instance_count=2,
            autoscaling=scaling,
            deployment={"blue_green": {"traffic": "linear", "linear_step": {"instances": 1}}},
        )
    )
    assert "value 1 instance is 5-50 %" in problem
    assert "allows 10-50 % for a linear step; allowed here: no instance count fits: use percent" in problem


def test_execution_timeout_must_exceed_the_waits():
    deployment = {
        "blue_green": {
            "traffic": "canary",
            "canary_size": {"percent": 25},
            "wait_interval_s": 600,
            "termination_wait_s": 300,
            "maximum_execution_timeout_s": 1500,
        }
    }
    [problem] = operations_problems(spec(instance_count=4, deployment=deployment))
    assert "maximum_execution_timeout_s: value 1500 s is not longer than the update's waits, 1500 s" in problem
    assert "allowed: 1501-28800" in problem
    deployment["blue_green"]["maximum_execution_timeout_s"] = 1501
    assert operations_problems(spec(instance_count=4, deployment=deployment)) == []


def test_rollback_alarms_must_fit_in_one_bake():
    deployment = {"blue_green": {"wait_interval_s": 120}, "auto_rollback": {"period_s": 60, "evaluation_periods": 3}}
    [problem] = operations_problems(spec(deployment=deployment))
    assert (
        "deployment.auto_rollback: period_s x evaluation_periods = 180 s is longer than blue_green.wait_interval_s 120 s"
        in problem
    )


def test_guardrails_are_refused_on_inf1():
    [problem] = operations_problems(spec(instance_type="ml.inf1.xlarge", tensor_parallel_degree=1))
    assert "deployment.blue_green: is not available on ml.inf1.xlarge" in problem
    assert operations_problems(spec(instance_type="ml.inf1.xlarge", tensor_parallel_degree=1, deployment=None)) == []


def test_no_invocations_alarm_is_refused_on_async_endpoints():
    ep = spec(invocation={"mode": "async"}, alarms={"no_invocations_periods": 6})
    assert any(
        "alarms.no_invocations_periods: value 6 cannot work on an asynchronous endpoint" in p
        for p in operations_problems(ep)
    )


def test_messages_through_load_config(tmp_path):
    path = tmp_path / "ops.yaml"
    path.write_text(
        textwrap.dedent("""\
        environments:
          prod:
            overrides:
              chat: {deployment: {blue_green: {traffic: canary, canary_size: {instances: 3}}}, alarms: null}
        endpoints:
          - name: chat
            system: lmi-vllm
            model: EleutherAI/gpt-j-6B
            instance_type: ml.g5.12xlarge
            tensor_parallel_degree: 2
            instance_count: 4
            deployment: {blue_green: {traffic: linear, linear_step: {percent: 70}}}
        """)
    )
    with pytest.raises(ConfigError) as err:
        load_config(path, "prod")
    assert (
        f"{path}: invalid config:\n  - endpoint 'chat': deployment.blue_green: linear_step: value 70 % is outside "
        "the 10-50 % of the fleet SageMaker allows for a linear step" in str(err.value)
    )
    # The environment's override replaces the whole block; its fleet rule names the environment.
    path.write_text(path.read_text().replace("linear_step: {percent: 70}", "linear_step: {percent: 25}"))
    with pytest.raises(ConfigError) as err:
        load_config(path, "prod")
    assert (
        "  - environment 'prod': endpoint 'chat': deployment.blue_green.canary_size: value 3 instances is 75 % of a "
        "fleet of 4 instances; SageMaker allows at most 50 % for a canary; allowed here: 1-2 instances"
        in str(err.value)
    )


# --------------------------------------------------------------------------------- inference components (item 4)

# max_instances 3: room for 12 copies, so the largest fleet here (8) plus a rolling batch fits (R5)
IC = {"mode": "inference-components", "instance_scaling": {"min_instances": 1, "max_instances": 3}}


def component(copies: int = 2, scaling: dict | None = None, **changes) -> EndpointSpec:
    """An lmi-vllm component, one GPU per copy on ml.g5.12xlarge (4 copies per instance)."""
    hosting = {**IC, "copies": copies, **({"copy_scaling": scaling} if scaling else {})}
    return spec(tensor_parallel_degree=1, hosting=hosting, **changes)


@pytest.mark.parametrize(
    ("deployment", "fragment"),
    [
        ({"blue_green": {}}, "deployment.blue_green: cannot apply to an inference component"),
        ({"blue_green": {"traffic": "canary", "canary_size": {"percent": 25}}}, "UpdateInferenceComponent"),
        (
            {"rolling": {"maximum_batch_size": {"instances": 1}}},
            "deployment.rolling.maximum_batch_size: value {instances: 1} counts instances",
        ),
        (
            {"rolling": {"maximum_batch_size": {"copies": 1}, "rollback_maximum_batch_size": {"instances": 2}}},
            "deployment.rolling.rollback_maximum_batch_size: value {instances: 2} counts instances",
        ),
    ],
)
def test_endpoint_level_settings_are_refused_on_a_component(deployment, fragment):
    problems = operations_problems(component(deployment=deployment))
    assert len(problems) == 1 and fragment in problems[0], problems
    assert problems[0].startswith("endpoint 'chat': deployment.")


def test_copies_are_refused_where_there_is_no_component():
    [problem] = operations_problems(
        spec(instance_count=4, deployment={"rolling": {"maximum_batch_size": {"copies": 1}}})
    )
    assert (
        "value {copies: 1} counts inference-component copies, and this endpoint (hosting.mode: endpoint) has none"
        in problem
    )
    assert "allowed: {instances: N} or {percent: P}" in problem


def test_a_component_rolls_in_5_to_50_percent_of_the_copies_an_update_can_meet():
    scaling = {"min_copies": 2, "max_copies": 8, "target_concurrency": 4}
    assert (
        operations_problems(component(scaling=scaling, deployment={"rolling": {"maximum_batch_size": {"copies": 1}}}))
        == []
    )
    [problem] = operations_problems(
        component(scaling=scaling, deployment={"rolling": {"maximum_batch_size": {"copies": 2}}})
    )
    assert (
        "deployment.rolling.maximum_batch_size: value 2 copies is 25-100 % of a fleet of 2-8 copies (copy_scaling); "
        "SageMaker allows 5-50 % for a rolling batch; allowed here: 1-1 copies"
    ) in problem
    # Scaled to zero, a deploy keeps one copy (never 0), and one copy is 100 % of itself.
    [problem] = operations_problems(
        component(
            copies=1,
            scaling={**scaling, "min_copies": 0},
            deployment={"rolling": {"maximum_batch_size": {"percent": 50}}},
        )
    )
    assert (
        "rolling batches need a fleet of at least 2 copies, and this one can be 1 (hosting.copies / "
        "copy_scaling.min_copies)"
        in problem
        and "set deployment: null" in problem
    )


@pytest.mark.parametrize(
    ("copies", "scaling", "batch"),
    [
        (2, None, {"copies": 1}),
        (3, None, {"copies": 1}),
        (2, {"min_copies": 2, "max_copies": 8, "target_concurrency": 4}, {"copies": 1}),
        (1, None, None),  # one copy: no batch fits, SageMaker's own update
        (1, {"min_copies": 0, "max_copies": 8, "target_concurrency": 4}, None),
    ],
)
def test_the_default_update_of_a_component(copies, scaling, batch):
    from endpoint_config.operations import component_deployment_warning, resolved_update_policy

    ep = component(copies=copies, scaling=scaling)
    assert operations_problems(ep) == []
    applied = resolved_update_policy(ep)
    if batch is None:
        assert applied is None
        assert "model updates of its inference component are not guarded" in component_deployment_warning(ep)
        assert component_deployment_warning(component(copies=copies, scaling=scaling, deployment=None)) is None
    else:
        assert applied.rolling.maximum_batch_size == CapacitySize(**batch)
        assert applied.rolling.wait_interval_s == 300 and applied.auto_rollback == AutoRollback()
        assert component_deployment_warning(ep) is None


def test_a_large_component_defaults_to_5_percent_batches():
    from endpoint_config.operations import default_component_rolling

    ep = component(scaling={"min_copies": 2, "max_copies": 24, "target_concurrency": 4})
    assert default_component_rolling(ep).maximum_batch_size == CapacitySize(percent=5)  # 1 of 24 copies is < 5 %


# --------------------------------------------------------------------------------- async latency, data capture (8, 14)


def test_an_async_endpoint_takes_its_latency_thresholds_from_its_invocation_timeout():
    from endpoint_config.operations import resolved_alarms, resolved_update_policy

    ep = spec(invocation={"mode": "async", "invocation_timeout_s": 1800})
    assert resolved_alarms(ep).latency_p99_ms == 1_620_000 == resolved_update_policy(ep).auto_rollback.latency_p99_ms
    # SageMaker's default timeout, 900 s, when none is set.
    assert resolved_alarms(spec(invocation={"mode": "async"})).latency_p99_ms == 810_000
    # Given values are kept (null too: no latency alarm), and real-time endpoints keep the 30 s default.
    given = spec(
        invocation={"mode": "async", "invocation_timeout_s": 1800},
        alarms={"latency_p99_ms": 600_000},
        deployment={"auto_rollback": {"latency_p99_ms": None}},
    )
    assert (
        resolved_alarms(given).latency_p99_ms == 600_000
        and resolved_update_policy(given).auto_rollback.latency_p99_ms is None
    )
    assert resolved_alarms(spec()).latency_p99_ms == 30_000
    assert operations_problems(ep) == []


def test_an_async_latency_threshold_above_the_timeout_is_refused():
    ep = spec(
        invocation={"mode": "async", "invocation_timeout_s": 600},
        alarms={"latency_p99_ms": 700_000},
        deployment={"auto_rollback": {"latency_p99_ms": 900_000}},
    )
    problems = operations_problems(ep)
    assert any(
        p.startswith(
            "endpoint 'chat': alarms.latency_p99_ms: value 700000 ms is above the 600000 ms "
            "(invocation.invocation_timeout_s, 600 s)"
        )
        and "allowed: 1-600000" in p
        for p in problems
    )
    assert any("deployment.auto_rollback.latency_p99_ms: value 900000 ms" in p for p in problems), problems


def test_with_data_capture_the_disk_alarm_fires_before_capture_stops():
    from endpoint_config.operations import resolved_alarms

    capture = {"sampling_percent": 10}
    assert resolved_alarms(spec(data_capture=capture)).disk_percent == 70
    assert resolved_alarms(spec()).disk_percent == 90  # no capture: the plain default
    assert resolved_alarms(spec(data_capture=capture, alarms={"disk_percent": 75})).disk_percent == 75
    assert operations_problems(spec(data_capture=capture, alarms={"disk_percent": None})) == []
    [problem] = operations_problems(spec(data_capture=capture, alarms={"disk_percent": 80}))
    assert problem.startswith("endpoint 'chat': alarms.disk_percent: value 80 is above 75, where data capture")
    assert "allowed with data capture: 1-75 (or leave it out: 70)" in problem


def test_defaults_that_depend_on_the_endpoint_survive_an_environment_override(tmp_path):
    """An environment's override rebuilds the endpoint; the keys the file left out stay defaults (so they still
    follow the invocation timeout), and the ones it gave stay given."""
    path = tmp_path / "async.yaml"
    path.write_text(
        textwrap.dedent("""\
        environments:
          prod:
            overrides:
              summarize: {instance_count: 2}
        endpoints:
          - name: summarize
            system: hf-fastload
            model: EleutherAI/gpt-j-6B
            instance_type: ml.g5.2xlarge
            invocation: {mode: async, invocation_timeout_s: 1800}
            alarms: {disk_percent: 85}
        """)
    )
    plan = load_config(path, "prod").plan("summarize")
    assert plan.spec.instance_count == 2
    assert (plan.alarms.latency_p99_ms, plan.alarms.disk_percent) == (1_620_000, 85)
    assert plan.update_policy.auto_rollback.latency_p99_ms == 1_620_000
