"""`instance_pools:` and `capacity:` (endpoint_config/pools.py): each pool checked as instance_type is (schema rules,
the system's rules, the fit, with what would hold the model when it does not), the rules of the pools together, the
plan per pool (degree, own model where the engine's settings differ, quota), and the bounds against botocore's
service model and cfn-lint's schema, so they cannot drift from what SageMaker and CloudFormation accept."""

from __future__ import annotations

import gzip
import json
from pathlib import Path

import botocore
import pytest
from helpers import config_refusal

from deployment import load_config
from endpoint_config import ConfigError
from endpoint_config.pools import MAX_POOLS, PROVISION_TIMEOUT_BOUNDS, RESERVATION_ARN_PATTERN, RESERVATIONS_ONLY
from systems import all_systems, get_system
from systems.checks import instance_types_holding, model_fit_problems, system_problems

# Qwen3-32B bf16 (systems/checkpoint_facts.py KNOWN_CHECKPOINTS): 61.0 GiB of weights + 8 GiB of KV cache at 32768.
ENDPOINT = (
    "name: qwen, system: vllm, model: Qwen/Qwen3-32B, dtype: bf16, instance_type: ml.g7e.2xlarge, "
    "volume_size_gb: null, engine: {max_model_len: 32768}"
)
TWO_POOLS = (
    "instance_pools: [{instance_type: ml.g6e.12xlarge, tensor_parallel_degree: 4}, {instance_type: ml.p5.4xlarge}]"
)
RESERVATION = "arn:aws:sagemaker:us-east-1:111122223333:ml-reservation/gpu-capacity"


def config(tmp_path: Path, extra: str, *, environments: str = "") -> Path:
    path = tmp_path / "pools.yaml"
    path.write_text(f"{environments}endpoints:\n  - {{{ENDPOINT}, {extra}}}\n")
    return path


def load_error(tmp_path: Path, extra: str) -> str:
    return config_refusal(config(tmp_path, extra))


def test_two_pools_are_planned_in_priority_order_with_their_own_degree(tmp_path):
    [plan] = load_config(config(tmp_path, TWO_POOLS)).plans
    g6e, p5 = plan.pools
    assert (g6e.priority, g6e.instance_type, g6e.tensor_parallel_degree) == (2, "ml.g6e.12xlarge", 4)
    assert (p5.priority, p5.instance_type, p5.tensor_parallel_degree) == (3, "ml.p5.4xlarge", 1)  # the endpoint's
    # The g6e pool's engine runs another tensor-parallel degree: its own model; the p5 pool runs the variant's.
    assert g6e.own_model and not p5.own_model
    primary = plan.container_environment("bucket")
    pooled = plan.container_environment("bucket", g6e)
    assert {k for k in primary if primary[k] != pooled.get(k)} == {"SM_VLLM_TENSOR_PARALLEL_SIZE"}
    assert pooled["SM_VLLM_TENSOR_PARALLEL_SIZE"] == "4"
    assert plan.container_environment("bucket", p5) == primary
    # One machine image and one container image for the variant, resolved per pool and equal.
    assert g6e.inference_ami_version == p5.inference_ami_version == plan.inference_ami_version is not None
    assert g6e.image_tag == p5.image_tag == plan.image_tag is not None


def test_every_pool_needs_the_whole_fleet_in_quota(tmp_path):
    extra = f"{TWO_POOLS}, autoscaling: {{min_capacity: 1, max_capacity: 3, target_value: 8}}"
    [plan] = load_config(config(tmp_path, extra)).plans
    needs = {q.instance_type: (q.steady, q.update) for q in plan.quotas}
    assert needs == {"ml.g7e.2xlarge": (3, 3), "ml.g6e.12xlarge": (3, 3), "ml.p5.4xlarge": (3, 3)}
    assert "instance pool priority 2" in plan.quotas[1].basis


def test_a_pool_the_model_does_not_fit_is_refused_with_the_need_and_what_holds_it(tmp_path):
    message = load_error(tmp_path, "instance_pools: [{instance_type: ml.p5.4xlarge}, {instance_type: ml.g6e.2xlarge}]")
    [line] = [line for line in message.splitlines()[1:]]  # one problem, one line
    assert line.startswith("  - endpoint 'qwen': instance_pools[1] (ml.g6e.2xlarge): instance_type: model ")
    assert "needs 61.0 GiB of weights" in line and "8.0 GiB of KV cache" in line
    assert "the 41.1 GiB the engine fills of each 44.7 GiB NVIDIA L40S on ml.g6e.2xlarge" in line
    holders = line.split("; instance types that hold it: ")[1].split(", ")
    assert "ml.g7e.2xlarge at tensor_parallel_degree 1" in holders
    assert "ml.p5.4xlarge at tensor_parallel_degree 1" in holders


def test_what_holds_it_is_checked_by_the_same_fit_rule(tmp_path):
    [plan] = load_config(config(tmp_path, TWO_POOLS)).plans
    system = get_system("vllm")
    small = plan.spec.model_copy(update={"instance_type": "ml.g6e.2xlarge"})
    assert model_fit_problems(small, system)  # the refusal above
    holders = instance_types_holding(small, system, all_systems(), limit=100)
    assert holders and "ml.g6e.2xlarge at tensor_parallel_degree 1" not in holders
    # Fitting alone would offer more types; the refusal offers only those where every rule of the system passes.
    assert set(holders) < set(instance_types_holding(small, system, limit=100))
    for holder in holders:
        name, degree = holder.split(" at tensor_parallel_degree ")
        fits = plan.spec.model_copy(update={"instance_type": name, "tensor_parallel_degree": int(degree)})
        assert not model_fit_problems(fits, system), holder
        assert not system_problems(fits, system, all_systems()), holder
        if int(degree) > 1:  # the smallest degree that holds it
            below = plan.spec.model_copy(update={"instance_type": name, "tensor_parallel_degree": int(degree) // 2})
            assert model_fit_problems(below, system), holder


def test_the_cli_prints_the_refusal_without_a_traceback_and_builds_nothing(tmp_path, capsys):
    from model_build.cli import main

    path = config(tmp_path, "instance_pools: [{instance_type: ml.g6e.2xlarge}]")
    out = tmp_path / "build-root"
    out.mkdir()
    assert main(["build", "--config", str(path), "--endpoint", "qwen", "--build-root", str(out)]) == 2
    captured = capsys.readouterr()
    assert "Traceback" not in captured.out + captured.err
    assert captured.err.startswith(f"error: {path}: invalid config:")
    assert "instance_pools[0] (ml.g6e.2xlarge)" in captured.err and "instance types that hold it:" in captured.err
    assert not list(out.iterdir())


@pytest.mark.parametrize(
    "extra, fragments",
    [
        (
            "instance_pools: [{instance_type: ml.g6e.12xlarge, tensor_parallel_degree: 3}]",
            [
                "instance_pools[0] (ml.g6e.12xlarge): tensor_parallel_degree: value 3 does not divide the 4 GPUs",
                "1, 2, 4",
            ],
        ),
        (
            "instance_pools: [{instance_type: ml.g6e.99xlarge}]",
            ["instance_pools[0] (ml.g6e.99xlarge): instance_type: value 'ml.g6e.99xlarge' is not a SageMaker hosting"],
        ),
        (
            "instance_pools: [{instance_type: ml.m5.24xlarge}]",
            [
                "instance_pools[0] (ml.m5.24xlarge): instance_type: value 'ml.m5.24xlarge' has no accelerator",
                "NVIDIA GPUs",
            ],
        ),
        (
            "instance_pools: [{instance_type: ml.g7e.2xlarge}]",
            ["instance_pools[0].instance_type: value 'ml.g7e.2xlarge' is already instance_type"],
        ),
        (
            "instance_pools: [{instance_type: ml.p5.4xlarge}, {instance_type: ml.p5.4xlarge, tensor_parallel_degree: 1}]",
            ["instance_pools[1].instance_type: value 'ml.p5.4xlarge' is already instance_pools[0]"],
        ),
        (
            "instance_pools: [{instance_type: ml.p5.4xlarge}, {instance_type: ml.p5.48xlarge},"
            " {instance_type: ml.p4de.24xlarge}, {instance_type: ml.g7e.12xlarge}, {instance_type: ml.g7e.24xlarge}]",
            ["instance_pools: has 5 pools; SageMaker takes at most 5 instance pools", "allowed: 1-4 fallbacks"],
        ),
        (
            f"{TWO_POOLS}, capacity: {{reservation_arn: '{RESERVATION}'}}",
            ["capacity.reservation_arn: is not supported together with instance_pools"],
        ),
        (
            "instance_pools: [{instance_type: ml.p5.4xlarge}], hosting: {mode: inference-components, "
            "instance_scaling: {min_instances: 1, max_instances: 2}, compute: {accelerators: 1, cpu_cores: 4, "
            "min_memory_mb: 32768}}",
            ["instance_pools: is not supported with hosting.mode inference-components"],
        ),
        ("capacity: {provision_timeout_s: 299}", ["capacity.provision_timeout_s", "300"]),
        ("capacity: {provision_timeout_s: 3601}", ["capacity.provision_timeout_s", "3600"]),
        (
            "capacity: {reservation_arn: 'arn:aws:ec2:us-east-1:111122223333:capacity-reservation/cr-1'}",
            ["reservation_arn"],
        ),
        ("instance_pools: [{instance_type: ml.p5.4xlarge, tensor_parallel_degree: 0}]", ["tensor_parallel_degree"]),
        ("instance_pools: [{instance_type: ml.p5.4xlarge, priority: 2}]", ["priority"]),
    ],
)
def test_bad_pools_and_capacity_are_refused_on_one_line_each(tmp_path, extra, fragments):
    message = load_error(tmp_path, extra)
    assert all(f in message for f in fragments), message
    problems = message.split("\n  - ")[1:]
    assert problems and all("\n" not in p for p in problems), message


def test_volume_size_is_refused_where_a_pool_has_local_nvme(tmp_path):
    # CPU instances: m5 is EBS-only, m5d has local NVMe (facts/instances.py).
    path = tmp_path / "nvme.yaml"
    endpoint = "{name: small, system: hf-fastload, model: gpt2, instance_type: ml.m5.xlarge, volume_size_gb: 50"
    path.write_text(f"endpoints:\n  - {endpoint}, instance_pools: [{{instance_type: ml.m5.2xlarge}}]}}\n")
    [plan] = load_config(path).plans
    assert [p.instance_type for p in plan.pools] == ["ml.m5.2xlarge"] and plan.inference_ami_version is None
    path.write_text(f"endpoints:\n  - {endpoint}, instance_pools: [{{instance_type: ml.m5d.xlarge}}]}}\n")
    with pytest.raises(ConfigError) as err:
        load_config(path)
    assert "instance_pools[0] (ml.m5d.xlarge): volume_size_gb: value 50 is not allowed on ml.m5d.xlarge" in str(
        err.value
    )


def test_capacity_alone_and_its_bounds_load(tmp_path):
    low, high = PROVISION_TIMEOUT_BOUNDS
    for value in (low, high):
        [ep] = load_config(config(tmp_path, f"capacity: {{provision_timeout_s: {value}}}")).endpoints
        assert ep.capacity is not None and ep.capacity.provision_timeout_s == value
    [ep] = load_config(
        config(tmp_path, f"capacity: {{reservation_arn: '{RESERVATION}', reserved_instances: 2}}")
    ).endpoints
    assert ep.capacity is not None and ep.capacity.reservation_arn == RESERVATION


def test_an_environment_replaces_the_pools(tmp_path):
    environments = (
        "environments:\n  dev: {}\n  prod:\n    overrides:\n      qwen:\n"
        "        instance_pools: [{instance_type: ml.p5.48xlarge}]\n"
        "        capacity: {provision_timeout_s: 600}\n"
    )
    path = config(tmp_path, TWO_POOLS, environments=environments)
    [dev] = load_config(path, "dev").plans
    [prod] = load_config(path, "prod").plans
    assert [p.instance_type for p in dev.pools] == ["ml.g6e.12xlarge", "ml.p5.4xlarge"]
    assert [p.instance_type for p in prod.pools] == ["ml.p5.48xlarge"]
    assert prod.spec.capacity is not None and prod.spec.capacity.provision_timeout_s == 600


# ---- the bounds against the primary sources


def sagemaker_shapes() -> dict:
    path = Path(botocore.__file__).parent / "data" / "sagemaker" / "2017-07-24" / "service-2.json.gz"
    return json.loads(gzip.decompress(path.read_bytes()))["shapes"]


def cfn_lint_endpoint_config() -> dict:
    import cfnlint

    resources = Path(cfnlint.__file__).parent / "data" / "schemas" / "resources"
    for path in resources.glob("*.json"):
        schema = json.loads(path.read_text())
        if schema.get("typeName") == "AWS::SageMaker::EndpointConfig":
            return schema
    raise AssertionError("cfn-lint has no schema of AWS::SageMaker::EndpointConfig")


def test_bounds_match_botocore():
    shapes = sagemaker_shapes()
    assert shapes["InstancePoolList"]["max"] == MAX_POOLS
    assert (shapes["InstancePoolPriority"]["min"], shapes["InstancePoolPriority"]["max"]) == (1, MAX_POOLS)
    assert set(shapes["InstancePool"]["required"]) == {"InstanceType", "Priority"}
    timeout = shapes["VariantInstanceProvisionTimeoutInSeconds"]
    assert (timeout.get("min"), timeout.get("max")) in ((None, None), PROVISION_TIMEOUT_BOUNDS)
    assert (
        "Valid values: 300 to 3600"
        in shapes["ProductionVariant"]["members"]["VariantInstanceProvisionTimeoutInSeconds"]["documentation"]
    )
    assert RESERVATIONS_ONLY in shapes["CapacityReservationPreference"]["enum"]


def test_bounds_match_cfn_lint():
    schema = cfn_lint_endpoint_config()
    variant = schema["definitions"]["ProductionVariant"]["properties"]
    assert variant["InstancePools"]["maxItems"] == MAX_POOLS
    timeout = variant["VariantInstanceProvisionTimeoutInSeconds"]
    assert (timeout["minimum"], timeout["maximum"]) == PROVISION_TIMEOUT_BOUNDS
    pool = schema["definitions"]["InstancePool"]["properties"]
    assert (pool["Priority"]["minimum"], pool["Priority"]["maximum"]) == (1, MAX_POOLS)
    arn = schema["definitions"]["CapacityReservationConfig"]["properties"]["MlReservationArn"]
    assert RESERVATION_ARN_PATTERN.startswith(arn["pattern"])


def test_preflight_checks_the_quota_of_every_pool(tmp_path):
    from model_build.preflight import QUOTA_NAME, Quota, quota_checks

    extra = f"{TWO_POOLS}, autoscaling: {{min_capacity: 1, max_capacity: 2, target_value: 8}}"
    environment_plan = load_config(config(tmp_path, extra))

    def quotas(**values: int) -> dict[str, Quota]:
        names = {t: QUOTA_NAME.format(instance_type=t) for t in values}
        return {names[t]: Quota(names[t], f"L-{i}", v, True) for i, (t, v) in enumerate(values.items())}

    enough = quotas(**{"ml.g7e.2xlarge": 4, "ml.g6e.12xlarge": 4, "ml.p5.4xlarge": 4})
    checks = {c.name: c for c in quota_checks(environment_plan, enough, "us-east-1")}
    assert set(checks) == {"quota ml.g7e.2xlarge", "quota ml.g6e.12xlarge", "quota ml.p5.4xlarge"}
    assert all(c.ok for c in checks.values())

    # The last pool's quota runs the fleet but not an update's second fleet; the middle pool is not offered.
    short = quotas(**{"ml.g7e.2xlarge": 4, "ml.p5.4xlarge": 2})
    checks = {c.name: c for c in quota_checks(environment_plan, short, "us-east-1")}
    assert checks["quota ml.g7e.2xlarge"].ok
    p5, g6e = checks["quota ml.p5.4xlarge"], checks["quota ml.g6e.12xlarge"]
    assert not p5.ok and "not for an update, which needs 4" in p5.message
    assert "instance pool priority 3: the whole fleet may fall back to it" in p5.message
    assert "the next update would fail when it falls back to this instance pool" in p5.message
    assert not g6e.ok and "change instance_type or instance_pools of qwen" in g6e.message


def test_the_emulator_refuses_pools_unless_the_environment_drops_them(tmp_path):
    environments = "environments:\n  local: {emulator: true}\n"
    path = config(tmp_path, TWO_POOLS, environments=environments)
    with pytest.raises(ConfigError) as err:
        load_config(path, "local")
    assert "endpoint 'qwen': instance_pools: not supported in environment 'local' (emulator: true)" in str(err.value)
    assert "overrides: {qwen: {instance_pools: []}}" in str(err.value)
    environments = "environments:\n  local:\n    emulator: true\n    overrides: {qwen: {instance_pools: []}}\n"
    [plan] = load_config(config(tmp_path, TWO_POOLS, environments=environments), "local").plans
    assert plan.pools == ()


def test_preflight_treats_a_change_of_pools_on_a_scaled_variant_as_a_change_of_instance_type(moto_env, tmp_path):
    """SageMaker refuses an UpdateEndpoint changing the instance type of a variant registered with Application Auto
    Scaling; a change of its pools is treated alike (unverified): the two-step deploy is asked for."""
    import boto3

    from model_build.preflight import instance_change_problem

    extra = f"{TWO_POOLS}, autoscaling: {{min_capacity: 1, max_capacity: 2, target_value: 8}}"
    [plan] = load_config(config(tmp_path, extra)).plans
    scaling = boto3.client("application-autoscaling")
    scaling.register_scalable_target(
        ServiceNamespace="sagemaker",
        ResourceId=f"endpoint/{plan.endpoint_name}/variant/AllTraffic",
        ScalableDimension="sagemaker:variant:DesiredInstanceCount",
        MinCapacity=1,
        MaxCapacity=2,
    )

    def deployed(*types: str) -> dict:
        pools = [{"InstanceType": t, "Priority": i} for i, t in enumerate(types, start=1)]
        return {"ProductionVariants": [{"VariantName": "AllTraffic", "InstancePools": pools[::-1]}]}

    assert (
        instance_change_problem(plan, deployed("ml.g7e.2xlarge", "ml.g6e.12xlarge", "ml.p5.4xlarge"), scaling) is None
    )
    problem = instance_change_problem(plan, deployed("ml.g7e.2xlarge", "ml.p5.4xlarge"), scaling)
    assert problem is not None
    assert "runs instance types ml.g7e.2xlarge, then ml.p5.4xlarge (in priority order)" in problem
    assert "changes them to ml.g7e.2xlarge, then ml.g6e.12xlarge, then ml.p5.4xlarge" in problem
    assert "(1) set `autoscaling: null` for endpoint 'qwen'" in problem
    # A variant deployed before its pools: InstanceType alone.
    single = {"ProductionVariants": [{"VariantName": "AllTraffic", "InstanceType": "ml.g7e.2xlarge"}]}
    assert "runs instance types ml.g7e.2xlarge" in (instance_change_problem(plan, single, scaling) or "")


def test_the_build_holds_every_pool_to_its_own_fit_limit():
    """At build the real weights are counted (systems.checks.built_weights_problem): a model the load could not size
    (not a known one) that fits instance_type but not a pool is refused naming the pool."""
    from endpoint_config import EndpointSpec
    from systems.checks import built_weights_problem

    spec = EndpointSpec.model_validate(
        {
            "name": "big",
            "system": "vllm",
            "model": "someone/unsized-model",
            "instance_type": "ml.g7e.2xlarge",  # 96 GiB: 76.8 GiB for weights
            "volume_size_gb": None,
            "instance_pools": [
                {"instance_type": "ml.g6e.12xlarge", "tensor_parallel_degree": 4},
                {"instance_type": "ml.g6e.2xlarge"},
            ],
        }
    )
    parameters = 30 * 10**9  # 60 GB in fp16: fits the RTX PRO 6000 and four L40S, not one L40S (35.8 GiB)
    problem = built_weights_problem(spec, parameters)
    assert problem is not None
    assert problem.startswith("endpoint 'big': instance_pools[1] (ml.g6e.2xlarge): model 'someone/unsized-model'")
    assert (
        built_weights_problem(spec.model_copy(update={"instance_pools": spec.instance_pools[:1]}), parameters) is None
    )


def test_the_checkpoint_rules_run_on_every_pool():
    """What the build's real config.json refuses (systems.checks.checkpoint_problems), on each pool at its degree."""
    from endpoint_config import EndpointSpec
    from systems.checkpoint_facts import checkpoint_of
    from systems.checks import checkpoint_problems_on_every_pool

    spec = EndpointSpec.model_validate(
        {
            "name": "qwen",
            "system": "vllm",
            "model": "Qwen/Qwen3-32B",
            "dtype": "bf16",
            "instance_type": "ml.g7e.2xlarge",
            "volume_size_gb": None,
            "engine": {"max_model_len": 32768},
            "instance_pools": [
                {"instance_type": "ml.g6e.12xlarge", "tensor_parallel_degree": 4},
                {"instance_type": "ml.g6e.2xlarge"},
            ],
        }
    )
    checkpoint = checkpoint_of(spec.model)
    assert checkpoint is not None
    vllm = get_system("vllm")
    problems = checkpoint_problems_on_every_pool(spec, vllm, vllm.engine(spec), checkpoint, all_systems())
    assert [p.split(": instance_type:")[0] for p in problems] == ["endpoint 'qwen': instance_pools[1] (ml.g6e.2xlarge)"]


def test_a_pool_models_environment_is_measured_against_createmodels_limits(tmp_path, monkeypatch):
    """A pool with its own model renders its own container environment: CreateModel's limits hold for it too, and a
    problem the variant's model already shows is said once."""
    import dataclasses

    import deployment

    real = get_system("vllm")

    def environment(ep, engine):  # a value too long only where the pool's degree renders it
        return {
            **real.environment(ep, engine),
            **({"SOME_OPTION": "x" * 1025} if ep.tensor_parallel_degree == 4 else {}),
        }

    long = dataclasses.replace(real, environment=environment)
    monkeypatch.setattr(deployment, "get_system", lambda name: long if name == "vllm" else get_system(name))
    with pytest.raises(ConfigError) as err:
        load_config(config(tmp_path, TWO_POOLS))
    [problem] = str(err.value).split("\n  - ")[1:]
    assert problem.startswith("endpoint 'qwen': instance_pools[0] (ml.g6e.12xlarge): the container environment value")
    assert "SOME_OPTION is 1025 bytes" in problem

    template = "{%- for m in messages %}{{ m['content'] }}{%- endfor %}" * 30
    monkeypatch.setattr(deployment, "get_system", get_system)
    path = config(tmp_path, TWO_POOLS)
    engine = f'engine: {{max_model_len: 32768, chat_template: "{template}"}}'
    path.write_text(path.read_text().replace("engine: {max_model_len: 32768}", engine))
    with pytest.raises(ConfigError) as err:
        load_config(path)
    [problem] = str(err.value).split("\n  - ")[1:]  # the variant's model's; the pool's model has the same value
    assert problem.startswith("endpoint 'qwen': the container environment value of SM_VLLM_CHAT_TEMPLATE")
