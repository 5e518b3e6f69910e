"""lmi-trtllm: the LMI TensorRT-LLM container (djl-inference 0.33, TensorRT-LLM 0.21) with in-flight batching.

The container compiles TensorRT-LLM engines from the Hugging Face checkpoint at start ("JIT"), for the
tensor-parallel degree, dtype and length limits given in the environment. The artifact is the same model
directory as lmi-vllm (sharded safetensors + config + tokenizer at /opt/ml/model). No torch import here.
"""

from __future__ import annotations

from endpoint_config import EndpointSpec
from systems.djl_common import MODEL_LOADING_TIMEOUT_S, djl_system
from systems.djl_common.lmi import base_options, option_environment
from systems.images import DJL_TENSORRTLLM

ROLLING_BATCH = "trtllm"
# Engine compilation at start takes many minutes for a 7B model, on top of the load.
DEFAULT_STARTUP_TIMEOUT_S = 1800
# Architectures TensorRT-LLM's checkpoint converters handle (the LMI JIT path); others fail at start on a GPU,
# so the recipe refuses them at build time.
MODEL_TYPES = ("llama", "mistral", "mixtral", "gptj", "gpt2", "falcon", "qwen2", "phi", "gemma", "mpt", "gpt_bigcode")


def length_options(max_model_len: int) -> dict[str, str]:
    """TensorRT-LLM engines are built with separate prompt and output limits, not one total: the total
    engine.max_model_len is split in half (prompt up to the first half rounded up, output the rest)."""
    output = max_model_len // 2
    return {"max_input_len": str(max_model_len - output), "max_output_len": str(output)}


def container_environment(endpoint: EndpointSpec) -> dict[str, str]:
    options = base_options(endpoint, ROLLING_BATCH)
    if endpoint.engine.max_model_len is not None:
        options.update(length_options(endpoint.engine.max_model_len))
    options["model_loading_timeout"] = str(MODEL_LOADING_TIMEOUT_S)
    return option_environment(options)


SYSTEM = djl_system(
    name="lmi-trtllm",
    summary="LMI TensorRT-LLM container: engines compiled at start, in-flight batching, OPTION_* environment",
    image=DJL_TENSORRTLLM,
    environment=container_environment,
    default_startup_timeout_s=DEFAULT_STARTUP_TIMEOUT_S,
    engine_notes=(
        "Compiles TensorRT-LLM engines at container start (allow up to 30 min); one engine per "
        "tensor_parallel_degree GPUs (ml.g5.12xlarge, 4 GPUs, degree 2: 2 copies). Model types: "
        + ", ".join(MODEL_TYPES)
    ),
)

__all__ = ["SYSTEM", "container_environment", "MODEL_TYPES"]
