"""Build the djl-deepspeed artifact: the model directory DJL 0.27's DeepSpeed engine serves.

Layout (the uncompressed S3 prefix SageMaker mounts at /opt/ml/model):
    serving.properties                      engine=DeepSpeed, entry point, tp degree, dtype, model_id (see
                                            systems.djl_deepspeed.serving_properties)
    config.json, generation_config.json     `torch_dtype` key (the container's transformers 4.x reads it)
    model-0000N-of-0000M.safetensors + index the weights in the configured dtype, sharded
    tokenizer files                         copied verbatim from the source
    model.py                                only with engine.custom_handler: true
    manifest.json                           what/how/verification + sha256 of every file
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from endpoint_config import EndpointSpec
from systems.djl_common.build import build_handler_artifact
from systems.djl_deepspeed import SYSTEM, DeepSpeedEngineOptions, serving_properties
from systems.images import DJL_DEEPSPEED_LEGACY


def build(
    endpoint: EndpointSpec, engine: DeepSpeedEngineOptions, out_dir: Path, progress: bool = True
) -> dict[str, Any]:
    return build_handler_artifact(
        endpoint,
        out_dir,
        image=DJL_DEEPSPEED_LEGACY,
        engine="DeepSpeed",
        properties=serving_properties(endpoint, engine),
        custom_handler=engine.custom_handler,
        progress=progress,
        notes=SYSTEM.engine_notes,
    )
