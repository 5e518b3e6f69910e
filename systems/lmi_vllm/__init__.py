"""lmi-vllm: the current LMI container (djl-inference 0.36, LMI 27, vLLM 0.23.1) serving with vLLM in LMI's
async mode (vLLM's AsyncLLMEngine batches continuously).

Configured entirely through the container environment (see `container_environment`); the artifact is the
model directory (sharded safetensors + config + tokenizer) SageMaker mounts at /opt/ml/model. No torch import.
Image choice and the option names: systems/images.py (DJL_LMI) and docs/engine-reference.md.
"""

from __future__ import annotations

from endpoint_config import EndpointSpec
from systems.djl_common import djl_system
from systems.djl_common.lmi import (
    LMI_INFERENCE_AMI_VERSION,
    LMI_INFERENCE_COMPONENTS,
    LMI_STREAMING,
    base_options,
    option_environment,
)
from systems.images import DJL_LMI
from systems.lmi_vllm.chat import CHAT, LmiVllmChatOptions

# The async vLLM handler LMI 27 recommends when async_mode=true on its vLLM image (SERVING_FEATURES=vllm):
# deepjavalibrary/djl-serving 0.36.0-lmi27-dlc engines/python/src/main/java/ai/djl/python/engine/PyModel.java,
# `recommendedEntryPoint = "djl_python.lmi_vllm.vllm_async_service"`; the module is
# engines/python/setup/djl_python/lmi_vllm/vllm_async_service.py there. It also accepts LMI's
# {"inputs", "parameters"} request (lmi_vllm/request_response_utils.py maps "inputs" to vLLM's "prompt").
ENTRY_POINT = "djl_python.lmi_vllm.vllm_async_service"
# vLLM profiles memory and captures CUDA graphs for each batch size at start: minutes on a 7B model.
DEFAULT_STARTUP_TIMEOUT_S = 900


class VllmEngineOptions(LmiVllmChatOptions):
    """lmi-vllm's `engine:` options: max_batch_size (OPTION_MAX_ROLLING_BATCH_SIZE, vLLM max_num_seqs),
    max_model_len (OPTION_MAX_MODEL_LEN), tool_call_parser and reasoning_parser (systems/lmi_vllm/chat.py)."""


def container_environment(endpoint: EndpointSpec) -> dict[str, str]:
    """Async mode + entry point (systems/djl_common/lmi.py), tensor parallel degree, dtype, model location.
    OPTION_MAX_MODEL_LEN (engine.max_model_len) caps prompt + generated tokens and so the KV cache vLLM
    reserves: LMI passes option.max_model_len through to vLLM's EngineArgs.max_model_len (0.36.0-lmi27-dlc
    properties_manager/vllm_rb_properties.py get_additional_vllm_engine_args: extra options named like an
    EngineArgs field). OPTION_MODEL_LOADING_TIMEOUT matches the startup health check maximum (3600 s), so DJL
    does not kill a worker SageMaker would still wait for. Unset ones keep LMI's defaults."""
    options = base_options(endpoint, ENTRY_POINT)
    engine = VllmEngineOptions.parse(endpoint)
    if engine.max_model_len is not None:
        options["max_model_len"] = str(engine.max_model_len)
    options.update(engine.chat_options())
    return option_environment(options)


SYSTEM = djl_system(
    engine_options=VllmEngineOptions,
    name="lmi-vllm",
    recipe="systems.lmi_vllm.recipe",
    summary="LMI (DJL Serving) with vLLM in async mode, configured by OPTION_* environment variables",
    image=DJL_LMI,
    environment=container_environment,
    default_startup_timeout_s=DEFAULT_STARTUP_TIMEOUT_S,
    # CUDA 13.0 image (cu130): see systems/djl_common/lmi.py LMI_INFERENCE_AMI_VERSION.
    inference_ami_version=LMI_INFERENCE_AMI_VERSION,
    engine_notes=(
        "LMI starts one vLLM engine per tensor_parallel_degree GPUs (ml.g5.12xlarge, 4 GPUs, degree 2: 2 copies); "
        "each batches requests continuously (LMI async mode), so scale on concurrent requests per copy. "
        f"Needs InferenceAmiVersion {LMI_INFERENCE_AMI_VERSION} (NVIDIA driver 580) for its CUDA 13 image."
    ),
    streaming=LMI_STREAMING,
    inference_components=LMI_INFERENCE_COMPONENTS,
    chat=CHAT,
    # LMI 27 installs vLLM 0.23.1.dev4+gcd87ce883 (lmi-container-requirements.txt); the nearest release read: 0.23.0.
    model_registry="vllm==0.23.0",
)

__all__ = ["SYSTEM", "container_environment", "ENTRY_POINT"]
