"""tensorrt-byoc: GPT-2 exported to ONNX, run by TensorRT in our own container (nginx + byoc_server).

model_build (recipe.py) exports an fp32 ONNX decoder graph with a KV cache, verifies it with ONNX Runtime
against the PyTorch model and writes the TensorRT optimisation profile. The TensorRT engine itself is built
in the container at start, on the GPU it will run on (an engine only runs on the GPU model and TensorRT
version that built it), and cached under TRT_ENGINE_CACHE_DIR keyed by (GPU, TensorRT version, ONNX sha256,
profile, precision), so a restart that keeps the cache loads it in seconds. The first start therefore
includes the engine build: the default ContainerStartupHealthCheckTimeoutInSeconds is 900 s.

No torch import here: the CDK app imports this module to synthesize the endpoint.
"""

from __future__ import annotations

from pydantic import Field, model_validator

from endpoint_config import EndpointSpec
from endpoint_config.base import Strict
from systems.base import Capability, EngineOptions, LocalRun, MaxBatchSize, MaxModelLen, ServingSystem
from systems.byoc_system import byoc_system

ENGINE_CACHE_DIR = "/opt/ml/engine-cache"
# GPT-2 small engine builds take a few minutes on a T4/A10G; model download and load add little.
STARTUP_TIMEOUT_S = 900


class TensorRTProfile(Strict):
    """The TensorRT optimisation profile: the engine serves shapes within these bounds only."""

    min_batch: int = Field(1, ge=1, le=256)
    opt_batch: int | None = Field(None, ge=1, le=256)
    max_batch: int = Field(10, ge=1, le=256)
    max_sequence_length: int = Field(42, ge=2, le=8192)

    @model_validator(mode="after")
    def _ordered(self) -> TensorRTProfile:
        opt = self.opt_batch if self.opt_batch is not None else self.min_batch
        if not self.min_batch <= opt <= self.max_batch:
            raise ValueError(
                f"batch sizes must satisfy min_batch <= opt_batch <= max_batch, got {self.min_batch}, {opt}, {self.max_batch}"
            )
        return self


class TensorRTByocEngineOptions(EngineOptions):
    """The `engine:` options tensorrt-byoc implements: tensorrt_profile, the optimisation profile (batch and
    sequence bounds) the container builds its engine for. The other keys are accepted and unused, as they always
    were (the profile bounds batch and length)."""

    tensorrt_profile: TensorRTProfile = TensorRTProfile()
    max_batch_size: MaxBatchSize | None = None
    max_model_len: MaxModelLen | None = None
    rolling_batch: str | None = None
    entry_point: str | None = None
    custom_handler: bool = False


def container_environment(endpoint: EndpointSpec, engine: TensorRTByocEngineOptions) -> dict[str, str]:
    """The container's environment for one endpoint.

    TRT_BACKEND=tensorrt: build/load a TensorRT engine (onnxruntime is the CPU/test backend of the same handler).
    TRT_ENGINE_CACHE_DIR: where built engines are kept, keyed by GPU, TensorRT version, ONNX hash and profile.
    TRT_PRECISION: the kernels TensorRT may choose (the endpoint's dtype; the ONNX graph itself is fp32).
    TRT_MAX_BATCH / TRT_MAX_SEQUENCE_LENGTH: the profile the endpoint was configured with; the handler refuses
      to start on an artifact built for another profile.
    MAX_BATCH_SIZE / MAX_NEW_TOKENS: the request limits byoc_server enforces (contract.py), from the same profile.
    """
    profile = engine.tensorrt_profile
    return {
        "TRT_BACKEND": "tensorrt",
        "TRT_ENGINE_CACHE_DIR": ENGINE_CACHE_DIR,
        "TRT_PRECISION": endpoint.dtype,
        "TRT_MAX_BATCH": str(profile.max_batch),
        "TRT_MAX_SEQUENCE_LENGTH": str(profile.max_sequence_length),
        "MAX_BATCH_SIZE": str(profile.max_batch),
        "MAX_NEW_TOKENS": str(profile.max_sequence_length - 1),
    }


SYSTEM: ServingSystem[TensorRTByocEngineOptions] = byoc_system(
    engine_options=TensorRTByocEngineOptions,
    name="tensorrt-byoc",
    # TRT_BACKEND=onnxruntime: the handler's CPU backend runs the same ONNX graph (handler/engine.py).
    local=LocalRun.own_server(
        "the TensorRT handler's onnxruntime backend (the same ONNX graph, on the CPU)", TRT_BACKEND="onnxruntime"
    ),
    recipe="systems.tensorrt_byoc.recipe",
    summary="GPT-2 as ONNX, TensorRT engine built at container start on the serving GPU (own container)",
    dockerfile="systems/tensorrt_byoc/container/Dockerfile",
    handler_files=("systems/tensorrt_byoc/handler", "systems/tensorrt_byoc/container/start"),
    tensor_parallel=Capability.no(
        "its TensorRT engine is built for and runs on one GPU, the handler's current CUDA device "
        "(handler/engine.py cudaGetDevice)"
    ),
    environment=container_environment,
    default_download_timeout_s=600,
    default_startup_timeout_s=STARTUP_TIMEOUT_S,
    engine_notes=(
        "The TensorRT engine is built when the container starts (GPU- and TensorRT-version-specific) and cached "
        f"in {ENGINE_CACHE_DIR}; the first start includes the build, so the startup health check allows "
        f"{STARTUP_TIMEOUT_S} s by default. GPT-2 only; profile bounds from engine.tensorrt_profile."
    ),
)
