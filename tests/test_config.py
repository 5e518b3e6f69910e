"""The config file: valid files load; each mistake gets a message naming endpoint, key, value and what is allowed."""

from __future__ import annotations

import os
import subprocess
import textwrap

import pytest
from conftest import ROOT

from endpoint_config import ConfigError, hosting_instance_types, load_config, parse_instance_type

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
        if instance.accelerators is None or instance.accelerators.kind != "gpu":
            continue
        assert instance.gpu_count == info["Count"], name
        assert instance.gpu_memory_gib * 1024 * instance.gpu_count == pytest.approx(info["TotalGpuMemoryInMiB"], rel=0.1), name
        checked += 1
    assert checked >= 15


BAD = [
    # (description, yaml, expected fragments of the message)
    ("unknown key with a suggestion", endpoint_yaml(instnce_count=1), ["endpoint 'gptj'", "instnce_count", "unknown key", "did you mean 'instance_count'"]),
    ("unknown top-level key", "endpoint:\n  - {name: x}\n", ["endpoint", "unknown key", "allowed keys: project, environments, endpoints"]),
    ("missing endpoints", "project: p\n", ["endpoints", "required key is missing"]),
    ("empty endpoints", "endpoints: []\n", ["endpoints", "at least 1"]),
    ("bad name", endpoint_yaml(name="GPT_J"), ["name", "'GPT_J'", "a-z, 0-9 and '-'"]),
    ("duplicate names", "endpoints:\n  - {name: a, system: hf-fastload, model: m, instance_type: ml.g5.xlarge}\n  - {name: a, system: hf-fastload, model: m, instance_type: ml.g5.xlarge}\n", ["'a' is used twice", "unique"]),
    ("unknown system", endpoint_yaml(system="tgi"), ["endpoint 'gptj'", "system", "'tgi'", "allowed: hf-fastload"]),
    ("unknown dtype", endpoint_yaml(dtype="int8"), ["endpoint 'gptj'", "dtype", "'int8'", "'fp16', 'bf16' or 'fp32'"]),
    ("unknown instance type", endpoint_yaml(instance_type="ml.g5.3xlarge"), ["endpoint 'gptj'", "instance_type", "'ml.g5.3xlarge'", "ml.g5.2xlarge"]),
    ("instance type not for hosting", endpoint_yaml(instance_type="g5.2xlarge"), ["instance_type", "'g5.2xlarge'", "not a SageMaker hosting instance type"]),
    ("download timeout too long", endpoint_yaml(model_data_download_timeout_s=7200), ["endpoint 'gptj'", "model_data_download_timeout_s", "7200", "less than or equal to 3600"]),
    ("startup timeout too short", endpoint_yaml(container_startup_health_check_timeout_s=30), ["container_startup_health_check_timeout_s", "30", "greater than or equal to 60"]),
    ("volume on NVMe instance", endpoint_yaml(volume_size_gb=100), ["endpoint 'gptj'", "volume_size_gb", "100", "local NVMe", "remove the key"]),
    ("volume too large", endpoint_yaml(instance_type="ml.p3.2xlarge", volume_size_gb=1024), ["volume_size_gb", "1024", "less than or equal to 512"]),
    ("tensor parallel does not divide GPUs", endpoint_yaml(instance_type="ml.g5.12xlarge", tensor_parallel_degree=3), ["tensor_parallel_degree", "value 3", "4 GPUs of ml.g5.12xlarge", "allowed: 1, 2, 4"]),
    ("tensor parallel on CPU", endpoint_yaml(instance_type="ml.m5.xlarge", tensor_parallel_degree=2), ["tensor_parallel_degree", "value 2", "has no GPU"]),
    ("autoscaling min above max", endpoint_yaml(autoscaling="{min_capacity: 3, max_capacity: 2, target_value: 4}"), ["autoscaling", "min_capacity 3 is above max_capacity 2"]),
    ("instance count outside scaling range", endpoint_yaml(instance_count=5, autoscaling="{min_capacity: 1, max_capacity: 2, target_value: 4}"), ["instance_count", "value 5", "range 1-2"]),
    ("zero instances", endpoint_yaml(instance_count=0), ["instance_count", "value 0", "greater than or equal to 1"]),
    ("bad log retention", endpoint_yaml(log_retention_days=10), ["log_retention_days", "value 10", "allowed: 1, 3, 5, 7, 14"]),
    ("non-positive scaling target", endpoint_yaml(autoscaling="{max_capacity: 2, target_value: 0}"), ["autoscaling.target_value", "value 0", "greater than 0"]),
    ("bad account id", "environments:\n  dev: {account: '1234'}\n" + endpoint_yaml(), ["environment 'dev'", "account", "'1234'"]),
    ("override for unknown endpoint", "environments:\n  dev: {overrides: {gpt: {instance_count: 2}}}\n" + endpoint_yaml(), ["environment 'dev'", "'gpt'", "not defined", "defined: gptj"]),
    ("override breaks a rule", "environments:\n  dev: {overrides: {gptj: {volume_size_gb: 50}}}\n" + endpoint_yaml(), ["environment 'dev'", "endpoint 'gptj'", "volume_size_gb", "local NVMe"]),
    ("torch-save on another field value", endpoint_yaml(weights_format="pickle"), ["weights_format", "'pickle'", "'safetensors' or 'torch-save'"]),
    ("image not in the region", "environments:\n  dev: {region: us-gov-west-1}\n" + endpoint_yaml(system="djl-fastertransformer", model="google/flan-t5-xxl", instance_type="ml.g5.12xlarge", tensor_parallel_degree=4), ["environment 'dev'", "djl-inference:0.24.0-fastertransformer5.3.0-cu118", "not published in region us-gov-west-1"]),
    ("model too large for the GPU", endpoint_yaml(instance_type="ml.g4dn.xlarge", dtype="fp32"), ["endpoint 'gptj'", "6.05 B parameters", "22.6 GiB of weights per GPU in fp32", "NVIDIA T4", "raise tensor_parallel_degree"]),
    ("encoder-decoder on a decoder system", endpoint_yaml(model="google/flan-t5-xxl", instance_type="ml.g5.12xlarge"), ["endpoint 'gptj'", "model", "'google/flan-t5-xxl' is an encoder-decoder model", "serves decoder models only"]),
    ("GPU system on a CPU instance", endpoint_yaml(system="lmi-vllm", instance_type="ml.m5.xlarge"), ["endpoint 'gptj'", "instance_type", "'ml.m5.xlarge' has no NVIDIA GPU", "lmi-vllm"]),
    ("Neuron instance", endpoint_yaml(instance_type="ml.inf2.xlarge"), ["instance_type", "AWS Neuron", "NVIDIA GPUs"]),
    ("engine option for another system", endpoint_yaml(engine="{tensorrt_profile: {max_batch: 4}}"), ["engine.tensorrt_profile", "tensorrt-byoc"]),
    ("pipeline stage not an environment", "environments:\n  dev: {}\npipeline: {connection_arn: 'arn:aws:codeconnections:us-east-1:111122223333:connection/abc', repository: o/r, stages: [dev, prod]}\n" + endpoint_yaml(), ["pipeline.stages", "'prod' is not defined", "defined: dev"]),
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


def _app_env() -> dict[str, str]:
    return {**os.environ, "JSII_SILENCE_WARNING_END_OF_LIFE_NODE_VERSION": "20", "CDK_DISABLE_CLI_TELEMETRY": "true"}


def test_cdk_synth_exits_non_zero_with_the_message_and_no_traceback(tmp_path):
    """The real CDK CLI on a bad file: the message, a non-zero exit, no traceback and no template written."""
    bad = write(tmp_path, endpoint_yaml(instance_type="ml.g5.12xlarge", tensor_parallel_degree=3))
    out = tmp_path / "cdk.out"
    result = subprocess.run(
        [str(ROOT / "node_modules/.bin/cdk"), "synth", "--no-notices", "-c", f"config={bad}", "-o", str(out)],
        cwd=ROOT, capture_output=True, text=True, env={**_app_env(), "PATH": f"{ROOT / '.venv/bin'}:{os.environ['PATH']}"},
    )
    assert result.returncode != 0
    assert "endpoint 'gptj': tensor_parallel_degree: value 3 does not divide the 4 GPUs" in result.stderr
    assert "Traceback" not in result.stdout + result.stderr
    assert not list(out.glob("*.template.json"))


def test_cdk_synth_writes_templates_for_an_example(tmp_path):
    out = tmp_path / "cdk.out"
    result = subprocess.run(
        [str(ROOT / "node_modules/.bin/cdk"), "synth", "--no-notices", "-q", "-c", "config=config/examples/hf-fastload.yaml",
         "-c", "env=prod", "-c", "allow_unbuilt=true", "-o", str(out)],
        cwd=ROOT, capture_output=True, text=True, env={**_app_env(), "PATH": f"{ROOT / '.venv/bin'}:{os.environ['PATH']}"},
    )
    assert result.returncode == 0, result.stderr[-3000:]
    assert sorted(p.name for p in out.glob("*.template.json")) == [
        "llm-endpoints-prod-artifacts.template.json", "llm-endpoints-prod-gptj-fastload.template.json"
    ]
