"""hf-fastload: a transformers causal LM on the Hugging Face PyTorch inference container, loaded fast.

The artifact is sharded safetensors in the configured dtype (memory-mapped, no code runs on load) plus a
small `code/inference.py` handler; model_build writes and verifies it (`recipe.build`). No torch import
here: the CDK app imports this module to synthesize the endpoint.
"""

from __future__ import annotations

from typing import Literal

from endpoint_config import EndpointSpec
from systems.base import Capability, EngineOptions, EngineProfile, MaxBatchSize, MaxModelLen, ServingSystem
from systems.images import HF_CONTAINER_TRANSFORMERS, HF_PYTORCH_INFERENCE


class HfFastloadEngineOptions(EngineOptions):
    """The `engine:` keys hf-fastload accepts. It reads `decode` (the handler's decode path, HF_FASTLOAD_DECODE);
    the others are accepted and unused, as they always were (the handler batches per request and takes its
    limits from the request contract), so configs that set them stay valid. tensorrt_profile is refused
    (system 'tensorrt-byoc').

    decode: eager (default: transformers' dynamic KV cache), static-cache (a preallocated KV cache) or compiled
      (static KV cache + torch.compile of the decoding step, on GPU). Default eager: the compiled path is not yet
      shown faster on a GPU by `make bench` (no GPU run yet); a model without static-cache support under the
      container's transformers (GPT-2 in 4.49) decodes eagerly whatever is set.
    """

    max_batch_size: MaxBatchSize | None = None
    max_model_len: MaxModelLen | None = None
    rolling_batch: str | None = None
    entry_point: str | None = None
    custom_handler: bool = False
    decode: Literal["eager", "static-cache", "compiled"] = "eager"


def container_environment(endpoint: EndpointSpec) -> dict[str, str]:
    """The container's environment for one endpoint.

    SAGEMAKER_MODEL_SERVER_WORKERS=1: each worker loads its own copy of the model; an LLM fills the GPU, so one.
    SAGEMAKER_MODEL_SERVER_TIMEOUT=600: the model server's per-request/loading timeout (seconds); large
      models take minutes to load, the default 60 s kills the worker mid-load.
    SAGEMAKER_CONTAINER_LOG_LEVEL=20: INFO logs in CloudWatch (load progress, errors).
    SAGEMAKER_PROGRAM / SAGEMAKER_SUBMIT_DIRECTORY: the handler the toolkit imports (the artifact's code/).
    HF_FASTLOAD_DTYPE: the dtype the artifact was built and verified in (the manifest says the same); the
      handler computes in it on GPU and in fp32 on CPU (bf16 where the CPU has native bf16 and the artifact is bf16).
    HF_FASTLOAD_DECODE: the decode path (engine.decode; the handler's DECODE_MODES).
    """
    return {
        "SAGEMAKER_MODEL_SERVER_WORKERS": "1",
        "SAGEMAKER_MODEL_SERVER_TIMEOUT": "600",
        "SAGEMAKER_CONTAINER_LOG_LEVEL": "20",
        "SAGEMAKER_PROGRAM": "inference.py",
        "SAGEMAKER_SUBMIT_DIRECTORY": "/opt/ml/model/code",
        "HF_FASTLOAD_DTYPE": endpoint.dtype,
        "HF_FASTLOAD_DECODE": HfFastloadEngineOptions.parse(endpoint).decode,
    }


def profile(endpoint: EndpointSpec) -> EngineProfile:
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
    the recipe casts them to the endpoint's dtype. None: endpoint_config.models sizes it, or nothing does."""
    from systems.checkpoint_facts import checkpoint_of

    checkpoint = checkpoint_of(endpoint.model)
    return None if checkpoint is None else checkpoint.weight_bytes(endpoint.dtype)


SYSTEM = ServingSystem(
    name="hf-fastload",
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
    inference_components=Capability.no(
        "its Hugging Face PyTorch inference image is not documented for inference components (no AWS or Hugging Face source found)"
    ),
    profile=profile,
    estimate_weight_bytes=weight_bytes,
)
