"""Build the deepspeed-byoc artifact of one endpoint, and prove the handler serves what the source model computes.

Artifact layout (the directory SageMaker mounts at /opt/ml/model; the handler and server are in the image):
    config.json, generation_config.json       config readable by transformers 4.36 (`torch_dtype` key)
    model-0000N-of-0000M.safetensors + index   fp16 (DeepSpeed's kernel dtype), sharded at `max_shard_size`
    tokenizer files                           copied verbatim from the source (never re-serialized)
    deepspeed.json                            the engine config: dtype, tensor_parallel.tp_size,
                                              replace_with_kernel_inject, max_out_tokens
    manifest.json                             what/how/verification + sha256 of every file

Verification loads the written artifact with the image's own handler class on its non-injected path (the
build machine has no GPU and no DeepSpeed) and compares logits and greedy tokens with the source model in
fp16. What kernel injection computes is checked on a GPU only (tests marked gpu).
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

from endpoint_config import EndpointSpec
from model_build import BuildError
from model_build.source import resolve_model_source
from systems.deepspeed_byoc import (
    BASE_IMAGE,
    DEEPSPEED_VERSION,
    KERNEL_INJECTION_MODEL_TYPES,
    SYSTEM,
    TORCH_VERSION,
    TRANSFORMERS_VERSION,
)
from systems.hf_fastload.recipe import (
    _TOKENIZER_CLASS,
    TOKENIZER_FILES,
    TOLERANCE,
    TRANSFORMERS5_TOKENIZER_CLASSES,
    VERIFY_NEW_TOKENS,
    VERIFY_PROMPT,
    _config_for_container,
    _reference,
)

ENGINE_CONFIG = "deepspeed.json"
DTYPE = "fp16"  # DeepSpeed-Inference's kernel dtype; the handler calls init_inference(dtype=torch.float16)


def _bad(endpoint: EndpointSpec, message: str) -> BuildError:
    return BuildError(f"endpoint {endpoint.name!r}: {message}")


def check_endpoint(endpoint: EndpointSpec) -> None:
    """Refuse settings this system does not honour, before any heavy work."""
    if endpoint.dtype != DTYPE:
        raise _bad(endpoint, f"dtype: value {endpoint.dtype!r} is not served by system 'deepspeed-byoc'; allowed: fp16 "
                             "(DeepSpeed's kernel-injection dtype)")  # fmt: skip
    if endpoint.weights_format != "safetensors":
        raise _bad(endpoint, f"weights_format: value {endpoint.weights_format!r} is not allowed; allowed: safetensors")
    engine = endpoint.engine
    if engine.rolling_batch not in (None, "disable"):
        raise _bad(endpoint, f"engine.rolling_batch: value {engine.rolling_batch!r} is not offered by DeepSpeed "
                             "kernel injection (static batches per request); allowed: disable, or leave it out")  # fmt: skip
    if engine.entry_point is not None:
        raise _bad(endpoint, f"engine.entry_point: value {engine.entry_point!r} is a DJL setting; system "
                             "'deepspeed-byoc' runs its own handler (leave it out)")  # fmt: skip
    if engine.custom_handler:
        raise _bad(endpoint, "engine.custom_handler: value true is a DJL setting; system 'deepspeed-byoc' always "
                             "runs its own handler (leave it out)")  # fmt: skip
    if engine.tensorrt_profile is not None:
        raise _bad(endpoint, "engine.tensorrt_profile: is only used by system 'tensorrt-byoc' (leave it out)")


def check_tokenizer(source: Path) -> list[str]:
    """Tokenizer files to copy; refuses what transformers 4.36 (the image) cannot read."""
    present = [name for name in TOKENIZER_FILES if (source / name).is_file()]
    if not present:
        raise BuildError(
            f"model directory {str(source)!r} has no tokenizer files; expected tokenizer_config.json with "
            "vocab.json + merges.txt (or tokenizer.json / tokenizer.model)"
        )
    config_path = source / "tokenizer_config.json"
    if config_path.is_file():
        tokenizer_class = json.loads(config_path.read_text()).get("tokenizer_class")
        if tokenizer_class is not None and (
            tokenizer_class in TRANSFORMERS5_TOKENIZER_CLASSES or not _TOKENIZER_CLASS.match(tokenizer_class)
        ):
            raise BuildError(
                f"{config_path}: tokenizer_class {tokenizer_class!r} is unknown to transformers "
                f"{TRANSFORMERS_VERSION} (the deepspeed-byoc image); allowed: a transformers 4.x class such as "
                "'GPT2Tokenizer' or 'GPT2TokenizerFast' (files saved by transformers 5 need re-exporting with the "
                "original tokenizer files)"
            )
    return present


def check_architecture(endpoint: EndpointSpec, source: Path) -> dict[str, Any]:
    """The source config.json; refuses models DeepSpeed cannot inject or split `tensor_parallel_degree` ways."""
    config_path = source / "config.json"
    if not config_path.is_file():
        raise BuildError(f"model directory {str(source)!r} has no config.json; it is not a transformers model")
    config = json.loads(config_path.read_text())
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


def engine_config(endpoint: EndpointSpec, source_config: dict[str, Any]) -> dict[str, Any]:
    """deepspeed.json: the arguments of deepspeed.init_inference that the handler passes."""
    context = source_config.get("n_positions") or source_config.get("max_position_embeddings")
    max_model_len = endpoint.engine.max_model_len
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


def build(endpoint: EndpointSpec, out_dir: Path, progress: bool = True) -> dict[str, Any]:
    """Write the verified artifact of `endpoint` into `out_dir` (empty or absent) and return its manifest."""
    check_endpoint(endpoint)
    source = resolve_model_source(endpoint.model, endpoint.revision)
    tokenizer_files = check_tokenizer(source)
    source_config = check_architecture(endpoint, source)
    engine = engine_config(endpoint, source_config)

    import safetensors
    import tokenizers
    import torch
    import transformers
    from tqdm.auto import tqdm

    from model_build.manifest import write_manifest
    from systems.deepspeed_byoc.handler.handler import DeepSpeedHandler, dtype_kwargs

    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    steps = tqdm(total=5, desc=f"build {endpoint.name}", unit="step", disable=not progress)

    steps.set_postfix_str("load source")
    try:
        model = transformers.AutoModelForCausalLM.from_pretrained(source, **dtype_kwargs(torch.float16)).eval()
        tokenizer = transformers.AutoTokenizer.from_pretrained(source)
    except Exception as err:
        raise BuildError(
            f"model {endpoint.model!r} failed to load from {source}: {type(err).__name__}: {err}"
        ) from None
    parameter_count = sum(p.numel() for p in model.parameters())
    ref_logits, ref_prompt_ids, ref_tokens = _reference(model, tokenizer)
    steps.update()

    steps.set_postfix_str("write safetensors")
    model.save_pretrained(out_dir, max_shard_size=endpoint.max_shard_size, safe_serialization=True)
    _config_for_container(out_dir, DTYPE)
    del model  # one copy in memory at a time
    steps.update()

    steps.set_postfix_str("tokenizer + engine config")
    for name in tokenizer_files:
        shutil.copy2(source / name, out_dir / name)
    (out_dir / ENGINE_CONFIG).write_text(json.dumps(engine, indent=2, sort_keys=True) + "\n")
    steps.update()

    steps.set_postfix_str("verify")
    handler = DeepSpeedHandler()
    handler.load(out_dir, kernel_injection=False, tp_size=1)
    logits, prompt_ids, tokens = _reference(handler.model, handler.tokenizer)
    max_diff = float((logits - ref_logits).abs().max()) if logits.shape == ref_logits.shape else float("inf")
    tolerance = TOLERANCE[DTYPE]
    verification = {
        "path": "transformers (non-injected), build machine; kernel injection is checked on a GPU",
        "prompt": VERIFY_PROMPT,
        "new_tokens": VERIFY_NEW_TOKENS,
        "max_abs_logit_diff": max_diff,
        "tolerance": tolerance,
        "tokenizer_ids_match": prompt_ids == ref_prompt_ids,
        "greedy_tokens_match": tokens == ref_tokens,
    }
    if not (max_diff <= tolerance and prompt_ids == ref_prompt_ids and tokens == ref_tokens):
        raise BuildError(
            f"endpoint {endpoint.name!r}: the written artifact does not reproduce the source model (fp16): max abs "
            f"logit diff {max_diff:.3g} (allowed <= {tolerance}), prompt token ids match: "
            f"{prompt_ids == ref_prompt_ids}, greedy tokens {tokens} vs source {ref_tokens}"
        )
    del handler
    steps.update()

    steps.set_postfix_str("hash")
    manifest = write_manifest(
        out_dir,
        progress=progress,
        system=SYSTEM.name,
        endpoint=endpoint.name,
        model={
            "source": endpoint.model,
            "revision": endpoint.revision,
            "architecture": (source_config.get("architectures") or [None])[0],
            "model_type": source_config.get("model_type"),
            "parameter_count": parameter_count,
        },
        dtype=DTYPE,
        weights_format="safetensors",
        max_shard_size=endpoint.max_shard_size,
        engine=engine,
        libraries={
            "torch": torch.__version__,
            "transformers": transformers.__version__,
            "safetensors": safetensors.__version__,
            "tokenizers": tokenizers.__version__,
        },
        target_container={
            "dockerfile": f"systems/{SYSTEM.own_container.dockerfile}",
            "base_image": BASE_IMAGE,
            "torch": TORCH_VERSION,
            "deepspeed": DEEPSPEED_VERSION,
            "transformers": TRANSFORMERS_VERSION,
        },
        verification=verification,
    )
    steps.update()
    steps.close()
    return manifest
