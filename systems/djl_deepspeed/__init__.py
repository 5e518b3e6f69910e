"""djl-deepspeed (legacy): DJL Serving's DeepSpeed engine, tensor parallel with kernel injection.

Upstream dropped DeepSpeed from LMI after 0.27.0, so this is pinned to the last image that has it
(`0.27.0-deepspeed0.12.6-cu121`); the replacement is lmi-vllm. The artifact is the model directory DJL
reads (serving.properties + sharded safetensors + config + tokenizer), mounted at /opt/ml/model; the whole
engine configuration lives in serving.properties (see `serving_properties`). No torch import here.
"""

from __future__ import annotations

from typing import Literal

from endpoint_config import EndpointSpec
from systems.base import LocalRun, MaxBatchSize, MaxModelLen, ServingSystem
from systems.djl_common import DjlEngineOptions, handler_serving_properties, legacy_djl_system
from systems.images import DJL_DEEPSPEED_LEGACY

ENTRY_POINT = "djl_python.deepspeed"
# The 0.27 DeepSpeed handler's own start can take minutes (checkpoint load + kernel injection on each GPU).
DEFAULT_STARTUP_TIMEOUT_S = 900


class DeepSpeedEngineOptions(DjlEngineOptions):
    """The `engine:` options djl-deepspeed implements (serving.properties keys in `serving_properties`)."""

    custom_handler: bool = False  # ship our model.py as the entry point
    max_batch_size: MaxBatchSize | None = None  # batch_size (+ max_batch_delay): DJL dynamic batching
    max_model_len: MaxModelLen | None = None  # option.max_tokens
    rolling_batch: Literal["disable"] | None = None  # GPT-J is no DeepSpeed rolling-batch architecture
    entry_point: Literal["djl_python.deepspeed"] | None = None


def serving_properties(endpoint: EndpointSpec, engine: DeepSpeedEngineOptions) -> dict[str, str]:
    """serving.properties of one endpoint (the recipe writes it; the tests compare the parsed file with it).

    option.model_id=/opt/ml/model: the weights sit next to serving.properties in the model data SageMaker
      mounts there. DJL 0.27 falls back to the model directory when model_id is unset; naming it makes the
      handler's `model_id or model_dir` choice explicit and keeps the artifact self-describing.
    option.rolling_batch=disable: GPT-J is not one of DeepSpeed's rolling-batch architectures; the
      classic handler with dynamic batching (batch_size / max_batch_delay) serves it.
    option.max_tokens: DeepSpeed's inference-time limit on prompt + generated tokens (engine.max_model_len).
    option.model_loading_timeout: 3600 s, so SageMaker's startup health check is the one limit (djl_common).
    """
    limits = {} if engine.max_model_len is None else {"option.max_tokens": str(engine.max_model_len)}
    return handler_serving_properties(endpoint, engine, engine="DeepSpeed", entry_point=ENTRY_POINT, limits=limits)


def container_environment(endpoint: EndpointSpec, engine: DeepSpeedEngineOptions) -> dict[str, str]:
    """Nothing: serving.properties in the model data carries the whole engine configuration. One place for
    it: an OPTION_* variable could only fill in keys the file leaves out (DJL applies the environment with
    putIfAbsent, see systems/djl_common), so a second source would silently do nothing or drift."""
    return {}


SYSTEM: ServingSystem[DeepSpeedEngineOptions] = legacy_djl_system(
    djl_version="0.27",
    maintained_replacement="lmi-vllm",
    serving_properties=serving_properties,
    engine_options=DeepSpeedEngineOptions,
    name="djl-deepspeed",
    local=LocalRun.stand_in("djl", "DJL Serving's front end (Java, djl_python) ships in the image only"),
    recipe="systems.djl_deepspeed.recipe",
    summary="DJL Serving 0.27 DeepSpeed engine (tensor parallel, kernel injection); legacy, pinned last image",
    image=DJL_DEEPSPEED_LEGACY,
    environment=container_environment,
    default_startup_timeout_s=DEFAULT_STARTUP_TIMEOUT_S,
    legacy=True,
    replacement="lmi-vllm",
    engine_notes=(
        "DJL starts one model copy per tensor_parallel_degree GPUs (ml.g5.12xlarge, 4 GPUs, degree 2: 2 copies, "
        "each on its own GPU pair); autoscaling targets are per copy. DeepSpeed was dropped from LMI after 0.27.0."
    ),
)

__all__ = ["SYSTEM", "serving_properties", "container_environment"]
