"""djl-accelerate: DJL Serving's Python engine with the stock Hugging Face handler (djl_python.huggingface),
which splits the model across the worker's GPUs with accelerate's device_map="auto".

Pinned to the same 0.27.0 image as djl-deepspeed (it ships djl_python.huggingface with accelerate), so the two
recipes differ in the engine only and share one tested container. Not marked legacy: the Hugging Face handler
is still part of current LMI; only the image pin is old. Note that accelerate's split is layer-wise (pipeline
style, one GPU busy at a time), not true tensor parallelism: it fits the model, it does not speed it up.
No torch import here.
"""

from __future__ import annotations

from typing import Literal

from endpoint_config import EndpointSpec
from systems.base import LocalRun, MaxBatchSize, ServingSystem
from systems.djl_common import DjlEngineOptions, handler_serving_properties, legacy_djl_system
from systems.images import DJL_DEEPSPEED_LEGACY

ENTRY_POINT = "djl_python.huggingface"
DEFAULT_STARTUP_TIMEOUT_S = 600


class AccelerateEngineOptions(DjlEngineOptions):
    """The `engine:` options djl-accelerate implements. No max_model_len: the Hugging Face handler has no
    engine-wide length limit to set, so it is refused, not ignored."""

    custom_handler: bool = False  # ship our model.py as the entry point
    max_batch_size: MaxBatchSize | None = None  # batch_size (+ max_batch_delay): DJL dynamic batching
    rolling_batch: Literal["disable"] | None = None  # the plain transformers path
    entry_point: Literal["djl_python.huggingface"] | None = None


def serving_properties(endpoint: EndpointSpec, engine: AccelerateEngineOptions) -> dict[str, str]:
    """serving.properties of one endpoint.

    option.device_map=auto: accelerate places the layers over the tensor_parallel_degree GPUs DJL gives the
      worker (DJL sets each worker's visible GPUs from the degree).
    option.rolling_batch=disable: 0.27's Python engine would otherwise pick a rolling-batch backend
      (lmi-dist/vLLM) by itself; this system is the plain transformers path.
    option.model_id=/opt/ml/model and option.model_loading_timeout: as in djl-deepspeed.
    """
    return handler_serving_properties(
        endpoint, engine, engine="Python", entry_point=ENTRY_POINT, placement={"option.device_map": "auto"}
    )


def container_environment(endpoint: EndpointSpec, engine: AccelerateEngineOptions) -> dict[str, str]:
    """Nothing: serving.properties carries the whole configuration. (An OPTION_* variable could only fill in a
    key the file leaves out: DJL applies the environment with putIfAbsent, see systems/djl_common.)"""
    return {}


SYSTEM: ServingSystem[AccelerateEngineOptions] = legacy_djl_system(
    djl_version="0.27",
    maintained_replacement="lmi-vllm",
    serving_properties=serving_properties,
    engine_options=AccelerateEngineOptions,
    name="djl-accelerate",
    local=LocalRun.stand_in("djl", "DJL Serving's front end (Java, djl_python) ships in the image only"),
    recipe="systems.djl_accelerate.recipe",
    summary="DJL Serving 0.27 Python engine, Hugging Face handler with accelerate device_map over the GPUs",
    image=DJL_DEEPSPEED_LEGACY,
    environment=container_environment,
    default_startup_timeout_s=DEFAULT_STARTUP_TIMEOUT_S,
    engine_notes=(
        "DJL starts one model copy per tensor_parallel_degree GPUs (ml.g5.12xlarge, 4 GPUs, degree 2: 2 copies); "
        "accelerate splits each copy layer-wise over its GPUs (fits larger models, no tensor-parallel speed-up)."
    ),
)

__all__ = ["SYSTEM", "serving_properties", "container_environment"]
