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

import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from facts.model_files import ConfigFields, Named, config_fields
from facts.models import UnreadableModel, planned_metadata, read_json_object, safetensors_header_sizes

# vLLM modelopt.py LINEAR_ALGOS (+ MIXED_PRECISION): ModelOpt quant_algo -> the method vLLM loads it with.
MODELOPT_ALGOS = {
    "FP8": "modelopt",
    "FP8_PER_CHANNEL_PER_TOKEN": "modelopt",
    "FP8_PB_WO": "modelopt",
    "NVFP4": "modelopt_fp4",
    "W4A16_NVFP4": "modelopt_fp4",
    "MXFP8": "modelopt_mxfp8",
    "MIXED_PRECISION": "modelopt_mixed",
}
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
    expert_weight_parameters: int = 0  # the experts' weight matrices (no biases): what MXFP4 checkpoints quantize
    kv: KvLayout | None = None  # the attention cache's shape; None: the family's layout is not known here
    max_position_embeddings: int | None = None
    scaled_rope: bool = False  # rope_scaling / a non-default rope_parameters: the engines may derive a longer context

    @property
    def is_moe(self) -> bool:
        return self.total_parameters is not None and self.active_parameters != self.total_parameters


@dataclass(frozen=True)
class KvLayout:
    """What one token costs in the attention cache: `full_layers` keep every token, `sliding_layers` only the last
    `window` (gpt-oss, Gemma 2/3 alternate the two: config.json `layer_types`), each with kv_heads x head_dim keys and
    as many values."""

    full_layers: int
    sliding_layers: int
    window: int | None
    kv_heads: int
    head_dim: int

    def bytes_per_sequence(self, tokens: int, element_bytes: float, tensor_parallel: int = 1) -> float:
        """Cache bytes on one GPU for one sequence of `tokens`: key and value heads split over the tensor-parallel
        group (a head is never split: with fewer heads than GPUs each GPU keeps one)."""
        heads = max(1, self.kv_heads // tensor_parallel)
        cached = self.full_layers * tokens + self.sliding_layers * min(tokens, self.window or tokens)
        return 2 * heads * self.head_dim * element_bytes * cached


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
        nested = declared.get("quantization")
        inner = nested if isinstance(nested, dict) else declared
        algo = str(inner.get("quant_algo", "")).upper()
        if algo not in MODELOPT_ALGOS:
            raise ValueError(
                f"ModelOpt quant_algo {algo!r} is not one vLLM 0.30.0 loads; allowed: {', '.join(MODELOPT_ALGOS)}"
            )
        resolved = MODELOPT_ALGOS[algo]
        return Quantization(resolved, algo, _FORMAT_BITS.get(resolved))
    if method == "compressed-tensors":
        groups = declared.get("config_groups") or {}
        group_bits = {g.get("weights", {}).get("num_bits") for g in groups.values() if isinstance(g, dict)} - {None}
        return Quantization(method, declared.get("format"), group_bits.pop() if len(group_bits) == 1 else None)
    if method in ("awq", "gptq"):
        return Quantization(method, None, declared.get("bits") or declared.get("w_bit"))
    if method == "bitsandbytes":
        bits = 4 if declared.get("load_in_4bit") else 8 if declared.get("load_in_8bit") else None
        return Quantization(method, f"{bits}-bit" if bits else None, bits)
    return Quantization(method, None, _FORMAT_BITS.get(method))


FAMILIES = ("llama", "mistral", "qwen2", "qwen3", "gemma", "gemma2", "gemma3_text", "mixtral", "qwen3_moe", "gpt_oss")


def _given(field: Named | int | None, key: str) -> int:
    """A field the FAMILIES' transformers configs read under `key` alone (not GPT-2's or T5's names for it):
    KeyError(key) when config.json does not give it so."""
    if field is None or (isinstance(field, Named) and field.key != key):
        raise KeyError(key)
    return field.value if isinstance(field, Named) else field


def _kv_layout(fields: ConfigFields) -> KvLayout:
    """The cache shape of the FAMILIES: per-layer `layer_types` where the config lists them (transformers 4.5x+
    configs of gpt_oss, gemma2, gemma3_text), else a `sliding_window` on every layer where the family applies one
    (mistral, mixtral; qwen2/qwen3 only with use_sliding_window), else full attention everywhere."""
    c, family = fields.decoder, fields.decoder_type
    layers = _given(fields.layers, "num_hidden_layers")
    kv_heads, head_dim = _given(fields.kv_heads, "num_key_value_heads"), _given(fields.head_dim, "head_dim")
    window = c.get("sliding_window")
    kinds = fields.layer_types
    if kinds is not None and len(kinds) == layers:
        sliding = sum(1 for kind in kinds if kind == "sliding_attention")
    elif family == "gemma2" and window:
        sliding = (layers + 1) // 2  # transformers Gemma2Config: even layers slide ("sliding_attention" if not i % 2)
    elif window and (family in ("mistral", "mixtral") or c.get("use_sliding_window")):
        sliding = layers
    else:
        sliding = 0
    return KvLayout(layers - sliding, sliding, window if sliding else None, kv_heads, head_dim)


def _layout(fields: ConfigFields) -> tuple[int, int, int] | None:
    """(total, active, expert weight) parameters of the decoder families whose transformers module layout is encoded
    here."""
    c, kind = fields.decoder, fields.decoder_type
    if kind not in FAMILIES:
        return None
    h, layers = _given(fields.hidden, "hidden_size"), _given(fields.layers, "num_hidden_layers")
    vocab, heads = _given(fields.vocab_size, "vocab_size"), _given(fields.heads, "num_attention_heads")
    kv_heads, head_dim = _given(fields.kv_heads, "num_key_value_heads"), _given(fields.head_dim, "head_dim")
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

    total = active = expert_weights = 0
    for index in range(layers):
        if kind == "mixtral":
            experts, top_k, expert = c["num_local_experts"], c["num_experts_per_tok"], dense(c["intermediate_size"])
            router, weights = h * experts, expert
        elif kind == "qwen3_moe" and _qwen_moe_layer(c, index):
            experts, top_k, expert = _qwen_experts(c), c["num_experts_per_tok"], dense(c["moe_intermediate_size"])
            router, weights = h * experts, expert
        elif kind == "gpt_oss":
            experts, top_k = c["num_local_experts"], c.get("num_experts_per_tok") or c["experts_per_token"]
            i = c["intermediate_size"]
            expert = h * 2 * i + 2 * i + i * h + h  # fused gate_up with bias, down with bias
            router, weights = h * experts + experts, h * 2 * i + i * h
        else:
            mlp = dense(c["intermediate_size"])
            total, active = total + attention + norms + mlp, active + attention + norms + mlp
            continue
        total += attention + norms + router + experts * expert
        active += attention + norms + router + top_k * expert
        expert_weights += experts * weights
    embeddings = vocab * h * (1 if c.get("tie_word_embeddings", kind.startswith("gemma")) else 2) + h  # + final norm
    return total + embeddings, active + embeddings, expert_weights


def _qwen_moe_layer(c: dict[str, Any], index: int) -> bool:
    """Qwen3-MoE decoder layers are sparse unless listed in mlp_only_layers or off the decoder_sparse_step grid
    (transformers models/qwen3_moe/modeling_qwen3_moe.py, Qwen3MoeDecoderLayer)."""
    step = c.get("decoder_sparse_step", 1)
    return index not in (c.get("mlp_only_layers") or []) and _qwen_experts(c) > 0 and (index + 1) % step == 0


def _qwen_experts(c: dict[str, Any]) -> int:
    """Qwen3-MoE's expert count: `num_experts` as the Hub configs (transformers 4.51) write it, `num_local_experts`
    as transformers 5 saves it (Qwen3MoeConfig's attribute_map names both)."""
    return c["num_experts"] if "num_experts" in c else c["num_local_experts"]


def read_checkpoint(config: dict[str, Any], hf_quant_config: dict[str, Any] | None = None) -> CheckpointFacts:
    """The facts of a model from its config.json (and hf_quant_config.json when it has one). Its fields are read and
    checked for type and bounds first (facts.model_files.config_fields: UnreadableModel naming the field), so a
    config.json that lies (10^12 layers, 0 heads) is refused before the per-layer count below loops over it."""
    fields = config_fields(config, name="config.json")
    try:
        counts = _layout(fields)
    except KeyError as missing:
        raise ValueError(
            f"config.json of model_type {fields.decoder_type!r} lacks {missing} needed to count its parameters"
        ) from None
    return CheckpointFacts(
        architecture=fields.architecture,
        model_type=fields.model_type,
        dtype=fields.dtype,
        quantization=quantization_of(config, hf_quant_config),
        total_parameters=counts[0] if counts else None,
        active_parameters=counts[1] if counts else None,
        expert_weight_parameters=counts[2] if counts else 0,
        kv=_kv_layout(fields) if counts else None,
        max_position_embeddings=fields.max_position_embeddings,
        scaled_rope=fields.scaled_rope,
    )


# ---- a model's checkpoint before any build: a local directory's own files, or the config.json of a known Hub model

DTYPE_BYTES = {"fp16": 2, "bf16": 2, "fp32": 4}
# MXFP4 (OCP Microscaling Formats v1.0): 4-bit E2M1 elements in blocks of 32 sharing one 8-bit E8M0 scale.
MXFP4_BITS_PER_WEIGHT = 4 + 8 / 32

# config.json of the Hub models the example configs deploy (the Hub is not reachable from this project's machines),
# each as published copies quote it; only the keys the checks read. Sources:
#   Qwen/Qwen3-32B, Qwen/Qwen3-30B-A3B, meta-llama/Llama-3.1-8B-Instruct: the Hub config.json files as reproduced in
#     citsjtu2020/LLM-Prof sglang/Model_Config.md (Llama-3.1-8B's base config; the Instruct model's differs only in
#     eos_token_id), transformers_version 4.51.0 / 4.43.0.dev0;
#   openai/gpt-oss-20b: https://huggingface.co/openai/gpt-oss-20b/blob/main/config.json as quoted in tinygrad's
#     GPT-OSS test (TORCH_PARAMS["20B"]), transformers_version 4.57.0.
# Unverified against the Hub files themselves; a config that differs is caught at build, which reads the real files.
# What Qwen3-32B and Qwen3-30B-A3B's config.json files both say of attention, context and vocabulary (one
# Qwen3 tokenizer, one attention layout), the last keys of each.
_QWEN3_ATTENTION_AND_VOCABULARY: dict[str, Any] = {
    "head_dim": 128,
    "max_position_embeddings": 40960,
    "sliding_window": None,
    "use_sliding_window": False,
    "tie_word_embeddings": False,
    "torch_dtype": "bfloat16",
    "vocab_size": 151936,
}
KNOWN_CHECKPOINTS: dict[str, dict[str, Any]] = {
    "Qwen/Qwen3-32B": {
        "architectures": ["Qwen3ForCausalLM"],
        "model_type": "qwen3",
        "hidden_size": 5120,
        "intermediate_size": 25600,
        "num_hidden_layers": 64,
        "num_attention_heads": 64,
        "num_key_value_heads": 8,
        **_QWEN3_ATTENTION_AND_VOCABULARY,
    },
    "Qwen/Qwen3-30B-A3B": {
        "architectures": ["Qwen3MoeForCausalLM"],
        "model_type": "qwen3_moe",
        "hidden_size": 2048,
        "intermediate_size": 6144,
        "moe_intermediate_size": 768,
        "num_experts": 128,
        "num_experts_per_tok": 8,
        "decoder_sparse_step": 1,
        "mlp_only_layers": [],
        "num_hidden_layers": 48,
        "num_attention_heads": 32,
        "num_key_value_heads": 4,
        **_QWEN3_ATTENTION_AND_VOCABULARY,
    },
    "meta-llama/Llama-3.1-8B-Instruct": {
        "architectures": ["LlamaForCausalLM"],
        "model_type": "llama",
        "hidden_size": 4096,
        "intermediate_size": 14336,
        "num_hidden_layers": 32,
        "num_attention_heads": 32,
        "num_key_value_heads": 8,
        "max_position_embeddings": 131072,
        "tie_word_embeddings": False,
        "torch_dtype": "bfloat16",
        "vocab_size": 128256,
    },
    "openai/gpt-oss-20b": {
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
        "attention_bias": True,
        "layer_types": ["sliding_attention", "full_attention"] * 12,
        "sliding_window": 128,
        "max_position_embeddings": 131072,
        "tie_word_embeddings": False,
        "torch_dtype": "bfloat16",
        "vocab_size": 201088,
        "quantization_config": {
            "modules_to_not_convert": [
                "model.layers.*.self_attn",
                "model.layers.*.mlp.router",
                "model.embed_tokens",
                "lm_head",
            ],
            "quant_method": "mxfp4",
        },
    },
}


@dataclass(frozen=True)
class Checkpoint:
    """A model's facts before a build: from a local directory (its config.json and the safetensors headers, so the
    weight bytes are exact) or from KNOWN_CHECKPOINTS (the bytes estimated from the layout and precision)."""

    model: str
    facts: CheckpointFacts
    source: str  # where the config came from, for messages
    file_bytes: int | None = None  # the safetensors tensors' bytes, read from the headers (local directories)
    files: tuple[str, ...] = field(default=(), compare=False)
    # The tensors' element count when known without local files (a Hub model planned from its headers).
    elements: int | None = None

    def weight_bytes(self, dtype: str) -> int | None:
        """The weights' bytes on the GPUs when the engine computes in `dtype` (fp16/bf16/fp32): an unquantized
        checkpoint is cast to it at load; a pre-quantized one keeps its own bytes (the files' when read, else the
        MXFP4 estimate: experts at 4.25 bits, the rest bf16). None: not known before a build."""
        quantization, total = self.facts.quantization, self.facts.total_parameters
        if quantization is None:
            if total is not None:
                return total * DTYPE_BYTES[dtype]
            # A family the layout does not encode: the files' element count at the target dtype.
            return None if self.file_bytes is None else self._file_elements() * DTYPE_BYTES[dtype]
        if self.file_bytes is not None:
            return self.file_bytes
        if quantization.method == "mxfp4" and total is not None and self.facts.expert_weight_parameters:
            experts = self.facts.expert_weight_parameters
            return int(experts * MXFP4_BITS_PER_WEIGHT / 8 + (total - experts) * 2)
        return None

    def artifact_bytes(self) -> int | None:
        """The checkpoint's weight files as they are (what a copying recipe publishes and SageMaker downloads): the
        files' bytes when read, else the estimate in the config's own dtype (bf16/fp16 2 bytes, fp32 4)."""
        if self.file_bytes is not None:
            return self.file_bytes
        if self.facts.quantization is not None:
            return self.weight_bytes("bf16")
        own = {"float32": "fp32", "float16": "fp16", "bfloat16": "bf16"}.get(str(self.facts.dtype), "bf16")
        return self.weight_bytes(own)

    def _file_elements(self) -> int:
        if self.elements is not None:
            return self.elements
        return sum(safetensors_header_sizes(Path(f))[0] for f in self.files)


def read_local_checkpoint(directory: Path, model: str | None = None) -> Checkpoint:
    """A local model directory's facts: config.json (+ hf_quant_config.json) and the safetensors headers."""
    files = tuple(str(p) for p in sorted(directory.glob("*.safetensors")))
    file_bytes = sum(safetensors_header_sizes(Path(f))[1] for f in files) if files else None
    return read_metadata_checkpoint(directory, model or str(directory), file_bytes, files=files)


def read_metadata_checkpoint(
    directory: Path, model: str, file_bytes: int | None, elements: int | None = None, files: tuple[str, ...] = ()
) -> Checkpoint:
    """A model's facts from its metadata files in `directory` (config.json, hf_quant_config.json) and the tensors'
    bytes (and elements) read elsewhere: a Hub model's headers, or a planned build's manifest."""
    config_path = directory / "config.json"
    config = read_json_object(config_path)
    quant_path = directory / "hf_quant_config.json"
    hf_quant = read_json_object(quant_path) if os.path.lexists(quant_path) else None
    try:
        facts = read_checkpoint(config, hf_quant)
    except UnreadableModel:
        raise
    except (ValueError, TypeError, KeyError) as err:  # a config.json its family's keys are missing from, or mistyped
        raise UnreadableModel(f"{config_path}: {err}") from None
    return Checkpoint(model, facts, f"{config_path}", file_bytes, files, elements)


def checkpoint_of(model: str) -> Checkpoint | None:
    """`model`'s facts before a build: a local directory with a config.json; a Hub model planned from its metadata
    (its build's config.json and manifest, facts/models.py planned_metadata); a KNOWN_CHECKPOINTS Hub id (a cache of
    the same facts); else None (nothing is known until `model_build build` reads the metadata)."""
    path = Path(model)
    # lexists, not is_file: a config.json that is a FIFO or a symlink loop is refused by its reader, not skipped.
    if path.is_dir() and os.path.lexists(path / "config.json"):
        return read_local_checkpoint(path, model)
    planned = planned_metadata(model)
    if planned is not None:
        return read_metadata_checkpoint(planned.directory, model, planned.weight_bytes, planned.parameters)
    known = KNOWN_CHECKPOINTS.get(model)
    if known is not None:
        return Checkpoint(
            model, read_checkpoint(known), f"{model} config.json (systems/checkpoint_facts.py KNOWN_CHECKPOINTS)"
        )
    return None
