"""What lmi-vllm and lmi-trtllm share: the container environment that configures current LMI, and the recipe.

LMI is configured through OPTION_* environment variables only (no serving.properties in the content-addressed
artifact), in LMI's async mode: OPTION_ASYNC_MODE=true, OPTION_ROLLING_BATCH=disable, OPTION_ENTRYPOINT=<handler>.
Why, with the djl-serving sources: docs/design/engines.md.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import TYPE_CHECKING, Any, ClassVar, Literal

from artifact import BuildError
from endpoint_config import EndpointSpec
from facts.models import read_json_object
from systems.base import Capability, MaxBatchSize, MaxModelLen, ServingSystem

if TYPE_CHECKING:
    from systems.checkpoint_artifact import ContainerFiles

from . import (
    MODEL_LOADING_TIMEOUT_S,
    SAGEMAKER_MODEL_DIR,
    DjlEngineOptions,
    check_weights_format,
    copies_per_instance,
    option_environment,
)

# Why engine.rolling_batch is refused for the LMI systems (shown in the error).
ASYNC_MODE_BATCHING = "LMI async mode: the engine batches continuously by itself (OPTION_ROLLING_BATCH=disable)"
# ProductionVariant.InferenceAmiVersion for the LMI images (CUDA 12.8 and 13.0). SageMaker's default AMI has
# NVIDIA driver 470 / CUDA 11.4 on ml.g5 and ml.p4d (docs.aws.amazon.com/sagemaker/latest/dg/
# inference-gpu-drivers.html); the images carry CUDA forward-compat libraries (cuda-compat-12-8 / -13-0 and
# dockerd-entrypoint-with-cuda-compat.sh in djl-serving serving/docker/), but forward compatibility has a
# minimum driver of its own. al2023-ami-sagemaker-inference-gpu-4-1 has driver 580 / CUDA 13.0 (botocore
# sagemaker service model, ProductionVariant.InferenceAmiVersion documentation), which runs CUDA 12.8 and 13.0
# natively. Unverified: which instance families that AMI is offered on (the botocore text lists none).
LMI_INFERENCE_AMI_VERSION = "al2023-ami-sagemaker-inference-gpu-4-1"


# LMI (djl-serving) streams when the request carries "stream": true, as JSON lines {"token": {"id", "text",
# "log_prob"}, ...} (deepjavalibrary/djl-serving branch 0.36.0-lmi27-dlc, serving/docs/lmi/user_guides/
# lmi_input_output_schema.md "When using streaming ... application/jsonlines"; the async mode both systems run builds
# those lines in engines/python/setup/djl_python/lmi_vllm/request_response_utils.py
# convert_completion_chunk_response_to_lmi_schema, and on branch 0.33.0-dlc, the lmi-trtllm image's,
# lmi_trtllm/request_response_utils.py does the same).
LMI_STREAMING = Capability.yes("LMI jsonlines ({'token': {'text'}} per line, application/jsonlines)")
# djl-serving's own docs send several models or model copies to inference components ("For serving multiple models
# or model copies use SageMaker's Inference Components which ensures resource isolation between models and model
# copies", deepjavalibrary/djl-serving serving/docs/lmcache_performance.md), and AWS names the LMI DLCs among the
# containers its inference component scaling work covers ("Supercharge your auto scaling for generative AI inference -
# Introducing Container Caching in SageMaker Inference", AWS Machine Learning Blog, 2024-12-03). Both systems set
# OPTION_TENSOR_PARALLEL_DEGREE themselves, so a copy uses exactly the GPUs it is given.
# OPTION_MODEL_ID=/opt/ml/model (base_options) and the rest from OPTION_* variables: the LMI systems write no
# serving.properties, so a checkpoint's own files are all their model data needs.
LMI_PLAIN_CHECKPOINT = Capability.yes(
    "LMI loads the checkpoint at OPTION_MODEL_ID=/opt/ml/model and takes every other setting from OPTION_* variables"
)
LMI_INFERENCE_COMPONENTS = Capability.yes("LMI runs one engine per component copy on the GPUs the copy is given")
# LMI reads OPTION_<NAME> as option.<name> (djl_common); its engines shard over option.tensor_parallel_degree GPUs.
LMI_TENSOR_PARALLEL = Capability.yes(
    "OPTION_TENSOR_PARALLEL_DEGREE (option.tensor_parallel_degree): one engine per that many GPUs"
)


class LmiEngineOptions(DjlEngineOptions):
    """The `engine:` options both LMI systems implement (lmi-vllm and lmi-trtllm subclass it): no rolling_batch
    (async mode sets OPTION_ROLLING_BATCH=disable itself), no entry_point (the image's async handler), no
    custom_handler."""

    HINTS: ClassVar[dict[str, str]] = {"rolling_batch": ASYNC_MODE_BATCHING}

    custom_handler: Literal[False] = False
    max_batch_size: MaxBatchSize | None = None  # OPTION_MAX_ROLLING_BATCH_SIZE
    max_model_len: MaxModelLen | None = None


def base_options(endpoint: EndpointSpec, entry_point: str, engine: LmiEngineOptions) -> dict[str, str]:
    """The options both LMI systems set. OPTION_MODEL_ID=/opt/ml/model: LMI loads from a local directory given
    as model_id, which is where SageMaker mounts the uncompressed S3 prefix; naming it keeps LMI from looking for
    a Hub id. max_rolling_batch_size (engine.max_batch_size) is the sequences in flight: vLLM's max_num_seqs
    (0.36.0-lmi27-dlc properties_manager/vllm_rb_properties.py) and TensorRT-LLM's max_batch_size (0.33.0-dlc
    properties_manager/trt_properties.py get_llm_kwargs, serving/docker/partition/trt_llm_partition.py)."""
    options = {
        "model_id": SAGEMAKER_MODEL_DIR,
        "async_mode": "true",
        "rolling_batch": "disable",
        "entryPoint": entry_point,
        "tensor_parallel_degree": str(endpoint.tensor_parallel_degree),
        "dtype": endpoint.dtype,
        "model_loading_timeout": str(MODEL_LOADING_TIMEOUT_S),
    }
    if engine.max_batch_size is not None:
        options["max_rolling_batch_size"] = str(engine.max_batch_size)
    return options


def context_length(config: dict[str, Any]) -> int | None:
    for key in ("max_position_embeddings", "n_positions", "max_sequence_length", "seq_length"):
        if isinstance(config.get(key), int):
            return config[key]
    return None


def check_max_model_len(endpoint: EndpointSpec, engine: LmiEngineOptions, source: Path) -> None:
    """vLLM and TensorRT-LLM refuse a length beyond the model's positions; say so at build time."""
    length = engine.max_model_len
    if length is None:
        return
    config_path = source / "config.json"
    if not os.path.lexists(config_path):
        return  # build_decoder_artifact reports the missing config.json; a FIFO or a loop its reader refuses
    limit = context_length(read_json_object(config_path))
    if limit is not None and length > limit:
        raise BuildError(
            f"endpoint {endpoint.name!r}: engine.max_model_len: value {length} is beyond the model's "
            f"{limit} positions; allowed: 16 to {limit}"
        )


def build_lmi(
    endpoint: EndpointSpec,
    engine: LmiEngineOptions,
    out_dir: Path,
    progress: bool,
    system: ServingSystem,
    model_types=None,
) -> dict[str, Any]:
    """The checkpoint's own files (LMI_PLAIN_CHECKPOINT: LMI loads /opt/ml/model and casts to OPTION_DTYPE itself),
    through the checkpoint build (systems/checkpoint_artifact.py): a local directory is copied, a Hub model is
    planned from its metadata and its weights staged in the account by the job (docs/design/weights.md). Only the
    metadata files are rewritten for the image's transformers (both systems set rewrite_metadata_for_image;
    lmi_container_files adds LMI's own checks); the environment is written as before (OPTION_* variables, no
    serving.properties)."""
    from systems.checkpoint_artifact import build_checkpoint_artifact

    check_weights_format(endpoint)
    container = lmi_container_files(endpoint, engine, system, model_types)
    return build_checkpoint_artifact(endpoint, engine, out_dir, progress, system, container)


def lmi_container_files(
    endpoint: EndpointSpec, engine: LmiEngineOptions, system: ServingSystem, model_types=None
) -> ContainerFiles:
    """What the LMI images refuse, read from the metadata alone before anything is written: a model that is not a
    causal LM, a model type lmi-trtllm does not compile, max_model_len beyond the positions; and the manifest's
    `serving` block. The metadata files their transformers 4.x cannot read (config.json, tokenizer files) are
    rewritten by the checkpoint build itself, as every system with rewrite_metadata_for_image has them
    (systems/checkpoint_artifact.py image_metadata_files)."""
    from systems import recipe_common as common
    from systems.checkpoint_artifact import ContainerFiles

    from .build import check_model_types

    def check(metadata: Path) -> None:
        config = common.read_model_config(metadata, endpoint)
        common.check_causal_lm(endpoint, config)
        if model_types is not None:
            check_model_types(endpoint, config, model_types)
        check_max_model_len(endpoint, engine, metadata)

    fields = {
        "serving": {
            "engine": "LMI async mode",
            "model_copies_per_instance": copies_per_instance(endpoint),
            "tensor_parallel_degree": endpoint.tensor_parallel_degree,
            "container_environment": system.environment(endpoint, engine),
            **({"notes": system.engine_notes} if system.engine_notes else {}),
        },
    }
    return ContainerFiles(check=check, fields=fields)


__all__ = [
    "LMI_INFERENCE_COMPONENTS",
    "LMI_PLAIN_CHECKPOINT",
    "LMI_STREAMING",
    "base_options",
    "build_lmi",
    "lmi_container_files",
    "check_max_model_len",
    "option_environment",
    "LMI_INFERENCE_AMI_VERSION",
]
