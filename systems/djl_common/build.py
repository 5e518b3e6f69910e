"""Recipe helpers shared by the DJL/LMI systems that serve decoder-only causal LMs from the model directory
(djl-deepspeed, djl-accelerate, lmi-vllm, lmi-trtllm).

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

import json
import shutil
from collections.abc import Callable, Iterable, Mapping
from pathlib import Path
from typing import Any

from artifact import BuildError
from artifact.source import resolve_model_source
from endpoint_config import EndpointSpec
from systems import recipe_common as common
from systems import request_contract
from systems.container_tokenizer import plan_tokenizer
from systems.images import ImagePin

from . import SERVING_PROPERTIES, copies_per_instance, write_properties


def read_source_config(endpoint: EndpointSpec, source: Path) -> dict[str, Any]:
    path = source / "config.json"
    if not path.is_file():
        raise BuildError(
            f"endpoint {endpoint.name!r}: model: value {endpoint.model!r} has no config.json ({source}); "
            "allowed: a transformers model directory or Hub id"
        )
    return json.loads(path.read_text())


def check_decoder(endpoint: EndpointSpec, config: Mapping[str, Any], model_types: Iterable[str] | None = None) -> None:
    """Refuse anything but a decoder-only causal LM (and, when given, model types outside `model_types`)."""
    from transformers.models.auto.modeling_auto import MODEL_FOR_CAUSAL_LM_MAPPING_NAMES

    model_type = config.get("model_type")
    arch = (config.get("architectures") or [None])[0]
    if config.get("is_encoder_decoder") or model_type not in MODEL_FOR_CAUSAL_LM_MAPPING_NAMES:
        kind = "an encoder-decoder model" if config.get("is_encoder_decoder") else "not a causal language model"
        raise BuildError(
            f"endpoint {endpoint.name!r}: model: value {endpoint.model!r} is {kind} (model_type {model_type!r}, "
            f"architecture {arch!r}); system {endpoint.system!r} serves decoder-only causal LMs "
            "(e.g. gptj, gpt2, llama, mistral)"
        )
    if model_types is not None and model_type not in set(model_types):
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
    environment: Callable[[EndpointSpec], dict[str, str]] | None = None,
    model_types: Iterable[str] | None = None,
    notes: str = "",
) -> dict[str, Any]:
    """Weights + tokenizer (+ serving.properties, + model.py) + manifest.json in `out_dir`; returns the manifest."""
    source = resolve_model_source(endpoint.model, endpoint.revision)
    source_config = read_source_config(endpoint, source)
    check_decoder(endpoint, source_config, model_types)
    stack = image.python_stack
    target = f"transformers {stack.transformers} (djl-inference:{image.gpu_tag})"
    tokenizer_export = plan_tokenizer(source, stack, target)

    from tqdm.auto import tqdm

    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    steps = tqdm(total=4, desc=f"build {endpoint.name}", unit="step", disable=not progress)

    steps.set_postfix_str("load source")
    model, tokenizer = common.load_source(endpoint, source, lambda path: common.load_pretrained(path, endpoint.dtype))
    parameter_count = sum(p.numel() for p in model.parameters())
    reference = common.reference_outputs(model, tokenizer)
    steps.update()

    steps.set_postfix_str("write weights")
    model.save_pretrained(out_dir, max_shard_size=endpoint.max_shard_size, safe_serialization=True)
    common.config_for_container(out_dir, endpoint.dtype)
    del model
    tokenizer_export.write(out_dir)
    if properties is not None:
        write_properties(out_dir, properties)
    if custom_handler is not None:
        shutil.copyfile(custom_handler, out_dir / "model.py")
        shutil.copyfile(request_contract.__file__, out_dir / "request_contract.py")  # model.py imports it
    steps.update()

    steps.set_postfix_str("verify")
    loaded, loaded_tokenizer = common.load_pretrained(out_dir, endpoint.dtype)
    artifact = common.reference_outputs(loaded, loaded_tokenizer)
    del loaded
    verification = common.compare_with_source(
        endpoint.name,
        endpoint.dtype,
        reference,
        artifact,
        note={
            "method": "transformers reload of the artifact vs the source model, same dtype (the engine's own "
            "loader needs a GPU)"
        },
    )
    steps.update()

    steps.set_postfix_str("hash")
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
        serving["container_environment"] = environment(endpoint)
    if notes:
        serving["notes"] = notes
    manifest = common.write_build_manifest(
        out_dir,
        endpoint,
        system=endpoint.system,
        source_config=source_config,
        parameter_count=parameter_count,
        progress=progress,
        dtype=endpoint.dtype,
        weights_format="safetensors",
        max_shard_size=endpoint.max_shard_size,
        libraries=common.library_versions(),
        target_container={
            "image_repository": image.repository,
            "image_tag_gpu": image.gpu_tag,
            "transformers": stack.transformers,
            "tokenizers": stack.tokenizers,
        },
        tokenizer_rewritten=tokenizer_export.rewritten,
        serving=serving,
        verification=verification,
    )
    steps.update()
    steps.close()
    return manifest
