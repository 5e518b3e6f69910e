"""What the `vllm` and `sglang` systems share: the AWS engine DLCs serve the engine's own OpenAI server on SageMaker's
port 8080 (/ping, /invocations), load a plain model directory from /opt/ml/model, and run CUDA 13.0.

The artifact is the checkpoint's own files, copied and verified (systems/checkpoint_artifact.py); the engine casts
the weights to the endpoint's dtype when it loads them (--dtype). No torch import: the CDK app imports this.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping
from typing import Any

from endpoint_config import EndpointSpec
from facts.gpus import AMI_DRIVERS, CUDA
from facts.instances import InstanceType

from .base import (
    AdapterSupport,
    Capability,
    ChatCapability,
    E,
    EngineOptions,
    EngineProfile,
    RequestTimeout,
    ServingSystem,
    StreamedWeights,
)
from .checkpoint_facts import checkpoint_of

# The engines' --dtype for the endpoint's dtype: vLLM 0.30.0 config/model.py ModelDType and SGLang 0.5.20
# arg_groups/fields/model.py `dtype` choices both take "float16", "bfloat16", "float32".
DTYPE_FLAG = {"fp16": "float16", "bf16": "bfloat16", "fp32": "float32"}
# The CUDA 13.0 images need NVIDIA driver >= 580 (facts/gpus.py CUDA, [CUDA-MV]); of the
# ProductionVariant.InferenceAmiVersion values botocore 1.44.8 lists, only this one has it (gpus.py AMI_DRIVERS, from
# the botocore documentation of the enum). The vLLM DLC's own docs say "GPU deployments require inference_ami_version
# - the default SageMaker host AMI has incompatible NVIDIA drivers for CUDA 13.0 images"
# (aws/deep-learning-containers docs/vllm/deployment/sagemaker.md).
INFERENCE_AMI_VERSION = "al2023-ami-sagemaker-inference-gpu-4-1"
assert AMI_DRIVERS[INFERENCE_AMI_VERSION] >= CUDA["13.0"].min_driver
# The engines profile memory, load the weights and capture CUDA graphs before /ping answers: minutes on a 30B model
# (the artifact's size adds to these floors, ServingSystem.startup_timeout_s).
DEFAULT_DOWNLOAD_TIMEOUT_S = 600
DEFAULT_STARTUP_TIMEOUT_S = 900

# Bytes of one cached K or V element for the engines' kv_cache_dtype values; "auto" (None here) is the activation
# dtype's. A value missing here leaves the cache out of the fit check rather than guess (refusals must be sure).
KV_ELEMENT_BYTES: dict[str, float] = {
    "float16": 2,
    "bfloat16": 2,
    "bf16": 2,
    "fp8": 1,
    "fp8_e4m3": 1,
    "fp8_e5m2": 1,
    "fp8_inc": 1,
    "mxfp8": 1,
}
# Nominal bits per weight of the methods that quantize an unquantized checkpoint while loading: a lower bound of
# the weights' bytes (scales and the unquantized embeddings come on top), so the fit check refuses only a sure
# overflow. vLLM 0.30.0 RUNTIME_QUANTIZATION and SGLang 0.5.20's (systems/*/options.py).
RUNTIME_QUANTIZATION_BITS: dict[str, float] = {
    "fp8": 8,
    "fp8_per_tensor": 8,
    "fp8_per_block": 8,
    "fp8_per_channel": 8,
    "mxfp8": 8,
    "int8_per_channel_weight_only": 8,
    "mxfp4": 4,
    "nvfp4_per_token": 4,
    "nvfp4_online": 4,
    "quark_mxfp4": 4,
}


def kv_element_bytes(kv_cache_dtype: str | None) -> float | None:
    """The profile's kv_cache_bytes: None for "auto" (the activation dtype), 0 for a dtype not recorded here."""
    if kv_cache_dtype is None or kv_cache_dtype == "auto":
        return None
    return KV_ELEMENT_BYTES.get(kv_cache_dtype, 0.0)


def artifact_weight_bytes(ep: EndpointSpec) -> float | None:
    """The weights the artifact will hold before a build (the checkpoint's files as they are: the recipe copies
    them), for the timeouts; None when the model is neither local nor a known checkpoint."""
    checkpoint = checkpoint_of(ep.model)
    return None if checkpoint is None else checkpoint.artifact_bytes()


# Both engines answer OpenAI chat completions (and completions) on /invocations and on /v1/chat/completions, and
# stream them as server-sent events ("data: {chat.completion.chunk}" lines, "data: [DONE]") when the body says
# "stream": true: vLLM 0.30.0 entrypoints/serve/sagemaker/api_router.py + entrypoints/generate/factories.py
# (ChatCompletionRequest, then CompletionRequest), SGLang 0.5.20 srt/entrypoints/http_server.py (/invocations takes
# a ChatCompletionRequest). Neither accepts this project's {"inputs", "parameters"} body.
OPENAI_STREAMING = Capability.yes(
    "the engine's OpenAI server streams chat completions as server-sent events on /invocations "
    '(InvokeEndpointWithResponseStream) for an OpenAI chat body with "stream": true'
)


def _no_request_limit_environment(request_s: int, startup_s: int) -> dict[str, str]:
    return {}


def _no_request_limit(endpoint: EndpointSpec, engine: EngineOptions, environment: Mapping[str, str]) -> float:
    return math.inf


# Neither engine's HTTP server limits how long one request runs: vLLM 0.30.0 serves with uvicorn.Config(app,
# **uvicorn_kwargs) (vllm/entrypoints/launchers/launcher.py serve_http; only the keep-alive is set, envs.py
# VLLM_HTTP_TIMEOUT_KEEP_ALIVE), SGLang 0.5.20 with uvicorn and timeout_keep_alive only
# (sglang/srt/entrypoints/http_server.py). uvicorn.Config's timeouts (0.54.0, read here: keep-alive, notify,
# graceful shutdown, worker health check, websocket ping) bound no request; the images' own uvicorn release is
# unverified. SageMaker's invocation timeout ends a request.
ENGINE_SERVER_REQUEST_TIMEOUT: RequestTimeout[Any] = RequestTimeout(
    environment=_no_request_limit_environment, limit_s=_no_request_limit
)


def tensor_parallel_problems(endpoint: EndpointSpec, key: str, value: int | None) -> list[str]:
    """The engine's own tensor-parallel size (engine.<key>: vLLM's tensor_parallel_size, SGLang's tp_size) set
    apart from tensor_parallel_degree, which renders it (and sizes an inference component's GPUs)."""
    degree = endpoint.tensor_parallel_degree
    if value is None or value == degree:
        return []
    return [
        f"endpoint {endpoint.name!r}: engine.{key}: value {value} differs from tensor_parallel_degree {degree}, which "
        f"sets it (and an inference component's GPUs); remove engine.{key}"
    ]


def openai_chat(how: str, tool_calls: Callable[[E], bool]) -> ChatCapability[E]:
    """The engines' own chat completions on /invocations (the route OPENAI_STREAMING names): the model's chat
    template, tool calls parsed where the endpoint configures a parser (`tool_calls`), JSON schemas and a named
    tool_choice by the engine's structured outputs."""
    return ChatCapability.native(how, constrained_decoding=True, tool_calls=tool_calls, engine_server=True)


# The engine images start from the model data directory as it is: the vLLM entrypoint passes /opt/ml/model as --model
# when SM_VLLM_MODEL is unset (systems/vllm), SGLang's --model-path defaults to /opt/ml/model (systems/sglang), and
# the artifact they are given is the checkpoint's own files (systems/checkpoint_artifact.py).
PLAIN_CHECKPOINT = Capability.yes(
    "the engine reads the checkpoint's own files (config.json, tokenizer, safetensors) from /opt/ml/model, and "
    "everything else from its environment"
)


def engine_server_system(
    *,
    engine_options: type[E],
    environment: Callable[[EndpointSpec, E], dict[str, str]],
    profile: Callable[[EndpointSpec, E], EngineProfile],
    rules: Callable[[EndpointSpec, InstanceType, E], list[str]],
    chat: ChatCapability[E],
    adapters: AdapterSupport[E],
    checkpoint_rules: Callable[[EndpointSpec, E, Any], list[str]] | None = None,
    streamed_weights: StreamedWeights[E] | None = None,
    **fields: Any,
) -> ServingSystem[E]:
    """An engine DLC's system (vllm, sglang): its hooks (typed against its options class E) and `fields` (name, image,
    bodies, ...) are its own; what both share is set here. The images are GPU images only (vllm.json, sglang.json), on
    the CUDA 13.0 AMI; the engine's OpenAI server streams and limits no request; the artifact is the checkpoint's
    own files (their size sizes the timeouts); the model data comes from S3 through SageMaker, so the engine needs
    no network unless it streams the weights itself (ServingSystem.network_isolation_default)."""
    return ServingSystem(
        engine_options=engine_options,
        environment=environment,
        profile=profile,
        rules=rules,
        chat=chat,
        adapters=adapters,
        checkpoint_rules=checkpoint_rules,
        streamed_weights=streamed_weights,
        gpu_only=True,
        default_download_timeout_s=DEFAULT_DOWNLOAD_TIMEOUT_S,
        default_startup_timeout_s=DEFAULT_STARTUP_TIMEOUT_S,
        inference_ami_version=INFERENCE_AMI_VERSION,
        streaming=OPENAI_STREAMING,
        request_timeout=ENGINE_SERVER_REQUEST_TIMEOUT,
        estimate_weight_bytes=artifact_weight_bytes,
        network_isolation=True,
        plain_checkpoint=PLAIN_CHECKPOINT,
        **fields,
    )


__all__ = [
    "PLAIN_CHECKPOINT",
    "DEFAULT_DOWNLOAD_TIMEOUT_S",
    "ENGINE_SERVER_REQUEST_TIMEOUT",
    "DEFAULT_STARTUP_TIMEOUT_S",
    "DTYPE_FLAG",
    "INFERENCE_AMI_VERSION",
    "KV_ELEMENT_BYTES",
    "OPENAI_STREAMING",
    "RUNTIME_QUANTIZATION_BITS",
    "artifact_weight_bytes",
    "engine_server_system",
    "kv_element_bytes",
    "openai_chat",
    "tensor_parallel_problems",
]
