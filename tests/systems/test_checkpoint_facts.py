"""Checkpoint facts from config.json (systems/checkpoint_facts.py): the parameter counts equal what transformers
builds for the same config (instantiated on the meta device, no memory), and pre-quantization is detected as the
engines detect it."""

from __future__ import annotations

import pytest

from systems.checkpoint_facts import MODELOPT_ALGOS, Quantization, quantization_of, read_checkpoint

# The shapes of three mixture-of-experts checkpoints of issue 19, with the config.json field names of each model.
# The Hub is not reachable here: the values are those the model cards publish (gpt-oss-20b: 24 layers, 32 experts,
# 4 active, hidden 2880; Qwen3-30B-A3B: 48 layers, 128 experts, 8 active; Mixtral-8x7B: 32 layers, 8 experts, 2
# active) with transformers' config defaults for the rest (transformers names these checkpoints as the reference of
# GptOssConfig, Qwen3MoeConfig and MixtralConfig: @auto_docstring(checkpoint=...) in their configuration files).
# gpt-oss's quantization_config block is as quoted from openai/gpt-oss-20b config.json by a secondary source.
GPT_OSS_20B = {
    "architectures": ["GptOssForCausalLM"],
    "model_type": "gpt_oss",
    "hidden_size": 2880,
    "intermediate_size": 2880,
    "num_hidden_layers": 24,
    "num_attention_heads": 64,
    "num_key_value_heads": 8,
    "head_dim": 64,
    "num_local_experts": 32,
    "num_experts_per_tok": 4,
    "experts_per_token": 4,
    "vocab_size": 201088,
    "tie_word_embeddings": False,
    "attention_bias": True,
    "torch_dtype": "bfloat16",
    "quantization_config": {
        "modules_to_not_convert": [
            "model.layers.*.self_attn",
            "model.layers.*.mlp.router",
            "model.embed_tokens",
            "lm_head",
        ],
        "quant_method": "mxfp4",
    },
}
QWEN3_30B_A3B = {
    "architectures": ["Qwen3MoeForCausalLM"],
    "model_type": "qwen3_moe",
    "hidden_size": 2048,
    "num_hidden_layers": 48,
    "num_attention_heads": 32,
    "num_key_value_heads": 4,
    "head_dim": 128,
    "intermediate_size": 6144,
    "moe_intermediate_size": 768,
    "num_experts": 128,
    "num_experts_per_tok": 8,
    "decoder_sparse_step": 1,
    "mlp_only_layers": [],
    "vocab_size": 151936,
    "tie_word_embeddings": False,
    "torch_dtype": "bfloat16",
}
MIXTRAL_8X7B = {
    "architectures": ["MixtralForCausalLM"],
    "model_type": "mixtral",
    "hidden_size": 4096,
    "intermediate_size": 14336,
    "num_hidden_layers": 32,
    "num_attention_heads": 32,
    "num_key_value_heads": 8,
    "num_local_experts": 8,
    "num_experts_per_tok": 2,
    "vocab_size": 32000,
    "tie_word_embeddings": False,
    "torch_dtype": "bfloat16",
}
# Small dense and sparse shapes of each family the counter encodes, with the options that change the layout.
_SMALL = {
    "hidden_size": 64,
    "intermediate_size": 96,
    "num_hidden_layers": 3,
    "num_attention_heads": 4,
    "num_key_value_heads": 2,
    "vocab_size": 300,
}
SMALL_SHAPES = [
    {**_SMALL, "model_type": "llama"},
    {**_SMALL, "model_type": "llama", "attention_bias": True, "tie_word_embeddings": True},
    {**_SMALL, "model_type": "mistral", "head_dim": 32},
    {**_SMALL, "model_type": "qwen2"},
    {**_SMALL, "model_type": "qwen3", "head_dim": 24, "tie_word_embeddings": True},
    {**_SMALL, "model_type": "gemma", "head_dim": 16},
    {**_SMALL, "model_type": "gemma2", "head_dim": 16},
    {**_SMALL, "model_type": "gemma3_text", "head_dim": 16},
    {**_SMALL, "model_type": "mixtral", "num_local_experts": 4, "num_experts_per_tok": 2},
    {
        **_SMALL,
        "model_type": "qwen3_moe",
        "moe_intermediate_size": 32,
        "num_experts": 6,
        "num_experts_per_tok": 2,
        "decoder_sparse_step": 2,
        "mlp_only_layers": [2],
        "head_dim": 16,
    },
    {
        **_SMALL,
        "model_type": "gpt_oss",
        "num_local_experts": 4,
        "num_experts_per_tok": 2,
        "head_dim": 16,
        "attention_bias": True,
    },
]


def transformers_count(config: dict) -> tuple[int, int]:
    """(total, per-token active) parameters of the model transformers builds for `config`, on the meta device.
    Active: every parameter outside the experts, plus top-k of each expert tensor's leading expert dimension."""
    import torch
    from transformers import AutoConfig, AutoModelForCausalLM

    fields = {k: v for k, v in config.items() if k not in ("architectures", "model_type", "quantization_config")}
    hf_config = AutoConfig.for_model(config["model_type"], **fields)
    with torch.device("meta"):
        model = AutoModelForCausalLM.from_config(hf_config)
    total = active = 0
    experts = config.get("num_local_experts") or config.get("num_experts")
    top_k = config.get("num_experts_per_tok")
    for name, parameter in model.named_parameters():
        total += parameter.numel()
        if ".experts." in name and experts:
            if parameter.shape[0] == experts:  # fused: [experts, ...]
                active += parameter.numel() // experts * top_k
            else:  # one module per expert: experts.<i>.
                index = int(name.split(".experts.")[1].split(".")[0])
                active += parameter.numel() if index < top_k else 0
        else:
            active += parameter.numel()
    return total, active


@pytest.mark.parametrize("config", SMALL_SHAPES, ids=[f"{c['model_type']}-{i}" for i, c in enumerate(SMALL_SHAPES)])
def test_counts_equal_transformers_for_each_family(config):
    facts = read_checkpoint(config)
    assert (facts.total_parameters, facts.active_parameters) == transformers_count(config)


@pytest.mark.parametrize(
    ("config", "published_total", "published_active"),
    # gpt-oss's 3.6B leaves out the embedding table: 4.19B - 201088 x 2880 = 3.61B (inferred: the difference is
    # exactly that matrix); Qwen's and Mistral's figures include it.
    [(GPT_OSS_20B, 21e9, 3.6e9 + 201088 * 2880), (QWEN3_30B_A3B, 30.5e9, 3.3e9), (MIXTRAL_8X7B, 46.7e9, 12.9e9)],
    ids=["gpt-oss-20b", "Qwen3-30B-A3B", "Mixtral-8x7B"],
)
def test_moe_checkpoints_total_and_active(config, published_total, published_active):
    facts = read_checkpoint(config)
    assert (facts.total_parameters, facts.active_parameters) == transformers_count(config)
    assert facts.is_moe
    # The model cards' rounded figures (21B/3.6B, 30.5B/3.3B, 46.7B/12.9B).
    assert abs(facts.total_parameters / published_total - 1) < 0.01
    assert abs(facts.active_parameters / published_active - 1) < 0.03
    assert facts.architecture == config["architectures"][0] and facts.dtype == "bfloat16"


def test_gpt_oss_is_mxfp4_and_dense_models_are_not_quantized():
    assert read_checkpoint(GPT_OSS_20B).quantization == Quantization("mxfp4", None, 4)
    dense = read_checkpoint({**SMALL_SHAPES[0], "architectures": ["LlamaForCausalLM"], "dtype": "bfloat16"})
    assert dense.quantization is None and not dense.is_moe and dense.dtype == "bfloat16"


@pytest.mark.parametrize(
    ("declared", "hf_quant_config", "expected"),
    [
        (
            {"quant_method": "fp8", "activation_scheme": "dynamic", "weight_block_size": [128, 128]},
            None,
            Quantization("fp8", None, 8),
        ),
        (
            {
                "quant_method": "compressed-tensors",
                "format": "float-quantized",
                "config_groups": {"group_0": {"weights": {"num_bits": 8, "type": "float"}}},
            },
            None,
            Quantization("compressed-tensors", "float-quantized", 8),
        ),
        (
            {
                "quant_method": "compressed-tensors",
                "format": "nvfp4-pack-quantized",
                "config_groups": {"group_0": {"weights": {"num_bits": 4, "type": "float", "group_size": 16}}},
            },
            None,
            Quantization("compressed-tensors", "nvfp4-pack-quantized", 4),
        ),
        ({"quant_method": "awq", "bits": 4, "group_size": 128, "version": "gemm"}, None, Quantization("awq", None, 4)),
        ({"quant_method": "gptq", "bits": 8, "group_size": 128}, None, Quantization("gptq", None, 8)),
        ({"quant_method": "bitsandbytes", "load_in_4bit": True}, None, Quantization("bitsandbytes", "4-bit", 4)),
        ({"quant_method": "modelopt", "quant_algo": "NVFP4"}, None, Quantization("modelopt_fp4", "NVFP4", 4)),
        (
            None,
            {"producer": {"name": "modelopt", "version": "0.29.0"}, "quantization": {"quant_algo": "FP8"}},
            Quantization("modelopt", "FP8", 8),
        ),
    ],
    ids=["fp8-block", "ct-fp8", "ct-nvfp4", "awq", "gptq", "bnb4", "modelopt-nvfp4", "hf_quant_config-fp8"],
)
def test_pre_quantization_is_detected(declared, hf_quant_config, expected):
    config = {"model_type": "llama"} | ({"quantization_config": declared} if declared else {})
    assert quantization_of(config, hf_quant_config) == expected


@pytest.mark.parametrize(
    ("config", "error"),
    [
        ({"quantization_config": {"bits": 4}}, "quantization_config has no quant_method; keys: bits"),
        ({"quantization_config": "fp8"}, "config.json: quantization_config is 'fp8'; allowed: a JSON object or null"),
        (
            {"quantization_config": {"quant_method": "modelopt", "quant_algo": "INT4_AWQ"}},
            "ModelOpt quant_algo 'INT4_AWQ' is not one vLLM 0.30.0 loads; allowed: FP8, ",
        ),
        (
            {
                "model_type": "mixtral",
                "hidden_size": 8,
                "num_hidden_layers": 1,
                "num_attention_heads": 2,
                "vocab_size": 10,
                "intermediate_size": 4,
            },
            "config.json of model_type 'mixtral' lacks 'num_local_experts'",
        ),
    ],
)
def test_bad_configs_are_refused_with_what_is_missing(config, error):
    with pytest.raises(ValueError, match=error):
        read_checkpoint(config)


def test_unknown_families_give_no_count_rather_than_a_guess():
    facts = read_checkpoint({"architectures": ["FalconH1ForCausalLM"], "model_type": "falcon_h1", "hidden_size": 8})
    assert facts.total_parameters is None and facts.active_parameters is None and not facts.is_moe
    assert set(MODELOPT_ALGOS.values()) == {"modelopt", "modelopt_fp4", "modelopt_mxfp8", "modelopt_mixed"}


def test_a_multimodal_config_is_counted_from_its_text_config():
    """Gemma 3's multimodal config.json keeps the decoder under text_config: the count, the cache shape and the
    positions are the decoder's (as its config alone gives them), the architecture and kind the top level's, the
    dtype the top level's before text_config's."""
    decoder = {**SMALL_SHAPES[7], "max_position_embeddings": 4096, "rope_scaling": {"rope_type": "linear", "factor": 8}}
    multimodal = {
        "architectures": ["Gemma3ForConditionalGeneration"],
        "model_type": "gemma3",
        "torch_dtype": "bfloat16",
        "text_config": {**decoder, "torch_dtype": "float32"},
    }
    alone, facts = read_checkpoint(decoder), read_checkpoint(multimodal)
    assert alone.total_parameters is not None and alone.kv is not None
    assert (facts.total_parameters, facts.kv) == (alone.total_parameters, alone.kv)
    assert (
        facts.max_position_embeddings == 4096 and facts.scaled_rope and not read_checkpoint(SMALL_SHAPES[7]).scaled_rope
    )
    assert (facts.architecture, facts.model_type, facts.dtype) == (
        "Gemma3ForConditionalGeneration",
        "gemma3",
        "bfloat16",
    )


def test_a_family_counts_only_from_its_own_names_for_a_field():
    """GPT-2's n_embd is no hidden_size to transformers' LlamaConfig (it would build its default width): a llama
    config.json that gives only the other name is refused for the count, not counted from it."""
    config = {k: v for k, v in SMALL_SHAPES[0].items() if k != "hidden_size"} | {"n_embd": 64}
    with pytest.raises(ValueError, match="config.json of model_type 'llama' lacks 'hidden_size'"):
        read_checkpoint(config)
