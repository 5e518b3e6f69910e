"""hf-fastload: a transformers causal LM on the Hugging Face PyTorch inference container, loaded fast.

The artifact is sharded safetensors in the configured dtype (memory-mapped, no code runs on load) plus a
small `code/inference.py` handler; model_build writes and verifies it (`recipe.build`). No torch import
here: the CDK app imports this module to synthesize the endpoint.
"""

from __future__ import annotations

from endpoint_config import EndpointSpec
from systems.base import ServingSystem, SystemEngineOptions
from systems.images import HF_PYTORCH_INFERENCE


class HfFastloadEngineOptions(SystemEngineOptions):
    """The `engine:` keys hf-fastload accepts. It reads none of them (the handler batches per request and takes
    its limits from the request contract); they are accepted and unused, as they always were, so configs that
    set them stay valid. tensorrt_profile is refused (system 'tensorrt-byoc')."""

    max_batch_size: int | None = None
    max_model_len: int | None = None
    rolling_batch: str | None = None
    entry_point: str | None = None
    custom_handler: bool = False


def container_environment(endpoint: EndpointSpec) -> dict[str, str]:
    """The container's environment for one endpoint.

    SAGEMAKER_MODEL_SERVER_WORKERS=1: each worker loads its own copy of the model; an LLM fills the GPU, so one.
    SAGEMAKER_MODEL_SERVER_TIMEOUT=600: the model server's per-request/loading timeout (seconds); large
      models take minutes to load, the default 60 s kills the worker mid-load.
    SAGEMAKER_CONTAINER_LOG_LEVEL=20: INFO logs in CloudWatch (load progress, errors).
    SAGEMAKER_PROGRAM / SAGEMAKER_SUBMIT_DIRECTORY: the handler the toolkit imports (the artifact's code/).
    HF_FASTLOAD_DTYPE: the dtype the artifact was built and verified in (the manifest says the same).
    """
    return {
        "SAGEMAKER_MODEL_SERVER_WORKERS": "1",
        "SAGEMAKER_MODEL_SERVER_TIMEOUT": "600",
        "SAGEMAKER_CONTAINER_LOG_LEVEL": "20",
        "SAGEMAKER_PROGRAM": "inference.py",
        "SAGEMAKER_SUBMIT_DIRECTORY": "/opt/ml/model/code",
        "HF_FASTLOAD_DTYPE": endpoint.dtype,
    }


SYSTEM = ServingSystem(
    name="hf-fastload",
    engine_options=HfFastloadEngineOptions,
    recipe="systems.hf_fastload.recipe",
    summary="transformers causal LM on the Hugging Face PyTorch inference DLC, sharded safetensors, fast load",
    image=HF_PYTORCH_INFERENCE,
    environment=container_environment,
    default_download_timeout_s=600,
    default_startup_timeout_s=600,
)
