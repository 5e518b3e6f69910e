"""`instance_pools:` and `capacity:` on the template: the variant's InstancePools (instance_type at priority 1, then the
pools in order) in place of InstanceType, a pool whose tensor-parallel degree differs running its own Model through
ModelNameOverride (same role, image and artifact), a pool with the variant's settings running the variant's model,
VariantInstanceProvisionTimeoutInSeconds and CapacityReservationConfig; cdk-nag passes (the synth fixture runs it),
and cfn-lint 1.58 passes the templates while a copy with a priority out of bounds is reported."""

from __future__ import annotations

import copy
import json

import pytest
from cfn_lint_runner import lint_with_canary
from helpers import alarm_series

from stacks.sagemaker_metrics import ASYNC, REAL_TIME, is_published

CONFIG = """\
endpoints:
  - name: pools
    system: vllm
    model: Qwen/Qwen3-32B
    dtype: bf16
    instance_type: ml.g7e.2xlarge
    volume_size_gb: null
    instance_pools:
      - {instance_type: ml.g6e.12xlarge, tensor_parallel_degree: 4}
      - {instance_type: ml.p5.4xlarge}
    capacity: {provision_timeout_s: 900}
    autoscaling: {min_capacity: 1, max_capacity: 2, target_value: 8}
    engine: {max_model_len: 32768}
  - name: reserved
    system: vllm
    model: Qwen/Qwen3-32B
    dtype: bf16
    instance_type: ml.p5.4xlarge
    volume_size_gb: null
    capacity: {reservation_arn: "arn:aws:sagemaker:us-east-1:111122223333:ml-reservation/p5-capacity", reserved_instances: 2}
    engine: {max_model_len: 32768}
  - name: pools-async               # instance pools serve asynchronous endpoints too (SageMaker DG)
    system: vllm
    model: Qwen/Qwen3-32B
    dtype: bf16
    instance_type: ml.g7e.2xlarge
    volume_size_gb: null
    instance_pools: [{instance_type: ml.g6e.12xlarge, tensor_parallel_degree: 4}]
    invocation: {mode: async}
    engine: {max_model_len: 32768}
  - name: copies
    system: lmi-vllm
    model: EleutherAI/gpt-j-6B
    instance_type: ml.g5.12xlarge   # 4 GPUs at tensor parallel 1: 4 copies per instance
    instance_pools: [{instance_type: ml.g5.2xlarge}]   # 1 GPU: 1 copy
    autoscaling: {min_capacity: 1, max_capacity: 4, target_value: 6}
"""
STACKS = {
    "pools": "llm-endpoints-default-pools",
    "reserved": "llm-endpoints-default-reserved",
    "copies": "llm-endpoints-default-copies",
    "pools-async": "llm-endpoints-default-pools-async",
}
MODES = {"pools-async": ASYNC}
ARTIFACTS = "llm-endpoints-default-artifacts"


@pytest.fixture(scope="module")
def pools(synth, tmp_path_factory):
    path = tmp_path_factory.mktemp("instance-pools") / "pools.yaml"
    path.write_text(CONFIG)
    return synth(str(path))


def logical_ids(template: dict, type_name: str) -> dict[str, dict]:
    return {k: r for k, r in template["Resources"].items() if r["Type"] == type_name}


def variant(template: dict) -> dict:
    [endpoint_config] = logical_ids(template, "AWS::SageMaker::EndpointConfig").values()
    [production_variant] = endpoint_config["Properties"]["ProductionVariants"]
    return production_variant


def test_the_variant_lists_its_pools_in_priority_order_instead_of_an_instance_type(pools):
    template = pools.templates[STACKS["pools"]]
    pv = variant(template)
    assert "InstanceType" not in pv  # replaced by InstancePools (SageMaker DG, realtime-endpoints-heterogeneous)
    models = logical_ids(template, "AWS::SageMaker::Model")
    [pool_model] = [k for k in models if "PoolModel2" in k]
    [primary] = [k for k in models if k != pool_model]
    assert pv["ModelName"] == {"Fn::GetAtt": [primary, "ModelName"]}
    assert pv["InstancePools"] == [
        {"InstanceType": "ml.g7e.2xlarge", "Priority": 1},
        {
            "InstanceType": "ml.g6e.12xlarge",
            "Priority": 2,
            "ModelNameOverride": {"Fn::GetAtt": [pool_model, "ModelName"]},
        },
        {"InstanceType": "ml.p5.4xlarge", "Priority": 3},  # tensor parallel 1, as the variant's: its model
    ]
    assert pv["VariantInstanceProvisionTimeoutInSeconds"] == 900
    assert "CapacityReservationConfig" not in pv


def test_the_pool_model_differs_only_in_its_tensor_parallel_degree(pools):
    template = pools.templates[STACKS["pools"]]
    models = logical_ids(template, "AWS::SageMaker::Model")
    [pool_model] = [r for k, r in models.items() if "PoolModel2" in k]
    [primary] = [r for k, r in models.items() if "PoolModel2" not in k]
    primary_env = primary["Properties"]["PrimaryContainer"].pop("Environment")
    pool_env = pool_model["Properties"]["PrimaryContainer"].pop("Environment")
    assert {k for k in primary_env if primary_env[k] != pool_env.get(k)} == {"SM_VLLM_TENSOR_PARALLEL_SIZE"}
    assert (primary_env["SM_VLLM_TENSOR_PARALLEL_SIZE"], pool_env["SM_VLLM_TENSOR_PARALLEL_SIZE"]) == ("1", "4")
    # Same role, image, artifact and isolation; kept when replaced, as the variant's model is (a rollback may run it).
    assert pool_model["Properties"] == primary["Properties"]
    assert pool_model["UpdateReplacePolicy"] == primary["UpdateReplacePolicy"] == "Retain"


def test_a_capacity_reservation_without_pools(pools):
    pv = variant(pools.templates[STACKS["reserved"]])
    assert pv["InstanceType"] == "ml.p5.4xlarge" and "InstancePools" not in pv
    assert pv["CapacityReservationConfig"] == {
        "CapacityReservationPreference": "capacity-reservations-only",
        "MlReservationArn": "arn:aws:sagemaker:us-east-1:111122223333:ml-reservation/p5-capacity",
    }
    assert "VariantInstanceProvisionTimeoutInSeconds" not in pv
    assert len(logical_ids(pools.templates[STACKS["reserved"]], "AWS::SageMaker::Model")) == 1


def test_the_execution_role_is_unchanged_by_pools(pools):
    """The pool model runs with the variant's role on the same artifact and image: no new action (least privilege)."""

    def actions(stack: str) -> list[tuple[str, ...]]:
        template = pools.templates[stack]
        [role] = [k for k in logical_ids(template, "AWS::IAM::Role") if "ExecutionRole" in k]
        statements = [
            s
            for policy in logical_ids(template, "AWS::IAM::Policy").values()
            if {"Ref": role} in policy["Properties"]["Roles"]
            for s in policy["Properties"]["PolicyDocument"]["Statement"]
        ]
        return sorted(
            tuple(sorted(s["Action"] if isinstance(s["Action"], list) else [s["Action"]])) for s in statements
        )

    assert actions(STACKS["pools"]) == actions(STACKS["reserved"])


def test_cfn_lint_passes_the_templates_and_reports_a_priority_out_of_bounds(pools, tmp_path):
    canary = copy.deepcopy(pools.templates[STACKS["pools"]])
    [endpoint_config] = logical_ids(canary, "AWS::SageMaker::EndpointConfig").values()
    endpoint_config["Properties"]["ProductionVariants"][0]["InstancePools"][2]["Priority"] = 6
    templates = {stack: pools.templates[stack] for stack in STACKS.values()}
    in_templates, [finding] = lint_with_canary(tmp_path, templates, canary, ignore_rules=["W3005"])
    assert in_templates == []
    assert finding["Location"]["Path"][-1] == "Priority" and "6" in finding["Message"], finding


def test_gpu_memory_is_alarmed_per_instance_type_where_the_gpu_counts_differ(pools):
    """GPUMemoryUtilization sums an instance's GPUs: 1 GPU on g7e.2xlarge and p5.4xlarge, 4 on g6e.12xlarge, so one
    threshold cannot serve the mixed fleet; each type gets its own on the InstanceType dimension."""
    template = pools.templates[STACKS["pools"]]
    alarms = [r["Properties"] for r in logical_ids(template, "AWS::CloudWatch::Alarm").values()]
    gpu = {
        a["AlarmName"]: (a["Threshold"], {d["Name"]: d["Value"] for d in a["Dimensions"]}.get("InstanceType"))
        for a in alarms
        if a.get("MetricName") == "GPUMemoryUtilization"
    }
    assert gpu == {
        "pools-gpu-memory-ml.g7e.2xlarge": (95, "ml.g7e.2xlarge"),
        "pools-gpu-memory-ml.g6e.12xlarge": (380, "ml.g6e.12xlarge"),
        "pools-gpu-memory-ml.p5.4xlarge": (95, "ml.p5.4xlarge"),
    }
    # The endpoint without pools keeps its one alarm on the variant.
    [plain] = [
        a
        for a in (
            r["Properties"] for r in logical_ids(pools.templates[STACKS["reserved"]], "AWS::CloudWatch::Alarm").values()
        )
        if a.get("MetricName") == "GPUMemoryUtilization"
    ]
    assert {d["Name"] for d in plain["Dimensions"]} == {"EndpointName", "VariantName"}
    for endpoint, name in STACKS.items():  # every alarm reads a series SageMaker publishes (sagemaker_metrics.py)
        for r in logical_ids(pools.templates[name], "AWS::CloudWatch::Alarm").values():
            if "EvaluationCriteria" in r["Properties"]:
                continue  # PromQL: tests/stacks/test_engine_metrics.py
            for series in alarm_series(r["Properties"]):
                names = {d["Name"] for d in series["Dimensions"]}
                mode = MODES.get(endpoint, REAL_TIME)
                assert is_published(mode, series["Namespace"], series["MetricName"], names), series


def test_the_scaling_target_counts_the_fewest_copies_of_any_pool(pools):
    [policy] = [
        r["Properties"]
        for r in logical_ids(pools.templates[STACKS["copies"]], "AWS::ApplicationAutoScaling::ScalingPolicy").values()
    ]
    # 6 per copy: 4 copies on g5.12xlarge but 1 on the g5.2xlarge pool, where 24 per instance would overload it.
    assert policy["TargetTrackingScalingPolicyConfiguration"]["TargetValue"] == 6


def test_the_dashboard_shows_each_pools_instance_type(pools):
    [dashboard] = logical_ids(pools.templates[ARTIFACTS], "AWS::CloudWatch::Dashboard").values()
    parts = dashboard["Properties"]["DashboardBody"]["Fn::Join"][1]
    body = json.loads("".join(p if isinstance(p, str) else "us-east-1" for p in parts))
    by_type: dict[str, set[str]] = {}
    for widget in body["widgets"]:
        for m in widget["properties"].get("metrics", []) if widget["type"] == "metric" else []:
            if not isinstance(m[0], str):
                continue
            namespace, name, *rest = [x for x in m if not isinstance(x, dict)]
            dimensions = dict(zip(rest[::2], rest[1::2], strict=True))
            mode = MODES.get(dimensions.get("EndpointName", ""), REAL_TIME)
            assert is_published(mode, namespace, name, set(dimensions)), m
            if "InstanceType" in dimensions:
                by_type.setdefault((dimensions["EndpointName"], dimensions["InstanceType"]), set()).add(name)
    shown = {"CPUUtilization", "ModelLatency", "GPUMemoryUtilization"}
    assert by_type == {
        (endpoint, t): shown
        for endpoint, types in {
            "pools": ("ml.g7e.2xlarge", "ml.g6e.12xlarge", "ml.p5.4xlarge"),
            "pools-async": ("ml.g7e.2xlarge", "ml.g6e.12xlarge"),
            "copies": ("ml.g5.12xlarge", "ml.g5.2xlarge"),
        }.items()
        for t in types
    }


def test_the_engine_panel_splits_time_to_first_token_by_instance_type(pools):
    """Detailed observability labels every metric with the instance type ('@resource.host.type', SageMaker DG
    "OpenTelemetry metrics reference"): a pooled vllm endpoint's engine row gives each type's TTFT apart."""
    [dashboard] = logical_ids(pools.templates[ARTIFACTS], "AWS::CloudWatch::Dashboard").values()
    parts = dashboard["Properties"]["DashboardBody"]["Fn::Join"][1]
    body = json.loads("".join(p if isinstance(p, str) else "us-east-1" for p in parts))
    texts = [w["properties"]["markdown"] for w in body["widgets"] if w["type"] == "text"]
    engine = {t.split("'aws.sagemaker.endpoint.name'=\"")[1].split('"')[0]: t for t in texts if "Engine (vllm)" in t}
    assert set(engine) == {"pools", "reserved"}
    assert "sum by (le, '@resource.host.type')" in engine["pools"]
    assert "@resource.host.type" not in engine["reserved"]  # no pools: one instance type


def test_an_asynchronous_endpoint_takes_pools_beside_its_async_config(pools):
    template = pools.templates[STACKS["pools-async"]]
    [endpoint_config] = logical_ids(template, "AWS::SageMaker::EndpointConfig").values()
    assert "AsyncInferenceConfig" in endpoint_config["Properties"]
    pv = variant(template)
    assert [p["InstanceType"] for p in pv["InstancePools"]] == ["ml.g7e.2xlarge", "ml.g6e.12xlarge"]
    assert "ModelNameOverride" in pv["InstancePools"][1] and "InstanceType" not in pv
