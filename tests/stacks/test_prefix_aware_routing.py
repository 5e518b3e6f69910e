"""`routing: prefix-aware` on the template: the variant's RoutingConfig carries PREFIX_AWARE and its
PrefixAwareRoutingConfig (given settings or the defaults) on a model-on-the-variant endpoint and on an
inference-component endpoint, and cfn-lint 1.58 (whose schema holds the bounds) passes the templates, while a copy
with PrefixLength out of bounds is reported: the lint run itself can fail."""

from __future__ import annotations

import copy

import pytest
from cfn_lint_runner import lint_with_canary

from endpoint_config.routing import DEFAULT_CONCURRENCY_THRESHOLD, DEFAULT_PREFIX_LENGTH

CONFIG = """\
endpoints:
  - {name: chat, system: vllm, model: Qwen/Qwen2.5-7B-Instruct, instance_type: ml.g6e.2xlarge, instance_count: 2,
     model_parameters: 7615616512,
     routing: {strategy: prefix-aware, prefix_length: 16384, concurrency_threshold: 12}}
  - {name: chat-ic, system: vllm, model: Qwen/Qwen2.5-7B-Instruct, instance_type: ml.g6e.2xlarge, routing: prefix-aware,
     model_parameters: 7615616512, deployment: null,
     hosting: {mode: inference-components, instance_scaling: {min_instances: 1, max_instances: 2},
               compute: {accelerators: 1, cpu_cores: 4, min_memory_mb: 32768}}}
"""
STACKS = {"chat": "llm-endpoints-default-chat", "chat-ic": "llm-endpoints-default-chat-ic"}


@pytest.fixture(scope="module")
def prefix_aware(synth, tmp_path_factory):
    path = tmp_path_factory.mktemp("prefix-aware") / "prefix-aware.yaml"
    path.write_text(CONFIG)
    return synth(str(path))


def routing_config(synthesized, stack: str) -> dict:
    [endpoint_config] = synthesized.resources(stack, "AWS::SageMaker::EndpointConfig")
    [variant] = endpoint_config["Properties"]["ProductionVariants"]
    return variant["RoutingConfig"]


def test_the_variant_carries_prefix_aware_routing_with_its_settings(prefix_aware):
    assert routing_config(prefix_aware, STACKS["chat"]) == {
        "RoutingStrategy": "PREFIX_AWARE",
        "PrefixAwareRoutingConfig": {"PrefixLength": 16384, "ConcurrencyThreshold": 12},
    }


def test_an_inference_component_endpoint_gets_the_defaults(prefix_aware):
    [_component] = prefix_aware.resources(STACKS["chat-ic"], "AWS::SageMaker::InferenceComponent")
    assert routing_config(prefix_aware, STACKS["chat-ic"]) == {
        "RoutingStrategy": "PREFIX_AWARE",
        "PrefixAwareRoutingConfig": {
            "PrefixLength": DEFAULT_PREFIX_LENGTH,
            "ConcurrencyThreshold": DEFAULT_CONCURRENCY_THRESHOLD,
        },
    }


def test_cfn_lint_passes_the_templates_and_reports_a_prefix_out_of_bounds(prefix_aware, tmp_path):
    canary = copy.deepcopy(prefix_aware.templates[STACKS["chat"]])
    [endpoint_config] = [r for r in canary["Resources"].values() if r["Type"] == "AWS::SageMaker::EndpointConfig"]
    endpoint_config["Properties"]["ProductionVariants"][0]["RoutingConfig"]["PrefixAwareRoutingConfig"][
        "PrefixLength"
    ] = 512
    templates = {stack: prefix_aware.templates[stack] for stack in STACKS.values()}
    in_templates, [finding] = lint_with_canary(tmp_path, templates, canary)
    assert in_templates == []
    assert finding["Location"]["Path"][-1] == "PrefixLength" and "512" in finding["Message"], finding
