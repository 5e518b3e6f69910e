"""Typed options of the AWS SGLang container (the SGLang release of systems/images_current.py SGLANG_DLC) and the
`SM_SGLANG_*` environment they render to.

Names, value sets and bounds are that release's own (its PyPI wheel `sglang-<ENGINE_VERSION>`, file named at each
field; first read in 0.5.20, value sets re-read in 0.5.21);
tools/generate_architectures.py --check compares every value set below with that wheel. How the container turns
the environment into flags: aws/deep-learning-containers scripts/docker/sglang/sagemaker_entrypoint.sh (commit
3a66fab5ed): `SM_SGLANG_<NAME>` -> `--<name lowercased, _ -> ->`; "true" -> the bare flag; "false" -> nothing;
any other value -> exactly one argv token (so a list-valued flag can carry one value only); --port 8080,
--host 0.0.0.0 and --model-path /opt/ml/model are added unless set; SM_SGLANG_ENGINE picks the launch module.
"""

from __future__ import annotations

from typing import ClassVar, Literal

from pydantic import ConfigDict, Field, model_validator

from endpoint_config.base import Strict
from systems.base import EngineOptions
from systems.entrypoint_values import entrypoint_value_problem, sglang_entrypoint_splits
from systems.images_current import SGLANG_DLC

ENGINE_PROJECT = "sglang"
ENGINE_VERSION = SGLANG_DLC.sdk_version
ENV_PREFIX = "SM_SGLANG_"

# sglang/srt/function_call/function_call_parser.py, FunctionCallParser.ToolCallParserEnum keys; server_args.py
# adds "auto" (detect from the chat template) to the --tool-call-parser choices.
ToolCallParser = Literal[
    "auto",
    "apertus2509",
    "cohere_command4",
    "deepseekv3",
    "deepseekv31",
    "deepseekv32",
    "deepseekv4",
    "deepseekv41",
    "dots",
    "gemma4",
    "gigachat3",
    "gigachat35",
    "glm",
    "glm45",
    "glm47",
    "gpt-oss",
    "hermes",
    "hunyuan",
    "inkling",
    "interns1",
    "iquest_q1",
    "k2_horizon",
    "kimi_k2",
    "kimi_k3",
    "lfm2",
    "ling3",
    "llama3",
    "mimo",
    "minicpm5",
    "minimax-m2",
    "minimax-m3",
    "mistral",
    "muse",
    "nanbeige",
    "poolside_v1",
    "pythonic",
    "qwen",
    "qwen25",
    "qwen3_coder",
    "spark25",
    "step3",
    "step3p5",
    "trinity",
]
# sglang/srt/parser/reasoning_parser.py, ReasoningParser.DetectorMap keys, plus "auto" (server_args.py).
ReasoningParser = Literal[
    "auto",
    "apertus2509",
    "cohere_command4",
    "deepseek-r1",
    "deepseek-v3",
    "deepseek-v4",
    "deepseek-v41",
    "dots",
    "gemma4",
    "gigachat35",
    "glm45",
    "gpt-oss",
    "granite_thinking_parser",
    "hunyuan",
    "inkling",
    "interns1",
    "iquest_q1",
    "k2_horizon",
    "kimi",
    "kimi_k2",
    "kimi_k3",
    "ling3",
    "mimo",
    "minimax",
    "minimax-append-think",
    "minimax-m3",
    "mistral",
    "muse",
    "nanbeige",
    "nemotron_3",
    "poolside_v1",
    "qwen3",
    "qwen3-thinking",
    "step3",
    "step3p5",
]
# sglang/srt/arg_groups/fields/model.py, the choices of kv_cache_dtype (0.5.21 dropped "fp4_e2m1").
KvCacheDtype = Literal["auto", "fp8_e5m2", "fp8_e4m3", "mxfp8", "bf16", "bfloat16", "nvfp4", "fp4_mx_block16"]
# sglang/srt/arg_groups/choices.py, QUANTIZATION_CHOICES (--quantization). SGLang reads a checkpoint's own
# method from config.json quantization_config.quant_method or hf_quant_config.json (configs/model_config.py).
QuantizationMethod = Literal[
    "awq",
    "fp8",
    "mxfp8",
    "gptq",
    "gptq_marlin",
    "awq_marlin",
    "bitsandbytes",
    "gguf",
    "modelopt",
    "modelopt_fp8",
    "modelopt_fp4",
    "nvfp4_online",
    "modelopt_mixed",
    "petit_nvfp4",
    "w8a8_int8",
    "w8a8_fp8",
    "moe_wna16",
    "w4afp8",
    "mxfp4",
    "auto-round",
    "auto-round-int8",
    "compressed-tensors",
    "modelslim",
    "mxfp_w4a8",
    "quark",
    "quark_int4fp8_moe",
    "quark_mxfp4",
    "mlx_q4",
    "mlx_q8",
    "unquant",
    "humming",
]
# The choices list's own comments mark these as quantizing a bf16/fp16 checkpoint while loading ("online").
RUNTIME_QUANTIZATION = frozenset({"fp8", "mxfp8", "nvfp4_online", "quark_mxfp4"})
# sglang/srt/arg_groups/choices.py, LOAD_FORMAT_CHOICES (--load-format).
LoadFormat = Literal[
    "auto",
    "pt",
    "safetensors",
    "npcache",
    "dummy",
    "sharded_state",
    "presharded",
    "gguf",
    "expert_pack",
    "bitsandbytes",
    "mistral",
    "layered",
    "flash_rl",
    "remote",
    "remote_instance",
    "fastsafetensors",
    "private",
    "runai_streamer",
]
# sglang/srt/speculative/spec_info.py, the SpeculativeAlgorithm members but NONE, and NEXTN, the reserved alias
# of EAGLE that MTP models use (speculative/spec_registry.py, _RESERVED_ALIASES); from_string upper-cases.
SpeculativeAlgorithm = Literal[
    "DFLASH", "UNO", "DSPARK", "EAGLE", "EAGLE3", "FROZEN_KV_MTP", "STANDALONE", "NGRAM", "NEXTN"
]
# sglang/srt/utils/common.py, SUPPORTED_LORA_TARGET_MODULES and LORA_TARGET_ALL_MODULES ("all").
LoraTargetModule = Literal[
    "all",
    "q_proj",
    "k_proj",
    "v_proj",
    "o_proj",
    "q_a_proj",
    "kv_a_proj_with_mqa",
    "q_b_proj",
    "kv_b_proj",
    "wq_b",
    "wk",
    "weights_proj",
    "gate_proj",
    "up_proj",
    "down_proj",
    "qkv_proj",
    "gate_up_proj",
    "embed_tokens",
    "lm_head",
    "qkvr",
    "wo_ud",
]

_NEEDS_DRAFTER_MODEL = frozenset({"EAGLE", "EAGLE3", "STANDALONE", "DFLASH", "DSPARK"})


class SglangSpeculativeConfig(Strict):
    """The --speculative-* flags (sglang/srt/arg_groups/fields/spec.py)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    algorithm: SpeculativeAlgorithm
    draft_model_path: str | None = None  # --speculative-draft-model-path
    num_steps: int | None = Field(default=None, ge=1)  # --speculative-num-steps
    eagle_topk: int | None = Field(default=None, ge=1)  # --speculative-eagle-topk
    num_draft_tokens: int | None = Field(default=None, ge=1)  # --speculative-num-draft-tokens

    @model_validator(mode="after")
    def _algorithm_needs(self) -> SglangSpeculativeConfig:
        if self.algorithm in _NEEDS_DRAFTER_MODEL and not self.draft_model_path:
            raise ValueError(f"speculative algorithm {self.algorithm} needs draft_model_path (the drafter checkpoint)")
        if self.algorithm in ("NEXTN", "FROZEN_KV_MTP", "NGRAM") and self.draft_model_path:
            raise ValueError(
                f"speculative algorithm {self.algorithm} drafts without a separate model; remove draft_model_path"
            )
        return self

    def environment(self) -> dict[str, str]:
        env: dict[str, str] = {f"{ENV_PREFIX}SPECULATIVE_ALGORITHM": self.algorithm}
        for name in ("draft_model_path", "num_steps", "eagle_topk", "num_draft_tokens"):
            value = getattr(self, name)
            if value is not None:
                env[f"{ENV_PREFIX}SPECULATIVE_{name.upper()}"] = str(value)
        return env


class SglangOptions(EngineOptions):
    """The engine options of the `sglang` system. None means "not written": SGLang's own default applies."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    tp_size: int | None = Field(default=None, ge=1)  # arg_groups/fields/parallel.py (--tp-size)
    context_length: int | None = Field(default=None, ge=1)  # fields/model.py (max model length)
    max_running_requests: int | None = Field(default=None, ge=1)  # fields/schedule.py (concurrent requests)
    mem_fraction_static: float | None = Field(default=None, gt=0, lt=1)  # fields/schedule.py (weights + KV pool)
    max_prefill_tokens: int | None = Field(default=None, ge=1)  # fields/schedule.py (tokens in a prefill batch)
    # fields/schedule.py chunked_prefill_size: the chunk in tokens; -1 turns chunked prefill off.
    enable_chunked_prefill: bool | None = None
    chunked_prefill_size: int | None = Field(default=None, ge=1)
    # fields/memory.py disable_radix_cache: prefix caching (RadixAttention) is on unless disabled.
    enable_prefix_caching: bool | None = None
    kv_cache_dtype: KvCacheDtype | None = None
    quantization: QuantizationMethod | None = None
    speculative: SglangSpeculativeConfig | None = None
    ep_size: int | None = Field(default=None, ge=1)  # fields/parallel.py (--ep-size, expert parallelism)
    tool_call_parser: ToolCallParser | None = None
    reasoning_parser: ReasoningParser | None = None
    chat_template: str | None = Field(default=None, min_length=1)  # fields/serving.py: a name or a file path

    CONTEXT_KEY: ClassVar[str] = "context_length"

    @property
    def keeps_prefix_cache(self) -> bool | None:
        return self.enable_prefix_caching

    enable_lora: bool = False  # fields/lora.py
    max_loras_per_batch: int | None = Field(default=None, ge=1)  # default 8
    max_loaded_loras: int | None = Field(default=None, ge=1)
    max_lora_rank: int | None = Field(default=None, ge=1)
    lora_target_modules: LoraTargetModule | None = None  # one value: the container passes one argv token
    load_format: LoadFormat | None = None

    def conflicts(self) -> list[str]:
        """The rules between fields, each "engine: <rule>" (engine_problems prefixes the endpoint)."""
        return [f"engine: {problem}" for problem in self.problems()]

    def problems(self) -> list[str]:
        """The rules SGLang 0.5.20 enforces between these options at start-up, each with its source."""
        found = []
        if self.chunked_prefill_size is not None and self.enable_chunked_prefill is False:
            found.append("chunked_prefill_size applies only with chunked prefill on")
        lora_only = [
            n
            for n in ("max_loras_per_batch", "max_loaded_loras", "max_lora_rank", "lora_target_modules")
            if getattr(self, n) is not None
        ]
        if lora_only and not self.enable_lora:
            found.append(f"{', '.join(lora_only)} apply only with enable_lora: true")
        if self.enable_lora and (self.max_lora_rank is None or self.lora_target_modules is None):
            # arg_groups/lora_hook.py: without --lora-paths at start (adapters load later) both are required.
            found.append("enable_lora needs max_lora_rank and lora_target_modules (no adapters are loaded at start)")
        if self.max_loaded_loras is not None and self.max_loaded_loras < self.max_lora_batch:
            found.append("max_loaded_loras must be >= max_loras_per_batch (arg_groups/lora_hook.py; default 8)")
        # Without tp_size here, the system compares ep_size with the endpoint's tensor_parallel_degree, which sets it.
        if self.ep_size is not None and self.ep_size > 1 and self.tp_size is not None and self.ep_size != self.tp_size:
            # arg_groups/moe_hook.py: "The expert parallel size must be 1 or the same as the tensor parallel size"
            # (FlashInfer MoE backends); parallel_hook.py: ep_size * moe_dp_size <= tp_size.
            found.append(f"ep_size ({self.ep_size}) must be 1 or equal tp_size ({self.tp_size})")
        return found

    @property
    def max_lora_batch(self) -> int:
        """Adapters per running batch (fields/lora.py default 8)."""
        return self.max_loras_per_batch if self.max_loras_per_batch is not None else 8

    def environment(self) -> dict[str, str]:
        """The container environment: `SM_SGLANG_<FLAG>` for each option set (what the entrypoint turns into flags)."""
        if problems := self.problems():
            raise ValueError("; ".join(problems))
        env: dict[str, str] = {}
        for name in (
            "tp_size",
            "context_length",
            "max_running_requests",
            "mem_fraction_static",
            "max_prefill_tokens",
            "chunked_prefill_size",
            "kv_cache_dtype",
            "quantization",
            "ep_size",
            "tool_call_parser",
            "reasoning_parser",
            "chat_template",
            "max_loras_per_batch",
            "max_loaded_loras",
            "max_lora_rank",
            "lora_target_modules",
            "load_format",
        ):
            value = getattr(self, name)
            if value is not None:
                text = str(value)
                # sagemaker_entrypoint.sh's rule (systems/entrypoint_values.py quotes it)
                if (problem := entrypoint_value_problem(name, text, sglang_entrypoint_splits)) is not None:
                    raise ValueError(problem)
                env[ENV_PREFIX + name.upper()] = text
        if self.enable_chunked_prefill is False:
            env[f"{ENV_PREFIX}CHUNKED_PREFILL_SIZE"] = "-1"
        if self.enable_prefix_caching is False:
            env[f"{ENV_PREFIX}DISABLE_RADIX_CACHE"] = "true"
        if self.enable_lora:
            env[f"{ENV_PREFIX}ENABLE_LORA"] = "true"
        if self.speculative is not None:
            env.update(self.speculative.environment())
        return env
