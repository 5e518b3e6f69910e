"""Build the lmi-trtllm artifact: the checkpoint's own files + manifest.json (systems/djl_common/lmi.py); the container
compiles its TensorRT-LLM engines from them at start (see systems/djl_common/lmi.py for the layout choice)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from endpoint_config import EndpointSpec
from systems.djl_common.lmi import build_lmi
from systems.lmi_trtllm import MODEL_TYPES, SYSTEM, TrtllmEngineOptions


def build(endpoint: EndpointSpec, engine: TrtllmEngineOptions, out_dir: Path, progress: bool = True) -> dict[str, Any]:
    return build_lmi(endpoint, engine, out_dir, progress, SYSTEM, model_types=MODEL_TYPES)
