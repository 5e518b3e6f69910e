"""lmi-vllm: the current LMI container (djl-inference 0.38, lmi 29) serving with vLLM's continuous batching.

Configured entirely through the container environment (see `container_environment`); the artifact is the
model directory (sharded safetensors + config + tokenizer) SageMaker mounts at /opt/ml/model. No torch import.
"""

from __future__ import annotations

from endpoint_config import EndpointSpec
from systems.djl_common import MODEL_LOADING_TIMEOUT_S, djl_system
from systems.djl_common.lmi import base_options, option_environment
from systems.images import DJL_LMI

ROLLING_BATCH = "vllm"
# vLLM profiles memory and captures CUDA graphs for each batch size at start: minutes on a 7B model.
DEFAULT_STARTUP_TIMEOUT_S = 900


def container_environment(endpoint: EndpointSpec) -> dict[str, str]:
    """OPTION_ROLLING_BATCH=vllm: continuous batching by vLLM. OPTION_MAX_ROLLING_BATCH_SIZE (engine.max_batch_size)
    caps the sequences in flight; OPTION_MAX_MODEL_LEN (engine.max_model_len) caps prompt + generated tokens
    and so the KV cache vLLM reserves. Unset ones keep LMI's defaults. OPTION_MODEL_LOADING_TIMEOUT matches the
    startup health check maximum (3600 s), so DJL does not kill a worker SageMaker would still wait for."""
    options = base_options(endpoint, ROLLING_BATCH)
    if endpoint.engine.max_model_len is not None:
        options["max_model_len"] = str(endpoint.engine.max_model_len)
    options["model_loading_timeout"] = str(MODEL_LOADING_TIMEOUT_S)
    return option_environment(options)


SYSTEM = djl_system(
    name="lmi-vllm",
    summary="LMI (DJL Serving) with vLLM continuous batching, configured by OPTION_* environment variables",
    image=DJL_LMI,
    environment=container_environment,
    default_startup_timeout_s=DEFAULT_STARTUP_TIMEOUT_S,
    engine_notes=(
        "LMI starts one vLLM engine per tensor_parallel_degree GPUs (ml.g5.12xlarge, 4 GPUs, degree 2: 2 copies); "
        "each batches requests continuously, so scale on concurrent requests per copy."
    ),
)

__all__ = ["SYSTEM", "container_environment"]
