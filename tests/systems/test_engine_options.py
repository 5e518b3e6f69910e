"""The typed vLLM and SGLang options: what they render into the container environment, and what they refuse."""

from __future__ import annotations

import json
from typing import get_args

import pytest
from pydantic import ValidationError

from systems.engine_tables import CLI_FLAGS
from systems.images_current import SGLANG_ENGINE, VLLM_ENGINE
from systems.sglang.options import SglangOptions, SglangSpeculativeConfig
from systems.vllm.options import VllmOptions, VllmSpeculativeConfig

FULL_VLLM = VllmOptions(
    tensor_parallel_size=4,
    max_model_len=32768,
    max_num_seqs=64,
    gpu_memory_utilization=0.9,
    max_num_batched_tokens=32768,
    enable_chunked_prefill=False,
    enable_prefix_caching=False,
    kv_cache_dtype="fp8",
    quantization="fp8",
    speculative=VllmSpeculativeConfig(method="mtp", num_speculative_tokens=2),
    enable_expert_parallel=True,
    tool_call_parser="hermes",
    enable_auto_tool_choice=True,
    reasoning_parser="qwen3",
    chat_template="/opt/ml/model/chat_template.jinja",
    enable_lora=True,
    max_loras=4,
    max_lora_rank=64,
    allow_runtime_lora_updating=True,
    load_format="runai_streamer",
)
FULL_SGLANG = SglangOptions(
    tp_size=4,
    context_length=32768,
    max_running_requests=64,
    mem_fraction_static=0.85,
    max_prefill_tokens=16384,
    enable_chunked_prefill=True,
    chunked_prefill_size=4096,
    enable_prefix_caching=False,
    kv_cache_dtype="fp8_e4m3",
    quantization="fp8",
    ep_size=4,
    speculative=SglangSpeculativeConfig(
        algorithm="EAGLE3", draft_model_path="/opt/ml/model/eagle3", num_steps=3, eagle_topk=1, num_draft_tokens=4
    ),
    tool_call_parser="qwen3_coder",
    reasoning_parser="qwen3",
    chat_template="/opt/ml/model/template.jinja",
    enable_lora=True,
    max_loras_per_batch=4,
    max_loaded_loras=8,
    max_lora_rank=64,
    lora_target_modules="all",
    load_format="runai_streamer",
)


def _flag(key: str, prefix: str) -> str:
    """The container's rule (sagemaker_args.py flag_for / sagemaker_entrypoint.sh): lower-case, _ -> -."""
    return "--" + key[len(prefix) :].lower().replace("_", "-")


@pytest.mark.parametrize(
    ("options", "prefix", "engine"),
    [(FULL_VLLM, "SM_VLLM_", VLLM_ENGINE), (FULL_SGLANG, "SM_SGLANG_", SGLANG_ENGINE)],
    ids=["vllm", "sglang"],
)
def test_every_variable_names_a_flag_the_pinned_engine_accepts(options, prefix, engine):
    env = options.environment()
    flags = {_flag(key, prefix) for key in env if key.startswith(prefix)}
    assert flags, env
    assert flags - CLI_FLAGS[engine] == set()
    # And not the other engine's spelling by accident.
    other = SGLANG_ENGINE if engine.startswith("vllm") else VLLM_ENGINE
    assert flags - CLI_FLAGS[other], "the two engines' flags should differ somewhere"


def test_vllm_environment_values():
    env = FULL_VLLM.environment()
    assert env["SM_VLLM_TENSOR_PARALLEL_SIZE"] == "4"
    assert env["SM_VLLM_GPU_MEMORY_UTILIZATION"] == "0.9"
    # Off-by-default flags are bare "true"; on-by-default ones are turned off with their --no- form, because the
    # container drops a variable whose value is "false".
    assert env["SM_VLLM_ENABLE_EXPERT_PARALLEL"] == env["SM_VLLM_ENABLE_LORA"] == "true"
    assert env["SM_VLLM_NO_ENABLE_PREFIX_CACHING"] == env["SM_VLLM_NO_ENABLE_CHUNKED_PREFILL"] == "true"
    assert "SM_VLLM_ENABLE_PREFIX_CACHING" not in env
    # One JSON object: the container passes it as one argv token, verbatim.
    assert json.loads(env["SM_VLLM_SPECULATIVE_CONFIG"]) == {"method": "mtp", "num_speculative_tokens": 2}
    assert env["VLLM_ALLOW_RUNTIME_LORA_UPDATING"] == "true"
    assert not [v for k, v in env.items() if k != "VLLM_ALLOW_RUNTIME_LORA_UPDATING" and v.lower() == "false"]
    assert VllmOptions().environment() == {}
    assert VllmOptions(enable_prefix_caching=True).environment() == {"SM_VLLM_ENABLE_PREFIX_CACHING": "true"}


def test_sglang_environment_values():
    env = FULL_SGLANG.environment()
    assert env["SM_SGLANG_DISABLE_RADIX_CACHE"] == "true"
    assert env["SM_SGLANG_SPECULATIVE_ALGORITHM"] == "EAGLE3"
    assert env["SM_SGLANG_SPECULATIVE_DRAFT_MODEL_PATH"] == "/opt/ml/model/eagle3"
    assert env["SM_SGLANG_LORA_TARGET_MODULES"] == "all"
    assert SglangOptions(enable_chunked_prefill=False).environment() == {"SM_SGLANG_CHUNKED_PREFILL_SIZE": "-1"}
    assert SglangOptions().environment() == {}


def _message(build) -> str:
    with pytest.raises(ValidationError) as caught:
        build()
    return str(caught.value)


def test_unknown_keys_and_values_are_refused_with_what_is_allowed():
    assert "extra_forbidden" in _message(lambda: VllmOptions(max_batch_size=8))
    text = _message(lambda: VllmOptions(tool_call_parser="qwen3"))
    assert "tool_call_parser" in text and "'hermes'" in text and "'qwen3'" in text
    text = _message(lambda: VllmOptions(enable_lora=True, max_lora_rank=48))
    assert "max_lora_rank" in text and "320" in text and "48" in text
    assert "gpu_memory_utilization" in _message(lambda: VllmOptions(gpu_memory_utilization=1.5))
    assert "kv_cache_dtype" in _message(lambda: SglangOptions(kv_cache_dtype="fp8"))
    assert "lora_target_modules" in _message(
        lambda: SglangOptions(enable_lora=True, max_lora_rank=8, lora_target_modules="q_proj k_proj")
    )


@pytest.mark.parametrize(
    ("build", "expected"),
    [
        (lambda: VllmOptions(enable_auto_tool_choice=True), "enable_auto_tool_choice needs tool_call_parser"),
        (lambda: VllmOptions(max_lora_rank=64), "max_lora_rank apply only with enable_lora: true"),
        (
            lambda: VllmOptions(allow_runtime_lora_updating=True),
            "allow_runtime_lora_updating apply only with enable_lora",
        ),
        (
            lambda: VllmOptions(max_num_batched_tokens=16, max_num_seqs=32),
            r"max_num_batched_tokens \(16\) must be >= max_num_seqs \(32\)",
        ),
        (
            lambda: VllmOptions(max_num_batched_tokens=4096, max_model_len=8192, enable_chunked_prefill=False),
            r"smaller than max_model_len \(8192\) with chunked prefill off",
        ),
        (lambda: VllmSpeculativeConfig(method="eagle3", num_speculative_tokens=3), "'eagle3' needs `model`"),
        (
            lambda: VllmSpeculativeConfig(method="mtp", model="x", num_speculative_tokens=1),
            "drafts from the target model",
        ),
        (lambda: VllmSpeculativeConfig(method="mtp"), "'mtp' needs num_speculative_tokens"),
        (lambda: VllmSpeculativeConfig(method="ngram", num_speculative_tokens=3), "needs prompt_lookup_max"),
        (lambda: VllmOptions(chat_template="false"), "boolean or a bare flag"),
        (lambda: VllmOptions(chat_template='["a", "b"]'), "JSON array"),
        (lambda: SglangOptions(chat_template="{% for m in messages %}\n{{ m.content }}{% endfor %}"), "line break"),
        (lambda: SglangOptions(enable_lora=True), "enable_lora needs max_lora_rank and lora_target_modules"),
        (lambda: SglangOptions(max_lora_rank=8), "apply only with enable_lora"),
        (
            lambda: SglangOptions(enable_lora=True, max_lora_rank=8, lora_target_modules="all", max_loaded_loras=4),
            "max_loaded_loras must be >= max_loras_per_batch",
        ),
        (lambda: SglangOptions(tp_size=4, ep_size=2), r"ep_size \(2\) must be 1 or equal tp_size \(4\)"),
        (lambda: SglangOptions(enable_chunked_prefill=False, chunked_prefill_size=2048), "chunked prefill on"),
        (lambda: SglangSpeculativeConfig(algorithm="EAGLE"), "needs draft_model_path"),
        (lambda: SglangSpeculativeConfig(algorithm="NEXTN", draft_model_path="x"), "remove draft_model_path"),
    ],
)
def test_rules_between_fields(build, expected):
    with pytest.raises((ValidationError, ValueError), match=expected):
        build().environment()


def test_rules_accept_what_the_engines_accept():
    VllmOptions(max_num_batched_tokens=4096, max_model_len=8192)  # chunked prefill on (vLLM's default)
    VllmOptions(max_num_batched_tokens=8192, max_model_len=8192, enable_chunked_prefill=False)
    VllmSpeculativeConfig(method="ngram", num_speculative_tokens=3, prompt_lookup_max=4, prompt_lookup_min=2)
    SglangOptions(tp_size=4, ep_size=4)
    SglangOptions(ep_size=1)
    SglangSpeculativeConfig(algorithm="NEXTN", num_steps=1)


def test_value_sets_hold_the_names_the_examples_use():
    """Spot checks; tools/generate_architectures.py --check compares the whole sets with the engines' wheels."""
    from systems.sglang import options as sgl
    from systems.vllm import options as vl

    assert {"hermes", "llama3_json", "openai", "qwen3_coder", "mistral"} <= set(get_args(vl.ToolCallParser))
    assert {"qwen3", "openai_gptoss", "deepseek_r1"} <= set(get_args(vl.ReasoningParser))
    assert {"runai_streamer"} <= set(get_args(vl.LoadFormat)) & set(get_args(sgl.LoadFormat))
    assert {"eagle", "eagle3", "mtp"} <= set(get_args(vl.SpeculativeMethod))
    assert {"gpt-oss", "llama3", "qwen25", "qwen3_coder"} <= set(get_args(sgl.ToolCallParser))
    assert vl.RUNTIME_QUANTIZATION <= set(get_args(vl.QuantizationMethod))
    assert sgl.RUNTIME_QUANTIZATION <= set(get_args(sgl.QuantizationMethod))
    assert "bitsandbytes" not in get_args(vl.QuantizationMethod)  # a plugin since vLLM 0.24 (not in 0.30.0's list)
