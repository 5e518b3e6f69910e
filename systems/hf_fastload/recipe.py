"""Build the hf-fastload artifact of one endpoint, and prove it serves what the source model computes.

Artifact layout (the directory SageMaker mounts at /opt/ml/model):
    config.json, generation_config.json       config readable by transformers 4.49 (`torch_dtype` key)
    model-0000N-of-0000M.safetensors + index   sharded at `max_shard_size`, in the configured dtype
      (or model.pt with `weights_format: torch-save`: the seed recipe's pickled whole model; opt-in only,
       because torch.load executes code from the file, loads ~4x slower than safetensors, and the pickle
       names library classes, so it breaks when transformers versions differ)
    tokenizer files                           copied verbatim from the source when transformers 4.49 /
                                              tokenizers 0.21 read them; a tokenizer saved by transformers 5
                                              gets a tokenizer_config.json with a 4.x class
                                              (systems/container_tokenizer.py)
    code/inference.py                         the request handler (systems/hf_fastload/handler)
    manifest.json                             what/how/verification + sha256 of every file

Verification runs the handler's own loader on the written artifact and compares its logits and greedy
tokens with the source model in the same dtype, so a build that finishes is known to load and agree.
"""

from __future__ import annotations

import shutil
import sys
from pathlib import Path
from typing import Any

import request_contract
from artifact.source import resolve_model_source
from endpoint_config import EndpointSpec
from systems import recipe_common as common
from systems.container_tokenizer import plan_tokenizer
from systems.images import HF_CONTAINER_TRANSFORMERS, HF_PYTORCH_INFERENCE

HANDLER_SOURCE = Path(__file__).parent / "handler" / "inference.py"
TOLERANCE = common.TOLERANCE  # the shared table (compare_with_source reads it); tests tighten it through this module
TORCH_SAVE_FILE = "model.pt"


def build(endpoint: EndpointSpec, out_dir: Path, progress: bool = True) -> dict[str, Any]:
    """Write the verified artifact of `endpoint` into `out_dir` (empty or absent) and return its manifest.

    The caller (model_build.cli) builds into a temporary directory and renames it on success, so a
    failure here never leaves a half-written artifact in place.
    """
    source = resolve_model_source(endpoint.model, endpoint.revision)
    tokenizer_export = plan_tokenizer(source, HF_PYTORCH_INFERENCE.python_stack, common.HF_CONTAINER_TARGET)
    source_config = common.read_model_config(source)
    common.check_causal_lm(endpoint, source_config, refuse_encoder_decoder=False, serves="AutoModelForCausalLM models")

    import torch

    from systems.hf_fastload.handler import inference as handler

    out_dir = Path(out_dir)

    def write_weights(model: Any, _tokenizer: Any) -> None:
        if endpoint.weights_format == "safetensors":
            model.save_pretrained(out_dir, max_shard_size=endpoint.max_shard_size, safe_serialization=True)
        else:
            print(
                f"endpoint {endpoint.name!r}: weights_format 'torch-save' writes a pickled whole model: loading it "
                "executes code from the file, is slower than safetensors and needs the same transformers version",
                file=sys.stderr,
            )
            model.config.save_pretrained(out_dir)
            if model.generation_config is not None:
                model.generation_config.save_pretrained(out_dir)
            torch.save(model, out_dir / TORCH_SAVE_FILE)
        common.config_for_container(out_dir, endpoint.dtype)

    def write_code(_model: Any, _tokenizer: Any) -> None:
        tokenizer_export.write(out_dir)
        (out_dir / "code").mkdir(exist_ok=True)
        shutil.copyfile(HANDLER_SOURCE, out_dir / "code" / "inference.py")
        shutil.copyfile(request_contract.__file__, out_dir / "code" / "request_contract.py")  # inference.py imports it

    def reload() -> tuple[Any, Any]:
        loaded = handler.load_model(
            out_dir, dtype=handler.TORCH_DTYPES[endpoint.dtype], weights_format=endpoint.weights_format
        )
        return loaded["model"], loaded["tokenizer"]

    return common.run_recipe(
        endpoint,
        out_dir,
        progress,
        source=source,
        source_config=source_config,
        name_endpoint=False,
        write=[(f"write {endpoint.weights_format}", write_weights), ("tokenizer + handler", write_code)],
        reload=reload,
        fields=lambda: {
            "dtype": endpoint.dtype,
            # what the handler computes in (GPU: the stored dtype; CPU: fp32, bf16 stays on a native-bf16 CPU);
            # the verification above ran in the stored dtype
            "compute_dtype": handler.compute_dtype_rule(endpoint.dtype),
            "weights_format": endpoint.weights_format,
            "max_shard_size": endpoint.max_shard_size,
            "libraries": common.library_versions(),
            "target_container": {
                "image_repository": HF_PYTORCH_INFERENCE.repository,
                "image_tag_gpu": HF_PYTORCH_INFERENCE.gpu_tag,
                "image_tag_cpu": HF_PYTORCH_INFERENCE.cpu_tag,
                "transformers": HF_CONTAINER_TRANSFORMERS,
            },
            "tokenizer_rewritten": tokenizer_export.rewritten,
        },
    )
