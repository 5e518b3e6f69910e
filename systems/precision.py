"""Which precisions each pinned engine runs on which GPU generation: the compute capability from which it loads a
checkpoint quantized with a method, the capability from which that runs on native tensor cores, and the activation
dtypes the method computes in; `precision_problems` says why a GPU cannot run a dtype or method.

Sources, by the short names used below (GPU facts and their sources: facts/gpus.py):
  [VLLM]     vLLM 0.30.0 wheel (0.31.0's re-read: get_min_capability by tools/generate_architectures.py --check,
             supports_fp8 by hand): platforms/cuda.py supports_fp8 = capability >= 89; quantization/utils/
             marlin_utils_fp8.py and marlin_utils_fp4.py: weight-only FP8/FP4 Marlin kernels from 75; each
             QuantizationConfig.get_min_capability (config/vllm.py refuses a method below it); csrc
             nvfp4_scaled_mm_entry.cu cutlass_scaled_mm_supports_fp4: capability >= 100 and CUDA >= 12.8 (read in
             the vllm-project/vllm source index, version not pinned: unverified at 0.30.0).
  [SGL]      SGLang 0.5.20 wheel (0.5.21's re-read by the same tool): each quantization config's
             get_min_capability (model_loader/loader.py refuses a method below it).
"""

from __future__ import annotations

from dataclasses import dataclass, field

from facts.gpus import Capability, gpu_facts
from systems.images_current import SGLANG_ENGINE, VLLM_ENGINE


# The lowest compute capability at which each pinned engine loads a checkpoint quantized with a method (the
# config.json quant_method, or the --quantization value), and the capability from which it runs that precision
# on native tensor cores instead of a weight-only fallback. Keys: the engine as systems/engine_tables names it.
@dataclass(frozen=True)
class PrecisionSupport:
    minimum: Capability  # below: the engine refuses to start
    native: Capability | None  # from here on: native tensor-core math; between: a slower weight-only kernel
    source: str = field(compare=False)
    # The activation dtypes (the engine's --dtype) the method computes in: each config class's
    # get_supported_act_dtypes, which the engine checks at start (vLLM config/vllm.py _get_quantization_config:
    # "... is not supported for quantization method"; SGLang model_loader/loader.py). None: not recorded.
    act_dtypes: tuple[str, ...] | None = None


ENGINE_PRECISION: dict[str, dict[str, PrecisionSupport]] = {
    VLLM_ENGINE: {
        "fp8": PrecisionSupport(
            75, 89, "[VLLM] Fp8Config.get_min_capability 75; supports_fp8 from 89, Marlin below", ("bf16", "fp16")
        ),
        "modelopt": PrecisionSupport(
            80, 89, "[VLLM] ModelOptFp8Config.get_min_capability 80; FP8 math from 89", ("bf16", "fp16")
        ),
        "compressed-tensors": PrecisionSupport(
            70,
            None,
            "[VLLM] CompressedTensorsConfig 70; per scheme: W8A8 FP8 89, W8A16 FP8 75, W4A4 NVFP4 75, "
            "W4A4 MXFP4 80, WNA16 75",
            ("fp32", "fp16", "bf16"),
        ),
        "mxfp4": PrecisionSupport(
            80,
            100,
            "[VLLM] Mxfp4Config.get_min_capability 80 (gpt-oss: GptOssMxfp4Config); "
            "get_supported_act_dtypes: bfloat16 only",
            ("bf16",),
        ),
        "modelopt_fp4": PrecisionSupport(
            75, 100, "[VLLM] ModelOptNvFp4Config 75 (Marlin FP4 from 75); CUTLASS FP4 from 100", ("bf16", "fp16")
        ),
        "awq": PrecisionSupport(75, None, "[VLLM] AutoAWQConfig.get_min_capability 75", ("fp16", "bf16")),
        "gptq": PrecisionSupport(60, None, "[VLLM] AutoGPTQConfig.get_min_capability 60", ("fp16", "bf16")),
    },
    SGLANG_ENGINE: {
        "fp8": PrecisionSupport(80, 89, "[SGL] Fp8Config.get_min_capability 80 (mxfp8: 100)", ("bf16", "fp16")),
        "modelopt_fp8": PrecisionSupport(89, 89, "[SGL] ModelOptFp8Config.get_min_capability 89", ("bf16", "fp16")),
        "w8a8_fp8": PrecisionSupport(89, 89, "[SGL] W8A8Fp8Config.get_min_capability 89", ("fp16", "bf16")),
        "compressed-tensors": PrecisionSupport(
            70,
            None,
            "[SGL] CompressedTensorsConfig 70; per scheme: W8A8 FP8 89, W4A4 NVFP4 100, WNA16 80",
            ("fp16", "bf16"),
        ),
        "mxfp4": PrecisionSupport(80, 100, "[SGL] Mxfp4Config.get_min_capability 80", ("bf16", "fp16")),
        "modelopt_fp4": PrecisionSupport(80, 100, "[SGL] ModelOptFp4Config.get_min_capability 80", ("bf16", "fp16")),
        "nvfp4_online": PrecisionSupport(100, 100, "[SGL] NvFp4OnlineConfig.get_min_capability 100", ("bf16", "fp16")),
        # act_dtypes not recorded: SGLang swaps AWQ/GPTQ for their Marlin configs (bf16 too) where it can.
        "awq": PrecisionSupport(75, None, "[SGL] AWQConfig.get_min_capability 75 (awq_marlin 80)"),
        "gptq": PrecisionSupport(60, None, "[SGL] GPTQConfig.get_min_capability 60 (gptq_marlin 80)"),
        "bitsandbytes": PrecisionSupport(
            70, None, "[SGL] BitsAndBytesConfig.get_min_capability 70", ("fp32", "fp16", "bf16")
        ),
    },
}


def precision_problems(gpu: str, dtype: str, engine: str | None = None, quant_method: str | None = None) -> list[str]:
    """Why `gpu` cannot run weights of `dtype` (fp16/bf16/fp32) or a checkpoint quantized with `quant_method` on
    `engine` (a key of ENGINE_PRECISION); a slower weight-only fallback is not a problem, only a refusal is."""
    facts = gpu_facts(gpu)
    found = []
    if dtype == "bf16" and not facts.bf16:
        found.append(f"bf16 needs compute capability 8.0 (Ampere) or newer; {gpu} is {facts.capability_text}: use fp16")
    if quant_method is not None:
        table = ENGINE_PRECISION.get(engine or "")
        support = table.get(quant_method) if table else None
        if support is None:
            known = ", ".join(sorted(table)) if table else "none recorded for this engine"
            found.append(f"quantization {quant_method!r} on {engine}: no recorded GPU floor; recorded: {known}")
        else:
            if facts.capability < support.minimum:
                found.append(
                    f"{engine} loads {quant_method} weights from compute capability {support.minimum / 10:.1f}; "
                    f"{gpu} is {facts.capability_text}"
                )
            if support.act_dtypes is not None and dtype not in support.act_dtypes:
                found.append(
                    f"{engine} computes {quant_method} weights in {' or '.join(support.act_dtypes)} only, "
                    f"not {dtype}; set dtype: {support.act_dtypes[0]}"
                )
    return found
