"""hf-fastload: a transformers causal LM on the Hugging Face PyTorch inference container, loaded fast.

The artifact is sharded safetensors in the configured dtype (memory-mapped, no code runs on load) plus a
small `code/inference.py` handler; model_build writes and verifies it (`recipe.build`). No torch import
here: the CDK app imports this module to synthesize the endpoint.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Literal

from endpoint_config import EndpointSpec
from systems.base import (
    GENERATION_AND_CHAT,
    Capability,
    EngineOptions,
    EngineProfile,
    LocalRun,
    MaxBatchSize,
    MaxModelLen,
    RequestTimeout,
    ServingSystem,
)
from systems.chat import HF_HANDLER_CHAT
from systems.images import HF_CONTAINER_TRANSFORMERS, HF_PYTORCH_INFERENCE


class HfFastloadEngineOptions(EngineOptions):
    """The `engine:` keys hf-fastload accepts. It reads `decode` (the handler's decode path, HF_FASTLOAD_DECODE);
    the others are accepted and unused, as they always were (the handler batches per request and takes its
    limits from the request contract), so configs that set them stay valid. tensorrt_profile is refused
    (system 'tensorrt-byoc').

    decode: eager (default: transformers' dynamic KV cache), static-cache (a preallocated KV cache) or compiled
      (static KV cache + torch.compile of the decoding step, on GPU). Default eager: on one H200 (8B bf16,
      docs/design/bench.md) compiled decoded 2.7x faster at batch 1 and 2.1x at 32, but traced each new batch
      size first (20-40 s), which a request would wait through; a model without static-cache support under the
      container's transformers (GPT-2 in 4.49) decodes eagerly whatever is set.
    """

    max_batch_size: MaxBatchSize | None = None
    max_model_len: MaxModelLen | None = None
    rolling_batch: str | None = None
    entry_point: str | None = None
    custom_handler: bool = False
    decode: Literal["eager", "static-cache", "compiled"] = "eager"


def container_environment(endpoint: EndpointSpec, engine: HfFastloadEngineOptions) -> dict[str, str]:
    """The container's environment for one endpoint.

    SAGEMAKER_MODEL_SERVER_WORKERS=1: each worker loads its own copy of the model; an LLM fills the GPU, so one.
    The model server's timeout is not here: the plan sets it from the endpoint's invocation timeout
      (REQUEST_TIMEOUT, model_server_timeout_environment).
    SAGEMAKER_CONTAINER_LOG_LEVEL=20: INFO logs in CloudWatch (load progress, errors).
    SAGEMAKER_PROGRAM / SAGEMAKER_SUBMIT_DIRECTORY: the handler the toolkit imports (the artifact's code/).
    HF_FASTLOAD_DTYPE: the dtype the artifact was built and verified in (the manifest says the same); the
      handler computes in it on GPU and in fp32 on CPU (bf16 where the CPU has native bf16 and the artifact is bf16).
    HF_FASTLOAD_DECODE: the decode path (engine.decode; the handler's DECODE_MODES).
    """
    return {
        "SAGEMAKER_MODEL_SERVER_WORKERS": "1",
        "SAGEMAKER_CONTAINER_LOG_LEVEL": "20",
        "SAGEMAKER_PROGRAM": "inference.py",
        "SAGEMAKER_SUBMIT_DIRECTORY": "/opt/ml/model/code",
        "HF_FASTLOAD_DTYPE": endpoint.dtype,
        "HF_FASTLOAD_DECODE": engine.decode,
    }


# The model server's timeout. The HF inference toolkit (2.6.0) starts Multi Model Server with the config file
# sagemaker-inference (1.10.1) writes: default_response_timeout = SAGEMAKER_MODEL_SERVER_TIMEOUT (default "60") and,
# when set, default_response_timeout_seconds = SAGEMAKER_MODEL_SERVER_TIMEOUT_SECONDS (aws/sagemaker-inference-toolkit
# src/sagemaker_inference/model_server.py `_generate_mms_config_properties`, environment.py; the seconds variable
# since v1.9.3). MMS 1.1.11, the image's (MMS_VERSION in aws/deep-learning-containers huggingface/pytorch/inference/
# docker/2.6), prefers default_response_timeout_seconds and otherwise reads default_response_timeout in MINUTES
# ("due to a bug that's what it did", awslabs/multi-model-server ConfigManager.getDefaultResponseTimeoutSeconds,
# commit 45711731); WorkerThread waits that long for each reply of the Python worker, the model load's included.
MMS_TIMEOUT_S, MMS_TIMEOUT_MIN = "SAGEMAKER_MODEL_SERVER_TIMEOUT_SECONDS", "SAGEMAKER_MODEL_SERVER_TIMEOUT"


def model_server_timeout_environment(request_s: int, startup_s: int) -> dict[str, str]:
    """Both variables, consistent: the seconds one MMS reads, and the minutes one (rounded up) for a toolkit that
    predates the seconds variable. One clock times every reply, the model load too: at least the startup timeout."""
    seconds = max(request_s, startup_s)
    return {MMS_TIMEOUT_S: str(seconds), MMS_TIMEOUT_MIN: str(math.ceil(seconds / 60))}


def model_server_timeout_s(
    endpoint: EndpointSpec, engine: HfFastloadEngineOptions, environment: Mapping[str, str]
) -> float:
    """The reply timeout MMS 1.1.11 applies, as sagemaker-inference 1.10.1 and MMS read the environment."""
    seconds = int(environment.get(MMS_TIMEOUT_S) or 0)  # the toolkit writes it only when set and non-zero
    return seconds if seconds > 0 else 60 * int(environment.get(MMS_TIMEOUT_MIN, "60"))


REQUEST_TIMEOUT = RequestTimeout(environment=model_server_timeout_environment, limit_s=model_server_timeout_s)


def profile(endpoint: EndpointSpec, engine: HfFastloadEngineOptions) -> EngineProfile:
    """What the compatibility checks (systems/checks.py) need: transformers 4.51.3's causal-LM mapping decides which
    architectures load, the image is CUDA 12.4 (systems/images_current.py), and the weights may fill the share of a
    GPU the size rule allows (the handler's KV cache grows per request; nothing is reserved at start)."""
    from systems.checks import WEIGHT_SHARE_OF_GPU_MEMORY

    return EngineProfile(
        engine=f"transformers=={HF_CONTAINER_TRANSFORMERS}",
        cuda="12.4",
        memory_fraction=WEIGHT_SHARE_OF_GPU_MEMORY,
        memory_source=f"the weights' share of a GPU, systems/checks.py WEIGHT_SHARE_OF_GPU_MEMORY {WEIGHT_SHARE_OF_GPU_MEMORY}",
    )


def weight_bytes(endpoint: EndpointSpec) -> float | None:
    """The artifact's weights before a build, for a model whose config.json is known (systems/checkpoint_facts.py):
    the recipe casts them to the endpoint's dtype. None: facts.models sizes it, or nothing does."""
    from systems.checkpoint_facts import checkpoint_of

    checkpoint = checkpoint_of(endpoint.model)
    return None if checkpoint is None else checkpoint.weight_bytes(endpoint.dtype)


SYSTEM: ServingSystem[HfFastloadEngineOptions] = ServingSystem(
    name="hf-fastload",
    local=LocalRun.handler(),
    engine_options=HfFastloadEngineOptions,
    recipe="systems.hf_fastload.recipe",
    summary="transformers causal LM on the Hugging Face PyTorch inference DLC, sharded safetensors, fast load",
    image=HF_PYTORCH_INFERENCE,
    environment=container_environment,
    default_download_timeout_s=600,
    default_startup_timeout_s=600,
    # torch-save: the seed recipe's pickled whole model, opt-in only (runs code on load, slower to load).
    weights_formats=("safetensors", "torch-save"),
    streaming=Capability.no(
        "its container's Hugging Face inference toolkit answers with one whole reply (handler_service.handle returns [response]; aws/sagemaker-huggingface-inference-toolkit) and calls no streaming function"
    ),
    chat=HF_HANDLER_CHAT,
    # code/inference.py answers both: "messages" as chat (chat_contract.py), else the generation contract.
    bodies=GENERATION_AND_CHAT,
    # No variable: code/inference.py gives accelerate device_map="auto" on more than one GPU, which places the layers
    # over every GPU its one worker sees (SAGEMAKER_MODEL_SERVER_WORKERS=1): at least tensor_parallel_degree of them.
    tensor_parallel=Capability.yes(
        "the handler places the layers over every GPU its one worker sees (accelerate device_map='auto'; layers, "
        "not tensor shards), so tensor_parallel_degree only sizes the fit check"
    ),
    inference_components=Capability.no(
        "its Hugging Face PyTorch inference image is not documented for inference components (no AWS or Hugging Face source found)"
    ),
    request_timeout=REQUEST_TIMEOUT,
    profile=profile,
    estimate_weight_bytes=weight_bytes,
)
