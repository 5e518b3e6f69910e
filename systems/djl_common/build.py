"""Recipe helpers shared by the DJL/LMI systems that serve decoder-only causal LMs from the model directory
(djl-deepspeed, djl-accelerate; lmi-vllm and lmi-trtllm ship the checkpoint: systems/djl_common/lmi.py).

The weights are written exactly as hf-fastload writes them, with the shared helpers (systems.recipe_common): sharded
safetensors in the configured dtype, config.json with the `torch_dtype` key the containers' transformers 4.x
reads, and the source's tokenizer files in a form the image's transformers/tokenizers read: copied verbatim
when they already are, rewritten where a tokenizer saved by transformers 5 / tokenizers >= 0.20 is not
(systems/container_tokenizer.py, for the image's ImagePin.python_stack).
SageMaker mounts the uncompressed S3 prefix at /opt/ml/model, so the engine finds everything in one place.

Verification loads the written directory back with transformers in the same dtype and compares logits and
greedy tokens with the source model: a finished build is known to load and to compute what the source does.
What it cannot prove here is the engine's own loader (DeepSpeed kernels, vLLM, TensorRT-LLM need a GPU).
"""

from __future__ import annotations

import shutil
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

import request_contract
from artifact import BuildError
from artifact.source import resolve_model_source
from endpoint_config import EndpointSpec
from systems import recipe_common as common
from systems.chat_template import write_chat_template
from systems.container_tokenizer import image_python_stack, plan_tokenizer
from systems.images import ImagePin

from . import SERVING_PROPERTIES, check_weights_format, copies_per_instance, write_properties


def check_model_types(endpoint: EndpointSpec, config: Mapping[str, Any], model_types: Iterable[str]) -> None:
    """Refuse model types outside `model_types` (what the engine compiles)."""
    model_type = config.get("model_type")
    if model_type not in set(model_types):
        raise BuildError(
            f"endpoint {endpoint.name!r}: model: value {endpoint.model!r} has model_type {model_type!r}, which "
            f"system {endpoint.system!r} cannot compile; allowed model types: {', '.join(sorted(model_types))}"
        )


def build_decoder_artifact(
    endpoint: EndpointSpec,
    out_dir: Path,
    *,
    image: ImagePin,
    engine: str,
    progress: bool = True,
    properties: Mapping[str, str | int | bool] | None = None,
    custom_handler: Path | None = None,
    environment: dict[str, str] | None = None,
    model_types: Iterable[str] | None = None,
    notes: str = "",
) -> dict[str, Any]:
    """Weights + tokenizer (+ serving.properties, + model.py) + manifest.json in `out_dir`; returns the manifest."""
    source = resolve_model_source(endpoint.model, endpoint.revision)
    source_config = common.read_model_config(source, endpoint)
    common.check_causal_lm(endpoint, source_config)
    if model_types is not None:
        check_model_types(endpoint, source_config, model_types)
    stack = image_python_stack(image)
    target = f"transformers {stack.transformers} (djl-inference:{image.gpu_tag})"
    tokenizer_export = plan_tokenizer(source, stack, target)
    out_dir = Path(out_dir)
    chat: dict[str, str | None] = {"source": None}

    def write_weights(model: Any, _tokenizer: Any) -> None:
        model.save_pretrained(out_dir, max_shard_size=endpoint.max_shard_size, safe_serialization=True)
        common.config_for_container(out_dir, endpoint.dtype)
        tokenizer_export.write(out_dir)
        if endpoint.chat:  # the chat template the engine's chat route renders (systems/chat_template.py)
            chat["source"] = write_chat_template(endpoint, out_dir)
        if properties is not None:
            write_properties(out_dir, properties)
        if custom_handler is not None:
            shutil.copyfile(custom_handler, out_dir / "model.py")
            shutil.copyfile(request_contract.__file__, out_dir / "request_contract.py")  # model.py imports it

    def fields() -> dict[str, Any]:
        serving: dict[str, Any] = {
            "engine": engine,
            "model_copies_per_instance": copies_per_instance(endpoint),
            "tensor_parallel_degree": endpoint.tensor_parallel_degree,
        }
        if properties is not None:
            serving["serving_properties"] = SERVING_PROPERTIES
        if custom_handler is not None:
            serving["custom_handler"] = "model.py"
        if environment is not None:
            serving["container_environment"] = environment
        if notes:
            serving["notes"] = notes
        return {
            "dtype": endpoint.dtype,
            "weights_format": "safetensors",
            "max_shard_size": endpoint.max_shard_size,
            "libraries": common.library_versions(),
            "target_container": {
                "image_repository": image.repository,
                "image_tag_gpu": image.gpu_tag,
                "transformers": stack.transformers,
                "tokenizers": stack.tokenizers,
            },
            "tokenizer_rewritten": tokenizer_export.rewritten,
            "chat_template": chat["source"],  # "tokenizer", "config", or None (no chat block)
            "serving": serving,
        }

    return common.run_recipe(
        endpoint,
        out_dir,
        progress,
        source=source,
        write=[("write weights", write_weights)],
        reload=lambda: common.load_pretrained(out_dir, endpoint.dtype),
        note={
            "method": "transformers reload of the artifact vs the source model, same dtype (the engine's own "
            "loader needs a GPU)"
        },
        fields=fields,
    )


# The handler both DJL 0.27 handler systems (djl-deepspeed, djl-accelerate) copy in when engine.custom_handler is set.
CUSTOM_HANDLER = Path(__file__).resolve().parent / "handler" / "model.py"


def build_handler_artifact(
    endpoint: EndpointSpec,
    out_dir: Path,
    *,
    image: ImagePin,
    engine: str,
    properties: Mapping[str, str],
    custom_handler: bool,
    progress: bool = True,
    notes: str = "",
) -> dict[str, Any]:
    """The artifact of a DJL 0.27 system that runs a djl_python handler: the weights in a format it loads, its
    serving.properties and, with engine.custom_handler, our model.py (CUSTOM_HANDLER)."""
    check_weights_format(endpoint)
    return build_decoder_artifact(
        endpoint,
        out_dir,
        image=image,
        engine=engine,
        progress=progress,
        properties=properties,
        custom_handler=CUSTOM_HANDLER if custom_handler else None,
        notes=notes,
    )
