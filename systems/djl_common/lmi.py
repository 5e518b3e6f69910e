"""What lmi-vllm and lmi-trtllm share: the container environment that configures current LMI, and the recipe.

Current LMI is configured through the container environment (OPTION_<NAME> -> option.<name>), which is what
AWS documents for it; the artifact holds only weights + config + tokenizer (+ manifest), no serving.properties.
Why not also a serving.properties: the artifact is content-addressed (its hash names its S3 prefix), so engine
settings inside it would make a batch-size change re-upload gigabytes of unchanged weights; and two sources of
the same setting (file and environment, environment winning) invite drift. The manifest records the
environment the build was made for.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from endpoint_config import EndpointSpec
from model_build import BuildError
from systems.base import ServingSystem

from . import SAGEMAKER_MODEL_DIR, check_engine_options, option_environment


def base_options(endpoint: EndpointSpec, rolling_batch: str) -> dict[str, str]:
    """OPTION_MODEL_ID=/opt/ml/model: LMI loads from a local directory given as model_id, which is where
    SageMaker mounts the uncompressed S3 prefix; naming it keeps LMI from looking for a Hub id."""
    options = {
        "model_id": SAGEMAKER_MODEL_DIR,
        "rolling_batch": rolling_batch,
        "tensor_parallel_degree": str(endpoint.tensor_parallel_degree),
        "dtype": endpoint.dtype,
    }
    if endpoint.engine.max_batch_size is not None:
        options["max_rolling_batch_size"] = str(endpoint.engine.max_batch_size)
    return options


def context_length(config: dict[str, Any]) -> int | None:
    for key in ("max_position_embeddings", "n_positions", "max_sequence_length", "seq_length"):
        if isinstance(config.get(key), int):
            return config[key]
    return None


def check_max_model_len(endpoint: EndpointSpec, source: Path) -> None:
    """vLLM and TensorRT-LLM refuse a length beyond the model's positions; say so at build time."""
    length = endpoint.engine.max_model_len
    if length is None:
        return
    config_path = source / "config.json"
    if not config_path.is_file():
        return  # build_decoder_artifact reports the missing config.json
    limit = context_length(json.loads(config_path.read_text()))
    if limit is not None and length > limit:
        raise BuildError(
            f"endpoint {endpoint.name!r}: engine.max_model_len: value {length} is beyond the model's "
            f"{limit} positions; allowed: 16 to {limit}"
        )


def build_lmi(
    endpoint: EndpointSpec, out_dir: Path, progress: bool, system: ServingSystem, rolling_batch: str, model_types=None
) -> dict[str, Any]:
    from model_build.source import resolve_model_source

    from .build import build_decoder_artifact

    check_engine_options(endpoint, rolling_batch=(rolling_batch,))
    check_max_model_len(endpoint, resolve_model_source(endpoint.model, endpoint.revision))
    return build_decoder_artifact(
        endpoint,
        out_dir,
        image=system.image,
        engine=f"LMI rolling batch {rolling_batch}",
        progress=progress,
        environment=system.environment,
        model_types=model_types,
        notes=system.engine_notes,
    )


__all__ = ["base_options", "build_lmi", "check_max_model_len", "option_environment"]
