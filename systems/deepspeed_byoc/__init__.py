"""deepspeed-byoc: a causal LM on DeepSpeed-Inference with kernel injection, in a container built from this
repository (systems/deepspeed_byoc/container/Dockerfile), served by our own byoc_server.

The replacement for the retired DJL DeepSpeed engine: the same DeepSpeed kernels, with the versions pinned by
us instead of by an image AWS stopped publishing. The artifact is sharded fp16 safetensors plus
`deepspeed.json` (dtype, tensor-parallel size, kernel injection); model_build writes and verifies it
(`recipe.build`). No torch import here: the CDK app imports this module to synthesize the endpoint.
"""

from __future__ import annotations

from typing import ClassVar, Literal

from endpoint_config import EndpointSpec
from systems.base import Capability, EngineOptions, LocalRun, MaxBatchSize, MaxModelLen, ServingSystem
from systems.byoc_system import byoc_system

HANDLER = "handler:DeepSpeedHandler"  # the module lies in /opt/program in the image

# The library stack inside the image (container/Dockerfile pins the same; a test checks they agree). The
# recipe writes only what these read, and the manifest records them.
BASE_IMAGE = "pytorch/pytorch:2.1.2-cuda12.1-cudnn8-devel"
TORCH_VERSION = "2.1.2"
DEEPSPEED_VERSION = "0.12.6"
TRANSFORMERS_VERSION = "4.36.2"
# Model types whose blocks DeepSpeed 0.12.6 replaces with its fused kernels (its HF decoder injection
# policies). GPT-J is the reference model.
KERNEL_INJECTION_MODEL_TYPES = ("gptj", "gpt2", "gpt_neo", "gpt_neox", "opt", "bloom")


class DeepSpeedByocEngineOptions(EngineOptions):
    """The `engine:` options deepspeed-byoc implements: max_batch_size (MAX_BATCH_SIZE, prompts per request),
    max_model_len (deepspeed.json max_out_tokens, DeepSpeed's KV workspace), rolling_batch only as `disable`."""

    REFUSALS: ClassVar[dict[str, str]] = {
        "rolling_batch": "value {value!r} is not offered by DeepSpeed kernel injection (static batches per request); "
        "allowed: disable, or leave it out",
        "entry_point": "value {value!r} is a DJL setting; system 'deepspeed-byoc' runs its own handler (leave it out)",
        "custom_handler": "value true is a DJL setting; system 'deepspeed-byoc' always runs its own handler (leave it out)",
    }

    max_batch_size: MaxBatchSize | None = None
    max_model_len: MaxModelLen | None = None
    rolling_batch: Literal["disable"] | None = None
    custom_handler: Literal[False] = False


def container_environment(endpoint: EndpointSpec, engine: DeepSpeedByocEngineOptions) -> dict[str, str]:
    """The container's environment for one endpoint.

    DS_KERNEL_INJECTION=true: replace the transformer blocks with DeepSpeed's fused CUDA kernels
      (false serves the plain transformers model, e.g. to rule the kernels out when debugging).
    DTYPE: the dtype the artifact was built and verified in (fp16, DeepSpeed's kernel dtype).
    TENSOR_PARALLEL_DEGREE / BYOC_PROCESSES: GPUs the model is split over; `serve` starts one rank per GPU
      with torchrun when > 1 (rank 0 serves HTTP).
    MAX_BATCH_SIZE: prompts per request (engine.max_batch_size; the server's default is 8).
    """
    env = {
        "DS_KERNEL_INJECTION": "true",
        "DTYPE": endpoint.dtype,
        "TENSOR_PARALLEL_DEGREE": str(endpoint.tensor_parallel_degree),
        "BYOC_PROCESSES": str(endpoint.tensor_parallel_degree),
        "BYOC_HANDLER": HANDLER,
    }
    if engine.max_batch_size is not None:
        env["MAX_BATCH_SIZE"] = str(engine.max_batch_size)
    return env


SYSTEM: ServingSystem[DeepSpeedByocEngineOptions] = byoc_system(
    name="deepspeed-byoc",
    local=LocalRun.own_server("the DeepSpeed handler's transformers path (no GPU: no kernel injection)"),
    engine_options=DeepSpeedByocEngineOptions,
    recipe="systems.deepspeed_byoc.recipe",
    summary="DeepSpeed-Inference kernel injection (fp16, tensor parallel) in our own container, sharded safetensors",
    dockerfile="systems/deepspeed_byoc/container/Dockerfile",
    handler_files=("systems/deepspeed_byoc/handler/handler.py",),
    tensor_parallel=Capability.yes(
        "TENSOR_PARALLEL_DEGREE (DeepSpeed's tp_size) and BYOC_PROCESSES: `serve` starts one rank per GPU"
    ),
    environment=container_environment,
    # The kernels are compiled into the image, but loading 12 GB and injecting takes a few minutes.
    default_download_timeout_s=900,
    default_startup_timeout_s=900,
    engine_notes="DeepSpeed 0.12.6 kernel injection with transformers 4.36.2 (see the Dockerfile for the pins)",
)
