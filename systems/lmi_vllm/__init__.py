"""lmi-vllm: the current LMI container (djl-inference 0.36, LMI 27, vLLM 0.23.1) serving with vLLM in LMI's
async mode (vLLM's AsyncLLMEngine batches continuously).

Configured entirely through the container environment (see `container_environment`); the artifact is the
model directory (sharded safetensors + config + tokenizer) SageMaker mounts at /opt/ml/model. No torch import.
Image choice and the option names: systems/images.py (DJL_LMI) and docs/engine-reference.md.
"""

from __future__ import annotations

from typing import ClassVar, Literal, get_args

from endpoint_config import EndpointSpec
from facts.instances import InstanceType
from systems.base import AdapterSupport, ContainerBodies, LocalRun, LoraSizing, ServingSystem
from systems.djl_common import djl_system
from systems.djl_common.lmi import (
    LMI_INFERENCE_AMI_VERSION,
    LMI_INFERENCE_COMPONENTS,
    LMI_PLAIN_CHECKPOINT,
    LMI_STREAMING,
    LMI_TENSOR_PARALLEL,
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


# LoRA (adapters:). LMI's options, all passed to vLLM's EngineArgs (0.36.0-lmi27-dlc
# engines/python/setup/djl_python/properties_manager/: properties.py Properties.enable_lora (default False),
# vllm_rb_properties.py VllmRbProperties.max_loras (default 4, LMI's own; vLLM's is 1) and, for max_lora_rank, the
# pass-through of any option named like an EngineArgs field, get_additional_vllm_engine_args; documented together in
# serving/docs/adapters.md "Configurations": OPTION_ENABLE_LORA, OPTION_MAX_LORAS, OPTION_MAX_LORA_RANK, default 16).
# The adapter management API refuses to register an adapter unless option.enable_lora is true ("LoRA is not enabled.",
# serving/src/main/java/ai/djl/serving/http/AdapterManagementRequestHandler.java), and the async handler LMI 27 runs
# registers adapters with vLLM (lmi_vllm/vllm_async_service.py register_adapter -> add_lora) and picks one per request
# from the X-Amzn-SageMaker-Adapter-Identifier header (async_utils.py _extract_lora_adapter).
# The ranks vLLM accepts for max_lora_rank: vllm/config/lora.py MaxLoRARanks in vLLM 0.23.0 (the PyPI wheel
# vllm-0.23.0-2-cp38-abi3-manylinux_2_28_x86_64.whl, sha256 872aeb7c...31c03c; LMI 27 ships its own build
# 0.23.1.dev4+gcd87ce883, serving/docker/lmi-container-requirements.txt). vLLM refuses an adapter whose `r` exceeds it
# ("LoRA rank {r} is greater than max_lora_rank", vllm/lora/peft_helper.py PEFTHelper.validate_legal).
LoraRank = Literal[1, 8, 16, 32, 64, 128, 256, 320, 512]
LORA_RANKS: tuple[int, ...] = get_args(LoraRank)
DEFAULT_MAX_LORA_RANK = 16  # vLLM LoRAConfig.max_lora_rank; LMI leaves it (serving/docs/adapters.md: default 16)


class VllmEngineOptions(LmiVllmChatOptions):
    """lmi-vllm's `engine:` options: max_batch_size (OPTION_MAX_ROLLING_BATCH_SIZE, vLLM max_num_seqs),
    max_model_len (OPTION_MAX_MODEL_LEN), tool_call_parser and reasoning_parser (systems/lmi_vllm/chat.py) and, with
    adapters, max_lora_rank (OPTION_MAX_LORA_RANK)."""

    LORA_KEYS: ClassVar[tuple[str, ...]] = ("max_lora_rank",)

    max_lora_rank: LoraRank | None = None


def lora_sizing(endpoint: EndpointSpec, engine: VllmEngineOptions) -> LoraSizing:
    """LoRA on for the endpoint's adapters: every configured adapter may be in one batch (OPTION_MAX_LORAS = their
    count; vLLM keeps max_cpu_loras = max_loras when unset, vllm/config/lora.py), ranks up to engine.max_lora_rank
    (default 16: an adapter of a higher rank is refused at load when it is local, and by the build)."""
    rank = engine.max_lora_rank or DEFAULT_MAX_LORA_RANK
    source = "engine.max_lora_rank" if engine.max_lora_rank else f"vLLM's default max_lora_rank {DEFAULT_MAX_LORA_RANK}"
    count = len(endpoint.adapters)
    options = {"enable_lora": "true", "max_loras": str(count), "max_lora_rank": str(rank)}
    return LoraSizing(
        max_adapters=count,
        max_rank=rank,
        environment=option_environment(options),
        rank_source=source,
        allowed_ranks=LORA_RANKS,
    )


def rules(endpoint: EndpointSpec, instance: InstanceType, engine: VllmEngineOptions) -> list[str]:
    """engine.max_lora_rank sizes LoRA, which only adapters turn on."""
    if engine.max_lora_rank is not None and not endpoint.adapters:
        return [
            f"endpoint {endpoint.name!r}: engine.max_lora_rank: value {engine.max_lora_rank!r} applies "
            "only to LoRA adapters; add adapters: or remove the key"
        ]
    return []


def container_environment(endpoint: EndpointSpec, engine: VllmEngineOptions) -> dict[str, str]:
    """Async mode + entry point (systems/djl_common/lmi.py), tensor parallel degree, dtype, model location.
    OPTION_MAX_MODEL_LEN (engine.max_model_len) caps prompt + generated tokens and so the KV cache vLLM
    reserves: LMI passes option.max_model_len through to vLLM's EngineArgs.max_model_len (0.36.0-lmi27-dlc
    properties_manager/vllm_rb_properties.py get_additional_vllm_engine_args: extra options named like an
    EngineArgs field). OPTION_MODEL_LOADING_TIMEOUT matches the startup health check maximum (3600 s), so DJL
    does not kill a worker SageMaker would still wait for. Unset ones keep LMI's defaults."""
    options = base_options(endpoint, ENTRY_POINT, engine)
    if engine.max_model_len is not None:
        options["max_model_len"] = str(engine.max_model_len)
    options.update(engine.chat_options())
    lora = lora_sizing(endpoint, engine).environment if endpoint.adapters else {}
    return {**option_environment(options), **lora}


SYSTEM: ServingSystem[VllmEngineOptions] = djl_system(
    engine_options=VllmEngineOptions,
    name="lmi-vllm",
    local=LocalRun.stand_in("lmi27", "LMI's front end (DJL Serving, Java, with djl_python) ships in the image only"),
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
    plain_checkpoint=LMI_PLAIN_CHECKPOINT,
    # Its image reads the checkpoint with its own transformers, a 4.x at the floor systems/images.py records.
    rewrite_metadata_for_image=True,
    tensor_parallel=LMI_TENSOR_PARALLEL,
    chat=CHAT,
    # LMI maps "inputs" to vLLM's prompt and answers "messages" as chat (lmi_vllm/request_response_utils.py). Which
    # field its vLLM 0.23 puts reasoning in is unverified here: none is declared, so a check reads the content.
    # Its reply to {"inputs"} is one {"generated_text"} object, not the toolkit's list (deepjavalibrary/djl-serving@
    # 0.36.0-lmi27-dlc engines/python/setup/djl_python/lmi_vllm/request_response_utils.py:137-146), and of a list of
    # prompts the first one's only (convert_lmi_schema_to_completion_request passes the list as vLLM's prompt;
    # convert_completion_response_to_lmi_schema keeps `response.choices[0]`): one prompt a body. The parameters it does
    # not map go into vLLM's CompletionRequest as they are (`completion_dict.update(parameters)`), which has min_tokens
    # and use_beam_search but no min_new_tokens or num_beams field and ignores a field it does not define (vLLM
    # 0.30.0 completion/protocol.py and OpenAIBaseModel, read in .venv-vllm; LMI 27's 0.23.1 build is not read here).
    bodies=ContainerBodies(
        frozenset({"generation", "openai-chat"}),
        generation_reply="object",
        prompts_per_body=1,
        unread_parameters=frozenset({"min_new_tokens", "num_beams"}),
    ),
    # LMI 27 installs vLLM 0.23.1.dev4+gcd87ce883 (lmi-container-requirements.txt); the nearest release read: 0.23.0.
    model_registry="vllm==0.23.0",
    adapters=AdapterSupport(
        True,
        "LMI's adapter API registers each adapter inference component with vLLM (option.enable_lora, max_loras, "
        "max_lora_rank)",
        sizing=lora_sizing,
    ),
    rules=rules,
)

__all__ = ["SYSTEM", "container_environment", "ENTRY_POINT"]
