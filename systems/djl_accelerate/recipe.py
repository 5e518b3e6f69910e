"""Build the djl-accelerate artifact: serving.properties (engine=Python, djl_python.huggingface,
device_map=auto) next to sharded safetensors + config + tokenizer, optional model.py, manifest.json.
Same layout as djl-deepspeed (see systems/djl_deepspeed/recipe.py)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from endpoint_config import EndpointSpec
from systems.djl_accelerate import ENTRY_POINT, SYSTEM, serving_properties
from systems.djl_common import check_engine_options
from systems.djl_common.build import build_decoder_artifact
from systems.images import DJL_DEEPSPEED_LEGACY

CUSTOM_HANDLER = Path(__file__).resolve().parents[1] / "djl_common" / "handler" / "model.py"


def build(endpoint: EndpointSpec, out_dir: Path, progress: bool = True) -> dict[str, Any]:
    # engine.max_model_len: the Hugging Face handler has no engine-wide length limit to set; refused, not ignored.
    check_engine_options(
        endpoint, rolling_batch=("disable",), entry_points=(ENTRY_POINT,), max_model_len=False, custom_handler=True
    )
    return build_decoder_artifact(
        endpoint,
        out_dir,
        image=DJL_DEEPSPEED_LEGACY,
        engine="Python",
        progress=progress,
        properties=serving_properties(endpoint),
        custom_handler=CUSTOM_HANDLER if endpoint.engine.custom_handler else None,
        notes=SYSTEM.engine_notes,
    )
