"""What a model's config.json says about serving it: architecture, pre-quantization, dtype, and the total and
active parameter counts of dense and mixture-of-experts decoders.

Pre-quantized weights are detected as vLLM 0.30.0 and SGLang 0.5.20 detect them: `quantization_config.quant_method`
of config.json (vllm/transformers_utils/config.py; sglang/srt/configs/model_config.py), or for ModelOpt 0.29 and
older a separate hf_quant_config.json whose `quantization.quant_algo` picks the method (vLLM
model_executor/layers/quantization/modelopt.py, LINEAR_ALGOS). The parameter counts follow the module layout of
each family's transformers implementation (checked against transformers itself, instantiated on the meta device,
in tests/systems/test_checkpoint_facts.py).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

# vLLM modelopt.py LINEAR_ALGOS (+ MIXED_PRECISION): ModelOpt quant_algo -> the method vLLM loads it with.
MODELOPT_ALGOS = {
    "FP8": "modelopt", "FP8_PER_CHANNEL_PER_TOKEN": "modelopt", "FP8_PB_WO": "modelopt", "NVFP4": "modelopt_fp4",
    "W4A16_NVFP4": "modelopt_fp4", "MXFP8": "modelopt_mxfp8", "MIXED_PRECISION": "modelopt_mixed",
}  # fmt: skip
# Nominal bits of a quantized weight element (scales and unquantized modules come on top): FP8 E4M3; MXFP4 / NVFP4
# E2M1 (OCP MX and NVIDIA block formats); AWQ/GPTQ and compressed-tensors state `bits` / `num_bits` themselves.
_FORMAT_BITS = {"fp8": 8, "modelopt": 8, "modelopt_mxfp8": 8, "mxfp4": 4, "modelopt_fp4": 4}


@dataclass(frozen=True)
class Quantization:
    method: str  # as the engines name it (config.json quant_method, or the ModelOpt method it resolves to)
    detail: str | None = None  # ModelOpt quant_algo, compressed-tensors format, bitsandbytes 4/8-bit
    weight_bits: int | None = None  # nominal bits per quantized weight; None when the config does not say


@dataclass(frozen=True)
class CheckpointFacts:
    architecture: str | None  # config.json `architectures[0]`
    model_type: str | None
    dtype: str | None  # `dtype` (transformers 5 writes it) or `torch_dtype` (4.x)
    quantization: Quantization | None
    total_parameters: int | None  # None: the family's layout is not known here
    active_parameters: int | None  # per token; equals total for a dense model

    @property
    def is_moe(self) -> bool:
        return self.total_parameters is not None and self.active_parameters != self.total_parameters


def quantization_of(config: dict[str, Any], hf_quant_config: dict[str, Any] | None = None) -> Quantization | None:
    """The pre-quantization a checkpoint declares, or None for plain fp16/bf16/fp32 weights."""
    declared = config.get("quantization_config") or hf_quant_config
    if not declared:
        return None
    if not isinstance(declared, dict):
        raise ValueError(f"quantization_config: value {declared!r} is not a JSON object")
    method = str(declared.get("quant_method", "")).lower()
    if not method and declared.get("producer", {}).get("name") == "modelopt":
        method = "modelopt"  # ModelOpt <= 0.29 hf_quant_config.json names the producer, not a quant_method
    if not method:
        raise ValueError(f"quantization_config has no quant_method; keys: {', '.join(sorted(declared))}")
    if method.startswith("modelopt"):
        inner = declared.get("quantization") if isinstance(declared.get("quantization"), dict) else declared
        algo = str(inner.get("quant_algo", "")).upper()
        if algo not in MODELOPT_ALGOS:
            raise ValueError(f"ModelOpt quant_algo {algo!r} is not one vLLM 0.30.0 loads; allowed: {', '.join(MODELOPT_ALGOS)}")
        resolved = MODELOPT_ALGOS[algo]
        return Quantization(resolved, algo, _FORMAT_BITS.get(resolved))
    if method == "compressed-tensors":
        groups = declared.get("config_groups") or {}
        bits = {g.get("weights", {}).get("num_bits") for g in groups.values() if isinstance(g, dict)} - {None}
        return Quantization(method, declared.get("format"), bits.pop() if len(bits) == 1 else None)
    if method in ("awq", "gptq"):
        return Quantization(method, None, declared.get("bits") or declared.get("w_bit"))
    if method == "bitsandbytes":
        bits = 4 if declared.get("load_in_4bit") else 8 if declared.get("load_in_8bit") else None
        return Quantization(method, f"{bits}-bit" if bits else None, bits)
    return Quantization(method, None, _FORMAT_BITS.get(method))


def _text_config(config: dict[str, Any]) -> dict[str, Any]:
    """Multimodal configs (Gemma3ForConditionalGeneration, ...) keep the decoder's shape under text_config."""
    text = config.get("text_config")
    return {**config, **text} if isinstance(text, dict) else config


def _layout(c: dict[str, Any]) -> tuple[int, int] | None:
    """(total, active) parameters of the decoder families whose transformers module layout is encoded here."""
    families = ("llama", "mistral", "qwen2", "qwen3", "gemma", "gemma2", "gemma3_text", "mixtral", "qwen3_moe", "gpt_oss")
    kind = c.get("model_type")
    if kind not in families:
        return None
    h, layers, vocab = c["hidden_size"], c["num_hidden_layers"], c["vocab_size"]
    heads = c["num_attention_heads"]
    kv_heads = c.get("num_key_value_heads") or heads
    head_dim = c.get("head_dim") or h // heads
    q, kv = heads * head_dim, kv_heads * head_dim
    attention = h * q + 2 * h * kv + q * h
    if kind == "qwen2" or c.get("attention_bias"):
        attention += q + 2 * kv  # q/k/v biases (Qwen2 always has them)
    if c.get("attention_bias") and kind != "qwen2":
        attention += h  # o_proj bias
    if kind == "gpt_oss":
        attention += heads  # attention sinks
    if kind in ("qwen3", "qwen3_moe", "gemma3_text"):
        attention += 2 * head_dim  # q_norm, k_norm
    norms = (4 if kind in ("gemma2", "gemma3_text") else 2) * h

    def dense(intermediate: int) -> int:
        return 3 * h * intermediate  # gate, up, down projections

    total = active = 0
    for index in range(layers):
        if kind == "mixtral":
            experts, top_k, expert = c["num_local_experts"], c["num_experts_per_tok"], dense(c["intermediate_size"])
            router = h * experts
        elif kind == "qwen3_moe" and _qwen_moe_layer(c, index):
            experts, top_k, expert = c["num_experts"], c["num_experts_per_tok"], dense(c["moe_intermediate_size"])
            router = h * experts
        elif kind == "gpt_oss":
            experts, top_k = c["num_local_experts"], c.get("num_experts_per_tok") or c["experts_per_token"]
            i = c["intermediate_size"]
            expert = h * 2 * i + 2 * i + i * h + h  # fused gate_up with bias, down with bias
            router = h * experts + experts
        else:
            mlp = dense(c["intermediate_size"])
            total, active = total + attention + norms + mlp, active + attention + norms + mlp
            continue
        total += attention + norms + router + experts * expert
        active += attention + norms + router + top_k * expert
    embeddings = vocab * h * (1 if c.get("tie_word_embeddings", kind.startswith("gemma")) else 2) + h  # + final norm
    return total + embeddings, active + embeddings


def _qwen_moe_layer(c: dict[str, Any], index: int) -> bool:
    """Qwen3-MoE decoder layers are sparse unless listed in mlp_only_layers or off the decoder_sparse_step grid
    (transformers models/qwen3_moe/modeling_qwen3_moe.py, Qwen3MoeDecoderLayer)."""
    step = c.get("decoder_sparse_step", 1)
    return index not in (c.get("mlp_only_layers") or []) and c["num_experts"] > 0 and (index + 1) % step == 0


def read_checkpoint(config: dict[str, Any], hf_quant_config: dict[str, Any] | None = None) -> CheckpointFacts:
    """The facts of a model from its config.json (and hf_quant_config.json when it has one)."""
    if not isinstance(config, dict):
        raise ValueError(f"config.json: expected a JSON object, got {type(config).__name__}")
    architectures = config.get("architectures") or [None]
    shape = _text_config(config)
    try:
        counts = _layout(shape)
    except KeyError as missing:
        raise ValueError(f"config.json of model_type {shape.get('model_type')!r} lacks {missing} needed to count its parameters") from None
    return CheckpointFacts(
        architecture=architectures[0],
        model_type=config.get("model_type"),
        dtype=config.get("dtype") or config.get("torch_dtype") or shape.get("dtype") or shape.get("torch_dtype"),
        quantization=quantization_of(config, hf_quant_config),
        total_parameters=counts[0] if counts else None,
        active_parameters=counts[1] if counts else None,
    )
