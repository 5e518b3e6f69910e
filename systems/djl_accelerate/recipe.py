"""Build the djl-accelerate artifact: serving.properties (engine=Python, djl_python.huggingface,
device_map=auto) next to sharded safetensors + config + tokenizer, optional model.py, manifest.json.
Same layout as djl-deepspeed (see systems/djl_deepspeed/recipe.py)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from endpoint_config import EndpointSpec
from systems.djl_accelerate import SYSTEM, AccelerateEngineOptions, serving_properties
from systems.djl_common.build import build_handler_artifact
from systems.images import DJL_DEEPSPEED_LEGACY


def build(
    endpoint: EndpointSpec, engine: AccelerateEngineOptions, out_dir: Path, progress: bool = True
) -> dict[str, Any]:
    return build_handler_artifact(
        endpoint,
        out_dir,
        image=DJL_DEEPSPEED_LEGACY,
        engine="Python",
        properties=serving_properties(endpoint, engine),
        custom_handler=engine.custom_handler,
        progress=progress,
        notes=SYSTEM.engine_notes,
    )
