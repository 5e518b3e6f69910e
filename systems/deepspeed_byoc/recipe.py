"""Build the deepspeed-byoc artifact of one endpoint, and prove the handler serves what the source model computes.

Artifact layout (the directory SageMaker mounts at /opt/ml/model; the handler and server are in the image):
    config.json, generation_config.json       config readable by transformers 4.36 (`torch_dtype` key)
    model-0000N-of-0000M.safetensors + index   fp16 (DeepSpeed's kernel dtype), sharded at `max_shard_size`
    tokenizer files                           copied verbatim when the image's transformers 4.36.2 /
                                              tokenizers 0.15.0 read them, else rewritten for them
                                              (systems/container_tokenizer.py; manifest `tokenizer_rewritten`)
    deepspeed.json                            the engine config: dtype, tensor_parallel.tp_size,
                                              replace_with_kernel_inject, max_out_tokens
    manifest.json                             what/how/verification + sha256 of every file

Verification loads the written artifact with the image's own handler class on its non-injected path (the
build machine has no GPU and no DeepSpeed) and compares logits and greedy tokens with the source model in
fp16. What kernel injection computes is checked on a GPU only (tests marked gpu).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from artifact import BuildError
from artifact.source import resolve_model_source
from endpoint_config import EndpointSpec
from systems import recipe_common as common
from systems.container_tokenizer import plan_tokenizer, python_stack_of
from systems.deepspeed_byoc import (
    BASE_IMAGE,
    DEEPSPEED_VERSION,
    KERNEL_INJECTION_MODEL_TYPES,
    SYSTEM,
    TORCH_VERSION,
    TRANSFORMERS_VERSION,
    DeepSpeedByocEngineOptions,
)

ENGINE_CONFIG = "deepspeed.json"
DTYPE = "fp16"  # DeepSpeed-Inference's kernel dtype; the handler calls init_inference(dtype=torch.float16)


def _bad(endpoint: EndpointSpec, message: str) -> BuildError:
    return BuildError(f"endpoint {endpoint.name!r}: {message}")


def check_endpoint(endpoint: EndpointSpec) -> None:
    """Refuse settings this system does not honour, before any heavy work."""
    if endpoint.dtype != DTYPE:
        raise _bad(
            endpoint,
            f"dtype: value {endpoint.dtype!r} is not served by system 'deepspeed-byoc'; allowed: fp16 "
            "(DeepSpeed's kernel-injection dtype)",
        )
    if endpoint.weights_format != "safetensors":
        raise _bad(endpoint, f"weights_format: value {endpoint.weights_format!r} is not allowed; allowed: safetensors")
    problems = SYSTEM.engine_problems(endpoint)  # DeepSpeedByocEngineOptions: the keys it accepts
    if problems:
        raise BuildError(problems[0])


def check_architecture(endpoint: EndpointSpec, source: Path) -> dict[str, Any]:
    """The source config.json; refuses models DeepSpeed cannot inject or split `tensor_parallel_degree` ways."""
    config = common.read_model_config(source)
    model_type = config.get("model_type")
    if model_type not in KERNEL_INJECTION_MODEL_TYPES:
        raise _bad(
            endpoint,
            f"model: {endpoint.model!r} has model_type {model_type!r}; DeepSpeed {DEEPSPEED_VERSION} kernel injection "
            f"(system 'deepspeed-byoc') serves model types {', '.join(KERNEL_INJECTION_MODEL_TYPES)}",
        )
    heads = config.get("n_head") or config.get("num_attention_heads")
    tp = endpoint.tensor_parallel_degree
    if heads and heads % tp:
        raise _bad(
            endpoint,
            f"tensor_parallel_degree: value {tp} does not divide the model's {heads} attention heads; allowed: "
            f"{', '.join(str(d) for d in range(1, heads + 1) if heads % d == 0 and d <= 8)}",
        )
    return config


def engine_config(
    endpoint: EndpointSpec, options: DeepSpeedByocEngineOptions, source_config: dict[str, Any]
) -> dict[str, Any]:
    """deepspeed.json: the arguments of deepspeed.init_inference that the handler passes."""
    context = source_config.get("n_positions") or source_config.get("max_position_embeddings")
    max_model_len = options.max_model_len
    if max_model_len and context and max_model_len > context:
        raise _bad(
            endpoint,
            f"engine.max_model_len: value {max_model_len} exceeds the model's context of {context} tokens; "
            f"allowed: 16 to {context}",
        )
    return {
        "dtype": DTYPE,
        "tensor_parallel": {"tp_size": endpoint.tensor_parallel_degree},
        "replace_with_kernel_inject": True,
        # the KV-cache workspace DeepSpeed reserves per sequence (prompt + generated tokens)
        "max_out_tokens": max_model_len or context or 1024,
    }


def build(
    endpoint: EndpointSpec, options: DeepSpeedByocEngineOptions, out_dir: Path, progress: bool = True
) -> dict[str, Any]:
    """Write the verified artifact of `endpoint` into `out_dir` (empty or absent) and return its manifest."""
    check_endpoint(endpoint)
    source = resolve_model_source(endpoint.model, endpoint.revision)
    tokenizer_export = plan_tokenizer(
        source, python_stack_of(SYSTEM), f"transformers {TRANSFORMERS_VERSION} (the deepspeed-byoc image)"
    )
    source_config = check_architecture(endpoint, source)
    engine = engine_config(endpoint, options, source_config)
    container = SYSTEM.own_container
    assert container is not None  # the image is built from this repository

    from systems.deepspeed_byoc.handler.handler import DeepSpeedHandler

    out_dir = Path(out_dir)

    def write_weights(model: Any, _tokenizer: Any) -> None:
        model.save_pretrained(out_dir, max_shard_size=endpoint.max_shard_size, safe_serialization=True)
        common.config_for_container(out_dir, DTYPE)

    def write_engine_config(_model: Any, _tokenizer: Any) -> None:
        tokenizer_export.write(out_dir)
        (out_dir / ENGINE_CONFIG).write_text(json.dumps(engine, indent=2, sort_keys=True) + "\n")

    def reload() -> tuple[Any, Any]:
        handler = DeepSpeedHandler()
        handler.load(out_dir, kernel_injection=False, tp_size=1)
        return handler.model, handler.tokenizer

    return common.run_recipe(
        endpoint,
        out_dir,
        progress,
        source=source,
        write=[("write safetensors", write_weights), ("tokenizer + engine config", write_engine_config)],
        reload=reload,  # dtype: DTYPE, the only one check_endpoint allows
        note={"path": "transformers (non-injected), build machine; kernel injection is checked on a GPU"},
        fields=lambda: {
            "dtype": DTYPE,
            "weights_format": "safetensors",
            "max_shard_size": endpoint.max_shard_size,
            "engine": engine,
            "libraries": common.library_versions(),
            "target_container": {
                "dockerfile": container.dockerfile,
                "base_image": BASE_IMAGE,
                "torch": TORCH_VERSION,
                "deepspeed": DEEPSPEED_VERSION,
                "transformers": TRANSFORMERS_VERSION,
            },
            "tokenizer_rewritten": tokenizer_export.rewritten,
        },
    )
