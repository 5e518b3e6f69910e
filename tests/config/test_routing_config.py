"""The `routing:` key (endpoint_config/routing.py): the shorthand and the block, prefix-aware routing's two settings with
their defaults and bounds, the combinations refused at load, and the values checked against botocore's service model
and cfn-lint's schema, so neither bound nor strategy can drift from what SageMaker and CloudFormation accept."""

from __future__ import annotations

import gzip
import json
from pathlib import Path

import botocore
import pytest
from helpers import config_refusal

from deployment import load_config
from endpoint_config import EndpointSpec
from endpoint_config.routing import (
    CONCURRENCY_THRESHOLD_BOUNDS,
    DEFAULT_CONCURRENCY_THRESHOLD,
    DEFAULT_PREFIX_LENGTH,
    PREFIX_LENGTH_BOUNDS,
    ROUTING_STRATEGIES,
    Routing,
)
from endpoint_config.schema import endpoint_problems

ENDPOINT = (
    "{name: chat, system: vllm, model: Qwen/Qwen2.5-7B-Instruct, instance_type: ml.g6e.2xlarge, instance_count: 2"
)
IC_HOSTING = (
    "hosting: {mode: inference-components, instance_scaling: {min_instances: 1, max_instances: 2},"
    " compute: {accelerators: 1, cpu_cores: 4, min_memory_mb: 32768}}"
)


def config(tmp_path: Path, extra: str) -> Path:
    path = tmp_path / "routing.yaml"
    path.write_text(f"endpoints:\n  - {ENDPOINT}, {extra}}}\n")
    return path


def load_error(tmp_path: Path, extra: str) -> str:
    return config_refusal(config(tmp_path, extra))


def spec(routing) -> EndpointSpec:
    fields = dict(name="chat", system="lmi-vllm", model="m", instance_type="ml.g5.12xlarge", instance_count=2)
    return EndpointSpec.model_validate({**fields, "routing": routing})


def test_default_is_sagemakers_random_without_prefix_settings():
    routing = spec(Routing().model_dump()).routing
    assert routing == Routing(strategy="random") and routing.api_strategy == "RANDOM"
    assert routing.prefix_aware is None


@pytest.mark.parametrize(
    "value,expected",
    [
        ("random", "RANDOM"),
        ("least-outstanding-requests", "LEAST_OUTSTANDING_REQUESTS"),
        ("prefix-aware", "PREFIX_AWARE"),
    ],
)
def test_the_bare_strategy_is_short_for_the_block(value, expected):
    assert spec(value).routing == spec({"strategy": value}).routing
    assert spec(value).routing.api_strategy == expected


def test_prefix_aware_alone_takes_the_stated_defaults(tmp_path):
    [ep] = load_config(config(tmp_path, "routing: prefix-aware")).endpoints
    assert ep.routing.prefix_aware == (DEFAULT_PREFIX_LENGTH, DEFAULT_CONCURRENCY_THRESHOLD) == (4096, 4)
    # Both defaults lie within SageMaker's bounds.
    assert PREFIX_LENGTH_BOUNDS[0] <= DEFAULT_PREFIX_LENGTH <= PREFIX_LENGTH_BOUNDS[1]
    assert CONCURRENCY_THRESHOLD_BOUNDS[0] <= DEFAULT_CONCURRENCY_THRESHOLD <= CONCURRENCY_THRESHOLD_BOUNDS[1]


def test_prefix_aware_settings_as_given(tmp_path):
    extra = "routing: {strategy: prefix-aware, prefix_length: 16384, concurrency_threshold: 12}"
    [ep] = load_config(config(tmp_path, extra)).endpoints
    assert ep.routing.prefix_aware == (16384, 12)
    only_one = spec({"strategy": "prefix-aware", "concurrency_threshold": 1}).routing
    assert only_one.prefix_aware == (DEFAULT_PREFIX_LENGTH, 1)


@pytest.mark.parametrize(
    "settings",
    ["prefix_length: 1024, concurrency_threshold: 1", "prefix_length: 65536, concurrency_threshold: 1024"],
    ids=["lowest", "highest"],
)
def test_the_bounds_themselves_load(tmp_path, settings):
    [ep] = load_config(config(tmp_path, f"routing: {{strategy: prefix-aware, {settings}}}")).endpoints
    assert ep.routing.strategy == "prefix-aware"


# (what, the routing block, fragments the one message must hold: the key, the value, the limit)
BAD = [
    (
        "prefix too short",
        "{strategy: prefix-aware, prefix_length: 1023}",
        ["endpoint 'chat': routing.prefix_length: value 1023", "greater than or equal to 1024"],
    ),
    (
        "prefix too long",
        "{strategy: prefix-aware, prefix_length: 65537}",
        ["routing.prefix_length: value 65537", "less than or equal to 65536"],
    ),
    (
        "threshold zero",
        "{strategy: prefix-aware, concurrency_threshold: 0}",
        ["routing.concurrency_threshold: value 0", "greater than or equal to 1"],
    ),
    (
        "threshold too high",
        "{strategy: prefix-aware, concurrency_threshold: 1025}",
        ["routing.concurrency_threshold: value 1025", "less than or equal to 1024"],
    ),
    (
        "quoted number",
        "{strategy: prefix-aware, prefix_length: '4096'}",
        ["routing.prefix_length: value '4096'", "a whole number, written without quotes"],
    ),
    (
        "unknown strategy (KV_AWARE is not in CloudFormation)",
        "kv-aware",
        ["routing.strategy: value 'kv-aware'", "'random', 'least-outstanding-requests' or 'prefix-aware'"],
    ),
    (
        "settings with another strategy",
        "{strategy: least-outstanding-requests, prefix_length: 4096, concurrency_threshold: 8}",
        [
            "routing: prefix_length, concurrency_threshold: only used with strategy: prefix-aware "
            "(strategy is 'least-outstanding-requests'); set strategy: prefix-aware or remove them"
        ],
    ),
    (
        "a setting with the default strategy",
        "{prefix_length: 4096}",
        ["routing: prefix_length: only used with strategy: prefix-aware (strategy is 'random')"],
    ),
    (
        "misspelt setting",
        "{strategy: prefix-aware, concurrency: 8}",
        ["routing.concurrency: unknown key", "allowed keys: strategy, prefix_length, concurrency_threshold"],
    ),
]


@pytest.mark.parametrize("description,routing,fragments", BAD, ids=[b[0] for b in BAD])
def test_bad_routing_message(tmp_path, description, routing, fragments):
    message = load_error(tmp_path, f"routing: {routing}")
    for fragment in fragments:
        assert fragment in message, f"{description}: {fragment!r} not in:\n{message}"


def test_prefix_aware_is_refused_on_an_async_endpoint(tmp_path):
    """Documented for real-time endpoints (InvokeEndpoint, InvokeEndpointWithResponseStream) only."""
    message = load_error(tmp_path, "routing: prefix-aware, invocation: {mode: async}")
    assert (
        "endpoint 'chat': routing.strategy: value 'prefix-aware' is for real-time endpoints only (SageMaker documents "
        "it for InvokeEndpoint and InvokeEndpointWithResponseStream, not for InvokeEndpointAsync); with "
        "invocation.mode: async use routing random or least-outstanding-requests"
    ) in message
    # The other strategies stay allowed on an async endpoint.
    path = config(tmp_path, "routing: least-outstanding-requests, invocation: {mode: async}")
    assert load_config(path).endpoints[0].invocation.mode == "async"


def test_prefix_aware_is_refused_when_the_engine_keeps_no_prefix_cache(tmp_path):
    message = load_error(tmp_path, "routing: prefix-aware, engine: {enable_prefix_caching: false}")
    assert "routing.strategy: value 'prefix-aware'" in message
    assert "engine.enable_prefix_caching: false turns off" in message
    [ep] = load_config(config(tmp_path, "routing: prefix-aware, engine: {enable_prefix_caching: true}")).endpoints
    assert ep.routing.prefix_aware is not None


def test_prefix_aware_is_allowed_on_an_inference_component_endpoint(tmp_path):
    """botocore documents the copies of an inference component as routed by prefix and threshold too."""
    [ep] = load_config(config(tmp_path, f"routing: prefix-aware, {IC_HOSTING}")).endpoints
    assert ep.hosting.uses_components and ep.routing.prefix_aware == (4096, 4)


def test_only_prefix_aware_routing_adds_rules():
    assert endpoint_problems(spec("least-outstanding-requests")) == []
    assert endpoint_problems(spec("prefix-aware")) == []


# ------------------------------------------------------------------------------ against the primary sources


def sagemaker_shapes() -> dict:
    [model] = (Path(botocore.__file__).parent / "data/sagemaker").glob("*/service-2.json*")
    opener = gzip.open if model.suffix == ".gz" else open
    with opener(model, "rt") as f:
        return json.load(f)["shapes"]


def cfn_lint_endpoint_config_schema() -> dict:
    from cfnlint.schema import PROVIDER_SCHEMA_MANAGER

    return PROVIDER_SCHEMA_MANAGER.get_resource_schema("us-east-1", "AWS::SageMaker::EndpointConfig").schema


def test_strategies_and_bounds_match_botocore():
    shapes = sagemaker_shapes()
    assert set(ROUTING_STRATEGIES.values()) <= set(shapes["RoutingStrategy"]["enum"])
    length, threshold = shapes["PrefixAwareRoutingPrefixLength"], shapes["PrefixAwareRoutingConcurrencyThreshold"]
    assert (length["min"], length["max"]) == PREFIX_LENGTH_BOUNDS
    assert (threshold["min"], threshold["max"]) == CONCURRENCY_THRESHOLD_BOUNDS
    members = shapes["PrefixAwareRoutingConfig"]["members"]
    assert set(members) == {"PrefixLength", "ConcurrencyThreshold"}
    # No default to take from SageMaker: both are required with PREFIX_AWARE, so the config's defaults are ours.
    assert all(
        "Required when <code>RoutingStrategy</code> is <code>PREFIX_AWARE</code>" in m["documentation"]
        for m in members.values()
    )


def test_strategies_and_bounds_match_cfn_lint():
    definitions = cfn_lint_endpoint_config_schema()["definitions"]
    assert set(ROUTING_STRATEGIES.values()) <= set(
        definitions["RoutingConfig"]["properties"]["RoutingStrategy"]["enum"]
    )
    settings = definitions["PrefixAwareRoutingConfig"]["properties"]
    assert (settings["PrefixLength"]["minimum"], settings["PrefixLength"]["maximum"]) == PREFIX_LENGTH_BOUNDS
    assert (
        settings["ConcurrencyThreshold"]["minimum"],
        settings["ConcurrencyThreshold"]["maximum"],
    ) == CONCURRENCY_THRESHOLD_BOUNDS
