"""sglang: the AWS SGLang container for SageMaker (the SGLang release of systems/images_current.py SGLANG_DLC).

The container's entrypoint turns every `SM_SGLANG_<FLAG>` variable into SGLang's `--<flag>` (systems/sglang/options.py
says how, from its source), adds --port 8080, --host 0.0.0.0 and --model-path /opt/ml/model unless set, and runs
`python3 -m sglang.launch_server`. The artifact is the checkpoint's own files in the uncompressed S3 prefix SageMaker
mounts at /opt/ml/model. No torch import.

Streaming the weights from S3 is not offered: SGLang 0.5.20 itself loads an s3:// --model-path with the Run:ai
streamer (srt/arg_groups/model_path_hook.py sets load_format runai_streamer), but its image is built with the
`all` extra (sgl-project/sglang docker/Dockerfile `pip install -e "python[${BUILD_TYPE}]"`, BUILD_TYPE=all), which
brings runai-model-streamer through `diffusion` without its `s3` extra (sglang 0.5.20 METADATA: the s3 backend is
only in the `runai` extra), so whether the DLC can read S3 this way is unverified.
"""

from __future__ import annotations

from typing import ClassVar

from endpoint_config import EndpointSpec
from facts.instances import InstanceType

from ..base import AdapterSupport, Capability, ContainerBodies, EngineProfile, EngineSeries, LocalRun, ServingSystem
from ..engine_systems import (
    DTYPE_FLAG,
    INFERENCE_AMI_VERSION,
    engine_server_system,
    kv_element_bytes,
    openai_chat,
    tensor_parallel_problems,
)
from ..images_current import SGLANG_DLC, facts_of
from .options import ENGINE_PROJECT, ENGINE_VERSION, ENV_PREFIX, RUNTIME_QUANTIZATION, SglangOptions

ENGINE = f"{ENGINE_PROJECT}=={ENGINE_VERSION}"


class SglangEngineOptions(SglangOptions):
    """The `sglang` system's `engine:` options: SGLang's own (SglangOptions), each rendered as SM_SGLANG_<FLAG>."""

    GPU_KEYS: ClassVar[tuple[str, ...]] = ("quantization", "kv_cache_dtype")
    LORA_KEYS: ClassVar[tuple[str, ...]] = ("enable_lora", "max_lora_rank")

    HINTS: ClassVar[dict[str, str]] = {
        "max_batch_size": "SGLang's name for concurrent requests is max_running_requests",
        "max_num_seqs": "SGLang's name for concurrent requests is max_running_requests",
        "max_model_len": "SGLang's name for it is context_length",
        "tensor_parallel_size": "set tensor_parallel_degree (it renders SGLang's --tp-size)",
        "stream_weights_from_s3": "not offered for sglang: whether its image has the Run:ai streamer's S3 backend is "
        "unverified (systems/sglang/__init__.py); system 'vllm' offers it",
    }


def default_memory_fraction(gpu_memory_gib: float, tensor_parallel: int) -> float:
    """An upper bound of the mem_fraction_static SGLang picks when none is given: (GPU memory - reserved) / GPU
    memory with the smallest reserve its rule can give, 1536 MiB + tp/8 GiB (srt/arg_groups/memory_hook.py
    handle_gpu_memory_settings; its other branches reserve more: activations, CUDA graphs, >= 10 GiB on GPUs over
    60 GiB). An upper bound, so the fit check refuses only what cannot fit."""
    total_mib = gpu_memory_gib * 1024
    reserved_mib = 1536 + tensor_parallel / 8 * 1024
    return round((total_mib - reserved_mib) / total_mib, 3)


def container_environment(endpoint: EndpointSpec, engine: SglangEngineOptions) -> dict[str, str]:
    """The engine options as SM_SGLANG_* variables, plus the tensor-parallel size (tensor_parallel_degree), the
    dtype the engine casts the weights to. --model-path stays the entrypoint's default, /opt/ml/model, where SageMaker
    mounts the artifact. The served model name is the plan's (served_names_environment)."""
    env = engine.environment()
    env[f"{ENV_PREFIX}TP_SIZE"] = str(endpoint.tensor_parallel_degree)
    env[f"{ENV_PREFIX}DTYPE"] = DTYPE_FLAG[endpoint.dtype]
    if endpoint.engine_metrics.detailed_observability:
        # SGLang serves /metrics only with --enable-metrics (server_args.py; CloudWatch User Guide, "Collecting SGLang
        # metrics with OTel Container Insights": without it "the scrape fails"): SageMaker's detailed observability
        # scrapes it for the engine panel and alarm (stacks/engine_metrics.py).
        env[f"{ENV_PREFIX}ENABLE_METRICS"] = "true"
    return dict(sorted(env.items()))


def served_names_environment(names: tuple[str, ...]) -> dict[str, str]:
    """--served-model-name takes one name in SGLang 0.5.20, "the model name returned by the v1/models endpoint"
    (srt/arg_groups/fields/serving.py); its chat handler does not check a request's `model` against it and echoes
    the request's (srt/entrypoints/openai/serving_chat.py): the SageMaker endpoint's name."""
    return {f"{ENV_PREFIX}SERVED_MODEL_NAME": names[0]}


def profile(endpoint: EndpointSpec, engine: SglangEngineOptions) -> EngineProfile:
    fraction = engine.mem_fraction_static
    instance = endpoint.instance
    return EngineProfile(
        engine=ENGINE,
        cuda=facts_of(SGLANG_DLC).cuda,
        memory_fraction=fraction
        if fraction is not None
        else default_memory_fraction(instance.gpu_memory_gib, endpoint.tensor_parallel_degree),
        memory_source="engine.mem_fraction_static (weights + KV cache pool)"
        if fraction is not None
        else "at most what SGLang's default mem_fraction_static leaves (srt/arg_groups/memory_hook.py)",
        max_model_len=engine.context_length,
        context_option="engine.context_length",
        kv_cache_bytes=kv_element_bytes(engine.kv_cache_dtype),
        runtime_quantization=engine.quantization,
        quantizes_at_load=RUNTIME_QUANTIZATION,
        # SGLang sizes its KV pool from what is left and refuses only an empty pool
        # (srt/model_executor/pool_configurator.py "Not enough memory"); a long request then waits or is cut.
        reserves_full_sequence=False,
    )


def rules(endpoint: EndpointSpec, instance: InstanceType, engine: SglangEngineOptions) -> list[str]:
    found = tensor_parallel_problems(endpoint, "tp_size", engine.tp_size)
    degree = endpoint.tensor_parallel_degree
    if not found and engine.ep_size is not None and engine.ep_size > 1 and engine.ep_size != degree:
        # srt/arg_groups/moe_hook.py: "The expert parallel size must be 1 or the same as the tensor parallel size".
        found.append(
            f"endpoint {endpoint.name!r}: engine.ep_size: value {engine.ep_size} must be 1 or equal the tensor "
            f"parallel size, tensor_parallel_degree {degree}"
        )
    return found


def parses_tool_calls(engine: SglangEngineOptions) -> bool:
    """Whether replies carry parsed tool calls: the engine parses them only with a tool-call parser configured."""
    return engine.tool_call_parser is not None


SYSTEM: ServingSystem[SglangEngineOptions] = engine_server_system(
    name="sglang",
    metrics=EngineSeries(
        queue="sglang:num_queue_reqs",
        kv_cache="sglang:token_usage",
        prompt_tokens="sglang:prompt_tokens_total",
        generation_tokens="sglang:generation_tokens_total",
        ttft_histogram="sglang:time_to_first_token_seconds",
        source="SGLang python/sglang/srt/metrics/collector.py",
    ),
    example="sglang-qwen3-30b-a3b.yaml",
    # Searched on PyPI, 2026-11-27: the sglang==0.5.20 wheel needs CUDA (cuda-python>=13, flashinfer cu13).
    local=LocalRun.stand_in(
        "sglang-http", "no CPU build of SGLang 0.5.20 on the package registries (its wheel needs CUDA)"
    ),
    summary=f"the AWS SGLang container for SageMaker (SGLang {ENGINE_VERSION}), SM_SGLANG_* options, the checkpoint "
    "as it is",
    recipe="systems.sglang.recipe",
    image=SGLANG_DLC,
    engine_options=SglangEngineOptions,
    environment=container_environment,
    chat=openai_chat(
        f"SGLang {ENGINE_VERSION}'s OpenAI server answers chat completions on /invocations (sglang/srt/entrypoints/"
        "http_"
        "server.py, openai/serving_chat.py): the model's chat template, tool calls parsed with engine.tool_ca"
        "ll_parser, JSON schemas and a named tool_choice by its grammar backend",
        parses_tool_calls,
    ),
    # /invocations takes a ChatCompletionRequest only (srt/entrypoints/http_server.py), so a prompt travels as a
    # one-message chat; reasoning comes in the message's `reasoning_content` (srt/entrypoints/openai/protocol.py
    # ChatMessage).
    # enable_thinking false in chat_template_kwargs is what SGLang itself sets for reasoning_effort "none"
    # (srt/entrypoints/openai/protocol.py ChatCompletionRequest.reasoning_effort).
    bodies=ContainerBodies(
        frozenset({"openai-chat"}),
        reasoning_field="reasoning_content",
        thinking_off={"chat_template_kwargs": {"enable_thinking": False}},
        chat_streams_sse=True,  # an OpenAI server: chat.completion.chunk events, then `data: [DONE]`
    ),
    served_names_environment=served_names_environment,
    model_registry=ENGINE,
    tensor_parallel=Capability.yes("SM_SGLANG_TP_SIZE, which the image turns into --tp-size"),
    inference_components=Capability.yes(
        "one SGLang server per component copy, tp_size = the copy's GPUs (tensor_parallel_degree)"
    ),
    # Read in the sglang 0.5.20 wheel (PyPI sglang-0.5.20-cp311-cp311-manylinux_2_34_x86_64.whl, sha256 15735270...
    # 8f8513c), sglang/srt/entrypoints/http_server.py: its SageMaker routes are GET /ping and POST /invocations
    # (chat only); adapters load through its own POST /load_lora_adapter {lora_name, lora_path}; nothing imports
    # model_hosting_container_standards or reads X-Amzn-SageMaker-Adapter-Identifier, and the DLC's entrypoint runs
    # `python3 -m sglang.launch_server` as it is (docs/engine-reference.md). Re-read in the 0.5.21 wheel: the same.
    adapters=AdapterSupport.no(
        f"SGLang {ENGINE_VERSION} has no SageMaker POST /adapters route and ignores the X-Amzn-SageMaker-Adapter-"
        "Identifier "
        "header (sglang/srt/entrypoints/http_server.py serves only /ping and /invocations for SageMaker), so an "
        "adapter inference component could neither be loaded nor invoked; use system vllm for adapters"
    ),
    profile=profile,
    rules=rules,
    engine_notes=(
        f"SGLang's OpenAI server, configured by SM_SGLANG_* variables; needs InferenceAmiVersion "
        f"{INFERENCE_AMI_VERSION} (NVIDIA driver 580) for its CUDA 13.0 image. Clients send OpenAI chat completions."
    ),
)

__all__ = ["ENGINE", "SYSTEM", "SglangEngineOptions", "container_environment", "default_memory_fraction", "profile"]
