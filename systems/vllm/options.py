"""Typed options of the AWS vLLM container (the vLLM release of systems/images_current.py VLLM_DLC) and the
`SM_VLLM_*` environment they render to.

Names, value sets and bounds are that release's own (its PyPI wheel `vllm-<ENGINE_VERSION>`, file named at each
field; first read in 0.30.0, value sets re-read in 0.31.0);
tools/generate_architectures.py --check compares every value set below with that wheel. How the container turns
the environment into flags: aws/deep-learning-containers scripts/docker/vllm/sagemaker_args.py (commit
19aa4751eb): `SM_VLLM_<NAME>` -> `--<name lowercased, _ -> ->`; "true" -> the bare flag; "false" -> nothing;
a JSON array -> one argv token per element; a JSON object -> one token, verbatim; anything else -> one token.
"""

from __future__ import annotations

from typing import Literal, get_args

from pydantic import ConfigDict, Field, model_validator

from endpoint_config.base import Strict
from systems.base import EngineOptions
from systems.entrypoint_values import entrypoint_value_problem, vllm_entrypoint_splits
from systems.images_current import VLLM_DLC
from systems.vllm_parsers import ReasoningParser_0_31, ToolCallParser_0_30

ENGINE_PROJECT = "vllm"
ENGINE_VERSION = VLLM_DLC.sdk_version
ENV_PREFIX = "SM_VLLM_"

# vllm/tool_parsers/__init__.py, the keys of _TOOL_PARSERS_TO_REGISTER (what --tool-call-parser accepts), and
# vllm/reasoning/__init__.py, the keys of _REASONING_PARSERS_TO_REGISTER (--reasoning-parser): systems/vllm_parsers.py.
ToolCallParser = ToolCallParser_0_30
ReasoningParser = ReasoningParser_0_31
# vllm/config/cache.py, CacheDType (--kv-cache-dtype).
KvCacheDtype = Literal[
    "auto",
    "float16",
    "bfloat16",
    "fp8",
    "fp8_e4m3",
    "fp8_e5m2",
    "fp8_inc",
    "fp8_ds_mla",
    "nvfp4_ds_mla",
    "turboquant_k8v4",
    "turboquant_4bit_nc",
    "turboquant_k3v4_nc",
    "turboquant_3bit_nc",
    "int4_per_token_head",
    "int8_per_token_head",
    "fp8_per_token_head",
    "nvfp4",
    "nvfp4_4over6",
]
# vllm/model_executor/layers/quantization/__init__.py, QuantizationMethods (--quantization). vLLM reads a
# checkpoint's own method from config.json `quantization_config.quant_method` (or hf_quant_config.json) and
# refuses a --quantization that differs (vllm/config/model.py, _verify_quantization); bitsandbytes and gguf are
# not in 0.30.0 (0.23.0 still had them).
QuantizationMethod = Literal[
    "awq",
    "auto_awq",
    "fp8",
    "fbgemm_fp8",
    "fp_quant",
    "modelopt",
    "modelopt_fp4",
    "modelopt_mxfp8",
    "modelopt_mixed",
    "auto_gptq",
    "gptq",
    "gptq_marlin",
    "awq_marlin",
    "humming",
    "compressed-tensors",
    "experts_int8",
    "quark",
    "moe_wna16",
    "torchao",
    "inc",
    "mxfp4",
    "gpt_oss_mxfp4",
    "deepseek_v4_fp8",
    "online",
    "fp8_per_tensor",
    "fp8_per_block",
    "fp8_per_channel",
    "int8_per_channel_weight_only",
    "nvfp4_per_token",
    "mxfp8",
]
# Methods that quantize an unquantized (bf16/fp16) checkpoint while loading: vllm/config/quantization.py
# _ONLINE_SHORTHANDS keys, and "fp8" (Fp8Config.from_config: a checkpoint whose quant_method lacks "fp8" is
# quantized dynamically, vllm/model_executor/layers/quantization/fp8.py).
RUNTIME_QUANTIZATION = frozenset(
    {
        "fp8",
        "fp8_per_tensor",
        "fp8_per_block",
        "fp8_per_channel",
        "mxfp8",
        "mxfp4",
        "int8_per_channel_weight_only",
        "nvfp4_per_token",
    }
)
# vllm/model_executor/model_loader/__init__.py, LoadFormats (--load-format); "runai_streamer" reads safetensors
# straight from S3 or local disk with the Run:ai model streamer.
LoadFormat = Literal[
    "auto",
    "hf",
    "dummy",
    "fastsafetensors",
    "instanttensor",
    "ipc_cache",
    "mistral",
    "modelexpress",
    "npcache",
    "pt",
    "runai_streamer",
    "runai_streamer_sharded",
    "safetensors",
    "sharded_state",
    "tensorizer",
]
# vllm/config/speculative.py, SpeculativeMethod (with MTPModelTypes, EagleModelTypes, NgramGPUTypes,
# DFlashModelTypes, DSparkModelTypes spelled out). The model-specific MTP names are accepted and replaced by "mtp"
# with a deprecation warning (SpeculativeConfig.__post_init__).
SpeculativeMethod = Literal[
    "ngram",
    "medusa",
    "mlp_speculator",
    "draft_model",
    "suffix",
    "custom_class",
    "eagle",
    "eagle3",
    "extract_hidden_states",
    "deepseek_mtp",
    "dots3_note_mtp",
    "mimo_mtp",
    "mimo_v2_mtp",
    "glm4_moe_mtp",
    "glm4_moe_lite_mtp",
    "glm_ocr_mtp",
    "ernie_mtp",
    "nemotron_h_mtp",
    "exaone_moe_mtp",
    "exaone4_5_mtp",
    "qwen3_next_mtp",
    "qwen4_exp_mtp",
    "qwen3_5_mtp",
    "longcat_flash_mtp",
    "bailing_hybrid_v3_mtp",
    "minimax_m3_mtp",
    "bailing_hybrid_mtp",
    "mtp",
    "kimi_k3_mtp",
    "pangu_ultra_moe_mtp",
    "step3p5_mtp",
    "hy_v3_mtp",
    "hy_v4_mtp",
    "gemma4_mtp",
    "inkling_mtp",
    "glm5_next_mtp",
    "dflash",
    "ngram_gpu",
    "dspark",
]
# vllm/config/lora.py, MaxLoRARanks (--max-lora-rank).
MaxLoraRank = Literal[1, 8, 16, 32, 64, 128, 256, 320, 512]

# The speculative methods whose drafter comes from the target model's own weights (no `model`), and those that
# need a drafter checkpoint (vllm/config/speculative.py: "if `model` param is not provided, the method name must
# be provided"; MTP reuses the target model, ngram/suffix look up the prompt).
_DRAFTER_FROM_TARGET = frozenset(
    {"ngram", "ngram_gpu", "suffix", "mtp"} | {m for m in get_args(SpeculativeMethod) if m.endswith("_mtp")}
)
_NEEDS_DRAFTER_MODEL = frozenset({"eagle", "eagle3", "draft_model", "medusa", "mlp_speculator", "dflash", "dspark"})


class VllmSpeculativeConfig(Strict):
    """--speculative-config: a JSON object (vllm/config/speculative.py, SpeculativeConfig; fields used here)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    method: SpeculativeMethod
    model: str | None = None  # the drafter / EAGLE head (Hub id or path in the container)
    num_speculative_tokens: int | None = Field(default=None, gt=0)
    draft_tensor_parallel_size: int | None = Field(default=None, ge=1)
    prompt_lookup_max: int | None = Field(default=None, ge=1)  # ngram only
    prompt_lookup_min: int | None = Field(default=None, ge=1)

    @model_validator(mode="after")
    def _method_needs(self) -> VllmSpeculativeConfig:
        if self.method in _NEEDS_DRAFTER_MODEL and not self.model:
            raise ValueError(f"speculative method {self.method!r} needs `model` (the drafter checkpoint)")
        if self.method in _DRAFTER_FROM_TARGET and self.model:
            raise ValueError(f"speculative method {self.method!r} drafts from the target model itself; remove `model`")
        if self.method == "mtp" and self.num_speculative_tokens is None:
            # vllm/config/speculative.py: MTP with no model takes the drafter from the target only "if
            # self.model is None and self.num_speculative_tokens is not None".
            raise ValueError("speculative method 'mtp' needs num_speculative_tokens")
        if self.method in ("ngram", "ngram_gpu") and self.prompt_lookup_max is None:
            raise ValueError(f"speculative method {self.method!r} needs prompt_lookup_max")
        if (self.prompt_lookup_max or self.prompt_lookup_min) and self.method not in ("ngram", "ngram_gpu"):
            raise ValueError("prompt_lookup_max/prompt_lookup_min apply to the ngram methods only")
        if self.prompt_lookup_min and self.prompt_lookup_max and self.prompt_lookup_min > self.prompt_lookup_max:
            raise ValueError("prompt_lookup_min must not exceed prompt_lookup_max")
        return self

    def as_json(self) -> str:
        return self.model_dump_json(exclude_none=True)


class VllmOptions(EngineOptions):
    """The engine options of the `vllm` system. None means "not written": vLLM's own default applies."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    tensor_parallel_size: int | None = Field(default=None, ge=1)  # vllm/config/parallel.py
    max_model_len: int | None = Field(default=None, ge=1)  # vllm/config/model.py
    max_num_seqs: int | None = Field(default=None, ge=1)  # vllm/config/scheduler.py (concurrent sequences)
    gpu_memory_utilization: float | None = Field(default=None, gt=0, le=1)  # vllm/config/cache.py, default 0.92
    max_num_batched_tokens: int | None = Field(default=None, ge=1)  # vllm/config/scheduler.py
    # Both default to on in vLLM 0.30.0 (CacheConfig.enable_prefix_caching, SchedulerConfig.enable_chunked_prefill);
    # False renders --no-<flag> (argparse.BooleanOptionalAction in vllm/engine/arg_utils.py), since the
    # container drops a "false" value instead of passing it.
    enable_chunked_prefill: bool | None = None
    enable_prefix_caching: bool | None = None
    kv_cache_dtype: KvCacheDtype | None = None
    quantization: QuantizationMethod | None = None
    speculative: VllmSpeculativeConfig | None = None
    enable_expert_parallel: bool = False  # vllm/config/parallel.py, default False
    tool_call_parser: ToolCallParser | None = None
    enable_auto_tool_choice: bool = False  # vllm/entrypoints/launchers/cli_args.py: needs --tool-call-parser
    reasoning_parser: ReasoningParser | None = None
    chat_template: str | None = Field(default=None, min_length=1)  # a path in the container, or the template
    enable_lora: bool = False
    max_loras: int | None = Field(default=None, ge=1)  # vllm/config/lora.py, default 1
    max_lora_rank: MaxLoraRank | None = None  # vllm/config/lora.py, default 16
    # VLLM_ALLOW_RUNTIME_LORA_UPDATING (vllm/envs.py, "1"/"true"): registers /v1/load_lora_adapter and, through
    # model_hosting_container_standards, SageMaker's POST /adapters and DELETE /adapters/{name}
    # (vllm/entrypoints/serve/lora/api_router.py): what LoRA adapter inference components need.
    allow_runtime_lora_updating: bool = False
    load_format: LoadFormat | None = None

    @property
    def keeps_prefix_cache(self) -> bool | None:
        return self.enable_prefix_caching

    def conflicts(self) -> list[str]:
        """The rules between fields, each "engine: <rule>" (engine_problems prefixes the endpoint)."""
        return [f"engine: {problem}" for problem in self.problems()]

    def problems(self) -> list[str]:
        """The rules vLLM 0.30.0 enforces between these options at start-up, each with its source."""
        return self.lora_key_problems() + self.field_problems()

    def lora_key_problems(self) -> list[str]:
        """LoRA's sizing keys without LoRA on."""
        lora_only = [n for n in ("max_loras", "max_lora_rank") if getattr(self, n) is not None]
        lora_only += ["allow_runtime_lora_updating"] if self.allow_runtime_lora_updating else []
        return (
            [f"{', '.join(lora_only)} apply only with enable_lora: true"] if lora_only and not self.enable_lora else []
        )

    def field_problems(self) -> list[str]:
        """The rules between the other fields."""
        found = []
        if self.enable_auto_tool_choice and self.tool_call_parser is None:
            found.append("enable_auto_tool_choice needs tool_call_parser (vllm/entrypoints/launchers/cli_args.py)")
        tokens, seqs, length = self.max_num_batched_tokens, self.max_num_seqs, self.max_model_len
        # vllm/config/scheduler.py, SchedulerConfig.verify_max_model_len.
        if tokens is not None and seqs is not None and tokens < seqs:
            found.append(f"max_num_batched_tokens ({tokens}) must be >= max_num_seqs ({seqs})")
        if tokens is not None and length is not None and tokens < length and self.enable_chunked_prefill is False:
            found.append(
                f"max_num_batched_tokens ({tokens}) is smaller than max_model_len ({length}) with chunked prefill "
                "off: vLLM refuses that; raise max_num_batched_tokens or turn chunked prefill on"
            )
        return found

    def environment(self) -> dict[str, str]:
        """The container environment: `SM_VLLM_<FLAG>` for each option set (what the entrypoint turns into
        flags), plus VLLM_ALLOW_RUNTIME_LORA_UPDATING, which vLLM reads itself."""
        if problems := self.problems():
            raise ValueError("; ".join(problems))
        env: dict[str, str] = {}

        def flag(name: str, value: object) -> None:
            env[ENV_PREFIX + name.upper()] = value if isinstance(value, str) else str(value)

        for name in (
            "tensor_parallel_size",
            "max_model_len",
            "max_num_seqs",
            "gpu_memory_utilization",
            "max_num_batched_tokens",
            "kv_cache_dtype",
            "quantization",
            "tool_call_parser",
            "reasoning_parser",
            "chat_template",
            "max_loras",
            "max_lora_rank",
            "load_format",
        ):
            value = getattr(self, name)
            if value is not None:
                _refuse_reinterpreted(name, str(value))
                flag(name, value)
        for name in ("enable_chunked_prefill", "enable_prefix_caching"):
            value = getattr(self, name)
            if value is not None:
                flag(name if value else f"no_{name}", "true")
        for name in ("enable_expert_parallel", "enable_auto_tool_choice", "enable_lora"):
            if getattr(self, name):
                flag(name, "true")
        if self.speculative is not None:
            flag("speculative_config", self.speculative.as_json())
        if self.allow_runtime_lora_updating:
            env["VLLM_ALLOW_RUNTIME_LORA_UPDATING"] = "true"
        return env


def _refuse_reinterpreted(name: str, value: str) -> None:
    """A value the entrypoint would not pass to vLLM as the one token it is (systems/entrypoint_values.py, which
    quotes sagemaker_args.py's rule)."""
    if (problem := entrypoint_value_problem(name, value, vllm_entrypoint_splits)) is not None:
        raise ValueError(problem)
