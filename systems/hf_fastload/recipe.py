"""Build the hf-fastload artifact of one endpoint, and prove it serves what the source model computes.

Artifact layout (the directory SageMaker mounts at /opt/ml/model):
    config.json, generation_config.json       config readable by transformers 4.49 (`torch_dtype` key)
    model-0000N-of-0000M.safetensors + index   sharded at `max_shard_size`, in the configured dtype
      (or model.pt with `weights_format: torch-save`: the seed recipe's pickled whole model; opt-in only,
       because torch.load executes code from the file, loads ~4x slower than safetensors, and the pickle
       names library classes, so it breaks when transformers versions differ)
    tokenizer files                           copied verbatim from the source (never re-serialized: a
                                              tokenizer saved by transformers 5 does not load in 4.49)
    code/inference.py                         the request handler (systems/hf_fastload/handler)
    manifest.json                             what/how/verification + sha256 of every file

Verification runs the handler's own loader on the written artifact and compares its logits and greedy
tokens with the source model in the same dtype, so a build that finishes is known to load and agree.
"""

from __future__ import annotations

import json
import re
import shutil
import sys
from pathlib import Path
from typing import Any

from endpoint_config import EndpointSpec
from model_build import BuildError
from model_build.source import resolve_model_source
from systems.images import HF_CONTAINER_TRANSFORMERS, HF_PYTORCH_INFERENCE

HANDLER_SOURCE = Path(__file__).parent / "handler" / "inference.py"
TORCH_SAVE_FILE = "model.pt"
TOKENIZER_FILES = (
    "tokenizer_config.json", "special_tokens_map.json", "tokenizer.json", "vocab.json", "merges.txt",
    "vocab.txt", "added_tokens.json", "tokenizer.model", "spiece.model", "chat_template.jinja",
)  # fmt: skip
# Tokenizer classes that only exist since transformers 5: the 4.49 container cannot instantiate them.
TRANSFORMERS5_TOKENIZER_CLASSES = ("TokenizersBackend", "PythonBackend", "SentencePieceBackend", "MistralCommonBackend")
_TOKENIZER_CLASS = re.compile(r"^(?:[A-Z][A-Za-z0-9]*Tokenizer(?:Fast)?|PreTrainedTokenizerFast)$")

VERIFY_PROMPT = "The quick brown fox"
VERIFY_NEW_TOKENS = 8
# Same weights, same dtype, same kernels: the logits should match bit for bit; the slack covers kernel
# selection differences (e.g. a sharded vs single-file load changing memory layout).
TOLERANCE = {"fp32": 1e-4, "fp16": 1e-2, "bf16": 5e-2}
TORCH_DTYPE_NAMES = {"fp16": "float16", "bf16": "bfloat16", "fp32": "float32"}


def check_tokenizer(source: Path) -> list[str]:
    """Tokenizer files to copy; refuses what transformers 4.49 cannot read, before any heavy work."""
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
                f"{HF_CONTAINER_TRANSFORMERS} (the serving container); allowed: a transformers 4.x class such "
                "as 'GPT2Tokenizer', 'GPT2TokenizerFast', 'LlamaTokenizerFast' or 'PreTrainedTokenizerFast' "
                "(files saved by transformers 5 need re-exporting with the original tokenizer files)"
            )
    return present


def check_architecture(source: Path) -> dict[str, Any]:
    """The source config.json; refuses models that AutoModelForCausalLM cannot load."""
    from transformers.models.auto.modeling_auto import MODEL_FOR_CAUSAL_LM_MAPPING_NAMES

    config_path = source / "config.json"
    if not config_path.is_file():
        raise BuildError(f"model directory {str(source)!r} has no config.json; it is not a transformers model")
    config = json.loads(config_path.read_text())
    model_type = config.get("model_type")
    if model_type not in MODEL_FOR_CAUSAL_LM_MAPPING_NAMES:
        raise BuildError(
            f"model {str(source)!r}: model_type {model_type!r} (architectures {config.get('architectures')}) is "
            "not a causal language model; system 'hf-fastload' serves AutoModelForCausalLM models "
            "(e.g. gpt2, gptj, llama, mistral)"
        )
    return config


def _config_for_container(out_dir: Path, dtype: str) -> None:
    """transformers 5 writes `dtype`; 4.49 reads `torch_dtype`. Write the key the container reads."""
    path = out_dir / "config.json"
    config = json.loads(path.read_text())
    config.pop("dtype", None)
    config["torch_dtype"] = TORCH_DTYPE_NAMES[dtype]
    path.write_text(json.dumps(config, indent=2, sort_keys=True) + "\n")


def _reference(model: Any, tokenizer: Any) -> tuple[Any, list[int], list[int]]:
    """Logits of VERIFY_PROMPT and greedy continuation ids: what the artifact must reproduce."""
    import torch

    ids = tokenizer(VERIFY_PROMPT, return_tensors="pt")["input_ids"].to(next(model.parameters()).device)
    with torch.inference_mode():
        logits = model(input_ids=ids).logits.float().cpu()
        out = model.generate(
            input_ids=ids,
            attention_mask=torch.ones_like(ids),
            max_new_tokens=VERIFY_NEW_TOKENS,
            min_new_tokens=VERIFY_NEW_TOKENS,  # a full 8 tokens to compare, even past an early EOS
            do_sample=False,
            pad_token_id=tokenizer.pad_token_id if tokenizer.pad_token_id is not None else tokenizer.eos_token_id,
        )
    return logits, ids[0].tolist(), out[0, ids.shape[1] :].tolist()


def build(endpoint: EndpointSpec, out_dir: Path, progress: bool = True) -> dict[str, Any]:
    """Write the verified artifact of `endpoint` into `out_dir` (empty or absent) and return its manifest.

    The caller (model_build.cli) builds into a temporary directory and renames it on success, so a
    failure here never leaves a half-written artifact in place.
    """
    source = resolve_model_source(endpoint.model, endpoint.revision)
    tokenizer_files = check_tokenizer(source)
    source_config = check_architecture(source)

    import safetensors
    import tokenizers
    import torch
    import transformers
    from tqdm.auto import tqdm

    from model_build.manifest import write_manifest
    from systems.hf_fastload.handler import inference as handler

    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    dtype = handler.TORCH_DTYPES[endpoint.dtype]
    steps = tqdm(total=5, desc=f"build {endpoint.name}", unit="step", disable=not progress)

    steps.set_postfix_str("load source")
    try:
        model = transformers.AutoModelForCausalLM.from_pretrained(source, **handler.dtype_kwargs(dtype)).eval()
        tokenizer = transformers.AutoTokenizer.from_pretrained(source)
    except Exception as err:
        raise BuildError(f"model {endpoint.model!r} failed to load from {source}: {type(err).__name__}: {err}") from None
    parameter_count = sum(p.numel() for p in model.parameters())
    ref_logits, ref_prompt_ids, ref_tokens = _reference(model, tokenizer)
    steps.update()

    steps.set_postfix_str(f"write {endpoint.weights_format}")
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
    _config_for_container(out_dir, endpoint.dtype)
    del model  # free the source copy before loading the artifact (large models: one copy in memory at a time)
    steps.update()

    steps.set_postfix_str("tokenizer + handler")
    for name in tokenizer_files:
        shutil.copy2(source / name, out_dir / name)
    (out_dir / "code").mkdir(exist_ok=True)
    shutil.copyfile(HANDLER_SOURCE, out_dir / "code" / "inference.py")
    steps.update()

    steps.set_postfix_str("verify")
    loaded = handler.load_model(out_dir, dtype=dtype, weights_format=endpoint.weights_format)
    logits, prompt_ids, tokens = _reference(loaded["model"], loaded["tokenizer"])
    max_diff = float((logits - ref_logits).abs().max()) if logits.shape == ref_logits.shape else float("inf")
    tolerance = TOLERANCE[endpoint.dtype]
    verification = {
        "prompt": VERIFY_PROMPT,
        "new_tokens": VERIFY_NEW_TOKENS,
        "max_abs_logit_diff": max_diff,
        "tolerance": tolerance,
        "tokenizer_ids_match": prompt_ids == ref_prompt_ids,
        "greedy_tokens_match": tokens == ref_tokens,
    }
    if not (max_diff <= tolerance and prompt_ids == ref_prompt_ids and tokens == ref_tokens):
        raise BuildError(
            f"endpoint {endpoint.name!r}: the written artifact does not reproduce the source model ({endpoint.dtype}): "
            f"max abs logit diff {max_diff:.3g} (allowed <= {tolerance}), prompt token ids match: "
            f"{prompt_ids == ref_prompt_ids}, greedy tokens {tokens} vs source {ref_tokens}"
        )
    del loaded
    steps.update()

    steps.set_postfix_str("hash")
    manifest = write_manifest(
        out_dir,
        progress=progress,
        system="hf-fastload",
        endpoint=endpoint.name,
        model={
            "source": endpoint.model,
            "revision": endpoint.revision,
            "architecture": (source_config.get("architectures") or [None])[0],
            "model_type": source_config.get("model_type"),
            "parameter_count": parameter_count,
        },
        dtype=endpoint.dtype,
        weights_format=endpoint.weights_format,
        max_shard_size=endpoint.max_shard_size,
        libraries={
            "torch": torch.__version__,
            "transformers": transformers.__version__,
            "safetensors": safetensors.__version__,
            "tokenizers": tokenizers.__version__,
        },
        target_container={
            "image_repository": HF_PYTORCH_INFERENCE.repository,
            "image_tag_gpu": HF_PYTORCH_INFERENCE.gpu_tag,
            "image_tag_cpu": HF_PYTORCH_INFERENCE.cpu_tag,
            "transformers": HF_CONTAINER_TRANSFORMERS,
        },
        verification=verification,
    )
    steps.update()
    steps.close()
    return manifest
