"""Build the tgi artifact: the checkpoint's own files, copied and verified (systems/checkpoint_artifact.py), which
TGI's launcher loads from HF_MODEL_ID=/opt/ml/model; the metadata files its transformers 4.51 cannot read are
rewritten for it (SYSTEM.rewrite_metadata_for_image)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from endpoint_config import EndpointSpec
from systems.checkpoint_artifact import build_checkpoint_artifact
from systems.tgi import SYSTEM, TgiEngineOptions


def build(endpoint: EndpointSpec, engine: TgiEngineOptions, out_dir: Path, progress: bool = True) -> dict[str, Any]:
    return build_checkpoint_artifact(endpoint, engine, out_dir, progress, SYSTEM)
