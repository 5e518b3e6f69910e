"""The config file: valid files load; each mistake gets a message naming endpoint, key, value and what is allowed."""

from __future__ import annotations

import re
import textwrap

import pytest
from helpers import ROOT, cdk_cli_synth

from deployment import load_config
from endpoint_config import ConfigError
from facts.instances import hosting_instance_types, parse_instance_type

GOOD_ENDPOINT = dict(
    name="gptj", system="hf-fastload", model="EleutherAI/gpt-j-6B", dtype="fp16", instance_type="ml.g5.2xlarge"
)


def write(tmp_path, text: str):
    path = tmp_path / "endpoints.yaml"
    path.write_text(textwrap.dedent(text))
    return path


def endpoint_yaml(**changes) -> str:
    fields = {**GOOD_ENDPOINT, **changes}
    body = "\n".join(f"    {k}: {v}" for k, v in fields.items() if v is not None)
    return "endpoints:\n  - " + body.lstrip() + "\n"


def test_every_shipped_config_loads_in_every_environment():
    import yaml

    paths = sorted((ROOT / "config").rglob("*.yaml"))
    assert len(paths) >= 3
    for path in paths:
        envs = list(yaml.safe_load(path.read_text()).get("environments") or {}) or [None]
        for env in envs:
            assert load_config(path, env).endpoints


def test_only_endpoints_is_valid_with_implicit_environment(tmp_path):
    d = load_config(write(tmp_path, endpoint_yaml()))
    assert d.environment_name == "default"
    assert d.environment.account is None and d.environment.region is None
    assert d.endpoint_name(d.endpoints[0]) == "gptj"
    assert d.environment.retain_data is True  # CDK's own default: destroy keeps data unless told otherwise


def test_environment_overrides_apply_and_prefix_names():
    d = load_config(ROOT / "config/examples/hf-fastload.yaml", "prod")
    [ep] = d.endpoints
    assert ep.instance_count == 2 and ep.autoscaling.max_capacity == 8
    assert d.endpoint_name(ep) == "prod-gptj-fastload"
    assert d.environment.account == "111122223333" and d.environment.region == "us-west-2"


def test_instance_types_come_from_botocore():
    types = hosting_instance_types()
    assert {"ml.g5.12xlarge", "ml.m5.xlarge", "ml.p4d.24xlarge"} <= types
    assert len(types) > 100


def test_instance_facts_match_the_sagemaker_gpu_table():
    """Our family table (GPU count per size) against the sagemaker package's own instance GPU table."""
    import json
    from importlib.resources import files

    table = json.loads((files("sagemaker.core") / "image_uri_config" / "instance_gpu_info.json").read_text())
    checked = 0
    for name, info in table["us-east-1"].items():
        if name not in hosting_instance_types():
            continue
        instance = parse_instance_type(name)
        # Every type the table lists has NVIDIA GPUs: none may fall through to "CPU only" (p2 did before).
        assert instance.is_gpu, f"{name}: the sagemaker table lists {info['Count']} GPUs; our facts list none"
        assert instance.gpu_count == info["Count"], name
        assert instance.gpu_memory_gib * 1024 * instance.gpu_count == pytest.approx(
            info["TotalGpuMemoryInMiB"], rel=0.1
        ), name
        checked += 1
    assert checked >= 22  # g4dn 6, g5 7, p2 3, p3 3, p4d, p4de, p5.48xlarge


BAD = [
    # (description, yaml, expected fragments of the message)
    (
        "unknown key with a suggestion",
        endpoint_yaml(instnce_count=1),
        ["endpoint 'gptj'", "instnce_count", "unknown key", "did you mean 'instance_count'"],
    ),
    (
        "unknown top-level key",
        "endpoint:\n  - {name: x}\n",
        ["endpoint", "unknown key", "allowed keys: project, environments, endpoints"],
    ),
    ("missing endpoints", "project: p\n", ["endpoints", "required key is missing"]),
    ("empty endpoints", "endpoints: []\n", ["endpoints", "at least 1"]),
    ("bad name", endpoint_yaml(name="GPT_J"), ["name", "'GPT_J'", "a-z, 0-9 and '-'"]),
    (
        "duplicate names",
        "endpoints:\n  - {name: a, system: hf-fastload, model: m, instance_type: ml.g5.xlarge}\n  - {name: a, system: hf-fastload, model: m, instance_type: ml.g5.xlarge}\n",
        ["'a' is used twice", "unique"],
    ),
    ("unknown system", endpoint_yaml(system="tgx"), ["endpoint 'gptj'", "system", "'tgx'", "allowed: hf-fastload"]),
    ("unknown dtype", endpoint_yaml(dtype="int8"), ["endpoint 'gptj'", "dtype", "'int8'", "'fp16', 'bf16' or 'fp32'"]),
    (
        "unknown instance type",
        endpoint_yaml(instance_type="ml.g5.3xlarge"),
        ["endpoint 'gptj'", "instance_type", "'ml.g5.3xlarge'", "ml.g5.2xlarge"],
    ),
    (
        "instance type not for hosting",
        endpoint_yaml(instance_type="g5.2xlarge"),
        ["instance_type", "'g5.2xlarge'", "not a SageMaker hosting instance type"],
    ),
    (
        "download timeout too long",
        endpoint_yaml(model_data_download_timeout_s=7200),
        ["endpoint 'gptj'", "model_data_download_timeout_s", "7200", "less than or equal to 3600"],
    ),
    (
        "startup timeout too short",
        endpoint_yaml(container_startup_health_check_timeout_s=30),
        ["container_startup_health_check_timeout_s", "30", "greater than or equal to 60"],
    ),
    (
        "volume on NVMe instance",
        endpoint_yaml(volume_size_gb=100),
        ["endpoint 'gptj'", "volume_size_gb", "100", "local NVMe", "remove the key"],
    ),
    (
        "volume too large",
        endpoint_yaml(instance_type="ml.p3.2xlarge", volume_size_gb=1024),
        ["volume_size_gb", "1024", "less than or equal to 512"],
    ),
    (
        "tensor parallel does not divide GPUs",
        endpoint_yaml(instance_type="ml.g5.12xlarge", tensor_parallel_degree=3),
        ["tensor_parallel_degree", "value 3", "4 GPUs of ml.g5.12xlarge", "allowed: 1, 2, 4"],
    ),
    (
        "tensor parallel on CPU",
        endpoint_yaml(instance_type="ml.m5.xlarge", tensor_parallel_degree=2),
        ["tensor_parallel_degree", "value 2", "has no GPU"],
    ),
    (
        "autoscaling min above max",
        endpoint_yaml(autoscaling="{min_capacity: 3, max_capacity: 2, target_value: 4}"),
        ["autoscaling", "min_capacity 3 is above max_capacity 2"],
    ),
    (
        "instance count outside scaling range",
        endpoint_yaml(instance_count=5, autoscaling="{min_capacity: 1, max_capacity: 2, target_value: 4}"),
        ["instance_count", "value 5", "range 1-2"],
    ),
    ("zero instances", endpoint_yaml(instance_count=0), ["instance_count", "value 0", "greater than or equal to 1"]),
    (
        "bad log retention",
        endpoint_yaml(log_retention_days=10),
        ["log_retention_days", "value 10", "allowed: 1, 3, 5, 7, 14"],
    ),
    (
        "non-positive scaling target",
        endpoint_yaml(autoscaling="{max_capacity: 2, target_value: 0}"),
        ["autoscaling.target_value", "value 0", "greater than 0"],
    ),
    (
        "bad account id",
        "environments:\n  dev: {account: '1234'}\n" + endpoint_yaml(),
        ["environment 'dev'", "account", "'1234'"],
    ),
    (
        "override for unknown endpoint",
        "environments:\n  dev: {overrides: {gpt: {instance_count: 2}}}\n" + endpoint_yaml(),
        ["environment 'dev'", "'gpt'", "not defined", "defined: gptj"],
    ),
    (
        "override breaks a rule",
        "environments:\n  dev: {overrides: {gptj: {volume_size_gb: 50}}}\n" + endpoint_yaml(),
        ["environment 'dev'", "endpoint 'gptj'", "volume_size_gb", "local NVMe"],
    ),
    (
        "torch-save on another field value",
        endpoint_yaml(weights_format="pickle"),
        ["weights_format", "'pickle'", "'safetensors' or 'torch-save'"],
    ),
    (
        "image not in the region",
        "environments:\n  dev: {region: us-gov-west-1}\n"
        + endpoint_yaml(
            system="djl-fastertransformer",
            model="google/flan-t5-xxl",
            instance_type="ml.g5.12xlarge",
            tensor_parallel_degree=4,
        ),
        [
            "environment 'dev'",
            "djl-inference:0.24.0-fastertransformer5.3.0-cu118",
            "not published in region us-gov-west-1",
        ],
    ),
    (
        "model too large for the GPU",
        endpoint_yaml(instance_type="ml.g4dn.xlarge", dtype="fp32"),
        [
            "endpoint 'gptj'",
            "6.05 B parameters",
            "22.6 GiB of weights per GPU in fp32",
            "NVIDIA T4",
            "raise tensor_parallel_degree",
        ],
    ),
    (
        "encoder-decoder on a decoder system",
        endpoint_yaml(model="google/flan-t5-xxl", instance_type="ml.g5.12xlarge"),
        ["endpoint 'gptj'", "model", "'google/flan-t5-xxl' is an encoder-decoder model", "serves decoder models only"],
    ),
    (
        "GPU system on a CPU instance",
        endpoint_yaml(system="lmi-vllm", instance_type="ml.m5.xlarge"),
        ["endpoint 'gptj'", "instance_type", "'ml.m5.xlarge' has no NVIDIA GPU", "lmi-vllm"],
    ),
    ("Neuron instance", endpoint_yaml(instance_type="ml.inf2.xlarge"), ["instance_type", "AWS Neuron", "NVIDIA GPUs"]),
    (
        "engine option for another system",
        endpoint_yaml(engine="{tensorrt_profile: {max_batch: 4}}"),
        ["engine.tensorrt_profile", "tensorrt-byoc"],
    ),
    (
        "pipeline stage not an environment",
        "environments:\n  dev: {}\npipeline: {connection_arn: 'arn:aws:codeconnections:us-east-1:111122223333:connection/abc', repository: o/r, stages: [dev, prod]}\n"
        + endpoint_yaml(),
        ["pipeline.stages", "'prod' is not defined", "defined: dev"],
    ),
    ("not a mapping", "- just\n- a list\n", ["must be a mapping", "endpoints"]),
    ("broken yaml", "endpoints: [\n  name: x\n", ["not valid YAML", "line"]),
]


@pytest.mark.parametrize("description,text,fragments", BAD, ids=[b[0] for b in BAD])
def test_bad_config_message(tmp_path, description, text, fragments):
    env = "dev" if text.startswith("environments:") else None
    with pytest.raises(ConfigError) as err:
        load_config(write(tmp_path, text), env)
    message = str(err.value)
    for fragment in fragments:
        assert fragment in message, f"{description}: {fragment!r} not in:\n{message}"
    assert str(tmp_path) in message  # names the file


PIPELINE = "pipeline: {connection_arn: 'arn:aws:codeconnections:us-east-1:111122223333:connection/abc', repository: o/r"
MODEL_RULES = [
    # (description, yaml, environment, the whole message after "<file>: invalid config:\n  - ")
    (
        "duplicate names",
        endpoint_yaml() + "  - " + endpoint_yaml().split("  - ", 1)[1],
        None,
        "endpoint name 'gptj' is used twice; endpoint names must be unique",
    ),
    (
        "override for unknown endpoint",
        "environments:\n  dev: {overrides: {gpt: {instance_count: 2}}}\n" + endpoint_yaml(),
        "dev",
        "environment 'dev': overrides name endpoint 'gpt', which is not defined (defined: gptj)",
    ),
    (
        "pipeline stage not an environment",
        f"environments:\n  dev: {{}}\n{PIPELINE}, stages: [dev, prod]}}\n" + endpoint_yaml(),
        "dev",
        "pipeline.stages: environment 'prod' is not defined (defined: dev)",
    ),
    (
        "approval before an unknown environment",
        f"environments:\n  dev: {{}}\n{PIPELINE}, stages: [dev], manual_approval_before: [qa]}}\n" + endpoint_yaml(),
        "dev",
        "pipeline.manual_approval_before: environment 'qa' is not defined (defined: dev)",
    ),
    (
        "nested model rule",
        endpoint_yaml(system="tensorrt-byoc", engine="{tensorrt_profile: {min_batch: 5, max_batch: 2}}"),
        None,
        "endpoint 'gptj': engine.tensorrt_profile: batch sizes must satisfy min_batch <= opt_batch <= max_batch, "
        "got 5, 5, 2",
    ),
]


@pytest.mark.parametrize("description,text,env,expected", MODEL_RULES, ids=[m[0] for m in MODEL_RULES])
def test_model_rule_errors_print_the_location_and_message_only(tmp_path, description, text, env, expected):
    """pydantic hands a model validator's error the whole model (for file-wide rules: the whole config) as its
    input and prefixes the message with "Value error, "; neither belongs in what the user reads."""
    path = write(tmp_path, text)
    with pytest.raises(ConfigError) as err:
        load_config(path, env)
    message = str(err.value)
    assert message == f"{path}: invalid config:\n  - {expected}"
    assert "{" not in message and "Value error" not in message


def test_missing_file_and_unknown_environment(tmp_path):
    with pytest.raises(ConfigError, match="does not exist"):
        load_config(tmp_path / "nope.yaml")
    with pytest.raises(ConfigError, match="environment 'qa' is not defined; defined: dev, prod"):
        load_config(ROOT / "config/examples/hf-fastload.yaml", "qa")
    with pytest.raises(ConfigError, match="choose one with -c env=NAME"):
        load_config(ROOT / "config/examples/hf-fastload.yaml")


def test_all_errors_are_reported_at_once(tmp_path):
    text = endpoint_yaml(dtype="int8", instance_count=0, model_data_download_timeout_s=10)
    with pytest.raises(ConfigError) as err:
        load_config(write(tmp_path, text))
    assert all(k in str(err.value) for k in ("dtype", "instance_count", "model_data_download_timeout_s"))


@pytest.mark.slow
def test_cdk_synth_exits_non_zero_with_the_message_and_no_traceback(tmp_path):
    """The real CDK CLI on a bad file: the message, a non-zero exit, no traceback and no template written."""
    bad = tmp_path / "bad.yaml"
    bad.write_text(
        "endpoints:\n  - {name: gptj, system: hf-fastload, model: EleutherAI/gpt-j-6b, instance_type: ml.g5.12xlarge, "
        "tensor_parallel_degree: 3}\n"
    )
    out = tmp_path / "cdk.out"
    result = cdk_cli_synth(["-c", f"config={bad}"], out)
    assert result.returncode != 0
    assert "endpoint 'gptj': tensor_parallel_degree: value 3 does not divide the 4 GPUs" in result.stderr
    assert "Traceback" not in result.stdout + result.stderr
    assert not list(out.glob("*.template.json"))


@pytest.mark.slow
def test_cdk_synth_writes_templates_for_an_example(tmp_path):
    out = tmp_path / "cdk.out"
    args = ["-c", "config=config/examples/hf-fastload.yaml", "-c", "env=prod", "-c", "allow_unbuilt=true"]
    result = cdk_cli_synth(args, out)
    assert result.returncode == 0, result.stderr[-3000:]
    assert sorted(p.name for p in out.glob("*.template.json")) == [
        "llm-endpoints-prod-artifacts.template.json",
        "llm-endpoints-prod-gptj-fastload.template.json",
    ]


def test_artifact_bucket_name_must_fit_s3s_63_characters(tmp_path):
    """project (<= 20) + environment (<= 12) + account + region can exceed S3's 63: refused at load, assuming the
    longest region botocore knows when the environment sets none."""
    from endpoint_config.loader import longest_region

    text = "project: twenty-char-project0\nenvironments:\n  staging:\n    retain_data: false\n" + endpoint_yaml()
    with pytest.raises(ConfigError) as err:
        load_config(write(tmp_path, text))
    message = str(err.value)
    assert "environment 'staging': the artifact bucket name 'twenty-char-project0-staging-artifacts-" in message
    assert f"15 for region {longest_region()!r}, the longest region, since the environment sets none" in message
    assert (
        "S3 allows 63" in message
        and "shorten the project or the environment name by 4 characters, or set the environment's region" in message
    )
    # The same names fit with a short region given.
    fits = text.replace("    retain_data: false\n", "    retain_data: false\n    region: eu-west-1\n")
    (tmp_path / "fits").mkdir()
    assert load_config(write(tmp_path / "fits", fits)).environment.region == "eu-west-1"


# The model-size check is never silent: unsized at synth -> a warning; too big once the build reads the weights -> refused.
UNSIZED = "EleutherAI/gpt-neox-20b"  # neither a local directory, nor in the known-model table, nor model_parameters


def test_unsized_model_warning_names_the_model_and_the_fixes(tmp_path):
    from systems.checks import unsized_model_warning

    [ep] = load_config(write(tmp_path, endpoint_yaml(model=UNSIZED, instance_type="ml.g4dn.xlarge"))).endpoints
    warning = unsized_model_warning(ep)
    assert warning.startswith(f"endpoint 'gptj': model '{UNSIZED}' could not be sized")
    assert "16.0 GiB of each NVIDIA T4 on ml.g4dn.xlarge" in warning
    assert "set model_parameters" in warning and "python -m model_build build" in warning
    assert unsized_model_warning(ep, built_bytes=40_000_000_000) is None  # the build read and checked the weights
    assert unsized_model_warning(ep.model_copy(update={"model_parameters": 20_000_000_000})) is None
    assert unsized_model_warning(ep.model_copy(update={"instance_type": "ml.m5.xlarge"})) is None  # no GPU: no limit
    # Declared, the same model is sized and refused at load: 20 B parameters in fp16 do not fit one T4.
    declared = endpoint_yaml(model=UNSIZED, instance_type="ml.g4dn.xlarge", model_parameters=20_000_000_000)
    with pytest.raises(ConfigError, match="20.00 B parameters, model_parameters"):
        load_config(write(tmp_path, declared))


def test_unsized_model_is_a_synth_warning_on_its_stack(synth, tmp_path):
    config = tmp_path / "unsized.yaml"
    config.write_text(
        f"endpoints:\n  - {{name: unsized, system: hf-fastload, model: {UNSIZED}, instance_type: ml.g4dn.xlarge}}\n"
    )
    pattern = re.compile(f"model '{re.escape(UNSIZED)}' could not be sized.*llm-endpoints:unsized-model", re.DOTALL)
    [found] = [w for w in synth(str(config)).warnings("llm-endpoints-default-unsized") if pattern.search(w)]
    assert "set model_parameters" in found
    # A sized model on the same GPU (the minimal example, synthesized for other tests too) gets no such warning.
    sized = synth("config/examples/minimal.yaml").warnings("llm-endpoints-default-gpt2-small")
    assert not [w for w in sized if "could not be sized" in w]


def test_build_refuses_weights_that_do_not_fit(tiny_models, tmp_path):
    """The weights a build reads are checked before anything is written: a tiny model against a tiny budget."""
    from model_build import BuildError
    from systems import recipe_common as common
    from systems.checks import built_weights_problem

    [ep] = load_config(
        write(tmp_path, endpoint_yaml(model=tiny_models["gpt2"], instance_type="ml.g5.xlarge"))
    ).endpoints

    def load(path):
        return common.load_pretrained(path, ep.dtype)

    model, _ = common.load_source(ep, tiny_models["gpt2"], load)  # fits the A10G's real limit
    count = sum(p.numel() for p in model.parameters())
    with pytest.raises(BuildError) as err:
        common.load_source(ep, tiny_models["gpt2"], load, weight_limit_bytes=1000)
    assert str(err.value) == (
        f"endpoint 'gptj': model '{tiny_models['gpt2']}': the weights read at build are {2 * count:,} bytes "
        f"({count:,} parameters in fp16), more than the fit limit of 1,000 bytes on ml.g5.xlarge at "
        "tensor_parallel_degree 1; nothing was written; raise tensor_parallel_degree, pick a larger GPU or a smaller dtype"
    )
    # The instance's own limit: 80 % of each GPU's memory x tensor_parallel_degree (22888 MiB per A10G).
    limit = int(22888 * 2**20 * 0.8)
    assert built_weights_problem(ep, limit // 2) is None
    message = built_weights_problem(ep, limit // 2 + 1)
    assert (
        f"more than the fit limit of {limit:,} bytes on ml.g5.xlarge at tensor_parallel_degree 1 (80% of the 22.4 GiB of each NVIDIA A10G"
        in message
    )
    on_two = ep.model_copy(update={"instance_type": "ml.g5.12xlarge", "tensor_parallel_degree": 2})
    assert built_weights_problem(on_two, limit // 2 + 1) is None  # half the weights per GPU
    assert (
        built_weights_problem(ep.model_copy(update={"instance_type": "ml.m5.xlarge"}), 10**12) is None
    )  # CPU: no limit


def test_every_recipe_reads_its_weights_through_the_size_check():
    """recipe_common.load_source is where the build refuses weights that do not fit: every recipe's build path
    must read the source model through it (directly, or via the DJL/LMI shared builders that do); the engine
    systems' and LMI's recipes copy the checkpoint through checkpoint_artifact, which runs the fit check on the real
    files (or a Hub model's headers)."""
    systems = ROOT / "systems"
    shared = {
        "run_recipe(": systems / "recipe_common.py",
        "build_decoder_artifact(": systems / "djl_common/build.py",
        "build_handler_artifact(": systems / "djl_common/build.py",
        "build_lmi(": systems / "djl_common/lmi.py",
        "build_checkpoint_artifact(": systems / "checkpoint_artifact.py",
    }
    assert "load_source(" in shared["run_recipe("].read_text().split("def run_recipe(")[1]
    assert "run_recipe(" in shared["build_decoder_artifact("].read_text()
    assert "build_checkpoint_artifact(" in shared["build_lmi("].read_text()  # the LMI systems ship the checkpoint
    assert (
        "build_decoder_artifact("
        in shared["build_handler_artifact("].read_text().split("def build_handler_artifact(")[1]
    )
    assert (
        "checkpoint_problems_on_every_pool("  # instance_type's and every instance pool's
        in shared["build_checkpoint_artifact("].read_text().split("def build_checkpoint_artifact(")[1]
    )
    recipes = sorted(systems.glob("*/recipe.py"))
    from systems import all_systems

    assert len(recipes) == len(all_systems())  # every registered system's recipe
    for recipe in recipes:
        text = recipe.read_text()
        assert any(call in text for call in ("load_source(", *shared)), f"{recipe} reads weights without load_source"
