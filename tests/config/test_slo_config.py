"""The `slo:` block (endpoint_config/slo.py): one model for the config and `loadtest --slo`, its rules (each refused
naming endpoint, key, value and what is allowed), and the managed benchmark's AIWorkloadConfig: its document, name,
regions (read again from cfn-lint's schemas) and role name."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml

from deployment import load_config
from endpoint_config import ConfigError
from endpoint_config.slo import (
    AI_WORKLOAD_CONFIG_REGIONS,
    WORKLOAD_CONFIG_NAME,
    Slo,
    benchmark_role_name,
    hub_tokenizer,
    workload_config_name,
)
from load_testing.report import parse_slo

OBJECTIVES = {
    "concurrency": 8,
    "p95_ttft_ms": 800,
    "p95_itl_ms": 60,
    "min_output_tokens_per_s": 150,
    "max_error_rate": 0.01,
}


def load(tmp_path: Path, slo: dict | None, system: str = "lmi-vllm", **extra):
    endpoint = {
        "name": "chat",
        "system": system,
        "model": "EleutherAI/gpt-j-6B",
        "instance_type": "ml.g5.12xlarge",
        "artifact_hash": "ab" * 32,
        **extra,
    }
    if slo is not None:
        endpoint["slo"] = slo
    path = tmp_path / "endpoints.yaml"
    path.write_text(yaml.safe_dump({"environments": {"dev": {"region": "us-east-1"}}, "endpoints": [endpoint]}))
    return load_config(path, "dev")


def test_the_config_block_is_the_model_the_load_test_judges_with(tmp_path):
    slo = load(tmp_path, {**OBJECTIVES, "workload": {"concurrency": [1, 8], "requests": 64}}).endpoints[0].slo
    assert isinstance(slo, Slo) and parse_slo(slo) is slo and parse_slo(slo.model_dump()) == slo
    assert slo.levels == [1, 8] and slo.workload.warmup_requests == 2 and slo.workload.input_tokens.mean == 128
    # no workload levels: the gate runs the objectives' own concurrency
    assert Slo(p95_ttft_ms=100).levels == [1] and Slo(concurrency=4, p95_ttft_ms=100).levels == [4]


@pytest.mark.parametrize(
    "slo, message",
    [
        ({}, "no objective given: a gate with none passes everything"),
        ({"min_output_tokens_per_s": 10}, "min_output_tokens_per_s needs concurrency"),
        (
            {**OBJECTIVES, "workload": {"concurrency": [1, 4]}},
            "concurrency: value 8 is not among workload.concurrency [1, 4]",
        ),
        ({"max_error_rate": 0, "workload": {"concurrency": [0]}}, "every level must be 1-1024, got [0]"),
        ({"max_error_rate": 1.5}, "less than or equal to 1"),
        ({"max_error_rate": 0, "p99_ttft_ms": 5}, "p99_ttft_ms"),
    ],
)
def test_bad_blocks_are_refused_naming_the_key(tmp_path, slo, message):
    with pytest.raises(ConfigError) as err:
        load(tmp_path, slo)
    assert "chat" in str(err.value) and "slo" in str(err.value) and message in str(err.value), str(err.value)


def test_rules_that_need_the_rest_of_the_endpoint(tmp_path):
    with pytest.raises(
        ConfigError,
        match=r"endpoint 'chat': slo.usd_per_hour: required key is missing: "
        r"max_usd_per_million_tokens is computed from the hourly price of ml.g5.12xlarge",
    ):
        load(tmp_path, {"max_usd_per_million_tokens": 2.0})
    assert load(tmp_path, {"max_usd_per_million_tokens": 2.0, "usd_per_hour": 7.1}).endpoints[0].slo.usd_per_hour == 7.1
    with pytest.raises(
        ConfigError,
        match=r"slo.managed_benchmark: an AIPerf workload runs one concurrency, the gate's "
        r"workload has \[1, 8\]",
    ):
        load(tmp_path, {"max_error_rate": 0, "workload": {"concurrency": [1, 8]}, "managed_benchmark": True})
    with pytest.raises(ConfigError, match=r"slo.\(block\): an asynchronous endpoint is not load-tested"):
        load(
            tmp_path,
            {"max_error_rate": 0},
            system="hf-fastload",
            instance_type="ml.g5.2xlarge",
            invocation={"mode": "async"},
        )
    # time to first token and between tokens need a token stream: refused on a system that answers whole replies
    with pytest.raises(
        ConfigError,
        match=r"endpoint 'chat': slo.p95_itl_ms: is measured on a token stream and system "
        r"'hf-fastload' does not stream .*systems that stream: lmi-vllm",
    ):
        load(tmp_path, {"p95_itl_ms": 50}, system="hf-fastload", instance_type="ml.g5.2xlarge")
    assert (
        load(
            tmp_path,
            {"concurrency": 4, "min_output_tokens_per_s": 10},
            system="hf-fastload",
            instance_type="ml.g5.2xlarge",
        )
        .endpoints[0]
        .slo
    )


def test_the_managed_benchmark_document_name_and_role(tmp_path):
    plan = load(
        tmp_path,
        {
            **OBJECTIVES,
            "workload": {"requests": 40, "output_tokens": {"mean": 96, "stddev": 8}},
            "managed_benchmark": True,
        },
    ).plan("chat")
    managed = plan.managed_benchmark
    assert managed.document == {
        "benchmark": {"type": "aiperf"},
        "parameters": {
            "prompt_input_tokens_mean": 128,
            "prompt_input_tokens_stddev": 0.0,
            "output_tokens_mean": 96,
            "output_tokens_stddev": 8.0,
            "concurrency": 8,
            "request_count": 40,
            "warmup_request_count": 2,
            "streaming": True,
            "tokenizer": "EleutherAI/gpt-j-6B",
        },
        "tooling": {"api_standard": "openai"},
    }
    assert json.loads(managed.inline) == managed.document
    assert managed.workload_config_name.startswith("dev-chat-") and WORKLOAD_CONFIG_NAME.match(
        managed.workload_config_name
    )
    # a changed workload gets a new name (the resource is replaced, and CloudFormation creates before it deletes)
    assert workload_config_name("dev-chat", {**managed.document, "parameters": {}}) != managed.workload_config_name
    long = workload_config_name("x" * 60, managed.document)
    assert len(long) == 63 and WORKLOAD_CONFIG_NAME.match(long)
    assert load(tmp_path, OBJECTIVES).plan("chat").managed_benchmark is None
    # AIPerf counts tokens with the model's Hub tokenizer; a local model directory has none it could download
    assert hub_tokenizer("EleutherAI/gpt-j-6B") == "EleutherAI/gpt-j-6B" and hub_tokenizer(str(tmp_path)) is None
    assert hub_tokenizer("build/tiny-models/gpt2") is None


def test_the_benchmark_role_name_is_the_stacks_own_rule():
    from stacks.trusted_pipeline import role_name

    for project, env, endpoint in (("llm-endpoints", "prod", "chat-vllm"), ("p" * 20, "e" * 12, "n" * 40)):
        assert benchmark_role_name(project, env, endpoint) == role_name(project, env, endpoint, "benchmark")


def test_the_regions_are_the_ones_cfn_lint_has_the_resource_in():
    import importlib.util

    [package] = importlib.util.find_spec("cfnlint").submodule_search_locations  # found, not imported (seconds)
    providers = Path(package) / "data" / "schemas" / "providers"
    # Each file maps resource types to schemas ({"AWS::...": ...}); the type as a JSON key is enough to find it.
    regions = sorted(
        p.stem for p in providers.glob("*-*-*.json") if '"AWS::SageMaker::AIWorkloadConfig":' in p.read_text()
    )
    assert tuple(regions) == AI_WORKLOAD_CONFIG_REGIONS
