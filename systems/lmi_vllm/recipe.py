"""Build the lmi-vllm artifact: the checkpoint's own files (config.json and unreadable tokenizer files rewritten for
the image) + manifest.json (no serving.properties: LMI is configured by the container environment; see
systems/djl_common/lmi.py)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from endpoint_config import EndpointSpec
from systems.djl_common.lmi import build_lmi
from systems.lmi_vllm import SYSTEM, VllmEngineOptions


def build(endpoint: EndpointSpec, engine: VllmEngineOptions, out_dir: Path, progress: bool = True) -> dict[str, Any]:
    return build_lmi(endpoint, engine, out_dir, progress, SYSTEM)
