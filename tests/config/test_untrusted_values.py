"""Values the container or the account would refuse, refused at config load with their source's rule
(docs/design/untrusted-input.md): engine values the DLC entrypoint would split or read as an option, S3 bucket names
S3 refuses, endpoint names whose derived alarm names collide, pipeline stages named twice and branches git refuses,
a shard size of 0, adapters whose config lies. Each case is its own config written here (not in the repository)."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from helpers import ROOT, config_refusal, write_hand_made_model


@pytest.fixture
def model(tmp_path: Path) -> Path:
    """A Qwen3-shaped model folder written by hand (config.json, one safetensors tensor, a chat template)."""
    return write_hand_made_model(tmp_path / "model")


def endpoint(model: Path, name: str = "ep", system: str = "vllm", extra: str = "") -> str:
    return (
        f"  - name: {name}\n    system: {system}\n    model: {model}\n    instance_type: ml.g5.xlarge\n"
        f"    dtype: fp16\n{extra}"
    )


def write(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "endpoints.yaml"
    path.write_text(text)
    return path


def test_the_honest_config_these_cases_change_loads(tmp_path: Path, model: Path) -> None:
    from deployment import load_config

    load_config(write(tmp_path, "endpoints:\n" + endpoint(model)))


# ---- engine values: the DLC entrypoint's rule (systems/entrypoint_values.py)

ENGINE_CASES = [
    ("vllm", "--trust-remote-code", "starts with '-', so the engine's argument parser would read it as an option"),
    ("sglang", "--trust-remote-code", "starts with '-'"),
    ("vllm", "-x", "starts with '-'"),
    ("vllm", '{"a": 1} {"b": 2}', "a run of several JSON objects, which the container splits"),
    ("vllm", '["a", "b"]', "is a JSON array, which the container splits"),
    ("vllm", " template", "has whitespace at an end"),
    ("sglang", "true", "would be read by the container as a boolean or a bare flag"),
    ("sglang", "a\nb", "has a line break, which the container splits"),
]


@pytest.mark.parametrize(("system", "value", "says"), ENGINE_CASES)
def test_an_engine_value_the_entrypoint_would_split_or_read_as_an_option_is_refused(
    tmp_path: Path, model: Path, system: str, value: str, says: str
) -> None:
    extra = f"    engine: {{chat_template: {json.dumps(value)}}}\n"
    message = config_refusal(write(tmp_path, "endpoints:\n" + endpoint(model, system=system, extra=extra)))
    assert "engine.chat_template: value" in message and says in message and "allowed" in message, message


@pytest.mark.parametrize(
    ("value", "container", "ok"),
    [
        ("-1", "sglang", True),  # argparse reads a negative number as a value (_negative_number_matcher)
        ("-0.5", "vllm", True),
        ('{"a": 1}', "vllm", True),  # one JSON object: one token, verbatim
        ("{% for m in messages %}{{ m }}{% endfor %}", "vllm", True),  # a template is not a run of objects
        ("multi\nline", "vllm", True),  # sagemaker_args.py hands tokens NUL-delimited: a newline stays
        ("--x", "vllm", False),
    ],
)
def test_the_entrypoint_rule_lets_through_what_reaches_the_engine_as_one_token(
    value: str, container: str, ok: bool
) -> None:
    from systems import entrypoint_values

    splits = getattr(entrypoint_values, f"{container}_entrypoint_splits")
    assert (entrypoint_values.entrypoint_value_problem("f", value, splits) is None) == ok


def test_the_entrypoint_rule_quotes_the_pinned_entrypoints() -> None:
    """The rule's sources are named in its module: the vLLM and SGLang DLC entrypoints at the commits the options
    modules name, and argparse's negative-number rule."""
    text = (ROOT / "systems" / "entrypoint_values.py").read_text()
    for source in ("scripts/docker/vllm/sagemaker_args.py", "19aa4751eb", "sagemaker_entrypoint.sh", "3a66fab5ed"):
        assert source in text
        assert (
            source
            in (ROOT / "systems" / "vllm" / "options.py").read_text()
            + (ROOT / "systems" / "sglang" / "options.py").read_text()
        )
    assert "_negative_number_matcher" in text


# ---- S3 bucket names (endpoint_config/s3_names.py, the S3 User Guide's naming rules)

BUCKET_CASES = [
    ("a..b", "two adjacent periods"),
    ("xn--bucket", "starts with a prefix S3 reserves (xn--)"),
    ("sthree-bucket", "starts with a prefix S3 reserves (sthree-)"),
    ("bucket-s3alias", "ends with a suffix S3 reserves (-s3alias)"),
    ("bucket--ol-s3", "ends with a suffix S3 reserves (--ol-s3)"),
    ("bucket.mrap", "ends with a suffix S3 reserves (.mrap)"),
    ("bucket--x-s3", "ends with a suffix S3 reserves (--x-s3)"),
    ("192.168.5.4", "is formatted as an IP address"),
]


@pytest.mark.parametrize(("bucket", "says"), BUCKET_CASES)
def test_a_capture_bucket_s3_would_refuse_is_refused(tmp_path: Path, model: Path, bucket: str, says: str) -> None:
    extra = f"    data_capture: {{sampling_percent: 5, destination: 's3://{bucket}/captures'}}\n"
    message = config_refusal(write(tmp_path, "endpoints:\n" + endpoint(model, extra=extra)))
    assert "data_capture.destination" in message and f"bucket {bucket!r}" in message and says in message, message
    assert "general purpose bucket naming rules" in message


def test_an_allowed_bucket_passes_the_naming_rules() -> None:
    from endpoint_config.s3_names import bucket_name_problem

    for bucket in ("my-bucket", "a.b.c", "abc", "x" * 63, "1.2.3"):
        assert bucket_name_problem(bucket) is None, bucket


# ---- derived names: alarms, pipeline stages, branches


def test_two_endpoints_whose_alarm_names_collide_are_refused(tmp_path: Path, model: Path) -> None:
    text = "endpoints:\n" + endpoint(model, "chat") + endpoint(model, "chat-rollback")
    message = config_refusal(write(tmp_path, text))
    assert "endpoint names 'chat' and 'chat-rollback' give one alarm name twice" in message
    assert "chat-rollback-5xx-rate" in message


def test_every_alarm_suffix_the_check_knows_is_one_the_stacks_write() -> None:
    """The collision check's list (endpoint_config/schema.py ALARM_NAME_SUFFIXES) against the stacks that name the
    alarms: each suffix appears there, and every alarm name the stacks build from the endpoint's name is listed."""
    from endpoint_config.schema import ALARM_NAME_SUFFIXES

    stacks = (ROOT / "stacks" / "endpoint_alarms.py").read_text() + (ROOT / "stacks" / "engine_metrics.py").read_text()
    for suffix in ALARM_NAME_SUFFIXES:
        generic = re.sub(r"^(rollback-)?[45]xx-", r"\1{status}-", suffix)  # _error_rate's f"{status}-rate"
        assert suffix.rstrip("-") in stacks or "-rate" in generic and '-rate"' in stacks, suffix
    written = set(re.findall(r'f"\{endpoint_name\}-([a-z0-9-]+)"', stacks))
    assert written <= set(ALARM_NAME_SUFFIXES), written - set(ALARM_NAME_SUFFIXES)


PIPELINE = """pipeline:
  connection_arn: arn:aws:codeconnections:us-east-1:123456789012:connection/abc
  repository: owner/repo
  branch: {branch}
  stages: {stages}
"""
ENVIRONMENTS = """environments:
  dev: {account: "123456789012", region: us-east-1}
  prod: {account: "123456789012", region: us-east-1}
"""


@pytest.mark.parametrize(
    ("branch", "stages", "says"),
    [
        ("main", "[dev, dev]", "pipeline.stages: environment 'dev' is named twice"),
        ('"-main"', "[dev]", "pipeline.branch: value '-main': starts with '-'"),
        ('"ma\\nin"', "[dev]", "is not a git revision"),
    ],
    ids=["stage-twice", "branch-dash", "branch-newline"],
)
def test_a_pipeline_stage_named_twice_or_a_branch_git_refuses_is_refused(
    tmp_path: Path, model: Path, branch: str, stages: str, says: str
) -> None:
    text = ENVIRONMENTS + PIPELINE.format(branch=branch, stages=stages) + "endpoints:\n" + endpoint(model)
    message = config_refusal(write(tmp_path, text))
    assert says in message, message


# ---- numbers


@pytest.mark.parametrize("size", ["0KB", "0.0001KB", "9999999GB"])
def test_a_shard_size_of_nothing_or_past_s3s_limit_is_refused(tmp_path: Path, model: Path, size: str) -> None:
    message = config_refusal(write(tmp_path, "endpoints:\n" + endpoint(model, extra=f"    max_shard_size: {size}\n")))
    assert f"max_shard_size: value {size!r}" in message and "allowed: from 1KB to 5000GB" in message, message


# ---- adapters: adapter_config.json read bounded, its fields typed


@pytest.mark.parametrize(
    ("content", "says"),
    [
        (b'{"r": 8, "lora_alpha": NaN, "target_modules": ["q_proj"]}', "adapter_config.json: a number is NaN"),
        (b'{"r": 8, "lora_alpha": -1, "target_modules": ["q_proj"]}', "lora_alpha is -1; allowed: a finite number"),
        (b'{"r": 8, "lora_alpha": 16, "target_modules": []}', "target_modules is []; allowed: a non-empty list"),
        (b"[" * 100_000 + b"]" * 100_000, "adapter_config.json: nesting is deeper than 64 levels"),
    ],
    ids=["nan-alpha", "negative-alpha", "no-targets", "deep"],
)
def test_a_local_adapter_config_that_lies_is_refused_at_load(tmp_path: Path, content: bytes, says: str) -> None:
    from deployment import load_config
    from endpoint_config import ConfigError

    adapter = tmp_path / "adapter"
    adapter.mkdir()
    (adapter / "adapter_config.json").write_bytes(content)
    text = (
        'project: probe\nenvironments:\n  dev: {account: "444455556666", region: us-east-1, retain_data: false}\n'
        "endpoints:\n  - name: lora\n    system: lmi-vllm\n    model: meta-llama/Llama-3.1-8B-Instruct\n"
        "    dtype: bf16\n    instance_type: ml.g5.2xlarge\n    volume_size_gb: null\n"
        "    engine: {max_model_len: 8192, max_lora_rank: 16}\n"
        "    hosting: {mode: inference-components, compute: {cpu_cores: 4, min_memory_mb: 16384}}\n"
        f"    adapters:\n      - {{name: sql, model: '{adapter}'}}\n"
    )
    with pytest.raises(ConfigError) as refused:
        load_config(write(tmp_path, text), "dev")
    message = str(refused.value)
    assert f"adapters[0] ('sql', '{adapter}')" in message and says in message, message


def test_a_parameter_count_no_model_has_is_refused(tmp_path: Path, model: Path) -> None:
    message = config_refusal(
        write(tmp_path, "endpoints:\n" + endpoint(model, extra=f"    model_parameters: {'9' * 400}\n"))
    )
    assert "model_parameters" in message and "less than or equal to 10000000000000" in message, message
